// What to keep of the experiment graph under a budget (analysis/materialization.h), on the
// graph of tests/analysis/reuse_fixture.h, worked out by hand.
//
// Producers (the latest execution that ran to output each artifact) and their cost:
//   A (data/clean.csv): run 3's ingest, 12 s (run 1's 10 s is older; run 2 only restored it)
//   B: run 1's featurize 20 s;  M1: run 1's train 60 s;  M2: run 2's train 80 s
//   S1: run 1's evaluate 5 s;   S2: run 2's evaluate 5 s;   P: run 1's plot 2 s
//   X: only output by run 3's failed featurize: not in the graph.
//
// recreation_s (the producer and every step it needs, each key once):
//   A  = 12                         B  = 20 + 12      = 32
//   M1 = 60 + 20 + 12 = 92          M2 = 80 + 20 + 12 = 112
//   S1 = 5 + 60 + 20 + 12 = 97      S2 = 5 + 80 + 20 + 12 = 117  (evaluate also reads B: counted once)
//   P  = 2 + 12 = 14
// uses (distinct runs that output or read it or what was derived from it):
//   A: derived B, P, M1, S1, M2, S2; ingest ran in runs 1 and 3, was restored in run 2: 3
//   B: runs 1 and 2 (run 3's featurize failed): 2;  M1, S1, P: run 1 only: 1;  M2, S2: run 2: 1
// distance_to_final (final: S1, S2, P, which nothing reads):
//   S1, S2, P: 0;  M1 -> S1, M2 -> S2: 1;  B -> S1 (evaluate reads B): 1;  A -> P (plot): 1
// utility = recreation * uses / (1 + distance):
//   A = 12 * 3 / 2 = 18     B = 32 * 2 / 2 = 32     M1 = 92 / 2 = 46     M2 = 112 / 2 = 56
//   S1 = 97                 S2 = 117                P = 14
// per MB (sizes in MB: A 200, B 400, M1 2300, M2 1400, S1 100, S2 1000, P 50, X 10, Q 5):
//   S1 0.97 > P 0.28 > S2 0.117 > A 0.09 > B 0.08 > M2 0.04 > M1 0.02 > Q 0 = X 0 (hash order)
#include "analysis/materialization.h"

#include <gtest/gtest.h>

#include "analysis/reuse_fixture.h"

