// Core use (analysis/core_use.h), the what-if levers threads=N, cores=N and num_workers=N,
// and the issues that name them (underused_cores; num_workers for a DataLoader loading in
// the main process). Expected values are derived by hand in the comments.
#include <gtest/gtest.h>

#include "analysis/core_use.h"
#include "analysis/critical_path.h"
#include "analysis/issues.h"
#include "analysis/run_fixture.h"
#include "analysis/whatif.h"

namespace grademl::analysis {
namespace {

namespace metric = model::metric;
using model::PhaseId;
using model::ResourceKind;
using testing::RunFixture;
using testing::Sec;
using testing::Workflow;

constexpr double kLeverEps = 1e-6;

// A 60 s run on a 2-core host: process "crunch" [4, 56] runs one thread flat out (1 core:
// 52 CPU-seconds) on cpu0 while cpu1 sits idle the whole run. Its affinity allows 2 CPUs.
// `cores_used` scales its CPU (2: two busy threads, both cores busy).
struct Crunch {
  explicit Crunch(double cores_used = 1, double quota = 0, bool host_idle = true) {
    f.run.info.end_ns = Sec(60);
    f.run.info.interval_ns = Sec(0.1);
    root = f.AddPhase(0, "run", "run", 0, Sec(60));
    host = f.AddResource(0, ResourceKind::kHost, "node1");
    crunch = f.AddProcess(root, "crunch", Sec(4), Sec(56), 100, host);
    model::ResourceId r = f.last_process_resource;
    f.Counter(r, metric::kProcCpuUser, {{Sec(4), 0}, {Sec(56), 52 * cores_used}});
    f.Gauge(r, metric::kProcThreads, {{Sec(4), cores_used > 1 ? 2.0 : 1.0}});
    f.Gauge(r, metric::kProcCpuAffinity, {{Sec(4), 2}});
    if (quota > 0) f.Gauge(r, metric::kProcCpuQuota, {{Sec(4), quota}});
    model::ResourceId cpu = f.AddResource(host, ResourceKind::kCpu, "cpu");
    model::ResourceId cpu0 = f.AddResource(cpu, ResourceKind::kCore, "cpu0");
    model::ResourceId cpu1 = f.AddResource(cpu, ResourceKind::kCore, "cpu1");
    f.Counter(cpu0, metric::kCoreIdle, {{0, 0}, {Sec(4), 4}, {Sec(56), 4}, {Sec(60), 8}});
    if (host_idle && cores_used <= 1) {
      f.Counter(cpu1, metric::kCoreIdle, {{0, 0}, {Sec(60), 60}});
    } else {
      f.Counter(cpu1, metric::kCoreIdle, {{0, 0}, {Sec(4), 4}, {Sec(56), 4}, {Sec(60), 8}});
    }
    f.Build();
    b.phases = {{.phase = root, .duration_s = 60}, {.phase = crunch, .duration_s = 52}};
    b.phases[1].bound_s[static_cast<int>(BoundResource::kCpu)] = 52;  // CPU-bound all along
  }

  WhatifOptions Options() const {
    WhatifOptions o;
    o.bound_seconds = BoundSecondsOf(b);
    o.core_use = [this](PhaseId id) { return CoreUseOf(f.run, id); };
    return o;
  }
  double Saving(const std::string& change) const {
    auto ch = ParseWhatifChange(change);
    EXPECT_TRUE(ch.ok()) << ch.status().message();
    auto r = SimulateWhatif(f.run, {*ch}, Options());
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r->saving_s() : -1;
  }

