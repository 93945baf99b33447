// Reading a phase's tags (key=value annotations from collectors and importers) in analyses.
#pragma once

#include <charconv>
#include <cstdint>
#include <string_view>

#include "model/run.h"

namespace grademl::analysis {

// The value of the phase's first tag named key; empty when it has none.
inline std::string_view TagOf(const model::Phase& p, std::string_view key) {
  for (const auto& [k, v] : p.tags) {
    if (k == key) return v;
  }
  return {};
}

inline bool HasTag(const model::Phase& p, std::string_view key) {
  for (const auto& [k, v] : p.tags) {
    if (k == key) return true;
  }
  return false;
}

// The tag as a whole decimal integer; fallback when it is absent, empty or not a number.
inline int64_t IntTag(const model::Phase& p, std::string_view key, int64_t fallback = 0) {
  std::string_view v = TagOf(p, key);
  int64_t n = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  return ec == std::errc() && ptr == v.data() + v.size() && !v.empty() ? n : fallback;
}

}  // namespace grademl::analysis
