// Tests of the outside-load analysis: per-host totals and top processes read back from the
// model, the noisy rule at and around its thresholds, and CPU-bound issues naming the
// outside process that held the CPU. Expectations are worked out by hand from the series.
#include "analysis/outside_load.h"

#include <gtest/gtest.h>

#include "analysis/critical_path.h"
#include "analysis/issues.h"
#include "analysis/run_fixture.h"
#include "analysis/run_summary.h"

namespace grademl::analysis {
namespace {

namespace metric = model::metric;
using model::ResourceKind;
using testing::RunFixture;
using testing::Sec;

// A 10 s run whose host saw `other_cpu` CPU-seconds outside it, spread evenly, and two
// outside processes.
model::Run OutsideRun(RunFixture& f, double other_cpu) {
  f.run.info.end_ns = Sec(10);
  f.AddPhase(0, "run", "run", 0, Sec(10));
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  f.Counter(host, metric::kOtherCpu, {{0, 0}, {Sec(5), other_cpu / 2}, {Sec(10), other_cpu}});
  f.Gauge(host, metric::kOtherRss, {{0, 100e6}, {Sec(4), 300e6}, {Sec(10), 200e6}});
  auto small = f.AddResource(host, ResourceKind::kOutsideProcess, "sshd: me", 77);
  f.Counter(small, metric::kOtherCpu, {{Sec(1), 0}, {Sec(9), other_cpu * 0.1}});
  f.Gauge(small, metric::kOtherRss, {{Sec(3), 5e6}});
  auto big = f.AddResource(host, ResourceKind::kOutsideProcess, "stress\x1b[2J --cpu 1", 4242);
  f.Counter(big, metric::kOtherCpu, {{0, 0}, {Sec(10), other_cpu * 0.8}});
  f.Gauge(big, metric::kOtherRss, {{Sec(2), 40e6}});
  return f.Build();
}

TEST(OutsideLoadTest, TotalsAndTopProcessesComeFromTheModel) {
  RunFixture f;
  std::vector<OutsideLoad> load = MeasureOutsideLoad(OutsideRun(f, 2.0));
  ASSERT_EQ(load.size(), 1u);
  EXPECT_EQ(load[0].host, "node1");
  EXPECT_DOUBLE_EQ(load[0].cpu_seconds, 2.0);
  EXPECT_DOUBLE_EQ(load[0].avg_cores, 0.2);       // 2 CPU-s over 10 s
  EXPECT_DOUBLE_EQ(load[0].peak_rss_bytes, 300e6);
  ASSERT_EQ(load[0].top.size(), 2u);
  EXPECT_EQ(load[0].top[0].pid, 4242);            // 1.6 CPU-s before 0.2
  EXPECT_DOUBLE_EQ(load[0].top[0].cpu_seconds, 1.6);
  EXPECT_DOUBLE_EQ(load[0].top[0].peak_rss_bytes, 40e6);
  EXPECT_EQ(load[0].top[1].pid, 77);
  // A run recorded before outside load was measured has none.
  RunFixture old;
  old.AddPhase(0, "run", "run", 0, Sec(1));
  old.AddResource(0, ResourceKind::kHost, "node1");
  EXPECT_TRUE(MeasureOutsideLoad(old.Build()).empty());
  EXPECT_FALSE(SummarizeRun(old.run).noisy);
  EXPECT_FALSE(SummarizeRun(old.run).hosts[0].other_processes.has_value());
}

TEST(OutsideLoadTest, NoisyFromATenthOfACoreOnAverage) {
  for (auto [cpu, noisy] : std::vector<std::pair<double, bool>>{{0.5, false}, {0.99, false}, {1.0, true}, {3.0, true}}) {
    RunFixture f;
    RunSummary s = SummarizeRun(OutsideRun(f, cpu));
    EXPECT_EQ(s.noisy, noisy) << cpu;
    ASSERT_TRUE(s.hosts[0].other_processes.has_value());
    if (noisy) {
      // Names the host, the load and the top process, escaped.
      EXPECT_NE(s.noisy_reason.find("on node1"), std::string::npos) << s.noisy_reason;
      EXPECT_NE(s.noisy_reason.find("stress\\x1b[2J --cpu 1 (pid 4242"), std::string::npos) << s.noisy_reason;
    } else {
      EXPECT_TRUE(s.noisy_reason.empty());
    }
  }
  // A blip in a very short run is not noise: 0.04 CPU-s in 0.1 s is 0.4 cores, but under 0.05 s.
  std::vector<OutsideLoad> blip(1);
  blip[0].cpu_seconds = 0.04;
  blip[0].avg_cores = 0.4;
  EXPECT_FALSE(JudgeNoise(blip).noisy);
}

TEST(OutsideLoadTest, ACpuBoundIssueNamesTheOutsideProcessThatHeldTheCpu) {
  testing::Workflow w(10, 1);
  model::PhaseId train = w.Step("train", 0, 10);
  auto host = w.f.AddResource(0, ResourceKind::kHost, "node1");
  w.f.Counter(host, metric::kOtherCpu, {{0, 0}, {Sec(10), 9.0}});
  auto stress = w.f.AddResource(host, ResourceKind::kOutsideProcess, "stress --cpu 1", 4242);
  w.f.Counter(stress, metric::kOtherCpu, {{0, 0}, {Sec(10), 8.5}});
  const model::Run& run = w.Build();
  Bottlenecks b;
  b.phases.resize(run.phases.size());
  for (size_t i = 0; i < run.phases.size(); ++i) {
    b.phases[i].phase = run.phases[i].id;
    b.phases[i].duration_s = 10;
  }
  b.phases[static_cast<size_t>(train - 1)].bound_s[static_cast<int>(BoundResource::kCpu)] = 10;
  b.phases[static_cast<size_t>(train - 1)].saturated_s[static_cast<int>(BoundResource::kCpu)] = 10;
  std::vector<Issue> issues = RankIssues(run, b, {}, FindCriticalPath(run));
  const Issue* cpu = nullptr;
  for (const Issue& i : issues)
    if (i.phase == train && i.kind == "cpu") cpu = &i;
  ASSERT_NE(cpu, nullptr);
  EXPECT_NE(cpu->text.find("the machine's CPUs were full for 100% of that; processes outside the run used 0.90 "
                           "cores meanwhile, most: stress --cpu 1 (pid 4242, 8.50 CPU-s)"),
            std::string::npos)
      << cpu->text;
  // Without outside load, no such clause.
  EXPECT_EQ(OutsideContentionClause(run, "node1", Sec(0), Sec(0)), "");
  EXPECT_EQ(OutsideContentionClause(run, "elsewhere", Sec(0), Sec(10)), "");
}

}  // namespace
}  // namespace grademl::analysis