  RunFixture f;
  Bottlenecks b;
  PhaseId root = 0, crunch = 0;
  model::ResourceId host = 0;
};

TEST(CoreUseTest, MeasuresThreadsCoresUsedAvailableAndHostIdle) {
  Crunch x;
  PhaseCoreUse u = CoreUseOf(x.f.run, x.crunch);
  EXPECT_NEAR(u.duration_s, 52, kLeverEps);
  EXPECT_NEAR(u.cpu_seconds, 52, kLeverEps);
  EXPECT_NEAR(u.avg_cores, 1, kLeverEps);
  EXPECT_NEAR(u.peak_cores, 1, 1e-3);
  EXPECT_EQ(u.peak_threads, 1);
  EXPECT_EQ(u.processes, 1);
  EXPECT_DOUBLE_EQ(u.available_cores, 2);
  EXPECT_EQ(u.available_from, "affinity");
  EXPECT_EQ(u.host_cores, 2);
  EXPECT_NEAR(u.host_idle_cores, 1, kLeverEps);  // cpu1's 52 idle seconds over 52 s
  EXPECT_NEAR(CoresUsedWhileCpuBound(u, 52), 1, 1e-3);
  // The run: 52 CPU-seconds over 60 s; 8 + 60 - 4 idle... cpu0 8 s, cpu1 60 s idle.
  PhaseCoreUse run = CoreUseOf(x.f.run, x.root);
  EXPECT_NEAR(run.avg_cores, 52.0 / 60, kLeverEps);
  EXPECT_NEAR(run.host_idle_cores, 68.0 / 60, kLeverEps);
  ASSERT_NE(FindCoreUse(x.f.run).Find(x.crunch), nullptr);
}

TEST(CoreUseTest, AQuotaTighterThanTheAffinityIsWhatIsAvailable) {
  Crunch x(1, 1.5);
  PhaseCoreUse u = CoreUseOf(x.f.run, x.crunch);
  EXPECT_DOUBLE_EQ(u.available_cores, 1.5);
  EXPECT_EQ(u.available_from, "cgroup quota");
}

TEST(CoreUseTest, WithoutLimitsTheHostsCoresAreAvailable) {
  RunFixture f;
  PhaseId root = f.AddPhase(0, "run", "run", 0, Sec(10));
  model::ResourceId host = f.AddResource(0, ResourceKind::kHost, "node1");
  PhaseId p = f.AddProcess(root, "p", 0, Sec(10), 7, host);
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{0, 0}, {Sec(10), 5}});
  model::ResourceId cpu = f.AddResource(host, ResourceKind::kCpu, "cpu");
  for (int i = 0; i < 4; ++i) f.AddResource(cpu, ResourceKind::kCore, "cpu" + std::to_string(i));
  f.Build();
  PhaseCoreUse u = CoreUseOf(f.run, p);
  EXPECT_DOUBLE_EQ(u.available_cores, 4);
  EXPECT_EQ(u.available_from, "host");
  EXPECT_NEAR(u.avg_cores, 0.5, kLeverEps);
}

TEST(CoreUseTest, AProcessCountsItsCpuFromItsStart) {
  // Started at 2 s, first sampled at 4 s with 2 CPU-seconds, 10 at 12 s when it ended: by the
  // one rule (derived/counter_rate.h) it counted from 0 at 2 s, so it used 10 CPU-seconds in
  // its 10 s: 1 core on average. (Reading the counter flat before its first sample found 8.)
  RunFixture f;
  PhaseId root = f.AddPhase(0, "run", "run", 0, Sec(12));
  PhaseId p = f.AddProcess(root, "p", Sec(2), Sec(12), 7);
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{Sec(4), 2}, {Sec(12), 10}});
  f.Build();
  PhaseCoreUse u = CoreUseOf(f.run, p);
  EXPECT_NEAR(u.cpu_seconds, 10, kLeverEps);
  EXPECT_NEAR(u.avg_cores, 1, kLeverEps);
  // A reset (a counter that drops) counts 0, never less: 10 -> 4 at 14 s, 6 at 16 s in a
  // process to 16 s: 10 + 0 + 2 = 12 CPU-seconds.
  RunFixture g;
  root = g.AddPhase(0, "run", "run", 0, Sec(16));
  p = g.AddProcess(root, "p", Sec(2), Sec(16), 7);
  g.Counter(g.last_process_resource, metric::kProcCpuUser, {{Sec(4), 2}, {Sec(12), 10}, {Sec(14), 4}, {Sec(16), 6}});
  g.Build();
  EXPECT_NEAR(CoreUseOf(g.run, p).cpu_seconds, 12, kLeverEps);
}

