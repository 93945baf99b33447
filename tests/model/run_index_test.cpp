// Run::Index: phases found by id and children listed in start order (ties by id), whether
// the ids are 1..n in order (found by position) or not (found through a hash map).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "model/run.h"

namespace grademl::model {
namespace {

// A random forest of phases with ids 1..n in order; starts drawn from a few values so that
// ties are common.
Run RandomRun(std::mt19937& rng, size_t n) {
  model::Run run;
  for (size_t i = 0; i < n; ++i) {
    Phase p;
    p.id = static_cast<PhaseId>(i) + 1;
    p.parent = i == 0 || rng() % 10 == 0 ? 0 : static_cast<PhaseId>(rng() % i) + 1;
    p.start_ns = static_cast<TimeNs>(rng() % 7);
    run.phases.push_back(p);
  }
  return run;
}

// The children of each parent, computed the plain way: every phase with that parent,
// sorted by (start, id).
std::vector<PhaseId> ExpectedChildren(const Run& run, PhaseId parent) {
  std::vector<const Phase*> kids;
  for (const Phase& p : run.phases) {
    if (p.parent == parent) kids.push_back(&p);
  }
  std::sort(kids.begin(), kids.end(), [](const Phase* a, const Phase* b) {
    return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->id < b->id;
  });
  std::vector<PhaseId> ids;
  for (const Phase* p : kids) ids.push_back(p->id);
  return ids;
}

void ExpectIndexed(const Run& run, int round) {
  for (const Phase& p : run.phases) {
    ASSERT_EQ(run.FindPhase(p.id), &p) << "round " << round << " phase " << p.id;
    EXPECT_EQ(run.ChildrenOf(p.id), ExpectedChildren(run, p.id)) << "round " << round << " phase " << p.id;
  }
  EXPECT_EQ(run.ChildrenOf(0), ExpectedChildren(run, 0)) << "round " << round;
  EXPECT_EQ(run.FindPhase(0), nullptr);
  EXPECT_EQ(run.FindPhase(-1), nullptr);
  PhaseId most = 0;
  for (const Phase& p : run.phases) most = std::max(most, p.id);
  EXPECT_EQ(run.FindPhase(most + 1), nullptr);
}

TEST(RunIndexTest, DenseIdsAreFoundByPositionAndChildrenAreInStartOrder) {
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    model::Run run = RandomRun(rng, 1 + rng() % 60);
    run.Index();
    ExpectIndexed(run, round);
  }
}

TEST(RunIndexTest, ShuffledOrSparseIdsGiveTheSameAnswers) {
  std::mt19937 rng(11);
  for (int round = 0; round < 40; ++round) {
    model::Run run = RandomRun(rng, 2 + rng() % 60);
    std::shuffle(run.phases.begin(), run.phases.end(), rng);
    if (round % 2 == 1) {
      // Sparse ids: every id times 3 (parents too).
      for (Phase& p : run.phases) {
        p.id *= 3;
        p.parent *= 3;
      }
    }
    run.Index();
    ExpectIndexed(run, round);
  }
}

TEST(RunIndexTest, PhasesAddedAfterIndexAreNotFoundUntilReindexed) {
  model::Run run;
  for (PhaseId id = 1; id <= 3; ++id) run.phases.push_back({.id = id, .parent = id - 1});
  run.Index();
  run.phases.push_back({.id = 4, .parent = 3});
  EXPECT_EQ(run.FindPhase(4), nullptr);
  run.Index();
  ASSERT_NE(run.FindPhase(4), nullptr);
  EXPECT_EQ(run.FindPhase(4)->parent, 3);
  EXPECT_EQ(run.ChildrenOf(3), std::vector<PhaseId>{4});
}

}  // namespace
}  // namespace grademl::model
