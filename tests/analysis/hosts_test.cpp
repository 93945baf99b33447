// The hosts analysis of a run across hosts (analysis/hosts.h): each host's part, the
// straggler host, the causality check of edges between hosts, and the issues they give.
// Expectations by hand: tests/analysis/multi_host_fixture.h works out the three-host run;
// the smaller runs below are worked out beside them.
#include "analysis/hosts.h"

#include <gtest/gtest.h>

#include "analysis/critical_path.h"
#include "analysis/issues.h"
#include "analysis/multi_host_fixture.h"
#include "analysis/run_analysis.h"
#include "analysis/run_fixture.h"
#include "analysis/run_summary.h"

namespace grademl::analysis {
namespace {

using testing::RunFixture;
using testing::Sec;

HostsAnalysis HostsOf(const model::Run& run, const HostsOptions& options = {}) {
  return AnalyzeHosts(run, SummarizeRun(run), FindCriticalPath(run), options);
}

TEST(HostsTest, ThreeHostsPartsSpansCpuNetAndClocks) {
  model::Run run = testing::ThreeHostRun();
  HostsAnalysis h = HostsOf(run);
  ASSERT_EQ(h.hosts.size(), 3u);
  EXPECT_EQ(h.reference_host, "node1");
  EXPECT_EQ(h.hosts[0].name, "node1");
  EXPECT_EQ(h.hosts[1].name, "node2");
  EXPECT_EQ(h.hosts[2].name, "node3");

  const HostPart& n1 = h.hosts[0];
  EXPECT_TRUE(n1.reference);
  EXPECT_EQ(n1.start_ns, 0);
  EXPECT_EQ(n1.end_ns, Sec(6));  // the root (0-30) is not node1's part
  EXPECT_NEAR(n1.span_s, 6, 1e-9);
  EXPECT_EQ(n1.phases, 2);  // prep and its process; not the root
  EXPECT_EQ(n1.processes, 1);
  EXPECT_TRUE(n1.cpu_measured);
  EXPECT_EQ(n1.cores, 2);
  EXPECT_NEAR(n1.cpu_busy_s, 16, 1e-9);
  EXPECT_NEAR(n1.cpu_avg_busy, 16.0 / 60, 1e-9);
  EXPECT_FALSE(n1.net_measured);
  EXPECT_EQ(n1.clock.state, "reference");
  EXPECT_EQ(n1.clock.estimates, 0);
  EXPECT_EQ(n1.uncertainty_ns, 0);

  const HostPart& n2 = h.hosts[1];
  EXPECT_EQ(n2.start_ns, Sec(6));   // not 5: the agent's `node2` phase is not part of it
  EXPECT_EQ(n2.end_ns, Sec(20));    // not 22
  EXPECT_NEAR(n2.span_s, 14, 1e-9);
  EXPECT_EQ(n2.phases, 5);
  EXPECT_EQ(n2.processes, 2);
  EXPECT_NEAR(n2.cpu_busy_s, 18, 1e-9);
  EXPECT_NEAR(n2.cpu_avg_busy, 0.6, 1e-9);
  EXPECT_TRUE(n2.net_measured);
  EXPECT_NEAR(n2.net_rx_bytes, 2e6, 1e-6);  // lo's 1 GB left out
  EXPECT_NEAR(n2.net_tx_bytes, 5e5, 1e-6);
  EXPECT_EQ(n2.clock.state, "measured");
  EXPECT_EQ(n2.clock.estimates, 3);
  EXPECT_EQ(n2.clock.median_offset_ns, 250'000'000);
  EXPECT_EQ(n2.clock.max_uncertainty_ns, 400'000);
  EXPECT_EQ(n2.uncertainty_ns, 400'000);

  const HostPart& n3 = h.hosts[2];
  EXPECT_EQ(n3.start_ns, Sec(6));
  EXPECT_EQ(n3.end_ns, Sec(28));
  EXPECT_NEAR(n3.span_s, 22, 1e-9);
  EXPECT_EQ(n3.phases, 5);  // load_model, without a host of its own, is on its parent's
  EXPECT_EQ(n3.processes, 2);
  EXPECT_EQ(n3.cores, 1);
  EXPECT_NEAR(n3.cpu_busy_s, 27, 1e-9);
  EXPECT_NEAR(n3.cpu_avg_busy, 0.9, 1e-9);
  EXPECT_NEAR(n3.net_rx_bytes, 4e6, 1e-6);  // 3 MB, a reset, then 1 MB more
  EXPECT_NEAR(n3.net_tx_bytes, 1e6, 1e-6);
  EXPECT_EQ(n3.clock.estimates, 2);
  EXPECT_EQ(n3.clock.median_offset_ns, -101'000'000);
  EXPECT_EQ(n3.clock.max_uncertainty_ns, 1'000'000);
}

TEST(HostsTest, CriticalPathTimePerHost) {
  model::Run run = testing::ThreeHostRun();
  HostsAnalysis h = HostsOf(run);
  ASSERT_EQ(h.hosts.size(), 3u);
  EXPECT_NEAR(h.Find("node1")->critical_path_s, 6, 1e-9);
  EXPECT_NEAR(h.Find("node2")->critical_path_s, 0, 1e-9);
  EXPECT_NEAR(h.Find("node3")->critical_path_s, 22, 1e-9);
  EXPECT_FALSE(h.critical_path_truncated);
}

TEST(HostsTest, StragglerHostAndItsSaving) {
  model::Run run = testing::ThreeHostRun();
  HostsAnalysis h = HostsOf(run);
  ASSERT_TRUE(h.straggler.has_value());
  const HostStraggler& s = *h.straggler;
  EXPECT_EQ(h.hosts[s.host].name, "node3");
  EXPECT_TRUE(h.hosts[s.host].straggler);
  EXPECT_FALSE(h.Find("node1")->straggler);
  EXPECT_FALSE(h.Find("node2")->straggler);
  EXPECT_EQ(s.end_ns, Sec(28));
  EXPECT_EQ(s.others_median_end_ns, Sec(13));
  EXPECT_EQ(s.next_end_ns, Sec(20));
  EXPECT_NEAR(s.margin_s, 15, 1e-9);
  EXPECT_NEAR(s.threshold_s, 3, 1e-9);
  EXPECT_NEAR(s.saving_s, 8, 1e-9);
  EXPECT_FALSE(s.within_uncertainty);
  EXPECT_EQ(s.uncertainty_ns, 1'400'000);  // node3's 1 ms + the others' largest, 0.4 ms
}

TEST(HostsTest, CrossHostEdgesOneViolationOneWithinUncertainty) {
  testing::ThreeHostIds ids;
  model::Run run = testing::ThreeHostRun(&ids);
  HostsAnalysis h = HostsOf(run);
  EXPECT_EQ(h.cross_host_edges, 4);  // train_b -> eval_a is on node3 alone
  EXPECT_EQ(h.within_uncertainty, 1);
  EXPECT_EQ(h.violation_count, 1);
  ASSERT_EQ(h.violations.size(), 1u);
  const CausalityViolation& v = h.violations[0];
  EXPECT_EQ(v.from, ids.save);
  EXPECT_EQ(v.to, ids.load);
  EXPECT_EQ(v.kind, "data");
  EXPECT_EQ(v.from_host, "node2");
  EXPECT_EQ(v.to_host, "node3");
  EXPECT_EQ(v.rule, "end_to_start");
  EXPECT_EQ(v.gap_ns, Sec(3));
  EXPECT_EQ(v.tolerance_ns, 1'400'000);
  EXPECT_TRUE(v.clocks_measured);
}

TEST(HostsTest, IssuesNameTheStragglerHostAndWarnAboutClocks) {
  testing::ThreeHostIds ids;
  model::Run run = testing::ThreeHostRun(&ids);
  HostsAnalysis h = HostsOf(run);
  std::vector<Issue> issues = HostIssues(run, h, 30);
  ASSERT_EQ(issues.size(), 2u);
  const Issue& s = issues[0];
  EXPECT_EQ(s.kind, "host_straggler");
  EXPECT_EQ(s.phase, ids.train_b);  // node3 has no agent phase: its part's last phase
  EXPECT_NEAR(s.impact_s, 8, 1e-9);
  EXPECT_NEAR(s.impact_fraction, 8.0 / 30, 1e-9);
  EXPECT_TRUE(s.change.empty());
  EXPECT_NE(s.text.find("Host node3 was the straggler"), std::string::npos) << s.text;
  EXPECT_NE(s.text.find("15.00 s after the median end of the other 2 hosts"), std::string::npos) << s.text;
  EXPECT_NE(s.text.find("22.00 s of the critical path ran on it"), std::string::npos) << s.text;
  EXPECT_NE(s.text.find("8.00 s (27% of the run) sooner, when host node2 finished"), std::string::npos) << s.text;
  EXPECT_EQ(s.text.find("within clock uncertainty"), std::string::npos) << s.text;
  const Issue& c = issues[1];
  EXPECT_EQ(c.kind, "clock_causality");
  EXPECT_EQ(c.phase, ids.load);
  EXPECT_EQ(c.impact_s, 0);
  EXPECT_NE(c.text.find("1 of 4 edges between hosts goes backwards"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("'load_model' on node3 started 3.00 s before 'save_model' on node2 ended"), std::string::npos)
      << c.text;
  EXPECT_NE(c.text.find("allowed: 1 ms"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("misaligned beyond the measured uncertainty"), std::string::npos) << c.text;
}

TEST(HostsTest, RunAnalysisRanksTheHostIssuesClockWarningLast) {
  model::Run run = testing::ThreeHostRun();
  RunAnalysis a = AnalyzeRun(run);
  ASSERT_EQ(a.hosts.hosts.size(), 3u);
  ASSERT_FALSE(a.issues.empty());
  EXPECT_EQ(a.issues.back().kind, "clock_causality");
  bool straggler = false;
  for (const Issue& i : a.issues) straggler = straggler || i.kind == "host_straggler";
  EXPECT_TRUE(straggler);
  for (size_t i = 1; i + 1 < a.issues.size(); ++i) EXPECT_GE(a.issues[i - 1].impact_s, a.issues[i].impact_s);
}

TEST(HostsTest, SingleHostRunHasNoHostsSection) {
  RunFixture f;
  f.run.info.host = "node1";
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  auto p = f.AddProcess(root, "python3 train.py", 0, Sec(10), 7);
  f.AddPhase(p, "epoch", "run/process/epoch", Sec(1), Sec(2), 7, "");  // no host: its parent's
  f.run.edges = {{p, 3, "flow"}};
  model::Run& run = f.Build();
  HostsAnalysis h = HostsOf(run);
  EXPECT_TRUE(h.empty());
  EXPECT_FALSE(h.straggler.has_value());
  EXPECT_EQ(h.cross_host_edges, 0);
  EXPECT_TRUE(HostIssues(run, h, 10).empty());
  EXPECT_TRUE(AnalyzeRun(run).hosts.empty());

  // A root alone on another host (the machine that imported the run) adds no host.
  RunFixture g;
  auto groot = g.AddPhase(0, "import", "run", 0, Sec(10), 0, "laptop");
  g.AddPhase(groot, "task", "run/task", 0, Sec(10), 0, "node1");
  g.AddPhase(groot, "task", "run/task", Sec(1), Sec(9), 0, "node1");
  EXPECT_TRUE(HostsOf(g.Build()).empty());
  // With a third host the run spans hosts; an edge from the root (on no listed host) is skipped.
  auto other = g.AddPhase(groot, "task", "run/task", Sec(2), Sec(3), 0, "node2");
  g.run.edges = {{groot, other, "data"}};
  HostsAnalysis two = HostsOf(g.Build());
  EXPECT_EQ(two.hosts.size(), 2u);
  EXPECT_EQ(two.Find("laptop"), nullptr);
  EXPECT_EQ(two.cross_host_edges, 0);
}

// Each kind's rule. Host h1 is the reference, h2's clock was not measured: no uncertainty.
//   a (h1) 10-20; b (h2) 15-25; c (h2) 2-8; d (h2) 2-5; worker (h1, a process) 1-39;
//   fetch (h2) 3-4; open (h1) from 12, never ended; proc (h2, a process) 19.98-30.
TEST(HostsTest, CausalityRulePerEdgeKind) {
  RunFixture f;
  f.run.info.host = "h1";
  f.run.info.end_ns = Sec(40);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(40), 0, "h1");
  auto a = f.AddPhase(root, "a", "run/task", Sec(10), Sec(20), 0, "h1");
  auto b = f.AddPhase(root, "b", "run/task", Sec(15), Sec(25), 0, "h2");
  auto c = f.AddPhase(root, "c", "run/task", Sec(2), Sec(8), 0, "h2");
  auto d = f.AddPhase(root, "d", "run/task", Sec(2), Sec(5), 0, "h2");
  auto worker = f.AddPhase(root, "worker", "run/process", Sec(1), Sec(39), 50, "h1");
  auto fetch = f.AddPhase(root, "fetch", "run/transfer", Sec(3), Sec(4), 0, "h2");
  auto open = f.AddPhase(root, "open", "run/task", Sec(12), 0, 0, "h1");
  auto proc = f.AddPhase(root, "proc", "run/process", Sec(19.98), Sec(30), 60, "h2");
  f.run.edges = {
      {a, b, "data"},         // end_to_start: b starts 5 s before a ends: violation
      {a, b, "launch"},       // start_to_start: b starts after a: fine
      {a, b, "flow"},         // start_to_end: b ends after a starts: fine
      {a, c, "launch"},       // c starts 8 s before a starts: violation
      {a, d, "flow"},         // d ends 5 s before a starts: violation
      {worker, fetch, "transfer"},  // from a whole process: start_to_start, fine (end_to_start would be 35 s)
      {open, b, "data"},      // a never ended: start_to_start, fine
      {a, proc, "data"},      // 20 ms early, within the 30 ms slack of a process start
  };
  model::Run& run = f.Build();
  EXPECT_EQ(CausalityRuleOf(run.edges[0], *run.FindPhase(a)), "end_to_start");
  EXPECT_EQ(CausalityRuleOf(run.edges[1], *run.FindPhase(a)), "start_to_start");
  EXPECT_EQ(CausalityRuleOf(run.edges[2], *run.FindPhase(a)), "start_to_end");
  EXPECT_EQ(CausalityRuleOf(run.edges[5], *run.FindPhase(worker)), "start_to_start");
  EXPECT_EQ(CausalityRuleOf(run.edges[6], *run.FindPhase(open)), "start_to_start");
  EXPECT_EQ(CausalityRuleOf({a, b, "file:/data/x.csv"}, *run.FindPhase(a)), "end_to_start");
  EXPECT_EQ(CausalityRuleOf({a, b, "fwdbwd"}, *run.FindPhase(a)), "start_to_end");

  HostsAnalysis h = HostsOf(run);
  ASSERT_EQ(h.hosts.size(), 2u);
  EXPECT_EQ(h.Find("h1")->clock.state, "reference");
  EXPECT_EQ(h.Find("h2")->clock.state, "not measured");
  EXPECT_EQ(h.cross_host_edges, 8);
  EXPECT_EQ(h.violation_count, 3);
  EXPECT_EQ(h.within_uncertainty, 1);
  ASSERT_EQ(h.violations.size(), 3u);
  EXPECT_EQ(h.violations[0].to, c);  // the largest gap first: 8 s
  EXPECT_EQ(h.violations[0].rule, "start_to_start");
  EXPECT_EQ(h.violations[0].gap_ns, Sec(8));
  EXPECT_EQ(h.violations[1].to, b);  // 5 s, the earlier edge first
  EXPECT_EQ(h.violations[1].rule, "end_to_start");
  EXPECT_EQ(h.violations[2].to, d);  // 5 s
  EXPECT_EQ(h.violations[2].rule, "start_to_end");
  EXPECT_EQ(h.violations[2].tolerance_ns, 0);
  EXPECT_FALSE(h.violations[2].clocks_measured);

  HostsOptions two;
  two.max_violations = 2;
  HostsAnalysis bounded = HostsOf(run, two);
  EXPECT_EQ(bounded.violation_count, 3);
  EXPECT_EQ(bounded.violations.size(), 2u);

  std::vector<Issue> issues = HostIssues(run, h, 40);
  ASSERT_FALSE(issues.empty());
  const Issue& clock = issues.back();
  EXPECT_EQ(clock.kind, "clock_causality");
  EXPECT_NE(clock.text.find("3 of 8 edges between hosts go backwards"), std::string::npos) << clock.text;
  EXPECT_NE(clock.text.find("'c' on h2 started 8.00 s before 'a' on h1 started"), std::string::npos) << clock.text;
  EXPECT_NE(clock.text.find("no uncertainty allowed"), std::string::npos) << clock.text;
  EXPECT_NE(clock.text.find("The clock of host h2 was not measured"), std::string::npos) << clock.text;
}

// Two hosts in a 22 s run: h1's part ends at 18, h2's at 20.2005. The threshold is
// max(2.2 s, 1 s) = 2.2 s and the margin 2.2005 s: a straggler by 0.5 ms, which h2's clock
// uncertainty (one estimate) either covers (1 ms) or does not (0.1 ms).
model::Run TwoHostsNearTheThreshold(DurationNs h2_uncertainty) {
  RunFixture f;
  f.run.info.host = "h1";
  f.run.info.end_ns = Sec(22);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(22), 0, "h1");
  f.AddPhase(root, "python3 client.py", "run/process", 0, Sec(18), 10, "h1");
  f.AddPhase(root, "work", "run/task", 0, 20'200'500'000, 0, "h2");
  f.run.clock_estimates = {{.host = "h2", .t = Sec(1), .offset_ns = 5'000'000, .uncertainty_ns = h2_uncertainty}};
  return std::move(f.Build());
}

TEST(HostsTest, StragglerVerdictWithinClockUncertaintyIsFlagged) {
  model::Run run = TwoHostsNearTheThreshold(1'000'000);
  HostsAnalysis h = HostsOf(run);
  ASSERT_TRUE(h.straggler.has_value());
  EXPECT_EQ(h.hosts[h.straggler->host].name, "h2");
  EXPECT_NEAR(h.straggler->threshold_s, 2.2, 1e-9);
  EXPECT_NEAR(h.straggler->margin_s, 2.2005, 1e-9);
  EXPECT_NEAR(h.straggler->saving_s, 2.2005, 1e-9);  // 20.2005 - 18
  EXPECT_TRUE(h.straggler->within_uncertainty);
  std::vector<Issue> issues = HostIssues(run, h, 22);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_NE(issues[0].text.find("within clock uncertainty"), std::string::npos) << issues[0].text;
  EXPECT_NE(issues[0].text.find("the other host (within clock uncertainty"), std::string::npos) << issues[0].text;

  model::Run tight = TwoHostsNearTheThreshold(100'000);
  HostsAnalysis t = HostsOf(tight);
  ASSERT_TRUE(t.straggler.has_value());
  EXPECT_FALSE(t.straggler->within_uncertainty);
}

// Three hosts ending at 18, 19 and 20 s of a 20 s run: the last leads the others' median
// (18.5) by 1.5 s, under max(2 s, 1 s). h3 only has the agent's phase (2-20): its span.
TEST(HostsTest, NoStragglerWhenHostsEndTogether) {
  RunFixture f;
  f.run.info.host = "h1";
  f.run.info.end_ns = Sec(20);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(20), 0, "h1");
  f.AddPhase(root, "a", "run/task", 0, Sec(18), 0, "h1");
  f.AddPhase(root, "b", "run/task", Sec(1), Sec(19), 0, "h2");
  f.AddPhase(root, "h3", "run/host", Sec(2), Sec(20), 0, "h3");
  f.AddResource(0, model::ResourceKind::kHost, "h4", 0, 0, "h4");  // resources only
  model::Run& run = f.Build();
  HostsAnalysis h = HostsOf(run);
  ASSERT_EQ(h.hosts.size(), 4u);
  EXPECT_FALSE(h.straggler.has_value());
  const HostPart* h3 = h.Find("h3");
  ASSERT_NE(h3, nullptr);
  EXPECT_TRUE(h3->has_phases);
  EXPECT_EQ(h3->start_ns, Sec(2));
  EXPECT_NEAR(h3->span_s, 18, 1e-9);
  EXPECT_EQ(h.hosts.back().name, "h4");
  EXPECT_FALSE(h.hosts.back().has_phases);
  EXPECT_FALSE(h.hosts.back().cpu_measured);
  EXPECT_TRUE(HostIssues(run, h, 20).empty());
}

}  // namespace
}  // namespace grademl::analysis