TEST(CoreUseTest, PeakCoresAreTheBusiestWindow) {
  // 10 s: idle for 5 s, then 2 cores busy for 5 s: average 1, peak 2.
  RunFixture f;
  PhaseId root = f.AddPhase(0, "run", "run", 0, Sec(10));
  PhaseId p = f.AddProcess(root, "p", 0, Sec(10), 7);
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{0, 0}, {Sec(5), 0}, {Sec(10), 10}});
  f.Gauge(f.last_process_resource, metric::kProcThreads, {{0, 1}, {Sec(5), 3}});
  f.run.phases.back().tags.push_back({"torch_threads", "2"});
  f.Build();
  PhaseCoreUse u = CoreUseOf(f.run, p);
  EXPECT_NEAR(u.avg_cores, 1, kLeverEps);
  EXPECT_NEAR(u.peak_cores, 2, 1e-3);
  EXPECT_EQ(u.peak_threads, 3);
  ASSERT_TRUE(u.torch_threads.has_value());
  EXPECT_EQ(*u.torch_threads, 2);
  EXPECT_FALSE(u.num_workers.has_value());
}

// FindCoreUse walks only the parts of a subtree that hold processes or the tags it reads:
// a process below a phase of no process, a tag three levels below a process and a step
// whose process has 200 phases and no tag give what the full walk of CoreUseOf gives, and
// what the run says (5 CPU-s over 10 s in the first step; torch_threads 4 there only).
TEST(CoreUseTest, FindCoreUseSkipsOnlySubtreesWithoutProcessesOrTags) {
  RunFixture f;
  PhaseId root = f.AddPhase(0, "run", "run", 0, Sec(20));
  PhaseId step1 = f.AddPhase(root, "train", "run/step", 0, Sec(10));
  PhaseId wrapper = f.AddPhase(step1, "launch", "run/step/launch", 0, Sec(10));
  PhaseId p1 = f.AddProcess(wrapper, "python train.py", 0, Sec(10), 7);
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{0, 0}, {Sec(10), 5}});
  PhaseId epoch = f.AddPhase(p1, "epoch", "run/step/launch/process/epoch", Sec(1), Sec(9), 7);
  PhaseId iter = f.AddPhase(epoch, "iteration", "run/step/launch/process/epoch/iteration", Sec(1), Sec(2), 7);
  PhaseId op = f.AddPhase(iter, "op", "run/step/launch/process/epoch/iteration/op", Sec(1), Sec(2), 7);
  f.run.phases[static_cast<size_t>(op - 1)].tags = {{"torch_threads", "4"}};
  PhaseId step2 = f.AddPhase(root, "eval", "run/step", Sec(10), Sec(20));
  PhaseId p2 = f.AddProcess(step2, "python eval.py", Sec(10), Sec(20), 8);
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{Sec(10), 0}, {Sec(20), 2}});
  for (int i = 0; i < 200; ++i) {
    f.AddPhase(p2, "batch", "run/step/process/batch", Sec(10) + Sec(0.05 * i), Sec(10) + Sec(0.05 * (i + 1)), 8);
  }
  f.Build();
  CoreUse all = FindCoreUse(f.run);
  ASSERT_NE(all.Find(root), nullptr);
  ASSERT_NE(all.Find(step1), nullptr);
  ASSERT_NE(all.Find(step2), nullptr);
  ASSERT_NE(all.Find(p1), nullptr);
  ASSERT_NE(all.Find(p2), nullptr);
  EXPECT_EQ(all.Find(root)->processes, 2);
  EXPECT_EQ(all.Find(root)->torch_threads, 4);
  EXPECT_EQ(all.Find(step1)->processes, 1);
  EXPECT_EQ(all.Find(step1)->torch_threads, 4);
  EXPECT_NEAR(all.Find(step1)->cpu_seconds, 5.0, 1e-9);
  EXPECT_EQ(all.Find(p1)->torch_threads, 4);
  EXPECT_EQ(all.Find(step2)->processes, 1);
  EXPECT_EQ(all.Find(step2)->torch_threads, std::nullopt);
  EXPECT_NEAR(all.Find(step2)->cpu_seconds, 2.0, 1e-9);
  for (const PhaseCoreUse& u : all.phases) {
    PhaseCoreUse full = CoreUseOf(f.run, u.phase);
    EXPECT_EQ(u.processes, full.processes) << u.phase;
    EXPECT_EQ(u.cpu_seconds, full.cpu_seconds) << u.phase;
    EXPECT_EQ(u.peak_cores, full.peak_cores) << u.phase;
    EXPECT_EQ(u.peak_threads, full.peak_threads) << u.phase;
    EXPECT_EQ(u.top_process_share, full.top_process_share) << u.phase;
    EXPECT_EQ(u.torch_threads, full.torch_threads) << u.phase;
    EXPECT_EQ(u.num_workers, full.num_workers) << u.phase;
  }
}

