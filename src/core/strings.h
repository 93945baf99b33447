// Small string helpers shared by every layer (parsing /proc and cgroup files, tags, logs).
#pragma once

#include <string_view>

namespace grademl {

// Whether s begins with prefix.
inline bool StartsWith(std::string_view s, std::string_view prefix) { return s.starts_with(prefix); }

// s without the spaces, tabs, carriage returns and newlines at either end.
inline std::string_view TrimSpace(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

}  // namespace grademl
