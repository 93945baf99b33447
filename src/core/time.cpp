#include "core/time.h"

#include <atomic>

#include <fmt/format.h>
#include <time.h>

#include <cmath>

namespace grademl {
namespace {

int64_t ReadClock(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}

// Offsets from the monotonic and boottime clocks to the epoch, read once.
struct ClockOffsets {
  int64_t monotonic_to_epoch;
  int64_t boottime_to_epoch;
  ClockOffsets() {
    int64_t real = ReadClock(CLOCK_REALTIME);
    int64_t mono = ReadClock(CLOCK_MONOTONIC);
    int64_t boot = ReadClock(CLOCK_BOOTTIME);
    monotonic_to_epoch = real - mono;
    boottime_to_epoch = real - boot;
  }
};

const ClockOffsets& Offsets() {
  static const ClockOffsets offsets;
  return offsets;
}

// A test-only shift of this process's clock (grademl agent --test-clock-skew).
std::atomic<int64_t> g_test_skew{0};

}  // namespace

void WallClock::SetTestSkew(DurationNs skew) { g_test_skew.store(skew, std::memory_order_relaxed); }

int64_t WallClock::MonotonicNow() { return ReadClock(CLOCK_MONOTONIC); }
TimeNs WallClock::Now() { return FromMonotonic(MonotonicNow()); }
TimeNs WallClock::FromMonotonic(int64_t monotonic_ns) {
  return monotonic_ns + Offsets().monotonic_to_epoch + g_test_skew.load(std::memory_order_relaxed);
}
TimeNs WallClock::FromBoottime(int64_t boottime_ns) {
  return boottime_ns + Offsets().boottime_to_epoch + g_test_skew.load(std::memory_order_relaxed);
}

std::string FormatDuration(DurationNs ns) {
  double s = NsToSeconds(ns);
  if (ns < 0) return "-" + FormatDuration(-ns);
  // Each unit is chosen after rounding to its precision, so 59.999 s reads "1 min 00 s".
  if (std::round(s * 1e6) < 1e3) return fmt::format("{:.0f} us", s * 1e6);
  if (std::round(s * 1e3) < 1e3) return fmt::format("{:.0f} ms", s * 1e3);
  if (std::round(s * 100) < 6000) return fmt::format("{:.2f} s", s);
  if (s < 3600.0) {
    int64_t total = static_cast<int64_t>(std::llround(s));
    return fmt::format("{} min {:02d} s", total / 60, total % 60);
  }
  int64_t total_min = static_cast<int64_t>(std::llround(s / 60.0));
  return fmt::format("{} h {:02d} min", total_min / 60, total_min % 60);
}

std::string FormatTimestamp(TimeNs t) {
  time_t secs = static_cast<time_t>(t / kNsPerSec);
  tm local{};
  localtime_r(&secs, &local);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &local);
  return buf;
}

}  // namespace grademl

#include <charconv>

#include "core/status.h"

namespace grademl {

StatusOr<DurationNs> ParseDuration(const std::string& text) {
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ptr == begin || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return InvalidArgument("'{}' is not a duration (expected e.g. 100ms, 0.5s)", text);
  }
  std::string_view unit(ptr, static_cast<size_t>(end - ptr));
  double scale = 0;
  if (unit.empty()) return InvalidArgument("'{}': add a unit: {}ms or {}s", text, text, text);
  if (unit == "ms") scale = 1e6;
  else if (unit == "s") scale = 1e9;
  else if (unit == "us") scale = 1e3;
  else if (unit == "ns") scale = 1;
  else if (unit == "m" || unit == "min") scale = 60e9;
  else if (unit == "h") scale = 3600e9;
  else return InvalidArgument("'{}': unknown unit '{}' (use ns, us, ms, s, m or h)", text, unit);
  if (ec == std::errc::result_out_of_range) {  // past a double's range, either way
    return InvalidArgument("'{}' is not a duration grademl can use", text);
  }
  double ns = value * scale;
  if (std::isnan(ns)) return InvalidArgument("'{}' is not a duration (expected e.g. 100ms, 0.5s)", text);
  if (!(ns >= 1)) return InvalidArgument("'{}': a duration must be positive", text);
  if (!(ns <= kMaxDurationNs)) return InvalidArgument("'{}' is too long (at most 100 years)", text);
  return static_cast<DurationNs>(ns);
}

}  // namespace grademl
