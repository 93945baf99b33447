// Time in GradeML: every timestamp is int64 nanoseconds since the Unix epoch (TimeNs).
//
// WallClock reads CLOCK_MONOTONIC and adds an offset to the epoch taken once per process,
// so timestamps within a run never jump when NTP adjusts the wall clock, yet line up
// across processes and hosts to within the clocks' agreement.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace grademl {

using TimeNs = int64_t;
using DurationNs = int64_t;

constexpr DurationNs kNsPerUs = 1000;
constexpr DurationNs kNsPerMs = 1000 * 1000;
constexpr DurationNs kNsPerSec = 1000 * 1000 * 1000;

class WallClock {
 public:
  // Now as ns since the epoch, monotonic within this process.
  static TimeNs Now();
  // Converts a CLOCK_MONOTONIC reading (ns) to epoch ns.
  static TimeNs FromMonotonic(int64_t monotonic_ns);
  // Converts a CLOCK_BOOTTIME reading (ns), as /proc/PID/stat start times use, to epoch ns.
  static TimeNs FromBoottime(int64_t boottime_ns);
  static int64_t MonotonicNow();
  // Tests only: makes this process's clock run `skew` ahead of the machine's (every reading
  // above), as a host whose clock is off would (`grademl agent --test-clock-skew`).
  static void SetTestSkew(DurationNs skew);
};

// a + b, clamped to the int64 range instead of overflowing (timestamps from untrusted traces).
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return b > 0 ? INT64_MAX : INT64_MIN;
  return out;
}
inline double NsToSeconds(DurationNs ns) { return static_cast<double>(ns) / 1e9; }
inline DurationNs SecondsToNs(double s) { return static_cast<DurationNs>(s * 1e9); }

// "1.23 s", "412 ms", "2 min 3 s", "1 h 02 min".
std::string FormatDuration(DurationNs ns);
// "2026-11-22 07:23:52" in local time.
std::string FormatTimestamp(TimeNs t);

// Parses "100ms", "0.5s", "250us", "2m", "1h", "1500ns". A bare number is refused ("add a
// unit: 5ms or 5s"), as are zero, negative, infinite, NaN and durations over 100 years;
// callers check their own range on top.
inline constexpr double kMaxDurationNs = 100 * 365.25 * 86400 * 1e9;
StatusOr<DurationNs> ParseDuration(const std::string& text);

}  // namespace grademl
