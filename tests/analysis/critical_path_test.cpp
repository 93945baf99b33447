#include "analysis/critical_path.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "run_fixture.h"

namespace grademl::analysis {
namespace {

using model::PhaseId;
using testing::RunFixture;
using testing::Sec;
using testing::Workflow;

std::map<PhaseId, StepSlack> SlackById(const CriticalPathResult& r) {
  std::map<PhaseId, StepSlack> m;
  for (const StepSlack& s : r.slack) m[s.id] = s;
  return m;
}

TEST(CriticalPathTest, ChainOfStepsIsAllCritical) {
  Workflow w(7, 4);
  auto a = w.Step("a", 0, 2);
  auto b = w.Step("b", 2, 6, {a});
  auto c = w.Step("c", 6, 7, {b});
  CriticalPathResult r = FindCriticalPath(w.Build());
  EXPECT_DOUBLE_EQ(r.makespan_s, 7);
  EXPECT_EQ(r.path.TopLevel(), (std::vector<PhaseId>{a, b, c}));
  for (const StepSlack& s : r.slack) {
    EXPECT_EQ(s.slack_s, 0) << s.id;
    EXPECT_TRUE(s.critical);
  }
}

// a, then b (4 s) and c (2 s) side by side, then d: c has 2 s of slack.
struct Diamond {
  Workflow w{6, 4};
  PhaseId a = w.Step("a", 0, 1);
  PhaseId b = w.Step("b", 1, 5, {a});
  PhaseId c = w.Step("c", 1, 3, {a});
  PhaseId d = w.Step("d", 5, 6, {b, c});
};

TEST(CriticalPathTest, DiamondSlackOfTheShortBranch) {
  Diamond x;
  auto [a, b, c, d] = std::tuple(x.a, x.b, x.c, x.d);
  CriticalPathResult r = FindCriticalPath(x.w.Build());
  EXPECT_EQ(r.path.TopLevel(), (std::vector<PhaseId>{a, b, d}));
  auto slack = SlackById(r);
  EXPECT_DOUBLE_EQ(slack[c].slack_s, 2);
  EXPECT_EQ(slack[c].earliest_start_ns, Sec(1));
  EXPECT_EQ(slack[c].latest_start_ns, Sec(3));
  EXPECT_FALSE(slack[c].critical);
  EXPECT_EQ(slack[a].slack_s, 0);
  EXPECT_EQ(slack[b].slack_s, 0);
  EXPECT_EQ(slack[d].slack_s, 0);
}

TEST(CriticalPathTest, FromASharedGraphAndReplay) {
  // The diamond above through the overload AnalyzeRun uses: the same path and slack.
  Diamond x;
  auto [a, b, c, d] = std::tuple(x.a, x.b, x.c, x.d);
  const ScheduleGraph g = ScheduleGraph::Build(x.w.Build());
  CriticalPathResult r = FindCriticalPath(g, ReplaySchedule(g));
  EXPECT_DOUBLE_EQ(r.makespan_s, 6);
  EXPECT_EQ(r.jobs, 4);
  EXPECT_EQ(r.path.TopLevel(), (std::vector<PhaseId>{a, b, d}));
  auto slack = SlackById(r);
  EXPECT_DOUBLE_EQ(slack[c].slack_s, 2);
  EXPECT_EQ(slack[b].slack_s, 0);
  EXPECT_TRUE(FindCriticalPath(ScheduleGraph{}, Replay{}).path.links.empty());
}

TEST(CriticalPathTest, LaunchLatencyStaysOnThePath) {
  // b starts 0.25 s after a ends: the latency keeps b's slack 0 and a on the path.
  Workflow w(5, 2);
  auto a = w.Step("a", 0.5, 2);
  auto b = w.Step("b", 2.25, 4.5, {a});
  auto c = w.Step("c", 0.5, 1, {});
  CriticalPathResult r = FindCriticalPath(w.Build());
  EXPECT_EQ(r.path.TopLevel(), (std::vector<PhaseId>{a, b}));
  auto slack = SlackById(r);
  EXPECT_EQ(slack[a].slack_s, 0);
  EXPECT_EQ(slack[b].slack_s, 0);
  EXPECT_DOUBLE_EQ(slack[c].slack_s, 3.5);
}

TEST(CriticalPathTest, WaitingForASlotIsAnEdge) {
  // -j 1: y waited for x's slot, so x is on the path and has no slack.
  Workflow w(7, 1);
  auto x = w.Step("x", 0, 4);
  auto y = w.Step("y", 4, 7);
  CriticalPathResult r = FindCriticalPath(w.Build());
  EXPECT_EQ(r.jobs, 1);
  EXPECT_EQ(r.path.TopLevel(), (std::vector<PhaseId>{x, y}));
  auto slack = SlackById(r);
  EXPECT_EQ(slack[x].slack_s, 0);
  EXPECT_EQ(slack[y].slack_s, 0);
}

TEST(CriticalPathTest, InsideTheCriticalStepDownToIterations) {
  Workflow w(10, 2);
  auto prep = w.Step("prep", 0, 1);
  auto train = w.Step("train", 1, 10, {prep});
  auto other = w.Step("other", 1, 2, {prep});
  auto proc = w.f.AddPhase(train, "python train.py", "run/step/process", Sec(1), Sec(10), 100);
  auto load = w.f.AddPhase(proc, "load", "run/step/process/load", Sec(1.5), Sec(2), 100);
  auto e1 = w.f.AddPhase(proc, "epoch", "run/step/process/epoch", Sec(2), Sec(5), 100);
  auto i1 = w.f.AddPhase(e1, "iteration", "run/step/process/epoch/iteration", Sec(2), Sec(3.5), 100);
  auto i2 = w.f.AddPhase(e1, "iteration", "run/step/process/epoch/iteration", Sec(3.5), Sec(5), 100);
  auto e2 = w.f.AddPhase(proc, "epoch", "run/step/process/epoch", Sec(5), Sec(9), 100);
  CriticalPathResult r = FindCriticalPath(w.Build());
  std::vector<std::pair<PhaseId, int>> got;
  for (const CriticalLink& l : r.path.links) got.push_back({l.id, l.depth});
  std::vector<std::pair<PhaseId, int>> want = {{prep, 0}, {train, 0}, {proc, 1}, {load, 2}, {e1, 2},
                                               {i1, 3},   {i2, 3},    {e2, 2}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(r.path.links[1].start_ns, Sec(1));
  EXPECT_EQ(r.path.links[1].end_ns, Sec(10));
  EXPECT_DOUBLE_EQ(SlackById(r)[other].slack_s, 8);

  CriticalPathResult limited = FindCriticalPath(w.Build(), {.max_links = 4});
  EXPECT_TRUE(limited.path.truncated);
  EXPECT_EQ(limited.path.links.size(), 4u);
  CriticalPathResult shallow = FindCriticalPath(w.Build(), {.max_depth = 1});
  EXPECT_EQ(shallow.path.links.size(), 3u);  // prep, train, proc
  EXPECT_FALSE(shallow.path.truncated);
}

TEST(CriticalPathTest, SingleCommandRunHasNoStepSlack) {
  RunFixture f;
  auto root = f.AddPhase(0, "run", "run", 0, Sec(5));
  auto p = f.AddPhase(root, "python", "run/process", Sec(0.1), Sec(4.9), 7);
  auto q = f.AddPhase(p, "child", "run/process/process", Sec(1), Sec(3), 8);
  f.run.info.end_ns = Sec(5);
  CriticalPathResult r = FindCriticalPath(f.Build());
  EXPECT_TRUE(r.slack.empty());
  EXPECT_EQ(r.path.TopLevel(), (std::vector<PhaseId>{p}));
  ASSERT_EQ(r.path.links.size(), 2u);
  EXPECT_EQ(r.path.links[1].id, q);
  EXPECT_EQ(r.path.links[1].depth, 1);
}

TEST(CriticalPathTest, EmptyRun) {
  model::Run run;
  run.Index();
  CriticalPathResult r = FindCriticalPath(run);
  EXPECT_TRUE(r.path.links.empty());
  EXPECT_EQ(r.makespan_s, 0);
}

}  // namespace
}  // namespace grademl::analysis
