#include "analysis/imbalance.h"

#include <gtest/gtest.h>

#include "run_fixture.h"

namespace grademl::analysis {
namespace {

using testing::RunFixture;
using testing::Sec;

using testing::kEps;

TEST(ImbalanceTest, KindNames) {
  EXPECT_EQ(ImbalanceKindName(ImbalanceKind::kConcurrent), "concurrent");
  EXPECT_EQ(ImbalanceKindName(ImbalanceKind::kSequential), "sequential");
}

TEST(ImbalanceTest, ThreeParallelWorkersWithAStraggler) {
  RunFixture f;
  f.run.info.end_ns = Sec(6);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(6));
  auto main = f.AddProcess(root, "python3 train.py", 0, Sec(6), 10);
  f.AddProcess(main, "python3 train.py", Sec(0.5), Sec(2.5), 11);
  f.AddProcess(main, "python3 train.py", Sec(0.5), Sec(2.5), 12);
  auto slow = f.AddProcess(main, "python3 train.py", Sec(0.5), Sec(5.5), 13);
  auto out = FindImbalance(f.Build());
  ASSERT_EQ(out.size(), 1u);
  const Imbalance& im = out[0];
  EXPECT_EQ(im.kind, ImbalanceKind::kConcurrent);
  EXPECT_EQ(im.parent, main);
  EXPECT_EQ(im.type, "run/process/process");
  EXPECT_EQ(im.program, "python3");
  EXPECT_EQ(im.count, 3);
  EXPECT_NEAR(im.actual_s, 5, kEps);
  EXPECT_NEAR(im.balanced_s, 3, kEps);
  EXPECT_NEAR(im.cost_s, 2, kEps);
  EXPECT_EQ(im.straggler, slow);
  EXPECT_NEAR(im.straggler_s, 5, kEps);
  EXPECT_EQ(im.straggler_count, 1);
  EXPECT_NEAR(im.median_s, 2, kEps);
  EXPECT_EQ(im.start_ns, Sec(0.5));
  EXPECT_EQ(im.end_ns, Sec(5.5));
}

// A parent with a few children of different types (a setup, two workers, a teardown):
// the two of one type are still compared; a parent whose few children all differ in type
// (an iteration's forward and backward) has nothing to compare.
TEST(ImbalanceTest, AFewChildrenOfMixedTypesCompareTheirLikeOnes) {
  RunFixture f;
  f.run.info.end_ns = Sec(8);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(8));
  auto main = f.AddPhase(root, "main", "run/main", 0, Sec(8));
  f.AddPhase(main, "setup", "run/main/setup", 0, Sec(1));
  f.AddPhase(main, "worker", "run/main/worker", Sec(1), Sec(3));
  auto slow = f.AddPhase(main, "worker", "run/main/worker", Sec(1), Sec(7));
  f.AddPhase(main, "teardown", "run/main/teardown", Sec(7), Sec(8));
  auto iteration = f.AddPhase(root, "iteration", "run/iteration", 0, Sec(8));
  f.AddPhase(iteration, "forward", "run/iteration/forward", 0, Sec(1));
  f.AddPhase(iteration, "backward", "run/iteration/backward", Sec(1), Sec(8));
  auto out = FindImbalance(f.Build());
  ASSERT_EQ(out.size(), 1u);
  const Imbalance& im = out[0];
  EXPECT_EQ(im.kind, ImbalanceKind::kConcurrent);
  EXPECT_EQ(im.parent, main);
  EXPECT_EQ(im.type, "run/main/worker");
  EXPECT_EQ(im.count, 2);
  EXPECT_EQ(im.straggler, slow);
  EXPECT_NEAR(im.actual_s, 6, kEps);
  EXPECT_NEAR(im.balanced_s, 4, kEps);  // the mean of 2 s and 6 s
  EXPECT_NEAR(im.cost_s, 2, kEps);
  EXPECT_NE(im.parent, iteration);
}

