// The fine-sampling parts of the reports (analysis/fine_sampling.h): `fine_sampling` in
// `grademl report --json` and the terminal's "Fine phases" section. Figures worked out by hand
// in tests/analysis/fine_sampling_fixture.h.
#include <gtest/gtest.h>

#include "analysis/fine_sampling_fixture.h"
#include "analysis/run_analysis.h"
#include "report/json_report.h"
#include "report/terminal_report.h"

namespace grademl::report {
namespace {

using nlohmann::json;

TEST(FineSamplingReportTest, JsonAndTerminal) {
  model::Run run = testing::FineSampledRun();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  json j = RenderJsonReport(run, a);
  const json& f = j.at("fine_sampling");
  ASSERT_TRUE(f.is_object());
  EXPECT_EQ(f.at("iterations"), 12);
  EXPECT_EQ(f.at("recorded_iterations"), 4);
  EXPECT_EQ(f.at("every_max"), 4);
  EXPECT_NEAR(f.at("budget").get<double>(), 0.02, 1e-12);
  EXPECT_NEAR(f.at("overhead_fraction").get<double>(), 0.00375, 1e-12);
  ASSERT_EQ(f.at("types").size(), 5u);
  EXPECT_EQ(f.at("types")[0].at("type"), "forward");
  EXPECT_EQ(f.at("types")[0].at("total"), 12);
  EXPECT_NEAR(f.at("types")[0].at("total_s").get<double>(), 6.0, 1e-9);

  std::string out = RenderTerminalReport(run, a);
  size_t at = out.find("\nFine phases  (");
  ASSERT_NE(at, std::string::npos) << out;
  std::string section = out.substr(at + 1, out.find("\n\n", at + 1) - at);
  // The sentence's wrapped lines joined.
  for (size_t nl = section.find("\n  "); nl != std::string::npos; nl = section.find("\n  ", nl)) {
    if (section.compare(nl + 3, 4, "type") == 0) break;
    section.replace(nl, 3, " ");
  }
  EXPECT_NE(section.find("Fine phases recorded in 1 of 2 to 1 of 4 iterations (budget 2.0% of the workload, "
                         "instrumentation measured at 0.4%); counts and totals below are exact for all 12 "
                         "iterations; 4 of them recorded as phases\n"),
            std::string::npos)
      << section;
  EXPECT_NE(section.find("  forward       12  6.00 s   4 (33%)\n"), std::string::npos) << section;
  EXPECT_NE(section.find("  data_wait      8  1.60 s   2 (25%)\n"), std::string::npos) << section;
  EXPECT_EQ(section.find("optimizer_step"), std::string::npos) << "types that never ran are left out";
}

// Instrumentation measured over the budget although phases were sampled (the iterations are
// too short even for the iteration phase): said in so many words. 8 s over the fixture's
// 80 s of epochs: 10%, against a budget of 2%.
TEST(FineSamplingReportTest, OverTheBudgetIsSaid) {
  model::Run run = testing::FineSampledRun();
  for (model::Phase& p : run.phases)
    for (auto& [k, v] : p.tags)
      if (k == "overhead.ns") v = "4000000000";
  std::string out = RenderTerminalReport(run, analysis::AnalyzeRun(run));
  std::string joined;
  for (char c : out) joined += c == '\n' ? ' ' : c;
  for (size_t at; (at = joined.find("  ")) != std::string::npos;) joined.erase(at, 1);
  EXPECT_NE(joined.find("instrumentation measured at 10%"), std::string::npos) << out;
  EXPECT_NE(joined.find("Over the budget even so"), std::string::npos) << out;
}

TEST(FineSamplingReportTest, NullAndNoSectionWithoutTags) {
  model::Run run = testing::FineSampledRun();
  for (model::Phase& p : run.phases) p.tags.clear();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  EXPECT_TRUE(RenderJsonReport(run, a).at("fine_sampling").is_null());
  EXPECT_EQ(RenderTerminalReport(run, a).find("Fine phases"), std::string::npos);
}

}  // namespace
}  // namespace grademl::report
