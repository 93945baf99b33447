// The communication section of the reports: `communication` and `communication_summary` in
// `grademl report --json` (docs/json-report.md) and the HTML report's data, the terminal's
// "Communication" table; untrusted names (hosts, job ids) never reach the terminal raw.
// Input: two ranks whose figures are worked out by hand in
// tests/analysis/communication_test.cpp (OverlapWaitAndStragglerOfTwoRanks).
#include <gtest/gtest.h>

#include "analysis/attribution.h"
#include "analysis/run_analysis.h"
#include "analysis/run_fixture.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/terminal_report.h"

namespace grademl::report {
namespace {

using nlohmann::json;
using testing::RunFixture;
using testing::Sec;

const char kEvilHost[] = "node\x1b[31m<b>1</b>";
const char kEvilJob[] = "job\x1b[2J<script>";

model::Run TwoRanks() {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  f.run.info.complete = true;
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  auto launcher = f.AddProcess(root, "python3 /usr/bin/torchrun train.py", 0, Sec(10), 10);
  auto rank = [&](int r, int32_t pid) {
    auto id = f.AddProcess(launcher, "python3 -u train.py", 0, Sec(10), pid);
    auto& p = f.run.phases.back();
    p.host = kEvilHost;
    p.tags = {{"rank", std::to_string(r)}, {"world_size", "2"}, {"job", kEvilJob}};
    return id;
  };
  auto phase = [&](model::PhaseId parent, const char* name, const char* leaf, double s, double e) {
    const model::Phase par = f.run.phases[parent - 1];
    return f.AddPhase(parent, name, par.type + "/" + leaf, Sec(s), Sec(e), par.pid, par.host);
  };
  auto coll = [&](model::PhaseId parent, const char* name, double s, double e, int seq, bool async) {
    auto id = phase(parent, name, "collective", s, e);
    f.run.phases.back().tags = {{"bytes", "100"}, {"process_group", "world"}, {"seq", std::to_string(seq)},
                                {"async", async ? "1" : "0"}};
    return id;
  };
  auto r0 = rank(0, 11), r1 = rank(1, 12);
  coll(phase(r0, "forward", "forward", 1, 2), "broadcast", 1.2, 1.5, 1, false);
  phase(r0, "backward", "backward", 2, 4);
  coll(r0, "all_reduce", 3, 5, 2, true);
  phase(r0, "optimizer.step", "optimizer_step", 5, 5.5);
  coll(phase(r1, "forward", "forward", 1, 2), "broadcast", 1.1, 1.5, 1, false);
  phase(r1, "backward", "backward", 3, 4.5);
  coll(r1, "all_reduce", 4, 5, 2, true);
  phase(r1, "optimizer.step", "optimizer_step", 5, 5.5);
  return f.Build();
}

TEST(CommunicationReport, JsonHasOneEntryPerRankInTheIssuesShape) {
  model::Run run = TwoRanks();
  json report = RenderJsonReport(run, analysis::AnalyzeRun(run));
  const json& c = report["communication"];
  ASSERT_TRUE(c.is_array());
  ASSERT_EQ(c.size(), 2u);
  for (const char* key : {"rank", "host", "pid", "collectives", "comm_s", "overlapped_s", "overlap_pct", "wait_s"}) {
    EXPECT_TRUE(c[0].contains(key)) << key;
  }
  EXPECT_EQ(c[0]["rank"], 0);
  EXPECT_EQ(c[0]["host"], kEvilHost);  // JSON carries the name as it is (valid UTF-8)
  EXPECT_EQ(c[0]["pid"], 11);
  EXPECT_EQ(c[0]["collectives"], 2);
  EXPECT_NEAR(c[0]["comm_s"].get<double>(), 2.3, 1e-9);
  EXPECT_NEAR(c[0]["overlapped_s"].get<double>(), 1.0, 1e-9);
  EXPECT_EQ(c[0]["overlap_pct"], 43.48);
  EXPECT_NEAR(c[0]["wait_s"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(c[1]["wait_s"].get<double>(), 0.1, 1e-9);
  EXPECT_EQ(c[1]["straggler"], true);
  EXPECT_EQ(c[1]["source"], "events");
  const json& s = report["communication_summary"];
  EXPECT_EQ(s["straggler_rank"], 1);
  EXPECT_NEAR(s["straggler_cost_s"].get<double>(), 1.0, 1e-9);
  EXPECT_EQ(s["world_size"], 2);
  EXPECT_EQ(s["jobs"][0]["id"], kEvilJob);
  EXPECT_EQ(s["kinds"][0]["name"], "all_reduce");
  bool issue = false;
  for (const json& i : report["issues"]) issue = issue || i["kind"] == "rank_straggler";
  EXPECT_TRUE(issue) << report["issues"].dump(1);
}

TEST(CommunicationReport, TerminalTableWithNamesMadeSafe) {
  model::Run run = TwoRanks();
  std::string out = RenderTerminalReport(run, analysis::AnalyzeRun(run), {});
  size_t at = out.find("Communication");
  ASSERT_NE(at, std::string::npos) << out;
  std::string section = out.substr(at, out.find("Top issues", at) - at);
  EXPECT_EQ(section.find('\x1b'), std::string::npos) << section;
  EXPECT_NE(section.find("node?[31m<b>1</b>"), std::string::npos) << section;
  EXPECT_NE(section.find("job job?[2J<script>"), std::string::npos) << section;
  EXPECT_NE(section.find("1 straggler"), std::string::npos) << section;
  EXPECT_NE(section.find("rank 1 was the straggler: the others waited 1.00 s on average"), std::string::npos) << section;
  EXPECT_NE(section.find("2.30 s"), std::string::npos) << section;  // rank 0 in collectives
  // The straggler's issue has no what-if change: no empty "change:" line under it.
  std::string issues = out.substr(out.find("Top issues"));
  EXPECT_NE(issues.find("was the straggler of its"), std::string::npos) << issues;
  EXPECT_EQ(issues.find("change: \n"), std::string::npos) << issues;
}

TEST(CommunicationReport, NoSectionWithoutRanks) {
  RunFixture f;
  f.run.info.end_ns = Sec(1);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(1));
  f.AddProcess(root, "python3 x.py", 0, Sec(1), 5);
  model::Run run = f.Build();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  EXPECT_EQ(RenderTerminalReport(run, a, {}).find("Communication"), std::string::npos);
  json report = RenderJsonReport(run, a);
  EXPECT_EQ(report["communication"], json::array());
  EXPECT_TRUE(report["communication_summary"].is_null());
}

TEST(CommunicationReport, HtmlDataCarriesTheSection) {
  model::Run run = TwoRanks();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  json data = RenderHtmlReportData(run, a, analysis::AttributeResources(run), {});
  ASSERT_EQ(data["communication"].size(), 2u);
  EXPECT_EQ(data["communication"][1]["straggler"], true);
  EXPECT_EQ(data["communication_summary"]["straggler_rank"], 1);
  // The page's script is JSON in a <script> element: "</" never appears raw in it.
  std::string page = RenderHtmlReport(run, a, analysis::AttributeResources(run), {});
  EXPECT_EQ(page.find("job\x1b[2J<script>"), std::string::npos);
}

}  // namespace
}  // namespace grademl::report
