// The Dask sections of the reports (terminal, `report --json`'s `dask`, the HTML report's
// data) on a small hand-built run whose keys, prefix and worker address are hostile: they
// come from the user's program and must reach neither the terminal nor the page raw.
#include <gtest/gtest.h>

#include "html_page.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/terminal_report.h"
#include "sample_runs.h"

namespace grademl::report {
namespace {

using nlohmann::json;
using testing::RunFixture;
using testing::Sec;

const std::string kEvil = "</script><script>alert(1)</script>\x1b[31m\xff";
const std::string kEvilRead = "</script><script>alert(1)</script>\x1b[31m\xef\xbf\xbd";  // as valid UTF-8

model::Run DaskRun() {
  RunFixture f;
  f.run.info.id = 3;
  f.run.info.host = "node1";
  f.run.info.start_ns = 0;
  f.run.info.end_ns = Sec(10);
  f.run.info.complete = true;
  auto root = f.AddPhase(0, "python3 prog.py", "run", 0, Sec(10));
  auto client = f.AddProcess(root, "python3 prog.py", 0, Sec(10), 10);
  auto w = f.AddProcess(client, "python3 worker", 0, Sec(10), 11);
  auto task = [&](const std::string& key, const std::string& prefix, double s, double e) {
    auto id = f.AddPhase(w, key, "run/process/process/task", Sec(s), Sec(e), 11);
    f.run.phases.back().tags = {{"engine", "dask"}, {"key", key},       {"prefix", prefix},
                                {"group", prefix},  {"worker", kEvil}, {"state", "memory"}, {"nbytes", "64"}};
    f.AddPhase(id, "compute", "run/process/process/task/compute", Sec(s), Sec(e), 11);
    return id;
  };
  task("cheap-1", "cheap", 1, 1.5);
  task(kEvil + "-1", kEvil, 2, 5);
  task(kEvil + "-2", kEvil, 5, 6);
  return f.Build();
}

TEST(DaskReportTest, JsonSection) {
  model::Run run = DaskRun();
  json d = RenderJsonReport(run, analysis::AnalyzeRun(run))["dask"];
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d["tasks"], 3);
  EXPECT_EQ(d["edges"], 0);
  ASSERT_EQ(d["prefixes"].size(), 2u);
  const json& p = d["prefixes"][0];  // 4 s of compute before cheap's 0.5 s
  EXPECT_EQ(p["prefix"], kEvilRead);
  EXPECT_EQ(p["tasks"], 2);
  EXPECT_EQ(p["workers"], 1);
  EXPECT_EQ(p["compute_s"], 4.0);
  EXPECT_EQ(p["max_task_s"], 3.0);
  EXPECT_EQ(p["median_task_s"], 2.0);
  EXPECT_EQ(p["result_bytes"], 128);
  EXPECT_EQ(p["slowest_task_key"], kEvilRead + "-1");
  ASSERT_EQ(d["workers"].size(), 1u);
  EXPECT_EQ(d["workers"][0]["worker"], kEvilRead);
  EXPECT_EQ(d["workers"][0]["pid"], 11);
  EXPECT_EQ(d["workers"][0]["tasks"], 3);
  EXPECT_TRUE(d["workers"][0]["process"].is_number());
  // Without Dask tasks: null.
  model::Run plain = testing::BasicRun();
  EXPECT_TRUE(RenderJsonReport(plain, analysis::AnalyzeRun(plain))["dask"].is_null());
}

TEST(DaskReportTest, TerminalSectionIsSafeAndCostliestFirst) {
  model::Run run = DaskRun();
  std::string text = RenderTerminalReport(run, analysis::AnalyzeRun(run));
  size_t at = text.find("\nDask  (3 tasks on 1 worker, 0 dependency edges, 0 transfers");
  ASSERT_NE(at, std::string::npos) << text;
  std::string section = text.substr(at);
  EXPECT_EQ(section.find('\x1b'), std::string::npos);  // no escape sequence from the names
  size_t evil = section.find("</script><script>alert(1)</script>?[31m");
  size_t cheap = section.find("\n  cheap ");
  ASSERT_NE(evil, std::string::npos) << section;
  ASSERT_NE(cheap, std::string::npos) << section;
  EXPECT_LT(evil, cheap);
}

TEST(DaskReportTest, HtmlDataCarriesTheSectionAndTheNamesCannotEscape) {
  model::Run run = DaskRun();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  std::string page = RenderHtmlReport(run, a, analysis::AttributeResources(run));
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  json data = testing::HtmlPageData(page);
  ASSERT_TRUE(data["dask"].is_object());
  EXPECT_EQ(data["dask"]["prefixes"][0]["prefix"], kEvilRead);
  EXPECT_EQ(data["dask"]["workers"][0]["worker"], kEvilRead);
}

}  // namespace
}  // namespace grademl::report
