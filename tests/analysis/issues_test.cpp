#include "analysis/issues.h"

#include <gtest/gtest.h>

#include "analysis/critical_path.h"
#include "analysis/run_fixture.h"

namespace grademl::analysis {
namespace {

using model::PhaseId;
using testing::RunFixture;
using testing::Sec;
using testing::Workflow;

constexpr double kLooseEps = 1e-6;

// A workflow of 10 s run with -j 2: prep [0, 2] -> (train [2, 8] || fetch [2, 5]) -> report
// [8, 10]. Bottlenecks are given by hand: RankIssues is a function of the analyses' results.
struct Fixture {
  Fixture() {
    prep = w.Step("prep", 0, 2);
    train = w.Step("train", 2, 8, {prep});
    fetch = w.Step("fetch", 2, 5, {prep});
    report = w.Step("report", 8, 10, {train, fetch});
    const model::Run& run = w.Build();
    b.phases.resize(run.phases.size());
    for (size_t i = 0; i < run.phases.size(); ++i) {
      b.phases[i].phase = run.phases[i].id;
      b.phases[i].duration_s = NsToSeconds(run.phases[i].end_ns - run.phases[i].start_ns);
    }
    Set(prep).bound_s[0] = 2;
    Set(train).bound_s[0] = 6;
    Set(train).saturated_s[0] = 3;
    Set(fetch).waiting_s = 3;
    Set(report).bound_s[0] = 1;
    Set(report).waiting_s = 1;
  }
  PhaseBottlenecks& Set(PhaseId id) { return b.phases[static_cast<size_t>(id - 1)]; }

  Workflow w{10, 2};
  RunFixture& f = w.f;
  Bottlenecks b;
  PhaseId prep = 0, train = 0, fetch = 0, report = 0;
};

// The four issues of the fixture and the savings derived by hand, in rank order.
void ExpectHandDerivedIssues(const Fixture& x, const std::vector<Issue>& issues) {
  ASSERT_EQ(issues.size(), 4u);
  // Halving train's 6 s of CPU: it ends at 5 with fetch, report runs 5..7: 3 s saved.
  EXPECT_EQ(issues[0].phase, x.train);
  EXPECT_EQ(issues[0].kind, "cpu");
  EXPECT_NEAR(issues[0].impact_s, 3, kLooseEps);
  EXPECT_NEAR(issues[0].impact_fraction, 0.3, kLooseEps);
  // prep's CPU halved: 1 s; report's wait removed: 1 s; report's CPU halved: 0.5 s.
  EXPECT_EQ(issues[1].phase, x.prep);
  EXPECT_NEAR(issues[1].impact_s, 1, kLooseEps);
  EXPECT_EQ(issues[2].phase, x.report);
  EXPECT_EQ(issues[2].kind, "waiting");
  EXPECT_NEAR(issues[2].impact_s, 1, kLooseEps);
  EXPECT_EQ(issues[3].kind, "cpu");
  EXPECT_NEAR(issues[3].impact_s, 0.5, kLooseEps);
}

TEST(IssuesTest, RanksWhatTheWhatifEngineSaysEachChangeSaves) {
  Fixture x;
  std::vector<Issue> issues = RankIssues(x.f.run, x.b, {}, FindCriticalPath(x.f.run));
  ExpectHandDerivedIssues(x, issues);
  ASSERT_EQ(issues.size(), 4u);
  EXPECT_EQ(issues[0].change, "#" + std::to_string(x.train) + ":cpu*0.5");
  EXPECT_EQ(issues[0].text,
            "Step train is CPU-bound 100% of its time (the machine's CPUs were full for 50% of that) and on the "
            "critical path; making its CPU work 2x faster would save 3.00 s (30% of the run).");
  // fetch waits 3 s but has 3 s of slack: removing its wait saves nothing, so no issue;
  // -j 4 would not help either (never more than 2 steps were ready).
  for (const Issue& i : issues) {
    EXPECT_NE(i.phase, x.fetch);
    EXPECT_NE(i.kind, "concurrency");
  }
}

TEST(IssuesTest, TheSharedScheduleGraphGivesTheSameIssues) {
  // AnalyzeRun's way: the critical path's graph and replay reused for every question. The
  // savings are the hand-derived ones of the test above.
  Fixture x;
  const ScheduleGraph g = ScheduleGraph::Build(x.f.run);
  const Replay base = ReplaySchedule(g);
  const CriticalPathResult path = FindCriticalPath(g, base);
  std::vector<Issue> issues =
      RankIssues(x.f.run, x.b, {}, path, {}, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, &g, &base);
  ExpectHandDerivedIssues(x, issues);
  // Texts and changes: the same as when RankIssues builds the graph itself.
  std::vector<Issue> alone = RankIssues(x.f.run, x.b, {}, FindCriticalPath(x.f.run));
  ASSERT_EQ(alone.size(), issues.size());
  for (size_t i = 0; i < issues.size(); ++i) {
    EXPECT_EQ(issues[i].text, alone[i].text);
    EXPECT_EQ(issues[i].change, alone[i].change);
  }
}

TEST(IssuesTest, SmallSavingsAreDropped) {
  Fixture x;
  IssueOptions o;
  o.min_impact_s = 1.5;
  std::vector<Issue> issues = RankIssues(x.f.run, x.b, {}, FindCriticalPath(x.f.run), o);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].phase, x.train);
  o.min_impact_s = 0;
  o.max_issues = 2;
  EXPECT_EQ(RankIssues(x.f.run, x.b, {}, FindCriticalPath(x.f.run), o).size(), 2u);
}

TEST(IssuesTest, ImbalancedSiblingsAreBalancedByTheEngine) {
  // Four shards after a split, run at once: 1, 1, 2 and 4 s. Balanced: 2 s each, 2 s saved.
  RunFixture f;
  PhaseId root = f.AddPhase(0, "wf", "run", 0, Sec(5));
  f.run.info.end_ns = Sec(5);
  PhaseId split = f.AddPhase(root, "split", "run/step", 0, Sec(1));
  std::vector<PhaseId> shards;
  for (double d : {1.0, 1.0, 2.0, 4.0}) {
    shards.push_back(f.AddPhase(root, "shard_" + std::to_string(shards.size()), "run/step", Sec(1), Sec(1 + d)));
    f.run.edges.push_back({split, shards.back(), "after"});
  }
  f.Build();
  Imbalance g;
  g.kind = ImbalanceKind::kConcurrent;
  g.parent = root;
  g.type = "run/step";
  g.count = 4;
  g.straggler = shards[3];
  g.straggler_s = 4;
  g.mean_s = 2;
  std::vector<Issue> issues = RankIssues(f.run, Bottlenecks{}, {g}, FindCriticalPath(f.run));
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].kind, "imbalance");
  EXPECT_EQ(issues[0].phase, shards[3]);
  EXPECT_EQ(issues[0].change, "balance:type:run/step");
  EXPECT_NEAR(issues[0].impact_s, 2, kLooseEps);
  EXPECT_EQ(issues[0].text,
            "4 parallel 'step' phases under The run are imbalanced: the slowest, shard_3, took 4.00 s against a "
            "mean of 2.00 s; balancing them would save 2.00 s (40% of the run).");
}

TEST(IssuesTest, AnEmptyRunHasNoIssues) {
  model::Run run;
  run.Index();
  EXPECT_TRUE(RankIssues(run, Bottlenecks{}, {}, CriticalPathResult{}).empty());
}

}  // namespace
}  // namespace grademl::analysis
