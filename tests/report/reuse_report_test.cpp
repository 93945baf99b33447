// The reuse parts of the reports (analysis/reuse.h): the terminal's "Reuse" section, `reuse`
// in `grademl report --json` and in the HTML report's data. Figures worked out by hand in
// tests/analysis/reuse_fixture.h and tests/analysis/reuse_test.cpp.
#include <gtest/gtest.h>

#include "analysis/reuse_fixture.h"
#include "analysis/run_analysis.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/terminal_report.h"
#include "sample_runs.h"

namespace grademl::report {
namespace {

using nlohmann::json;

// The terminal report's Reuse section, up to the blank line after it ("" when none).
std::string ReuseSectionOf(const std::string& out) {
  size_t at = out.find("\nReuse  (");
  if (at == std::string::npos) return "";
  size_t end = out.find("\n\n", at + 1);
  return out.substr(at + 1, end == std::string::npos ? std::string::npos : end - at);
}

// Run 3's ingest ran with the key run 2 had: 12 s; restoring its 200 MB at the 100 MB/s
// (95.4 MiB/s) its hashing read would take 2 s.
TEST(ReuseReportTest, TerminalRecomputedStep) {
  model::Run run = testing::ReuseRun3();
  model::ExperimentGraph graph = testing::ReuseGraph();
  std::string out = RenderTerminalReport(run, analysis::AnalyzeRun(run, &graph));
  EXPECT_EQ(ReuseSectionOf(out),
            "Reuse  (steps restored from earlier runs, and steps that recomputed what one had; docs/reuse.md)\n"
            "  1 step recomputed what an earlier run had (the same key): 12.00 s (grademl run --reuse restores it)\n"
            "  step    outcome     cost  restore\n"
            "  ingest  ran      12.00 s  ~2.00 s  run 2 had the same key (same outputs)\n"
            "  ~ predicted: the outputs' bytes at 95.4 MiB/s (as fast as this run's hashing read)\n")
      << out;
  // The ranked issue, with its change.
  EXPECT_NE(out.find("change: reuse:#2"), std::string::npos) << out;
}

// Run 2 restored ingest (10 s in 0.5 s) and featurize (20 s in 1 s): 28.5 s saved.
TEST(ReuseReportTest, TerminalRestoredSteps) {
  model::Run run = testing::ReuseRun2();
  model::ExperimentGraph graph = testing::ReuseGraph();
  std::string out = RenderTerminalReport(run, analysis::AnalyzeRun(run, &graph));
  EXPECT_EQ(ReuseSectionOf(out),
            "Reuse  (steps restored from earlier runs, and steps that recomputed what one had; docs/reuse.md)\n"
            "  2 steps restored from earlier runs' outputs: 28.50 s saved (30.00 s of computation, 1.50 s restoring)\n"
            "  step       outcome     cost  restore\n"
            "  ingest     reused   10.00 s   500 ms  restored from run uuid-run-1\n"
            "  featurize  reused   20.00 s   1.00 s  restored from run uuid-run-1\n")
      << out;
}

// Nothing to say (run 1: every step ran for the first time), no step executions at all, or
// a store that could not list the graph: no section; the run's own reused steps still count.
TEST(ReuseReportTest, NoSectionWithNothingToSay) {
  model::Run first = testing::ReuseWorkflowRun(1, {{"ingest", 10}, {"featurize", 30}});
  model::ExperimentGraph graph = testing::ReuseGraph();
  EXPECT_EQ(ReuseSectionOf(RenderTerminalReport(first, analysis::AnalyzeRun(first, &graph))), "");
  model::Run basic = testing::BasicRun();
  EXPECT_EQ(ReuseSectionOf(RenderTerminalReport(basic, analysis::AnalyzeRun(basic))), "");
  model::Run third = testing::ReuseRun3();
  EXPECT_EQ(ReuseSectionOf(RenderTerminalReport(third, analysis::AnalyzeRun(third))), "");
  model::Run second = testing::ReuseRun2();
  EXPECT_NE(ReuseSectionOf(RenderTerminalReport(second, analysis::AnalyzeRun(second))), "");
}

TEST(ReuseReportTest, Json) {
  model::Run run = testing::ReuseRun3();
  model::ExperimentGraph graph = testing::ReuseGraph();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run, &graph);
  const json report = RenderJsonReport(run, a);
  const json& r = report.at("reuse");
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r.at("reused"), 0);
  EXPECT_EQ(r.at("redundant"), 1);
  EXPECT_NEAR(r.at("redundant_s").get<double>(), 12, 1e-9);
  EXPECT_NEAR(r.at("read_bytes_per_s").get<double>(), 100e6, 1e-3);
  EXPECT_EQ(r.at("read_speed_measured"), true);
  ASSERT_EQ(r.at("steps").size(), 2u);
  const json& ingest = r.at("steps")[0];
  EXPECT_EQ(ingest.at("phase"), 2);
  EXPECT_EQ(ingest.at("step"), "ingest");
  EXPECT_EQ(ingest.at("outcome"), "ran");
  EXPECT_EQ(ingest.at("redundant"), true);
  EXPECT_EQ(ingest.at("earlier_run"), 2);
  EXPECT_EQ(ingest.at("earlier_uuid"), "uuid-run-2");
  EXPECT_EQ(ingest.at("outputs_identical"), true);
  EXPECT_EQ(ingest.at("outputs"), json::array({"data/clean.csv"}));
  EXPECT_EQ(ingest.at("output_bytes"), 200'000'000);
  EXPECT_NEAR(ingest.at("predicted_restore_s").get<double>(), 2, 1e-9);
  EXPECT_TRUE(ingest.at("reused_from").is_null());
  EXPECT_TRUE(ingest.at("not_reusable").is_null());
  const json& featurize = r.at("steps")[1];
  EXPECT_EQ(featurize.at("outcome"), "failed");
  EXPECT_EQ(featurize.at("redundant"), false);
  EXPECT_TRUE(featurize.at("earlier_run").is_null());
  // The issue.
  bool found = false;
  for (const json& i : report.at("issues")) {
    if (i.at("kind") == "redundant_step") {
      found = true;
      EXPECT_EQ(i.at("change"), "reuse:#2");
      EXPECT_NEAR(i.at("impact_seconds").get<double>(), 10, 1e-6);
    }
  }
  EXPECT_TRUE(found);

