// Test support: what a test does when something it needs is missing from the machine (the
// shared traces in ../shared/traces, a tmpfs, root, a Debian package such as python3-torch or
// strace, a kernel feature, a part of the build). Outside CI it skips, saying what is missing;
// under CI=true it fails with the same message, because there a missing requirement is a
// broken setup, and a skipped test is a promise nobody sees go unchecked (issue 27). Every
// test under tests/ that skips for a missing requirement goes through SKIP_OR_FAIL_IN_CI;
// the Python tests have the same rule in python/tests/_ci.py. docs/testing.md.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace grademl::testing {

// Whether the tests run in CI (CI=true), where nothing they need may be missing.
inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// The shared traces (Kineto traces with their HTA references, Spark event logs): the
// directory GRADEML_SHARED_TRACES names, else ../shared/traces beside the source tree. It
// may not exist: a test that needs it says so with SKIP_OR_FAIL_IN_CI.
inline std::filesystem::path SharedTracesDir() {
  if (const char* env = std::getenv("GRADEML_SHARED_TRACES"); env != nullptr && *env != '\0') return env;
  return std::filesystem::path(GRADEML_SOURCE_DIR) / ".." / "shared" / "traces";
}

}  // namespace grademl::testing

// Ends the test (returns from the function, as GTEST_SKIP does): skipped, or failed under
// CI=true. `why` is streamed: SKIP_OR_FAIL_IN_CI("no shared trace " << path).
#define SKIP_OR_FAIL_IN_CI(why)                                                                        \
  do {                                                                                                  \
    if (::grademl::testing::InCi()) {                                                                   \
      GTEST_FAIL() << "CI=true, so this fails instead of skipping: " << why;                          \
    } else {                                                                                            \
      GTEST_SKIP() << why;                                                                              \
    }                                                                                                   \
  } while (0)

// The same for the shared traces: `var` is SharedTracesDir() / `sub`, and the test ends (skip,
// or fail under CI=true) when that does not exist.
#define REQUIRE_SHARED_TRACES(var, sub)                                                               \
  const std::filesystem::path var = ::grademl::testing::SharedTracesDir() / (sub);                     \
  if (!std::filesystem::exists(var))                                                                   \
  SKIP_OR_FAIL_IN_CI("the shared traces are absent: no " << var                                        \
                     << " (../shared/traces beside the source tree, or set GRADEML_SHARED_TRACES)")
