// Fine phases recorded on a sample of the iterations (analysis/fine_sampling.h). Expected
// figures worked out by hand in tests/analysis/fine_sampling_fixture.h.
#include "analysis/fine_sampling.h"

#include <gtest/gtest.h>

#include "analysis/fine_sampling_fixture.h"
#include "analysis/run_fixture.h"

namespace grademl::analysis {
namespace {

using testing::RunFixture;
using testing::Sec;

const FineTypeCounts& FineTypeOf(const FineSampling& f, std::string_view type) {
  for (const FineTypeCounts& c : f.types) {
    if (c.type == type) return c;
  }
  static const FineTypeCounts none;
  ADD_FAILURE() << "no type " << type;
  return none;
}

TEST(FineSamplingTest, ExactTotalsFromRecordedPhasesAndEpochTags) {
  model::Run run = testing::FineSampledRun();
  FineSampling f = AnalyzeFineSampling(run);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f.epochs, 2);
  EXPECT_EQ(f.every_min, 2);
  EXPECT_EQ(f.every_max, 4);
  EXPECT_EQ(f.iterations, 12);
  EXPECT_EQ(f.recorded_iterations, 4);
  ASSERT_EQ(f.types.size(), 5u);
  EXPECT_EQ(f.types[0].type, "forward");
  const FineTypeCounts& fwd = FineTypeOf(f, "forward");
  EXPECT_EQ(fwd.recorded, 4);
  EXPECT_NEAR(fwd.recorded_s, 2.0, 1e-9);
  EXPECT_EQ(fwd.unrecorded, 8);
  EXPECT_NEAR(fwd.unrecorded_s, 4.0, 1e-9);
  EXPECT_EQ(fwd.total, 12);
  EXPECT_NEAR(fwd.total_s, 6.0, 1e-9);
  const FineTypeCounts& bwd = FineTypeOf(f, "backward");
  EXPECT_EQ(bwd.total, 8);
  EXPECT_NEAR(bwd.total_s, 8.0, 1e-9);
  EXPECT_EQ(bwd.recorded, 2);
  const FineTypeCounts& dw = FineTypeOf(f, "data_wait");
  EXPECT_EQ(dw.recorded, 2);
  EXPECT_NEAR(dw.recorded_s, 0.4, 1e-9);
  EXPECT_EQ(dw.total, 8);
  EXPECT_NEAR(dw.total_s, 1.6, 1e-9);
  EXPECT_EQ(FineTypeOf(f, "loss").total, 0);
  EXPECT_EQ(FineTypeOf(f, "optimizer_step").total, 0);
  EXPECT_TRUE(f.budget_known);
  EXPECT_NEAR(f.budget, 0.02, 1e-12);
  EXPECT_TRUE(f.overhead_measured);
  EXPECT_NEAR(f.overhead_s, 0.3, 1e-9);
  EXPECT_NEAR(f.epochs_s, 80.0, 1e-9);
  EXPECT_NEAR(f.overhead_fraction, 0.00375, 1e-12);
}

TEST(FineSamplingTest, EmptyWithoutTheEpochTags) {
  RunFixture f;
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  auto epoch = f.AddPhase(root, "epoch", "epoch", 0, Sec(10));
  f.run.phases.back().tags.emplace_back("epoch", "0");
  auto it = f.AddPhase(epoch, "iteration", "iteration", 0, Sec(1));
  f.AddPhase(it, "forward", "forward", 0, Sec(1));
  EXPECT_TRUE(AnalyzeFineSampling(f.Build()).empty());
}

TEST(FineSamplingTest, MalformedTagsReadAsAbsent) {
  RunFixture f;
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  f.AddPhase(root, "epoch", "epoch", 0, Sec(10));
  f.run.phases.back().tags = {{"fine.every", "x"}, {"fine.iterations", "5"}, {"overhead.budget", "lots"},
                              {"unrecorded.forward.count", "-3"}};
  FineSampling s = AnalyzeFineSampling(f.Build());
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.every_max, 1);
  EXPECT_EQ(s.iterations, 5);
  EXPECT_FALSE(s.budget_known);
  EXPECT_FALSE(s.overhead_measured);
  EXPECT_EQ(FineTypeOf(s, "forward").unrecorded, 0);
}

}  // namespace
}  // namespace grademl::analysis