TEST(WhatifLeverTest, ParsesThreadsCoresAndNumWorkers) {
  auto t = ParseWhatifChange("type:step:threads=2");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->kind, WhatifChange::Kind::kThreads);
  EXPECT_EQ(t->count, 2);
  EXPECT_EQ(t->selector.text, "type:step");
  auto c = ParseWhatifChange("#3:cores=8");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, WhatifChange::Kind::kCores);
  auto w = ParseWhatifChange("train*:num_workers=4");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->kind, WhatifChange::Kind::kNumWorkers);
  EXPECT_EQ(w->count, 4);
  EXPECT_EQ(ParseWhatifChange("x:threads=0").status().message(),
            "bad change 'x:threads=0': threads must be from 1 to 4096 (at character 11)");
  EXPECT_EQ(ParseWhatifChange("x:threads=a").status().message(),
            "bad change 'x:threads=a': expected a whole number of threads after '=' (at character 11)");
  EXPECT_EQ(ParseWhatifChange("x:num_workers=2.5").status().message(),
            "bad change 'x:num_workers=2.5': expected a whole number of num_workers after '=' (at character 16)");
  EXPECT_FALSE(ParseWhatifChange(":threads=2").ok());
  EXPECT_FALSE(ParseWhatifChange("x:cores=99999").ok());
}

TEST(WhatifLeverTest, ThreadsScaleTheCpuBoundTimeByUsedOverAvailable) {
  Crunch x;
  const std::string id = "#" + std::to_string(x.crunch);
  // 52 s CPU-bound at 1 core, 2 available: 52 x 1/2 = 26 s saved.
  EXPECT_NEAR(x.Saving(id + ":threads=2"), 26, 1e-3);
  // More threads than cores available: still 2 cores.
  EXPECT_NEAR(x.Saving(id + ":threads=8"), 26, 1e-3);
  // cores=4 ignores the affinity: 52 x (1 - 1/4) = 39 s.
  EXPECT_NEAR(x.Saving(id + ":cores=4"), 39, 1e-3);
  // One thread is what it had: nothing changes.
  EXPECT_NEAR(x.Saving(id + ":threads=1"), 0, 1e-3);
  auto ch = ParseWhatifChange(id + ":threads=2");
  auto r = SimulateWhatif(x.f.run, {*ch}, x.Options());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->notes.size(), 1u);
  EXPECT_NE(r->notes[0].find("upper bound"), std::string::npos) << r->notes[0];
  EXPECT_NE(r->notes[0].find("1.00 cores used while CPU-bound -> 2 (of 2 available, affinity)"), std::string::npos)
      << r->notes[0];
}

