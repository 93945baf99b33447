// The operator-sampling parts of the reports (analysis/deep_profile.h): `deep_profile` in
// `grademl report --json` and the HTML report's data, the terminal's "Operators (sampled: ...)"
// section. Figures worked out by hand in tests/analysis/deep_profile_fixture.h (ms there).
#include <gtest/gtest.h>

#include "analysis/attribution.h"
#include "analysis/deep_profile_fixture.h"
#include "analysis/level_breakdown.h"
#include "analysis/run_analysis.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/terminal_report.h"

namespace grademl::report {
namespace {

using nlohmann::json;

TEST(DeepProfileReportTest, JsonTerminalAndHtmlData) {
  model::Run run = testing::DeepProfiledRun();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  json j = RenderJsonReport(run, a);
  const json& d = j.at("deep_profile");
  ASSERT_TRUE(d.is_object());
  EXPECT_TRUE(d.at("method").is_string());
  EXPECT_NEAR(d.at("removed_s").get<double>(), 6.5e-3, 1e-12);
  ASSERT_EQ(d.at("groups").size(), 1u);
  const json& g = d.at("groups")[0];
  EXPECT_EQ(g.at("mode"), "train");
  EXPECT_EQ(g.at("iterations"), 15);
  EXPECT_EQ(g.at("profiled_indices"), json::array({4, 8, 12}));
  EXPECT_NEAR(g.at("baseline_s").get<double>(), 10e-3, 1e-12);
  EXPECT_NEAR(g.at("cost_per_op_us").get<double>(), 5000.0 / 13, 1e-6);
  EXPECT_NEAR(g.at("data_wait").at("baseline_s").get<double>(), 1e-3, 1e-12);
  const json& mm = g.at("operators")[0];
  EXPECT_EQ(mm.at("name"), "mm");
  EXPECT_EQ(mm.at("data_wait"), false);
  EXPECT_NEAR(mm.at("ci95_s")[0].get<double>(), (2.0 - 1.6431027) * 1e-3, 1e-9);
  EXPECT_NEAR(mm.at("total_s").get<double>(), 30e-3, 1e-12);

  std::string out = RenderTerminalReport(run, a);
  size_t at = out.find("\nOperators (sampled: 3 of 15 iterations)");
  ASSERT_NE(at, std::string::npos) << out;
  std::string section = out.substr(at + 1, out.find("\n\n", at + 1) - at);
  // The cost sentence's wrapped lines joined.
  for (size_t nl = section.find("\n  "); nl != std::string::npos; nl = section.find("\n  ", nl)) {
    if (section.compare(nl + 3, 10, "operator  ") == 0) break;  // the table's header
    section.replace(nl, 3, " ");
  }
  EXPECT_NE(section.find("(train, python train.py (pid 7); docs/analysis.md)"), std::string::npos) << section;
  EXPECT_NE(section.find("operator profiling added 1.67 ms to each profiled iteration (17%) and 500 us to each "
                         "profiled data wait; 6.5 ms removed from the figures below\n"),
            std::string::npos)
      << section;
  // mm: 2.0 +- 1.6431027 ms per iteration, 20% of 10 ms; 30 +- 24.64654 ms over 15 iterations.
  EXPECT_NE(section.find("  mm                             1.0       2 ms ± 1.64 ms    20%    30 ms ± 24.6 ms\n"),
            std::string::npos)
      << section;
  EXPECT_NE(section.find("  collate (data loading)         1.0      333 us ± 502 us      -     5 ms ± 7.53 ms\n"),
            std::string::npos)
      << section;
  EXPECT_NE(section.find("not in any operator: 5.67 ms per iteration (57%)"), std::string::npos) << section;

  HtmlReportOptions hopts;
  analysis::Attribution attribution = analysis::AttributeResources(run, HtmlAttributionOptions(hopts));
  json data = RenderHtmlReportData(run, a, attribution, hopts);
  EXPECT_EQ(data.at("deep_profile"), d);
}

// `report --level operator` on a run profiled with --deep: the rows cover the profiled
// iterations only, and the section says where the extrapolation is.
TEST(DeepProfileReportTest, OperatorLevelSaysItIsASample) {
  model::Run run = testing::DeepProfiledRun();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  auto b = analysis::BreakDownByLevel(run, model::PhaseLevel::kOperator);
  ASSERT_TRUE(b.ok());
  TerminalReportOptions options;
  options.level_breakdown = &*b;
  std::string out = RenderTerminalReport(run, a, options);
  EXPECT_NE(out.find("operators were recorded in a sample of the iterations only (--deep)"), std::string::npos) << out;
  // Not for another level.
  auto fw = analysis::BreakDownByLevel(run, model::PhaseLevel::kFramework);
  ASSERT_TRUE(fw.ok());
  options.level_breakdown = &*fw;
  EXPECT_EQ(RenderTerminalReport(run, a, options).find("recorded in a sample"), std::string::npos);
}

}  // namespace
}  // namespace grademl::report
