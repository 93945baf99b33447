// Operators profiled on a sample of the iterations, their profiling cost removed
// (analysis/deep_profile.h). The expected figures are worked out by hand in
// tests/analysis/deep_profile_fixture.h (in ms there, seconds here).
#include "analysis/deep_profile.h"

#include <gtest/gtest.h>

#include "analysis/deep_profile_fixture.h"
#include "analysis/run_fixture.h"

namespace grademl::analysis {
namespace {

using testing::RunFixture;
using testing::Sec;

constexpr double kDeepMs = 1e-3;
constexpr double kDeepTol = 1e-9;

const DeepOperator& DeepOpNamed(const DeepProfileGroup& g, std::string_view name, bool data_wait) {
  for (const DeepOperator& op : g.operators) {
    if (op.name == name && op.data_wait == data_wait) return op;
  }
  static const DeepOperator none;
  ADD_FAILURE() << "no operator " << name;
  return none;
}

TEST(DeepProfileTest, StudentT) {
  EXPECT_NEAR(StudentT975(1), 12.7062047, 1e-7);
  EXPECT_NEAR(StudentT975(2), 4.30265273, 1e-8);
  EXPECT_NEAR(StudentT975(35), 2.04227246, 1e-8);  // the table's df 30: never narrower
  EXPECT_NEAR(StudentT975(1000), 1.97993050, 1e-8);
}

TEST(DeepProfileTest, BaselineCostAndGroup) {
  DeepProfile d = AnalyzeDeepProfile(testing::DeepProfiledRun());
  ASSERT_EQ(d.groups.size(), 1u);  // the eval iterations were not profiled
  const DeepProfileGroup& g = d.groups[0];
  EXPECT_EQ(g.mode, "train");
  EXPECT_EQ(g.pid, 7);
  EXPECT_NE(g.process, 0);
  EXPECT_EQ(g.iterations, 15);
  EXPECT_EQ(g.profiled, 3);
  EXPECT_EQ(g.profiled_indices, (std::vector<int64_t>{4, 8, 12}));
  EXPECT_EQ(g.profiled_phases.size(), 3u);
  EXPECT_TRUE(g.baseline_known);
  EXPECT_EQ(g.baseline_iterations, 9);
  EXPECT_NEAR(g.baseline_s, 10 * kDeepMs, kDeepTol);
  EXPECT_NEAR(g.mean_cost_s, 5.0 / 3 * kDeepMs, kDeepTol);
  EXPECT_NEAR(g.cost_fraction, 5.0 / 3 / 10, 1e-9);
  EXPECT_NEAR(g.ops_per_iteration, 13.0 / 3, 1e-12);
  EXPECT_NEAR(g.cost_per_op_s, 5.0 / 13 * kDeepMs, kDeepTol);
  EXPECT_NEAR(g.cost_inside_op_s, 0.25 * kDeepMs, kDeepTol);
  EXPECT_NEAR(g.unattributed_s, 17.0 / 3 * kDeepMs, kDeepTol);
  EXPECT_EQ(g.data_waits_profiled, 3);
  EXPECT_NEAR(g.data_wait_baseline_s, 1 * kDeepMs, kDeepTol);
  EXPECT_NEAR(g.data_wait_mean_cost_s, 0.5 * kDeepMs, kDeepTol);
  EXPECT_NEAR(g.removed_s, 6.5 * kDeepMs, kDeepTol);
  EXPECT_NEAR(d.removed_s, 6.5 * kDeepMs, kDeepTol);
}

TEST(DeepProfileTest, CorrectedOperatorsWithIntervals) {
  DeepProfile d = AnalyzeDeepProfile(testing::DeepProfiledRun());
  ASSERT_EQ(d.groups.size(), 1u);
  const DeepProfileGroup& g = d.groups[0];
  ASSERT_EQ(g.operators.size(), 7u);  // 5 in the iterations, 2 in data loading
  EXPECT_EQ(g.operators[0].name, "mm");  // the largest total first

  const DeepOperator& mm = DeepOpNamed(g, "mm", false);
  EXPECT_NEAR(mm.mean_s, 2.0 * kDeepMs, kDeepTol);
  EXPECT_NEAR(mm.raw_mean_s, (2 + 3 + 1.5) / 3.0 * kDeepMs, kDeepTol);
  EXPECT_NEAR(mm.sd_s, 0.6614378 * kDeepMs, 1e-9);
  ASSERT_TRUE(mm.half_interval_s.has_value());
  EXPECT_NEAR(*mm.half_interval_s, 1.6431027 * kDeepMs, 1e-9);
  EXPECT_NEAR(mm.total_s, 30 * kDeepMs, kDeepTol);
  EXPECT_NEAR(*mm.total_half_interval_s, 24.64654 * kDeepMs, 1e-8);
  EXPECT_NEAR(mm.calls_per_iteration, 1.0, 1e-12);
  EXPECT_NEAR(mm.share, 0.2, 1e-9);

  const DeepOperator& relu = DeepOpNamed(g, "relu", false);
  EXPECT_NEAR(relu.mean_s, 3.25 / 3 * kDeepMs, kDeepTol);
  EXPECT_NEAR(*relu.half_interval_s, 0.9486458 * kDeepMs, 1e-9);
  EXPECT_NEAR(relu.total_s, 16.25 * kDeepMs, kDeepTol);
  EXPECT_NEAR(relu.calls_per_iteration, 5.0 / 3, 1e-12);

  const DeepOperator& addmm = DeepOpNamed(g, "addmm", false);
  EXPECT_NEAR(addmm.mean_s, 2.0 / 3 * kDeepMs, kDeepTol);
  EXPECT_NEAR(*addmm.half_interval_s, 0.3585544 * kDeepMs, 1e-9);
  EXPECT_NEAR(addmm.total_s, 10 * kDeepMs, kDeepTol);

  const DeepOperator& dropout = DeepOpNamed(g, "dropout", false);
  EXPECT_NEAR(dropout.mean_s, 0.25 * kDeepMs, kDeepTol);
  EXPECT_NEAR(*dropout.half_interval_s, 1.0756632 * kDeepMs, 1e-9);
  EXPECT_NEAR(dropout.calls_per_iteration, 1.0 / 3, 1e-12);

  const DeepOperator& copy = DeepOpNamed(g, "copy_", false);
  EXPECT_NEAR(copy.mean_s, 0, kDeepTol);  // the cheapest: its own time is taken as all profiler
  EXPECT_NEAR(*copy.half_interval_s, 0, kDeepTol);

  const DeepOperator& collate = DeepOpNamed(g, "collate", true);
  EXPECT_NEAR(collate.mean_s, 1.0 / 3 * kDeepMs, kDeepTol);
  EXPECT_NEAR(*collate.half_interval_s, 0.5019762 * kDeepMs, 1e-9);
  EXPECT_NEAR(collate.total_s, 5 * kDeepMs, kDeepTol);
  EXPECT_NEAR(*collate.total_half_interval_s, 7.529642 * kDeepMs, 1e-8);
  EXPECT_NEAR(collate.share, 1.0 / 3, 1e-9);
  const DeepOperator& stack = DeepOpNamed(g, "stack", true);
  EXPECT_NEAR(stack.mean_s, 0.8 / 3 * kDeepMs, kDeepTol);
  EXPECT_NEAR(*stack.half_interval_s, 0.2585573 * kDeepMs, 1e-9);
  EXPECT_NEAR(stack.total_s, 4 * kDeepMs, kDeepTol);
}

TEST(DeepProfileTest, EmptyWithoutDeepTagsAndNoIntervalForOneSample) {
  RunFixture f;
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  auto proc = f.AddPhase(root, "p", "run/process", 0, Sec(10), 3);
  for (int k = 0; k < 4; ++k) f.AddPhase(proc, "iteration", "iteration", Sec(k), Sec(k + 0.5), 3);
  f.Build();
  EXPECT_TRUE(AnalyzeDeepProfile(f.run).empty());
  // One profiled iteration of 0.8 s against the median 0.5 s: D 0.3 over 3 ops, 0.1 each,
  // all of it inside the operators (the cheapest kind takes 0.2 per call: relu 0.4 / 2, mm 0.2).
  auto it = f.AddPhase(proc, "iteration", "iteration", Sec(5), Sec(5.8), 3);
  f.run.phases.back().tags.emplace_back("deep", "ops");
  f.AddPhase(it, "relu", "op", Sec(5), Sec(5.3), 3);
  f.AddPhase(it, "relu", "op", Sec(5.3), Sec(5.4), 3);
  f.AddPhase(it, "mm", "op", Sec(5.4), Sec(5.6), 3);
  f.Build();
  DeepProfile d = AnalyzeDeepProfile(f.run);
  ASSERT_EQ(d.groups.size(), 1u);
  const DeepProfileGroup& g = d.groups[0];
  EXPECT_EQ(g.mode, "");
  EXPECT_EQ(g.iterations, 5);
  EXPECT_NEAR(g.baseline_s, 0.5, kDeepTol);
  EXPECT_NEAR(g.removed_s, 0.3, kDeepTol);
  // relu: 0.4 - 2 x 0.1 = 0.2, x 5 iterations = 1.0; mm: 0.2 - 0.1 = 0.1.
  const DeepOperator& relu = DeepOpNamed(g, "relu", false);
  EXPECT_NEAR(relu.mean_s, 0.2, kDeepTol);
  EXPECT_NEAR(relu.total_s, 1.0, kDeepTol);
  EXPECT_FALSE(relu.half_interval_s.has_value());
  EXPECT_NEAR(DeepOpNamed(g, "mm", false).mean_s, 0.1, kDeepTol);
  // Not in operators: 0.8 - 0.3 - 0.3 = 0.2.
  EXPECT_NEAR(g.unattributed_s, 0.2, kDeepTol);
}

}  // namespace
}  // namespace grademl::analysis