TEST(WhatifLeverTest, FewerThreadsThanUsedIsSlower) {
  Crunch x(2);  // 104 CPU-seconds in 52 s: 2 cores
  // threads=1: 52 s x 2/1 = 104 s, 52 s longer.
  EXPECT_NEAR(x.Saving("#" + std::to_string(x.crunch) + ":threads=1"), -52, 1e-3);
}

TEST(WhatifLeverTest, ContentionIsNotRemovedByMoreThreads) {
  Crunch x(0.5, 0, /*host_idle=*/false);  // 26 CPU-seconds in 52 s CPU-bound: half a core
  const std::string id = "#" + std::to_string(x.crunch);
  // Counted as 1 core (not 0.5): 52 x (1 - 1/2) = 26 s, not 52 x (1 - 0.5/2) = 39 s.
  EXPECT_NEAR(x.Saving(id + ":threads=2"), 26, 1e-3);
  auto r = SimulateWhatif(x.f.run, {*ParseWhatifChange(id + ":threads=2")}, x.Options());
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->notes[0].find("0.50 cores used while CPU-bound (counted as 1: the rest was contention) -> 2"),
            std::string::npos)
      << r->notes[0];
}

TEST(WhatifLeverTest, ACgroupQuotaCapsThreads) {
  Crunch x(1, 1.5);
  // 52 x (1 - 1/1.5) = 17.333 s.
  EXPECT_NEAR(x.Saving("#" + std::to_string(x.crunch) + ":threads=2"), 52.0 / 3, 1e-3);
}

TEST(WhatifLeverTest, ThreadsNeedTheAnalyses) {
  Crunch x;
  auto ch = ParseWhatifChange("crunch:threads=2");
  ASSERT_TRUE(ch.ok());
  EXPECT_FALSE(SimulateWhatif(x.f.run, {*ch}).ok());
}

// A process [0, 5] with one epoch of 3 batches: data waits (loading in the main process)
// of 1 s, iterations (compute) of 0.5 s, and the final StopIteration wait of 0.1 s.
struct Loader {
  explicit Loader(std::string workers_tag = "") {
    f.run.info.end_ns = Sec(5);
    root = f.AddPhase(0, "run", "run", 0, Sec(5));
    process = f.AddProcess(root, "python3 train.py", 0, Sec(5), 100);
    epoch = f.AddPhase(process, "epoch", "run/process/epoch", 0, Sec(4.6), 100);
    if (!workers_tag.empty()) f.run.phases.back().tags.push_back({"num_workers", workers_tag});
    double t = 0;
    for (int i = 0; i < 3; ++i) {
      f.AddPhase(epoch, "dataloader.next", "run/process/epoch/data_wait", Sec(t), Sec(t + 1), 100);
      f.AddPhase(epoch, "iteration", "run/process/epoch/iteration", Sec(t + 1), Sec(t + 1.5), 100);
      t += 1.5;
    }
    f.AddPhase(epoch, "dataloader.next", "run/process/epoch/data_wait", Sec(t), Sec(t + 0.1), 100);
    f.Build();
  }
  double Saving(const std::string& change) const {
    auto ch = ParseWhatifChange(change);
    EXPECT_TRUE(ch.ok()) << ch.status().message();
    auto r = SimulateWhatif(f.run, {*ch});
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r->saving_s() : -1;
  }
  RunFixture f;
  PhaseId root = 0, process = 0, epoch = 0;
};

