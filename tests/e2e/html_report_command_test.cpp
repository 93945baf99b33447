// End-to-end tests of `grademl report --html`: a real recorded command whose page carries the
// measured numbers (checked against the helper's known CPU work); and its one-line errors.
// The page in a real browser is tested by tests/browser/html_report_test.mjs.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"
#include "report/html_page.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

TEST(HtmlReportE2E, PageOfARealCommand) {
  std::string dir = FreshDir("report_html");
  std::string db = dir + "/g.db";
  const auto started = std::chrono::steady_clock::now();
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--interval", "50ms", "--",
                                HelperBinary("burn_and_write"), "--cpu", "0.6"});
  // An upper bound on the helper's life: the whole `grademl run` around it.
  const double run_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string file = dir + "/report.html";
  r = RunCommand({GrademlBinary(), "--db", db, "report", "--html", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + file), std::string::npos) << r.err;
  std::string page = ReadFile(file);
  ASSERT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_LT(page.size(), 2u << 20);
  json data = HtmlPageData(page);
  ASSERT_TRUE(data.is_object());
  EXPECT_EQ(data["schema"], "grademl.html/1");

  // The process is on the timeline, under the run.
  const json& t = data["timeline"];
  bool process_drawn = false;
  for (size_t i = 0; i < t["id"].size(); ++i) {
    std::string name = t["strings"][t["name"][i].get<int>()];
    if (name.find("burn_and_write") != std::string::npos) process_drawn = t["parent"][i].get<int>() >= 0;
  }
  EXPECT_TRUE(process_drawn);

  // Ground truth: the helper burns 0.6 s of one core. The attribution table's CPU of the
  // process's subtree says so (±0.2 core-s), and so does the area under its CPU plot. The
  // plot's peak is at least the helper's mean over its life, 0.6 CPU-s over at most the run's
  // wall time (one core on a quiet machine; less when other work shares the cores). No upper
  // bound: a slice only partly sampled (the process's first or last) shows the rate of its
  // sampled part, where the kernel's 10 ms CPU ticks over a few ms read as 1.7-2.6 cores.
  double cpu = -1;
  for (const json& row : data["attribution"]["rows"]) {
    // The outermost row of that name (its subtree): a sanitized helper's leak checker clones
    // a tracer task at exit, which the kernel's process events show as a short child process
    // with the same command line.
    if (row["name"].get<std::string>().find("burn_and_write") != std::string::npos && row["usage"].contains("cpu")) {
      cpu = std::max(cpu, row["usage"]["cpu"].get<double>());
    }
  }
  EXPECT_NEAR(cpu, 0.6, 0.2);
  double peak = 0, area = 0;
  double slice_s = data["plots"]["slice_s"].get<double>();
  for (const json& g : data["plots"]["groups"]) {
    if (g["title"].get<std::string>().find("burn_and_write") == std::string::npos) continue;
    for (const json& c : g["charts"]) {
      if (c["title"] != "CPU") continue;
      for (const json& v : c["series"][0]["values"]) {
        peak = std::max(peak, v.get<double>());
        area += v.get<double>() * slice_s;
      }
    }
  }
  EXPECT_NEAR(area, 0.6, 0.2);
  EXPECT_GT(peak, 0.8 * std::min(1.0, 0.6 / run_wall_s)) << "run wall " << run_wall_s << " s";

  // '-' writes the page to stdout.
  r = RunCommand({GrademlBinary(), "--db", db, "report", "--html", "-"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("<!DOCTYPE html>", 0), 0u);
}

TEST(HtmlReportE2E, ErrorsAreOneLine) {
  std::string dir = FreshDir("report_html_errors");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectErrors({GrademlBinary(), "--db", db, "report"}, {
      {{"9", "--html", dir + "/r.html"}, 1},             // no run 9
      {{"--html", dir + "/no/such/dir/r.html"}, 1},      // cannot open
      {{"--html", "/dev/full"}, 1},                      // write fails
      {{"--html", dir + "/r.html", "--json"}, 2},        // one output at a time
  });
  std::ifstream missing(dir + "/r.html");
  EXPECT_FALSE(missing.good()) << "no file is created for a missing run or a usage error";
}

}  // namespace
}  // namespace grademl::testing
