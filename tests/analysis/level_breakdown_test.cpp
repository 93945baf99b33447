// Levels of phases (model/phase_level.h) and the time at one level (analysis/level_breakdown.h).
// The expected figures are worked out by hand from the phases' times in the comments.
#include "analysis/level_breakdown.h"

#include <gtest/gtest.h>

#include "analysis/run_fixture.h"

namespace grademl::analysis {
namespace {

using model::PhaseLevel;
using testing::RunFixture;
using testing::Sec;

TEST(PhaseLevelTest, LeafTypesToLevels) {
  EXPECT_EQ(model::LevelOfType("run"), PhaseLevel::kWorkflow);
  EXPECT_EQ(model::LevelOfType("step"), PhaseLevel::kStep);
  EXPECT_EQ(model::LevelOfType("process"), PhaseLevel::kProcess);
  EXPECT_EQ(model::LevelOfType("host"), PhaseLevel::kProcess);
  for (const char* t : {"epoch", "iteration", "data_wait", "stage", "task", "my_user_phase", ""}) {
    EXPECT_EQ(model::LevelOfType(t), PhaseLevel::kFramework) << t;
  }
  for (const char* t : {"forward", "backward", "loss", "optimizer_step", "module"}) {
    EXPECT_EQ(model::LevelOfType(t), PhaseLevel::kLayer) << t;
  }
  EXPECT_EQ(model::LevelOfType("op"), PhaseLevel::kOperator);
  for (const char* t : {"kernel", "memcpy", "memset", "sync"}) EXPECT_EQ(model::LevelOfType(t), PhaseLevel::kKernel) << t;
  model::Phase p;
  p.type = "run/process/epoch/iteration/forward";
  EXPECT_EQ(model::LevelOf(p), PhaseLevel::kLayer);
  for (int i = 0; i <= static_cast<int>(PhaseLevel::kKernel); ++i) {
    auto level = static_cast<PhaseLevel>(i);
    EXPECT_EQ(model::ParsePhaseLevel(model::PhaseLevelName(level)), level);
  }
  EXPECT_FALSE(model::ParsePhaseLevel("ops").has_value());
}

// run [0,10] > process [0,10] > epoch [1,9] >
//   dataloader.next (data_wait) [1,2]
//   iteration [2,6] > forward [2,4] > Linear (module) [2,3] > addmm (op) [2,2.5] > mm (op) [2.1,2.4]
//                                   > relu (op) [3,3.5]
//                   > MSELoss (loss) [4,4.5]
//                   > backward [4.5,5.5] > addmm (op) [4.6,5.0]
//                   > optimizer.step (optimizer_step) [5.5,6]
//   iteration [6,9] > forward [6,8] > relu (op) [6,7]
struct LevelRun {
  RunFixture f;
  model::PhaseId iteration1 = 0;
  LevelRun() {
    auto root = f.AddPhase(0, "python train.py", "run", 0, Sec(10));
    auto proc = f.AddPhase(root, "python", "run/process", 0, Sec(10), 7);
    auto epoch = f.AddPhase(proc, "epoch", "run/process/epoch", Sec(1), Sec(9), 7);
    f.AddPhase(epoch, "dataloader.next", "run/process/epoch/data_wait", Sec(1), Sec(2), 7);
    iteration1 = f.AddPhase(epoch, "iteration", "run/process/epoch/iteration", Sec(2), Sec(6), 7);
    auto fwd = f.AddPhase(iteration1, "forward", "run/process/epoch/iteration/forward", Sec(2), Sec(4), 7);
    auto linear = f.AddPhase(fwd, "Linear", "module", Sec(2), Sec(3), 7);
    auto addmm = f.AddPhase(linear, "addmm", "op", Sec(2), Sec(2.5), 7);
    f.AddPhase(addmm, "mm", "op", Sec(2.1), Sec(2.4), 7);
    f.AddPhase(fwd, "relu", "op", Sec(3), Sec(3.5), 7);
    f.AddPhase(iteration1, "MSELoss", "loss", Sec(4), Sec(4.5), 7);
    auto bwd = f.AddPhase(iteration1, "backward", "backward", Sec(4.5), Sec(5.5), 7);
    f.AddPhase(bwd, "addmm", "op", Sec(4.6), Sec(5.0), 7);
    f.AddPhase(iteration1, "optimizer.step", "optimizer_step", Sec(5.5), Sec(6), 7);
    auto it2 = f.AddPhase(epoch, "iteration", "run/process/epoch/iteration", Sec(6), Sec(9), 7);
    auto fwd2 = f.AddPhase(it2, "forward", "forward", Sec(6), Sec(8), 7);
    f.AddPhase(fwd2, "relu", "op", Sec(6), Sec(7), 7);
    f.run.info.end_ns = Sec(10);
    f.Build();
  }
};

const LevelRow* LevelRowNamed(const LevelBreakdown& b, std::string_view name) {
  for (const LevelRow& r : b.rows) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

TEST(LevelBreakdownTest, OperatorsOfTheWholeRunBySelfTime) {
  LevelRun r;
  auto b = BreakDownByLevel(r.f.run, PhaseLevel::kOperator);
  ASSERT_TRUE(b.ok()) << b.status().message();
  // The whole run: the root, 10 s. addmm: 0.5 - 0.3 (mm inside it) + 0.4 = 0.6 s in 2;
  // mm 0.3 s; relu 0.5 + 1.0 = 1.5 s. Outermost ops: 0.5 + 0.5 + 0.4 + 1.0 = 2.4 s, 5 ops.
  EXPECT_EQ(b->phases.size(), 1u);
  EXPECT_NEAR(b->duration_s, 10.0, 1e-9);
  EXPECT_NEAR(b->covered_s, 2.4, 1e-9);
  EXPECT_EQ(b->count, 5);
  ASSERT_EQ(b->rows.size(), 3u);
  EXPECT_EQ(b->rows[0].name, "relu");
  EXPECT_EQ(b->rows[0].count, 2);
  EXPECT_NEAR(b->rows[0].total_s, 1.5, 1e-9);
  EXPECT_NEAR(b->rows[0].share, 0.15, 1e-9);
  EXPECT_EQ(b->rows[1].name, "addmm");
  EXPECT_EQ(b->rows[1].count, 2);
  EXPECT_NEAR(b->rows[1].total_s, 0.6, 1e-9);
  EXPECT_NEAR(b->rows[1].share, 0.06, 1e-9);
  EXPECT_EQ(b->rows[2].name, "mm");
  EXPECT_NEAR(b->rows[2].total_s, 0.3, 1e-9);
}

TEST(LevelBreakdownTest, LayersOfTheSelectedIterations) {
  LevelRun r;
  auto sel = ParsePhaseSelector("type:iteration");
  ASSERT_TRUE(sel.ok());
  auto b = BreakDownByLevel(r.f.run, PhaseLevel::kLayer, &*sel);
  ASSERT_TRUE(b.ok()) << b.status().message();
  // Two iterations, 4 + 3 = 7 s. forward: (2 - 1 for Linear inside) + 2 = 3 s in 2; Linear
  // 1 s; MSELoss 0.5; backward 1; optimizer.step 0.5. Outermost: 2 + 0.5 + 1 + 0.5 + 2 = 6 s.
  EXPECT_EQ(b->phases.size(), 2u);
  EXPECT_NEAR(b->duration_s, 7.0, 1e-9);
  EXPECT_NEAR(b->covered_s, 6.0, 1e-9);
  EXPECT_EQ(b->count, 6);
  const LevelRow* fwd = LevelRowNamed(*b, "forward");
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->count, 2);
  EXPECT_NEAR(fwd->total_s, 3.0, 1e-9);
  EXPECT_NEAR(fwd->share, 3.0 / 7.0, 1e-9);
  EXPECT_EQ(b->rows[0].name, "forward");
  ASSERT_NE(LevelRowNamed(*b, "Linear"), nullptr);
  EXPECT_NEAR(LevelRowNamed(*b, "Linear")->total_s, 1.0, 1e-9);
  EXPECT_NEAR(LevelRowNamed(*b, "backward")->total_s, 1.0, 1e-9);
  EXPECT_NEAR(LevelRowNamed(*b, "MSELoss")->total_s, 0.5, 1e-9);
  EXPECT_NEAR(LevelRowNamed(*b, "optimizer.step")->total_s, 0.5, 1e-9);
}

TEST(LevelBreakdownTest, FrameworkLevelSelfTimesAndTheSelectedPhaseItself) {
  LevelRun r;
  auto b = BreakDownByLevel(r.f.run, PhaseLevel::kFramework);
  ASSERT_TRUE(b.ok());
  // epoch 8 s less dataloader.next 1 s and the iterations 4 + 3 s: 0 s. Outermost: the epoch, 8 s.
  EXPECT_NEAR(b->covered_s, 8.0, 1e-9);
  EXPECT_NEAR(LevelRowNamed(*b, "iteration")->total_s, 7.0, 1e-9);
  EXPECT_NEAR(LevelRowNamed(*b, "dataloader.next")->total_s, 1.0, 1e-9);
  EXPECT_NEAR(LevelRowNamed(*b, "epoch")->total_s, 0.0, 1e-9);
  // One iteration selected by id: it is at the level itself, 4 s with nothing of the level inside.
  auto sel = ParsePhaseSelector("#" + std::to_string(r.iteration1));
  ASSERT_TRUE(sel.ok());
  auto one = BreakDownByLevel(r.f.run, PhaseLevel::kFramework, &*sel);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->rows.size(), 1u);
  EXPECT_NEAR(one->rows[0].total_s, 4.0, 1e-9);
  EXPECT_NEAR(one->rows[0].share, 1.0, 1e-9);
}

TEST(LevelBreakdownTest, NestedMatchesCountOnceAndNoMatchIsAnError) {
  LevelRun r;
  auto all = ParsePhaseSelector("type:*");
  ASSERT_TRUE(all.ok());
  auto b = BreakDownByLevel(r.f.run, PhaseLevel::kOperator, &*all);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->phases.size(), 1u);  // the root; everything else is nested in it
  EXPECT_NEAR(b->covered_s, 2.4, 1e-9);
  auto none = ParsePhaseSelector("no_such_phase");
  ASSERT_TRUE(none.ok());
  auto missing = BreakDownByLevel(r.f.run, PhaseLevel::kOperator, &*none);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message().find('\n'), std::string::npos);
}

}  // namespace
}  // namespace grademl::analysis