TEST(WhatifLeverTest, NumWorkersOverlapLoadingWithTheIterationBefore) {
  Loader x;
  // N=2: waits 2 and 3 become max(0, 1/2 - 0.5) = 0, the last max(0, 0.1/2 - 0.5) = 0; the
  // first keeps its 1 s: 1 + 1 + 0.1 = 2.1 s saved.
  EXPECT_NEAR(x.Saving("#" + std::to_string(x.process) + ":num_workers=2"), 2.1, 1e-3);
  // N=1: max(0, 1 - 0.5) = 0.5 each, the last 0: 0.5 + 0.5 + 0.1 = 1.1 s saved.
  EXPECT_NEAR(x.Saving("#" + std::to_string(x.process) + ":num_workers=1"), 1.1, 1e-3);
  auto ch = ParseWhatifChange("#" + std::to_string(x.process) + ":num_workers=2");
  auto r = SimulateWhatif(x.f.run, {*ch});
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->notes[0].find("4 data waits (3.100 s) become 1.000 s"), std::string::npos) << r->notes[0];
  EXPECT_NE(r->notes[0].find("max(compute, load/N)"), std::string::npos);
}

TEST(WhatifLeverTest, NumWorkersFromATaggedWorkerCount) {
  Loader x("1");
  // One worker already: load = 1 x (wait + compute) = 1.5 s; with 2: max(0, 0.75 - 0.5) =
  // 0.25 for waits 2 and 3 (0.75 s saved each); the last: 0.6 / 2 - 0.5 < 0 (0.1 s saved).
  EXPECT_NEAR(x.Saving("epoch:num_workers=2"), 1.6, 1e-3);
  // The same count as tagged: nothing changes.
  EXPECT_NEAR(x.Saving("epoch:num_workers=1"), 0, 1e-3);
}

TEST(IssuesLeverTest, UnderusedCoresNamesTheLeverAndABound) {
  Crunch x;
  std::vector<Issue> issues = RankIssues(x.f.run, x.b, {}, FindCriticalPath(x.f.run));
  ASSERT_FALSE(issues.empty());
  const Issue& i = issues[0];
  EXPECT_EQ(i.kind, "underused_cores");
  EXPECT_EQ(i.phase, x.crunch);
  EXPECT_EQ(i.change, "#" + std::to_string(x.crunch) + ":threads=2");
  EXPECT_NEAR(i.impact_s, 26, 1e-3);
  EXPECT_EQ(i.text,
            "Process 'crunch' used 1.0 of 2 cores (affinity) for 52.00 s on the critical path while 1.0 of the host's "
            "2 cores sat idle; at most 26.00 s (43% of the run) could be saved if it used all of them (its work "
            "ran in one thread: split it among 2 threads or processes; assumes its CPU work scales perfectly).");
  // The generic "2x faster CPU" issue for the same time is not repeated.
  for (const Issue& other : issues) EXPECT_NE(other.kind, "cpu");
}

TEST(IssuesLeverTest, AWrapperShellDoesNotHideASingleThread) {
  // crunch under a shell (idle, 1 thread): 2 processes, 2 threads, but the work is crunch's.
  Crunch x;
  RunFixture& f = x.f;
  PhaseId sh = f.AddProcess(x.root, "sh -c crunch", Sec(4), Sec(56), 99);
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{Sec(4), 0}, {Sec(56), 0.01}});
  f.Gauge(f.last_process_resource, metric::kProcThreads, {{Sec(4), 1}});
  f.run.phases[static_cast<size_t>(x.crunch - 1)].parent = sh;  // crunch now runs under sh
  f.run.phases[static_cast<size_t>(x.crunch - 1)].type = "run/process/process";
  f.Build();
  x.b.phases.push_back({.phase = sh, .duration_s = 52});
  x.b.phases.back().bound_s[static_cast<int>(BoundResource::kCpu)] = 52;
  PhaseCoreUse u = CoreUseOf(f.run, sh);
  EXPECT_EQ(u.processes, 2);
  EXPECT_EQ(u.peak_threads, 2);
  EXPECT_EQ(u.top_process_threads, 1);
  EXPECT_NEAR(u.top_process_share, 52 / 52.01, 1e-6);
  std::vector<Issue> issues = RankIssues(f.run, x.b, {}, FindCriticalPath(f.run));
  ASSERT_FALSE(issues.empty());
  EXPECT_EQ(issues[0].kind, "underused_cores");
  // The issue is about crunch itself (a wrapper whose one child is most of it is represented by
  // that child); a workflow step wrapping both is judged by top_process_* above.
  EXPECT_EQ(issues[0].phase, x.crunch);
  EXPECT_NE(issues[0].text.find("its work ran in one thread"), std::string::npos) << issues[0].text;
}