TEST(ImbalanceTest, AnIterationMuchSlowerThanTheMedian) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  auto proc = f.AddProcess(root, "python3 train.py", 0, Sec(10), 10);
  auto epoch = f.AddPhase(proc, "epoch", "run/process/epoch", 0, Sec(9), 10);
  // 1, 1, 4, 1, 1.2 s one after the other, touching.
  double starts[] = {0, 1, 2, 6, 7}, ends[] = {1, 2, 6, 7, 8.2};
  model::PhaseId slow = 0;
  for (int i = 0; i < 5; ++i) {
    auto id = f.AddPhase(epoch, "iteration", "run/process/epoch/iteration", Sec(starts[i]), Sec(ends[i]), 10);
    if (i == 2) slow = id;
  }
  auto out = FindImbalance(f.Build());
  ASSERT_EQ(out.size(), 1u);
  const Imbalance& im = out[0];
  EXPECT_EQ(im.kind, ImbalanceKind::kSequential);
  EXPECT_EQ(im.parent, epoch);
  EXPECT_EQ(im.type, "run/process/epoch/iteration");
  EXPECT_EQ(im.program, "");
  EXPECT_EQ(im.count, 5);
  EXPECT_NEAR(im.median_s, 1, kEps);
  EXPECT_NEAR(im.actual_s, 8.2, 1e-6);
  EXPECT_NEAR(im.cost_s, 3, 1e-6);  // only the 4 s one is over 1.5 x the median
  EXPECT_NEAR(im.balanced_s, 5.2, 1e-6);
  EXPECT_EQ(im.straggler, slow);
  EXPECT_EQ(im.straggler_count, 1);
}

TEST(ImbalanceTest, SmallCostsAreIgnored) {
  RunFixture f;
  f.run.info.end_ns = Sec(100);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(100));
  // 0.5 s of imbalance: above min_cost_s but below 1% of a 100 s run.
  f.AddPhase(root, "shard_1", "run/step", 0, Sec(10));
  f.AddPhase(root, "shard_2", "run/step", 0, Sec(11));
  EXPECT_TRUE(FindImbalance(f.Build()).empty());
  ImbalanceOptions o;
  o.min_cost_fraction = 0;
  auto out = FindImbalance(f.run, o);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NEAR(out[0].cost_s, 0.5, kEps);
}

TEST(ImbalanceTest, BalancedGroupsAreNotReported) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  for (int i = 0; i < 4; ++i) f.AddPhase(root, "w", "run/worker", Sec(1), Sec(5));
  for (int i = 0; i < 5; ++i) f.AddPhase(root, "it", "run/iteration", Sec(5 + i), Sec(6 + i));
  EXPECT_TRUE(FindImbalance(f.Build()).empty());
}

TEST(ImbalanceTest, DifferentProgramsAndTypesAreNotCompared) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  auto sh = f.AddProcess(root, "sh -c x", 0, Sec(10), 10);
  f.AddProcess(sh, "/bin/cat data.csv", 0, Sec(1), 11);
  f.AddProcess(sh, "/usr/bin/python3 slow.py", 0, Sec(9), 12);
  f.AddPhase(root, "a", "run/a", 0, Sec(1));
  f.AddPhase(root, "b", "run/b", 0, Sec(9));
  EXPECT_TRUE(FindImbalance(f.Build()).empty());
}

TEST(ImbalanceTest, ConcurrentClustersAreSeparateAndSortedByCost) {
  RunFixture f;
  f.run.info.end_ns = Sec(20);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(20));
  // Two rounds of two parallel tasks: costs 1 s and 3 s.
  f.AddPhase(root, "t", "run/task", 0, Sec(2));
  f.AddPhase(root, "t", "run/task", 0, Sec(4));
  auto big = f.AddPhase(root, "t", "run/task", Sec(5), Sec(13));
  f.AddPhase(root, "t", "run/task", Sec(5), Sec(7));
  auto out = FindImbalance(f.Build());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NEAR(out[0].cost_s, 3, kEps);
  EXPECT_EQ(out[0].straggler, big);
  EXPECT_NEAR(out[1].cost_s, 1, kEps);
  EXPECT_EQ(out[0].count, 2);
}

TEST(ImbalanceTest, OpenPhasesRunToTheEndOfTheRun) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  f.AddPhase(root, "w", "run/worker", 0, Sec(2));
  auto hung = f.AddPhase(root, "w", "run/worker", 0, 0);
  auto out = FindImbalance(f.Build());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].straggler, hung);
  EXPECT_NEAR(out[0].cost_s, 4, kEps);  // 10 vs a mean of 6
}

