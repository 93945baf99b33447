// The tests' independent SHA-256 oracle: what coreutils' `sha256sum` prints for a file,
// against which the hashing code's results are checked (core and workflow tests).
#pragma once

#include <cstdio>
#include <string>

namespace grademl::testing {

// The 64 hex digits `/usr/bin/sha256sum FILE` prints; "" when it cannot run.
inline std::string Sha256sumOf(const std::string& path) {
  std::string cmd = "/usr/bin/sha256sum '" + path + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  if (pclose(p) != 0) return "";
  return out.substr(0, 64);
}

}  // namespace grademl::testing
