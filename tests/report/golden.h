// Golden-file comparison for report tests. GRADEML_UPDATE_GOLDENS=1 rewrites the files
// under tests/data/report/ from the actual output instead of comparing. A golden is a change
// detector, never the proof that a figure is right (it is the code's own output): each
// golden whose content claims numbers (durations, shares, savings, counts) has beside it a
// test of those numbers against values derived independently, by hand from the fixture's
// construction (e.g. JsonReportTest.BasicRunFiguresByHand). docs/testing.md.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace grademl::testing {

inline bool UpdatingGoldens() {
  const char* env = std::getenv("GRADEML_UPDATE_GOLDENS");
  return env != nullptr && std::string(env) == "1";
}

inline std::string GoldenPath(const std::string& name) {
  return std::string(GRADEML_TESTDATA_DIR) + "/report/" + name;
}

// Compares `actual` byte for byte with the golden file `name`, reporting the first
// differing line; or rewrites the file when updating.
inline void ExpectMatchesGolden(const std::string& actual, const std::string& name) {
  std::string path = GoldenPath(name);
  if (UpdatingGoldens()) {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "missing golden file " << path << " (run with GRADEML_UPDATE_GOLDENS=1 to create it)";
    return;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string expected = buffer.str();
  if (actual == expected) return;
  std::istringstream a(actual), e(expected);
  std::string la, le;
  int line = 0;
  while (true) {
    ++line;
    bool more_a = static_cast<bool>(std::getline(a, la));
    bool more_e = static_cast<bool>(std::getline(e, le));
    if (!more_a && !more_e) break;
    if (!more_a || !more_e || la != le) {
      ADD_FAILURE() << path << " differs at line " << line << "\n  expected: " << (more_e ? le : "<end>")
                    << "\n  actual:   " << (more_a ? la : "<end>")
                    << "\n(run with GRADEML_UPDATE_GOLDENS=1 to accept the new output)\n--- actual output ---\n"
                    << actual;
      return;
    }
  }
  ADD_FAILURE() << path << " differs (line endings or the final newline)";
}

// Reports are rendered in local time: make it the same everywhere.
inline void UseUtc() {
  setenv("TZ", "UTC", 1);
  tzset();
}

}  // namespace grademl::testing