// Different steps do different work: only steps named alike (shard_1, shard_2) are compared.
// Evaluation forwards (mode=eval) are not compared with training ones; numeric tags are indices.
TEST(ImbalanceTest, OnlyLikeNamedPhasesAreCompared) {
  RunFixture f;
  f.run.info.end_ns = Sec(20);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(20));
  f.AddPhase(root, "train_cnn", "run/step", 0, Sec(10));
  f.AddPhase(root, "train_baseline", "run/step", 0, Sec(2));
  f.AddPhase(root, "shard_1", "run/step", Sec(10), Sec(12));
  auto slow = f.AddPhase(root, "shard_2", "run/step", Sec(10), Sec(16));
  auto proc = f.AddPhase(root, "python", "run/process", Sec(16), Sec(20));
  for (int i = 0; i < 6; ++i) {
    auto it = f.AddPhase(proc, "forward", "run/process/forward", Sec(16 + 0.5 * i), Sec(16.1 + 0.5 * i));
    f.run.phases.back().tags = {{"epoch", std::to_string(i)}};
    (void)it;
  }
  for (int i = 0; i < 3; ++i) {  // eval forwards: 4x longer, but a group of their own
    f.AddPhase(proc, "forward", "run/process/forward", Sec(19 + 0.3 * i), Sec(19.2 + 0.3 * i));
    f.run.phases.back().tags = {{"mode", "eval"}};
  }
  auto out = FindImbalance(f.Build());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, ImbalanceKind::kConcurrent);
  EXPECT_EQ(out[0].straggler, slow);
  EXPECT_NEAR(out[0].cost_s, 2, kEps);
}

// Training and evaluation passes (the auto-instrumentation's mode tag) are compared only with
// their own kind. Expected values by hand, in the comments.
TEST(ImbalanceTest, TrainAndEvalEpochsAreComparedApart) {
  {
    // T 10 s, E 1 s, T 10, E 1, T 10, E 1, T 25, E 1 (touching).
    RunFixture f;
    f.run.info.end_ns = Sec(60);
    auto root = f.AddPhase(0, "run", "run", 0, Sec(60));
    auto proc = f.AddProcess(root, "python3 mnist.py", 0, Sec(60), 10);
    double t = 0;
    model::PhaseId slow = 0;
    for (int e = 1; e <= 4; ++e) {
      double train = e == 4 ? 25 : 10;
      auto id = f.AddPhase(proc, "epoch", "run/process/epoch", Sec(t), Sec(t + train), 10);
      f.run.phases.back().tags = {{"epoch", std::to_string(e)}, {"num_workers", "2"}, {"mode", "train"}};
      if (e == 4) slow = id;
      t += train;
      f.AddPhase(proc, "epoch", "run/process/epoch", Sec(t), Sec(t + 1), 10);
      f.run.phases.back().tags = {{"epoch", std::to_string(e)}, {"num_workers", "0"}, {"mode", "eval"}};
      t += 1;
    }
    // Train: 10, 10, 10, 25: median 10, threshold 15, one straggler (1 <= 25% of 4), cost
    // 25 - 10 = 15 (>= 1% of 60 s). Eval: four times 1 s, balanced. (All eight together:
    // median 5.5, four of eight over 8.25: a spread, nothing reported.)
    auto out = FindImbalance(f.Build());
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].kind, ImbalanceKind::kSequential);
    EXPECT_EQ(out[0].count, 4);
    EXPECT_EQ(out[0].straggler, slow);
    EXPECT_EQ(out[0].straggler_count, 1);
    EXPECT_NEAR(out[0].median_s, 10, kEps);
    EXPECT_NEAR(out[0].cost_s, 15, kEps);
    EXPECT_NEAR(out[0].actual_s, 55, kEps);
    EXPECT_NEAR(out[0].balanced_s, 40, kEps);
  }
  {
    // 2 training passes of 10 s, 8 evaluation passes of 1 s (evaluation every few steps).
    // Together: median 1, the two training passes (20% of 10) would be stragglers costing
    // 2 x 9 = 18 s. Apart: two training passes are too few for a median (3), and the
    // evaluation passes are balanced: nothing.
    RunFixture f;
    f.run.info.end_ns = Sec(30);
    auto root = f.AddPhase(0, "run", "run", 0, Sec(30));
    auto proc = f.AddProcess(root, "python3 mnist.py", 0, Sec(30), 10);
    double t = 0;
    for (int e = 1; e <= 2; ++e) {
      f.AddPhase(proc, "epoch", "run/process/epoch", Sec(t), Sec(t + 10), 10);
      f.run.phases.back().tags = {{"epoch", std::to_string(e)}, {"mode", "train"}};
      t += 10;
      for (int k = 0; k < 4; ++k) {
        f.AddPhase(proc, "epoch", "run/process/epoch", Sec(t), Sec(t + 1), 10);
        f.run.phases.back().tags = {{"epoch", std::to_string(4 * (e - 1) + k + 1)}, {"mode", "eval"}};
        t += 1;
      }
    }
    EXPECT_TRUE(FindImbalance(f.Build()).empty());
    for (model::Phase& p : f.run.phases) p.tags.clear();  // the same run without modes
    auto mixed = FindImbalance(f.Build());
    ASSERT_EQ(mixed.size(), 1u);
    EXPECT_EQ(mixed[0].straggler_count, 2);
    EXPECT_NEAR(mixed[0].cost_s, 18, kEps);
  }
}