TEST(IssuesLeverTest, UnderusedCoresNamesTorchThreads) {
  Crunch x;
  x.f.run.phases[1].tags.push_back({"torch_threads", "1"});
  std::vector<Issue> issues = RankIssues(x.f.run, x.b, {}, FindCriticalPath(x.f.run));
  ASSERT_FALSE(issues.empty());
  EXPECT_NE(issues[0].text.find("(torch used 1 thread (torch.set_num_threads(2)); assumes"), std::string::npos)
      << issues[0].text;
}

TEST(IssuesLeverTest, NoUnderusedCoresWhenTheHostHadNoIdleCore) {
  Crunch x(1, 0, /*host_idle=*/false);
  std::vector<Issue> issues = RankIssues(x.f.run, x.b, {}, FindCriticalPath(x.f.run));
  ASSERT_FALSE(issues.empty());
  for (const Issue& i : issues) EXPECT_NE(i.kind, "underused_cores");
  EXPECT_EQ(issues[0].kind, "cpu");
}

TEST(IssuesLeverTest, NoUnderusedCoresWhenAllAvailableCoresAreUsed) {
  Crunch x(2);
  for (const Issue& i : RankIssues(x.f.run, x.b, {}, FindCriticalPath(x.f.run))) EXPECT_NE(i.kind, "underused_cores");
}

TEST(IssuesLeverTest, AMainProcessDataLoaderGetsTheNumWorkersLever) {
  Loader x;
  std::vector<Issue> issues = RankIssues(x.f.run, Bottlenecks{}, {}, FindCriticalPath(x.f.run));
  ASSERT_FALSE(issues.empty());
  EXPECT_EQ(issues[0].kind, "data_wait");
  // No host cores known: 1 worker; saves 1.1 s (see NumWorkersOverlapLoadingWithTheIterationBefore).
  EXPECT_EQ(issues[0].change, "#" + std::to_string(x.process) + ":num_workers=1");
  EXPECT_NEAR(issues[0].impact_s, 1.1, 1e-3);
  EXPECT_NE(issues[0].text.find("loaded in the main process (num_workers=0)"), std::string::npos) << issues[0].text;
}

TEST(IssuesLeverTest, AConcurrencyLimitNamesAStepThatCouldHaveRunAlongsideAnother) {
  // -j 1: a [0, 2], b [2, 5] (no inputs: ready at 0), c [5, 6] after a (ready at 2, while b
  // held the one slot). With -j 2: a and b from 0, c at 2 after a: the run ends at 3.
  Workflow w(6, 1);
  PhaseId a = w.Step("a", 0, 2);
  w.Step("b", 2, 5);
  w.Step("c", 5, 6, {a});
  const model::Run& run = w.Build();
  std::vector<Issue> issues = RankIssues(run, Bottlenecks{}, {}, FindCriticalPath(run));
  const Issue* concurrency = nullptr;
  for (const Issue& i : issues) {
    if (i.kind == "concurrency") concurrency = &i;
  }
  ASSERT_NE(concurrency, nullptr);
  EXPECT_EQ(concurrency->change, "jobs=2");
  EXPECT_NEAR(concurrency->impact_s, 3, 0.1);
  EXPECT_NE(concurrency->text.find("ready steps waited for a free slot (c waited 3.00 s with its inputs ready; it "
                                   "could have run alongside b); with -j 2"),
            std::string::npos)
      << concurrency->text;
}

}  // namespace
}  // namespace grademl::analysis
