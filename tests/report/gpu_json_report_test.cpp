// The `gpu` section of `grademl report --json` (docs/gpu.md): field names as issue 13 spells
// them, figures rounded as HTA rounds them, NaN as null. Input: worked example A of
// shared/design/hta-definitions.md; expected values from that document.
#include <gtest/gtest.h>

#include "analysis/gpu_example_traces.h"
#include "report/json_report.h"
#include "sample_runs.h"

namespace grademl::report {
namespace {

using nlohmann::json;

json GpuSection(const analysis::GpuRowTable& rows) {
  model::Run run = testing::BasicRun();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  a.gpu = analysis::AnalyzeGpuRows(rows);
  return RenderJsonReport(run, a)["gpu"];
}

TEST(GpuJsonReport, ExampleAFieldsAsTheIssueSpellsThem) {
  json g = GpuSection(testing::ExampleA());
  ASSERT_TRUE(g.is_object());
  ASSERT_EQ(g["temporal"].size(), 1u);
  const json& t = g["temporal"][0];
  EXPECT_EQ(t["rank"], 0);
  EXPECT_EQ(t["idle_pct"], 5.56);
  EXPECT_EQ(t["compute_pct"], 55.56);
  EXPECT_EQ(t["non_compute_pct"], 38.89);
  EXPECT_EQ(t["idle_us"], 15.0);
  EXPECT_EQ(t["compute_us"], 150.0);
  EXPECT_EQ(t["non_compute_us"], 105.0);
  EXPECT_EQ(t["kernel_us"], 270.0);
  EXPECT_EQ(g["overlap"][0]["rank"], 0);
  EXPECT_EQ(g["overlap"][0]["comm_comp_overlap_pct"], 42.42);
  ASSERT_EQ(g["kernel_types"].size(), 4u);
  EXPECT_EQ(g["kernel_types"][0]["type"], "COMMUNICATION");
  EXPECT_EQ(g["kernel_types"][0]["us"], 85.0);
  EXPECT_EQ(g["kernel_types"][0]["pct"], 34.7);
  EXPECT_EQ(g["kernel_types"][2]["type"], "COMPUTATION overlapping COMMUNICATION");
  EXPECT_EQ(g["kernel_types"][2]["pct"], 28.6);
  ASSERT_EQ(g["idle"].size(), 5u);
  EXPECT_EQ(g["idle"][0], json({{"rank", 0}, {"stream", 7}, {"category", "host_wait"}, {"us", 50.0}, {"ratio", 0.45}}));
  EXPECT_EQ(g["idle"][1]["ratio"], 0.09);
  EXPECT_EQ(g["idle"][4], json({{"rank", 0}, {"stream", 20}, {"category", "other"}, {"us", 0.0}, {"ratio", 0.0}}));
  EXPECT_EQ(g["launch"][0]["kernels"], 7);
  EXPECT_EQ(g["launch"][0]["delay_max_us"], 220.0);
  EXPECT_EQ(g["ranks"][0]["bound"], "gpu");
  EXPECT_EQ(g["whatif"][0]["lever"], "communication_overlapped");
  EXPECT_EQ(g["whatif"][0]["saving_us"], 85.0);
  EXPECT_EQ(g["whatif"][0]["predicted_kernel_us"], 185.0);
}

TEST(GpuJsonReport, UndefinedOverlapAndIdleRatiosAreNull) {
  json g = GpuSection(testing::ExampleC());
  EXPECT_EQ(g["overlap"][0]["comm_comp_overlap_pct"], 50.0);
  EXPECT_TRUE(g["overlap"][1]["comm_comp_overlap_pct"].is_null());  // rank 1: no communication
  EXPECT_TRUE(g["idle"][0]["ratio"].is_null());                      // rank 0, stream 7: one kernel
}

TEST(GpuJsonReport, RunWithoutTracesHasNullGpu) {
  model::Run run = testing::BasicRun();
  EXPECT_TRUE(RenderJsonReport(run, analysis::AnalyzeRun(run))["gpu"].is_null());
}

}  // namespace
}  // namespace grademl::report
