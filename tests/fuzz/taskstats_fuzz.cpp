// libFuzzer target for the kernel's exit records (collect::ParseTaskstatsDatagram): arbitrary
// bytes as one datagram of the taskstats family, as a hostile or future kernel could send
// (the records come from the whole machine). Whatever the bytes, the parser never reads
// past them, and every record it gives is whole: non-negative times, a tid.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "collect/task_exit_stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<grademl::collect::TaskExitStats::Record> out;
  // The family id is the datagram's own type when there is one, so that the attributes are
  // reached; and a fixed one, so that a wrong family is taken too.
  uint16_t family = size >= 6 ? static_cast<uint16_t>(data[4] | (data[5] << 8)) : 0;
  grademl::collect::ParseTaskstatsDatagram(reinterpret_cast<const char*>(data), size, family, &out);
  grademl::collect::ParseTaskstatsDatagram(reinterpret_cast<const char*>(data), size, 31, &out);
  for (const auto& r : out) {
    if (!(r.utime_s >= 0) || !(r.stime_s >= 0) || !std::isfinite(r.utime_s) || !std::isfinite(r.stime_s)) {
      __builtin_trap();
    }
    if (r.comm.size() > 64) __builtin_trap();
  }
  return 0;
}
