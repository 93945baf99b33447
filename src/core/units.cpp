#include "core/units.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

namespace grademl {

std::string FormatBytes(double bytes) {
  if (!std::isfinite(bytes)) return "?";
  if (bytes < 0) return "-" + FormatBytes(-bytes);
  if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
  static constexpr std::array<const char*, 6> kUnits{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = bytes / 1024;
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < kUnits.size()) {
    v /= 1024;
    ++unit;
  }
  // Round first, so that 9.999 KiB prints as "10.0 KiB", not "10.00 KiB".
  if (std::round(v * 100) / 100 < 10) return fmt::format("{:.2f} {}", v, kUnits[unit]);
  if (std::round(v * 10) / 10 < 100) return fmt::format("{:.1f} {}", v, kUnits[unit]);
  return fmt::format("{:.0f} {}", v, kUnits[unit]);
}

}  // namespace grademl