  model::Run second = testing::ReuseRun2();
  json restored = RenderJsonReport(second, analysis::AnalyzeRun(second, &graph)).at("reuse");
  EXPECT_EQ(restored.at("reused"), 2);
  EXPECT_NEAR(restored.at("saved_s").get<double>(), 28.5, 1e-9);
  EXPECT_NEAR(restored.at("restore_s").get<double>(), 1.5, 1e-9);
  EXPECT_EQ(restored.at("steps")[0].at("reused_from"), "uuid-run-1");
  EXPECT_EQ(restored.at("read_speed_measured"), false);

  model::Run basic = testing::BasicRun();
  EXPECT_TRUE(RenderJsonReport(basic, analysis::AnalyzeRun(basic)).at("reuse").is_null());
}

// Untrusted names: control characters never reach the terminal; the page gets them as JSON data.
TEST(ReuseReportTest, HtmlDataAndUntrustedNames) {
  model::Run run = testing::ReuseRun3();
  run.step_executions[0].step = "in\x1b[31mgest</script>";
  model::ExperimentGraph graph = testing::ReuseGraph();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run, &graph);
  std::string out = RenderTerminalReport(run, a);
  EXPECT_EQ(out.find('\x1b'), std::string::npos);
  EXPECT_NE(ReuseSectionOf(out).find("gest</script>"), std::string::npos) << out;  // shown, escaped
  json data = RenderHtmlReportData(run, a, analysis::Attribution{});
  ASSERT_TRUE(data.at("reuse").is_object());
  EXPECT_EQ(data.at("reuse"), ReuseJson(a.reuse));
  EXPECT_EQ(data.at("reuse").at("steps")[0].at("step"), "in\x1b[31mgest</script>");
  std::string page = RenderHtmlReport(run, a, analysis::Attribution{});
  EXPECT_EQ(page.find("gest</script>"), std::string::npos) << "the name must be escaped inside the data";
}

}  // namespace
}  // namespace grademl::report
