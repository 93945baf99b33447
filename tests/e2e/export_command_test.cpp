// End-to-end tests of `grademl export --perfetto`: a real recorded command exported and
// parsed back; and its one-line errors.
#include <algorithm>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

TEST(ExportE2E, PerfettoTraceOfARealCommand) {
  std::string dir = FreshDir("export_perfetto");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--interval", "50ms", "--",
                                HelperBinary("burn_and_write"), "--cpu", "0.4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string file = dir + "/trace.json";
  r = RunCommand({GrademlBinary(), "--db", db, "export", "--perfetto", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Wrote run 1 to "), std::string::npos) << r.out;
  const std::string text = ReadFile(file);
  json trace = json::parse(text);
  json report = ReportJson(db);
  int64_t pid = 0;
  for (const json& p : report["phases"]) {
    if (!p["pid"].is_null()) {
      pid = p["pid"].get<int64_t>();
      break;
    }
  }
  ASSERT_NE(pid, 0);
  bool process_slice = false, cpu_counter = false, process_name = false;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["pid"] == pid && e["cat"] == "process") process_slice = true;
    if (e["ph"] == "C" && e["pid"] == pid && e["name"] == "CPU" && e["args"]["cores"].get<double>() > 0.3) {
      cpu_counter = true;
    }
    if (e["ph"] == "M" && e["pid"] == pid && e["name"] == "process_name") {
      process_name = e["args"]["name"].get<std::string>().find("burn_and_write") != std::string::npos;
    }
  }
  EXPECT_TRUE(process_slice);
  EXPECT_TRUE(cpu_counter);
  EXPECT_TRUE(process_name);

  // '-' writes to stdout, and the same run by id gives the same trace.
  r = RunCommand({GrademlBinary(), "--db", db, "export", "--perfetto", "-", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, text);
}

TEST(ExportE2E, ErrorsAreOneLine) {
  std::string dir = FreshDir("export_errors");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectErrors({GrademlBinary(), "--db", db, "export"}, {
      {{"--perfetto", dir + "/t.json", "9"}, 1},                 // no run 9
      {{"--perfetto", dir + "/no/such/dir/t.json"}, 1},          // cannot open
      {{"--perfetto", "/dev/full"}, 1},                          // write fails
      {{}, 2},                                                   // --perfetto is required
  });
  std::ifstream missing(dir + "/t.json");
  EXPECT_FALSE(missing.good()) << "no file is created for a missing run";
}

}  // namespace
}  // namespace grademl::testing
