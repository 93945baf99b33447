// Clocks of the scale benchmarks: wall time since a point, and this process's CPU time and
// peak RSS, which tell contention on a shared machine apart from work.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <ctime>

namespace grademl::bench {

// Wall-clock seconds since a steady-clock time point.
inline double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// CPU time this process has used, in seconds.
inline double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The most resident memory this process has held, in MiB.
inline double PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

}  // namespace grademl::bench