namespace grademl::analysis {
namespace {

using testing::ReuseGraph;

using testing::kReuseMB;

const std::vector<std::pair<std::string, int64_t>> kMaterializationCandidates = {
    {"hash-A", 200 * kReuseMB},  {"hash-B", 400 * kReuseMB}, {"hash-M1", 2300 * kReuseMB},
    {"hash-M2", 1400 * kReuseMB}, {"hash-S1", 100 * kReuseMB}, {"hash-S2", 1000 * kReuseMB},
    {"hash-P", 50 * kReuseMB},    {"hash-X", 10 * kReuseMB},   {"hash-Q", 5 * kReuseMB}};

std::vector<std::string> MaterializationOrder(const MaterializationPlan& plan) {
  std::vector<std::string> out;
  for (const ArtifactUtility& a : plan.artifacts) out.push_back(a.hash);
  return out;
}

std::vector<std::string> MaterializationKept(const MaterializationPlan& plan) {
  std::vector<std::string> out;
  for (const ArtifactUtility& a : plan.artifacts) {
    if (a.kept) out.push_back(a.hash);
  }
  return out;
}

const ArtifactUtility& MaterializationFind(const MaterializationPlan& plan, const std::string& hash) {
  for (const ArtifactUtility& a : plan.artifacts) {
    if (a.hash == hash) return a;
  }
  static const ArtifactUtility none;
  ADD_FAILURE() << "no candidate " << hash;
  return none;
}

TEST(MaterializationTest, UtilitiesWorkedOutByHand) {
  MaterializationPlan plan = PlanMaterialization(ReuseGraph(), kMaterializationCandidates, 1'000'000 * kReuseMB);
  struct Expected {
    std::string hash;
    double recreation_s;
    int uses;
    int distance;
    double utility;
  };
  for (const Expected& e : std::vector<Expected>{{"hash-A", 12, 3, 1, 18},
                                                 {"hash-B", 32, 2, 1, 32},
                                                 {"hash-M1", 92, 1, 1, 46},
                                                 {"hash-M2", 112, 1, 1, 56},
                                                 {"hash-S1", 97, 1, 0, 97},
                                                 {"hash-S2", 117, 1, 0, 117},
                                                 {"hash-P", 14, 1, 0, 14},
                                                 {"hash-X", 0, 0, 0, 0},
                                                 {"hash-Q", 0, 0, 0, 0}}) {
    const ArtifactUtility& a = MaterializationFind(plan, e.hash);
    EXPECT_NEAR(a.recreation_s, e.recreation_s, 1e-9) << e.hash;
    EXPECT_EQ(a.uses, e.uses) << e.hash;
    EXPECT_EQ(a.distance_to_final, e.distance) << e.hash;
    EXPECT_NEAR(a.utility, e.utility, 1e-9) << e.hash;
    EXPECT_NEAR(a.utility_per_byte, e.utility / static_cast<double>(std::max<int64_t>(a.size, 1)), 1e-18) << e.hash;
  }
  EXPECT_EQ(MaterializationOrder(plan), (std::vector<std::string>{"hash-S1", "hash-P", "hash-S2", "hash-A", "hash-B",
                                                                   "hash-M2", "hash-M1", "hash-Q", "hash-X"}));
  // Where each came from: the latest execution that output it, restored ones included.
  const ArtifactUtility& a = MaterializationFind(plan, "hash-A");
  EXPECT_EQ(a.run, 3);
  EXPECT_EQ(a.step, "ingest");
  EXPECT_EQ(a.path, "data/clean.csv");
  const ArtifactUtility& b = MaterializationFind(plan, "hash-B");
  EXPECT_EQ(b.run, 2);  // run 2 restored it
  EXPECT_EQ(b.step, "featurize");
  EXPECT_EQ(MaterializationFind(plan, "hash-X").run, 0) << "a failed execution's output is not in the graph";
}

// Budget 1000 MB: S1 (100, 900 left), P (50, 850 left); S2 (1000) does not fit and is skipped;
// A (200, 650 left) and B (400, 250 left) still fit; M2 (1400) and M1 (2300) do not; Q (5, 245
// left) and X (10, 235 left) do: kept 100 + 50 + 200 + 400 + 5 + 10 = 765 MB.
TEST(MaterializationTest, SkipsWhatDoesNotFitAndKeepsSmallerOnesAfter) {
  MaterializationPlan plan = PlanMaterialization(ReuseGraph(), kMaterializationCandidates, 1000 * kReuseMB);
  EXPECT_EQ(plan.budget_bytes, 1000 * kReuseMB);
  EXPECT_EQ(MaterializationKept(plan),
            (std::vector<std::string>{"hash-S1", "hash-P", "hash-A", "hash-B", "hash-Q", "hash-X"}));
  EXPECT_EQ(plan.kept_bytes, 765 * kReuseMB);
}

// Budget 1500 MB: S1, P, S2 (1150 used, 350 left); A (200, 150 left); B (400) no longer fits,
// nor M2 or M1; Q and X do: 1150 + 200 + 15 = 1365 MB.
TEST(MaterializationTest, GreedyByUtilityPerByte) {
  MaterializationPlan plan = PlanMaterialization(ReuseGraph(), kMaterializationCandidates, 1500 * kReuseMB);
  EXPECT_EQ(MaterializationKept(plan),
            (std::vector<std::string>{"hash-S1", "hash-P", "hash-S2", "hash-A", "hash-Q", "hash-X"}));
  EXPECT_EQ(plan.kept_bytes, 1365 * kReuseMB);
}

TEST(MaterializationTest, BudgetOfZeroKeepsNothingAndAHugeOneEverything) {
  MaterializationPlan none = PlanMaterialization(ReuseGraph(), kMaterializationCandidates, 0);
  EXPECT_TRUE(MaterializationKept(none).empty());
  EXPECT_EQ(none.kept_bytes, 0);
  EXPECT_EQ(none.artifacts.size(), kMaterializationCandidates.size());
  MaterializationPlan negative = PlanMaterialization(ReuseGraph(), kMaterializationCandidates, -5);
  EXPECT_EQ(negative.budget_bytes, 0);
  EXPECT_TRUE(MaterializationKept(negative).empty());

  MaterializationPlan all = PlanMaterialization(ReuseGraph(), kMaterializationCandidates, int64_t{1} << 40);
  EXPECT_EQ(MaterializationKept(all).size(), kMaterializationCandidates.size());
  EXPECT_EQ(all.kept_bytes, (200 + 400 + 2300 + 1400 + 100 + 1000 + 50 + 10 + 5) * kReuseMB);
}

// Before run 3 (the graph of runs 1 and 2): A's producer is run 1's ingest (10 s), and run 3
// never used it: A = 10 * 2 / 2 = 10; B = (20 + 10) * 2 / 2 = 30.
TEST(MaterializationTest, TheLatestExecutionThatRanIsTheProducer) {
  MaterializationPlan plan = PlanMaterialization(ReuseGraph(2), {{"hash-A", 200}, {"hash-B", 400}}, 0);
  EXPECT_NEAR(MaterializationFind(plan, "hash-A").utility, 10, 1e-9);
  EXPECT_EQ(MaterializationFind(plan, "hash-A").run, 2);  // the latest to output it: run 2 restored it
  EXPECT_NEAR(MaterializationFind(plan, "hash-B").recreation_s, 30, 1e-9);
  EXPECT_NEAR(MaterializationFind(plan, "hash-B").utility, 30, 1e-9);
}

TEST(MaterializationTest, EmptyGraphAndDuplicateCandidates) {
  MaterializationPlan plan =
      PlanMaterialization(model::ExperimentGraph{}, {{"b", 10}, {"a", 10}, {"a", 99}}, 15);
  ASSERT_EQ(plan.artifacts.size(), 2u);
  // Both utility 0: hash order; "a" fits (10), "b" then does not (5 left).
  EXPECT_EQ(MaterializationOrder(plan), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(plan.artifacts[0].size, 10);
  EXPECT_EQ(MaterializationKept(plan), (std::vector<std::string>{"a"}));
}

}  // namespace
}  // namespace grademl::analysis
