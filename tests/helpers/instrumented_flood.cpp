// A C program that floods grademl with empty phases: a tight loop of grademl_begin/grademl_end
// of one name for SECONDS seconds (or exactly N phases when N > 0; at most RATE phases a
// second when RATE > 0), then writes what it wrote to TRUTH as key=value lines (phases=...,
// end_ns=... its CLOCK_REALTIME end) and exits 0.
// It creates TRUTH.started once it wrote STARTED phases (default 0: as it starts). On SIGTERM
// it stops, writes TRUTH and exits 143 (as a process killed by it would report).
// usage: instrumented_flood SECONDS TRUTH [N [RATE [STARTED]]]
#include <grademl/grademl_c.h>
#include <signal.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
volatile sig_atomic_t g_terminated = 0;
void OnTerm(int) { g_terminated = 1; }

int64_t ClockNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: instrumented_flood SECONDS TRUTH [N [RATE [STARTED]]]\n");
    return 2;
  }
  const double seconds = std::atof(argv[1]);
  const long long limit = argc > 3 ? std::atoll(argv[3]) : 0;
  const double rate = argc > 4 ? std::atof(argv[4]) : 0;
  const long long started_after = argc > 5 ? std::atoll(argv[5]) : 0;
  signal(SIGTERM, OnTerm);
  const uint32_t name = grademl_intern("x");
  const std::string started_path = std::string(argv[2]) + ".started";
  bool started = false;
  auto say_started = [&] {
    if (FILE* f = std::fopen(started_path.c_str(), "w")) std::fclose(f);
    started = true;
  };
  if (started_after == 0) say_started();
  const int64_t start = ClockNs(CLOCK_MONOTONIC);
  const int64_t until = start + int64_t(seconds * 1e9);
  long long phases = 0;
  for (;;) {
    const long long batch = limit > 0 && limit - phases < 1024 ? limit - phases : 1024;
    for (long long i = 0; i < batch; ++i) {
      grademl_begin(name);
      grademl_end();
    }
    phases += batch;
    if (!started && phases >= started_after) say_started();
    if (g_terminated || (limit > 0 ? phases >= limit : ClockNs(CLOCK_MONOTONIC) >= until)) break;
    if (rate > 0) {  // ahead of RATE: wait for the schedule
      int64_t due = start + int64_t(double(phases) / rate * 1e9);
      int64_t now = ClockNs(CLOCK_MONOTONIC);
      if (due > now) {
        timespec ts{time_t((due - now) / 1000000000), long((due - now) % 1000000000)};
        nanosleep(&ts, nullptr);
      }
    }
  }
  FILE* f = std::fopen(argv[2], "w");
  if (f == nullptr) return 1;
  std::fprintf(f, "phases=%lld\nenabled=%d\nend_ns=%lld\n", phases, grademl_enabled(),
               static_cast<long long>(ClockNs(CLOCK_REALTIME)));
  std::fclose(f);
  return g_terminated ? 143 : 0;
}