// The tags that make a kind are compared whatever their order: a tag set when a phase ends
// (mode) comes after those set when it began, or before them for another source.
TEST(ImbalanceTest, KindTagsInAnyOrder) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  double durations[] = {1, 1, 1, 4};  // median 1, one straggler costing 3 s
  double t = 0;
  model::PhaseId slow = 0;
  for (int i = 0; i < 4; ++i) {
    slow = f.AddPhase(root, "iteration", "run/iteration", Sec(t), Sec(t + durations[i]));
    if (i % 2 == 0) f.run.phases.back().tags = {{"mode", "train"}, {"loader", "mnist"}};
    else f.run.phases.back().tags = {{"loader", "mnist"}, {"mode", "train"}};
    t += durations[i];
  }
  auto out = FindImbalance(f.Build());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].count, 4);
  EXPECT_EQ(out[0].straggler, slow);
  EXPECT_NEAR(out[0].cost_s, 3, kEps);
}

// Half the iterations slow is a spread of durations (two kinds of batches), not stragglers.
TEST(ImbalanceTest, ManySlowPhasesAreNotStragglers) {
  RunFixture f;
  f.run.info.end_ns = Sec(40);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(40));
  double t = 0;
  for (int i = 0; i < 10; ++i) {
    double d = i % 2 == 0 ? 1 : 4;  // median 2.5: every 4 s one is over 1.5x it
    f.AddPhase(root, "iteration", "run/iteration", Sec(t), Sec(t + d));
    t += d;
  }
  EXPECT_TRUE(FindImbalance(f.Build()).empty());
  ImbalanceOptions o;
  o.max_straggler_fraction = 1;
  auto out = FindImbalance(f.run, o);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].straggler_count, 5);
  EXPECT_EQ(out[0].stragglers.size(), 5u);  // listed, for the ranked issues' what-if
}

// Engine tasks (Dask) of one prefix run under different worker processes: the `group` tag
// compares them across parents, and keeps them out of their other siblings' groups.
TEST(ImbalanceTest, TaggedTasksAreComparedAcrossParents) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  auto client = f.AddProcess(root, "python3 features.py", 0, Sec(10), 10);
  auto w1 = f.AddProcess(client, "python3 -m distributed.cli.dask_worker", 0, Sec(10), 11);
  auto w2 = f.AddProcess(client, "python3 -m distributed.cli.dask_worker", 0, Sec(10), 12);
  auto task = [&](model::PhaseId worker, const char* key, double s, double e, const char* group) {
    auto id = f.AddPhase(worker, key, "run/process/process/task", Sec(s), Sec(e), 0);
    f.run.phases[static_cast<size_t>(id - 1)].tags = {{"key", key}, {"group", group}};
    return id;
  };
  // Four tasks of prefix "clean" at once (mean 1.75 s, the longest 4 s): cost 2.25 s.
  task(w1, "('clean-aa', 0)", 1, 2, "clean");
  task(w2, "('clean-aa', 1)", 1, 2, "clean");
  auto skewed = task(w1, "('clean-aa', 2)", 1, 5, "clean");
  task(w2, "('clean-aa', 3)", 1, 1.5, "clean");  // wait: starts with the others
  // Another prefix, balanced: not reported; never mixed with "clean".
  task(w1, "('sum-bb', 0)", 6, 7, "sum");
  task(w2, "('sum-bb', 1)", 6, 7, "sum");
  auto out = FindImbalance(f.Build());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, ImbalanceKind::kConcurrent);
  EXPECT_EQ(out[0].parent, client);  // the nearest common ancestor of the two workers' tasks
  EXPECT_EQ(out[0].count, 4);
  EXPECT_EQ(out[0].straggler, skewed);
  EXPECT_NEAR(out[0].actual_s, 4, kEps);
  EXPECT_NEAR(out[0].balanced_s, (1 + 1 + 4 + 0.5) / 4.0, kEps);
  EXPECT_NEAR(out[0].cost_s, 4 - 6.5 / 4, kEps);
}

}  // namespace
}  // namespace grademl::analysis
