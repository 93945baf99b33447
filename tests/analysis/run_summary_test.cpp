#include "analysis/run_summary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "run_fixture.h"

namespace grademl::analysis {
namespace {

namespace metric = model::metric;
using model::ResourceKind;
using model::Sample;
using testing::RunFixture;
using testing::Sec;

// A process with only an RSS series.
model::PhaseId AddRssProcess(RunFixture& f, model::PhaseId parent, TimeNs start, TimeNs end, int32_t pid,
                             std::vector<Sample> rss) {
  model::PhaseId id = f.AddProcess(parent, "p" + std::to_string(pid), start, end, pid);
  f.Gauge(f.last_process_resource, metric::kProcRss, std::move(rss));
  return id;
}

TEST(RunSummaryTest, PeakRssIsTheMostHeldAtOnceNotTheSumOfPeaks) {
  RunFixture f;
  f.run.info.start_ns = Sec(0);
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", Sec(0), Sec(4));
  // a: 100 then 50; b: 30 while a still holds 100.
  auto a = AddRssProcess(f, root, Sec(0), Sec(4), 10, {{Sec(0), 100}, {Sec(2), 50}, {Sec(4), 50}});
  auto b = AddRssProcess(f, root, Sec(1), Sec(3), 11, {{Sec(1), 30}, {Sec(3), 30}});
  RunSummary s = SummarizeRun(f.Build());
  EXPECT_EQ(s.FindPhase(root)->peak_rss_bytes, 130);
  EXPECT_EQ(s.FindPhase(a)->peak_rss_bytes, 100);
  EXPECT_EQ(s.FindPhase(a)->self_peak_rss_bytes, 100);
  EXPECT_EQ(s.FindPhase(b)->peak_rss_bytes, 30);
  EXPECT_EQ(s.FindPhase(root)->self_peak_rss_bytes, 0);
}

TEST(RunSummaryTest, PeakRssWhenTheOverlapComesLater) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  AddRssProcess(f, root, 0, Sec(10), 10, {{Sec(0), 100}, {Sec(2), 50}, {Sec(10), 50}});
  AddRssProcess(f, root, Sec(3), Sec(5), 11, {{Sec(3), 70}, {Sec(5), 70}});  // 50 + 70 = 120 > 100
  EXPECT_EQ(SummarizeRun(f.Build()).FindPhase(root)->peak_rss_bytes, 120);
}

TEST(RunSummaryTest, PeakRssOfNestedSubtrees) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  auto p = AddRssProcess(f, root, 0, Sec(10), 1, {{Sec(0), 200}, {Sec(10), 200}});
  auto c1 = AddRssProcess(f, p, Sec(2), Sec(4), 2, {{Sec(2), 100}, {Sec(4), 100}});
  auto c2 = AddRssProcess(f, p, Sec(3), Sec(6), 3, {{Sec(3), 50}, {Sec(5), 60}});
  auto g = AddRssProcess(f, c2, Sec(5), Sec(6), 4, {{Sec(5), 1000}});
  RunSummary s = SummarizeRun(f.Build());
  EXPECT_EQ(s.FindPhase(c1)->peak_rss_bytes, 100);
  EXPECT_EQ(s.FindPhase(g)->peak_rss_bytes, 1000);
  EXPECT_EQ(s.FindPhase(c2)->peak_rss_bytes, 1060);        // at 5 s: 60 + 1000
  EXPECT_EQ(s.FindPhase(p)->peak_rss_bytes, 1260);         // at 5 s: 200 + 60 + 1000 (c1 ended at 4 s)
  EXPECT_EQ(s.FindPhase(root)->peak_rss_bytes, 1260);
  EXPECT_EQ(s.FindPhase(p)->process_count, 4);
  EXPECT_EQ(s.FindPhase(root)->subtree_phases, 5);
}

TEST(RunSummaryTest, AGaugeHoldsItsValueAcrossCompressedGaps) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  // A flat stretch 80 from 1 s to 9 s keeps only its end points.
  AddRssProcess(f, root, 0, Sec(10), 1, {{Sec(0), 10}, {Sec(1), 80}, {Sec(9), 80}, {Sec(9.5), 5}});
  AddRssProcess(f, root, Sec(5), Sec(6), 2, {{Sec(5), 7}});  // sampled once, in the middle of the gap
  EXPECT_EQ(SummarizeRun(f.Build()).FindPhase(root)->peak_rss_bytes, 87);
}

TEST(RunSummaryTest, ProcessesOneAfterTheOtherDoNotAddUp) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  AddRssProcess(f, root, 0, Sec(5), 1, {{Sec(0), 100}, {Sec(4), 100}});
  AddRssProcess(f, root, Sec(5), Sec(9), 2, {{Sec(5), 100}, {Sec(8), 100}});
  EXPECT_EQ(SummarizeRun(f.Build()).FindPhase(root)->peak_rss_bytes, 100);
}

TEST(RunSummaryTest, ALastSampleAtTheEndStillCounts) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(10));
  AddRssProcess(f, root, 0, Sec(5), 1, {{Sec(5), 100}});           // sampled once, as it ended
  AddRssProcess(f, root, Sec(2), Sec(8), 2, {{Sec(2), 40}, {Sec(8), 40}});
  RunSummary s = SummarizeRun(f.Build());
  EXPECT_EQ(s.FindPhase(root)->peak_rss_bytes, 140);
}

TEST(RunSummaryTest, CountersUseTheLastValueAndSumOverTheSubtree) {
  RunFixture f;
  f.run.info.start_ns = Sec(100);
  f.run.info.end_ns = Sec(104);
  auto root = f.AddPhase(0, "run", "run", Sec(100), Sec(104));
  auto sh = f.AddProcess(root, "sh run.sh", Sec(100), Sec(104), 10);
  auto sh_res = f.last_process_resource;
  f.Counter(sh_res, metric::kProcCpuUser, {{Sec(100.5), 0.25}, {Sec(101), 0.5}, {Sec(103), 0.5}});
  f.Counter(sh_res, metric::kProcCpuSystem, {{Sec(100.5), 0}, {Sec(103), 0.25}});
  f.Counter(sh_res, metric::kProcCpuUnseenChildren, {{Sec(100.5), 0}, {Sec(102), 1.5}, {Sec(103), 1.5}});
  f.Counter(sh_res, metric::kProcReadBytes, {{Sec(100.5), 4096}, {Sec(103), 8192}});
  f.Counter(sh_res, metric::kProcWriteBytes, {{Sec(103), 100}});
  auto worker = f.AddProcess(sh, "python train.py", Sec(101), Sec(103), 11);
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{Sec(101.5), 1}, {Sec(102.5), 2.75}});
  f.Counter(f.last_process_resource, metric::kProcCpuSystem, {{Sec(101.5), 0.125}, {Sec(102.5), 0.25}});
  f.Counter(f.last_process_resource, metric::kProcWriteBytes, {{Sec(101.5), 0}, {Sec(102.5), 1 << 20}});
  // A phase of the worker that is not a process (an epoch): it has no own process.
  auto epoch = f.AddPhase(worker, "epoch 1", "run/process/process/epoch", Sec(101.5), Sec(102.5));

  RunSummary s = SummarizeRun(f.Build());
  ASSERT_EQ(s.phases.size(), 4u);
  EXPECT_EQ(s.phases[1].id, sh);  // same order as run.phases
  const PhaseSummary& w = *s.FindPhase(worker);
  EXPECT_EQ(w.self_cpu_seconds, 3.0);
  EXPECT_EQ(w.cpu_seconds, 3.0);
  EXPECT_EQ(w.duration_s, 2.0);
  EXPECT_EQ(w.avg_cores, 1.5);
  EXPECT_EQ(w.write_bytes, 1 << 20);
  EXPECT_EQ(w.read_bytes, 0);
  const PhaseSummary& shs = *s.FindPhase(sh);
  EXPECT_EQ(shs.self_cpu_seconds, 2.25);  // 0.5 + 0.25 + 1.5
  EXPECT_EQ(shs.cpu_seconds, 5.25);
  EXPECT_EQ(shs.self_read_bytes, 8192);
  EXPECT_EQ(shs.read_bytes, 8192);
  EXPECT_EQ(shs.self_write_bytes, 100);
  EXPECT_EQ(shs.write_bytes, 100 + (1 << 20));
  const PhaseSummary& r = *s.FindPhase(root);
  EXPECT_EQ(r.self_cpu_seconds, 0);
  EXPECT_EQ(r.cpu_seconds, 5.25);
  EXPECT_EQ(r.duration_s, 4.0);
  EXPECT_EQ(r.avg_cores, 5.25 / 4);
  EXPECT_EQ(r.process_count, 2);
  const PhaseSummary& e = *s.FindPhase(epoch);
  EXPECT_EQ(e.cpu_seconds, 0);
  EXPECT_EQ(e.process_count, 0);
  EXPECT_EQ(s.duration_s, 4.0);
}

TEST(RunSummaryTest, AnIncompleteRunEndsAtTheLastThingSeen) {
  RunFixture f;
  f.run.info.start_ns = Sec(0);
  f.run.info.end_ns = 0;  // grademl was killed
  auto root = f.AddPhase(0, "run", "run", 0, 0);
  auto a = f.AddProcess(root, "a", Sec(1), 0, 10);
  f.Gauge(f.last_process_resource, metric::kProcRss, {{Sec(1), 100}, {Sec(3), 100}});
  f.Counter(f.last_process_resource, metric::kProcCpuUser, {{Sec(1), 0.5}, {Sec(6), 4}});
  auto b = f.AddProcess(root, "b", Sec(2), Sec(4), 11);
  f.Gauge(f.last_process_resource, metric::kProcRss, {{Sec(2), 25}});
  RunSummary s = SummarizeRun(f.Build());
  EXPECT_EQ(s.end_ns, Sec(6));
  EXPECT_EQ(s.duration_s, 6.0);
  const PhaseSummary& pa = *s.FindPhase(a);
  EXPECT_TRUE(pa.open);
  EXPECT_EQ(pa.end_ns, Sec(6));
  EXPECT_EQ(pa.duration_s, 5.0);
  EXPECT_EQ(pa.cpu_seconds, 4.0);
  EXPECT_EQ(pa.avg_cores, 0.8);
  EXPECT_FALSE(s.FindPhase(b)->open);
  // b's 25 lasts until b ends at 4 s, alongside a's 100 (held from 3 s on: open phases hold).
  EXPECT_EQ(s.FindPhase(root)->peak_rss_bytes, 125);
  EXPECT_TRUE(s.FindPhase(root)->open);
  EXPECT_EQ(s.FindPhase(root)->cpu_seconds, 4.0);
}

TEST(RunSummaryTest, AnEmptyRunHasAnEmptySummary) {
  RunFixture f;
  RunSummary s = SummarizeRun(f.Build());
  EXPECT_TRUE(s.phases.empty());
  EXPECT_TRUE(s.hosts.empty());
  EXPECT_EQ(s.duration_s, 0);
}

// Host resources for the tests below: two cores sampled at 0, 1, 2 s, memory, a disk, a
// network interface and a GPU. Every number is a binary fraction, so results are exact.
void AddHost(RunFixture& f) {
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto cpu = f.AddResource(host, ResourceKind::kCpu, "cpu");
  auto c0 = f.AddResource(cpu, ResourceKind::kCore, "cpu0");
  // core0: interval 1: user .5 system .25 iowait .125 idle .125; interval 2: user .75 steal .125 idle .125.
  f.Counter(c0, metric::kCoreUser, {{Sec(0), 10}, {Sec(1), 10.5}, {Sec(2), 11.25}}, 1);
  f.Counter(c0, metric::kCoreSystem, {{Sec(0), 5}, {Sec(1), 5.25}, {Sec(2), 5.25}}, 1);
  f.Counter(c0, metric::kCoreIowait, {{Sec(0), 1}, {Sec(1), 1.125}, {Sec(2), 1.125}}, 1);
  f.Counter(c0, metric::kCoreSteal, {{Sec(0), 0}, {Sec(1), 0}, {Sec(2), 0.125}}, 1);
  f.Counter(c0, metric::kCoreIdle, {{Sec(0), 100}, {Sec(1), 100.125}, {Sec(2), 100.25}}, 1);
  auto c1 = f.AddResource(cpu, ResourceKind::kCore, "cpu1");
  // core1: interval 1: user .25 idle .75; interval 2: user .5 idle .5. No iowait series at
  // all, and a flat system series that kept only its end points.
  f.Counter(c1, metric::kCoreUser, {{Sec(0), 20}, {Sec(1), 20.25}, {Sec(2), 20.75}}, 1);
  f.Counter(c1, metric::kCoreSystem, {{Sec(0), 3}, {Sec(2), 3}}, 1);
  f.Counter(c1, metric::kCoreSteal, {{Sec(0), 0}, {Sec(2), 0}}, 1);
  f.Counter(c1, metric::kCoreIdle, {{Sec(0), 50}, {Sec(1), 50.75}, {Sec(2), 51.25}}, 1);
  auto mem = f.AddResource(host, ResourceKind::kMemory, "memory");
  f.Gauge(mem, metric::kMemUsed, {{Sec(0), 1000}, {Sec(1), 3000}, {Sec(1.5), 2000}, {Sec(2), 2000}}, 8000);
  auto disk = f.AddResource(host, ResourceKind::kDisk, "sda");
  f.Counter(disk, metric::kDiskReadBytes, {{Sec(0), 5000}, {Sec(1), 7000}, {Sec(2), 9000}});
  f.Counter(disk, metric::kDiskWriteBytes, {{Sec(0), 0}, {Sec(2), 1024}});
  f.Counter(disk, metric::kDiskBusy, {{Sec(0), 10}, {Sec(2), 10.5}}, 1);
  auto net = f.AddResource(host, ResourceKind::kNet, "eth0");
  f.Counter(net, metric::kNetRxBytes, {{Sec(0), 100}, {Sec(2), 600}}, 1.25e8);
  f.Counter(net, metric::kNetTxBytes, {{Sec(0), 0}, {Sec(2), 50}}, 1.25e8);
  auto gpu = f.AddResource(host, ResourceKind::kGpu, "gpu0");
  f.Gauge(gpu, metric::kGpuUtilization, {{Sec(0), 0.5}, {Sec(1), 1}, {Sec(2), 1}}, 1);
  f.Gauge(gpu, metric::kGpuMemoryUsed, {{Sec(0), 1e9}, {Sec(1), 2e9}, {Sec(2), 2e9}}, 16e9);
  f.Gauge(gpu, metric::kGpuPower, {{Sec(0), 100}, {Sec(1), 200}, {Sec(2), 200}}, 300);
}

TEST(RunSummaryTest, ACoreResetCountsNothingInThePeak) {
  // Two cores sampled each second. [0, 1] s: each .5 busy, .5 idle. [1, 2] s: cpu0's user
  // counter resets (0.5 -> 0.1) while it idles .5 s; cpu1 is busy 1 s and idle 0 s.
  RunFixture f;
  f.run.info.end_ns = Sec(2);
  f.run.info.interval_ns = Sec(1);
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto cpu = f.AddResource(host, ResourceKind::kCpu, "cpu");
  auto c0 = f.AddResource(cpu, ResourceKind::kCore, "cpu0");
  auto c1 = f.AddResource(cpu, ResourceKind::kCore, "cpu1");
  f.Counter(c0, metric::kCoreUser, {{0, 0}, {Sec(1), 0.5}, {Sec(2), 0.1}}, 1);
  f.Counter(c0, metric::kCoreIdle, {{0, 0}, {Sec(1), 0.5}, {Sec(2), 1.0}}, 1);
  f.Counter(c1, metric::kCoreUser, {{0, 0}, {Sec(1), 0.5}, {Sec(2), 1.5}}, 1);
  f.Counter(c1, metric::kCoreIdle, {{0, 0}, {Sec(1), 0.5}, {Sec(2), 0.5}}, 1);
  RunSummary s = SummarizeRun(f.Build());
  ASSERT_EQ(s.hosts.size(), 1u);
  ASSERT_TRUE(s.hosts[0].cpu.has_value());
  const CpuSummary& c = *s.hosts[0].cpu;
  // Totals: busy .5 + 1.5 = 2 of 2 + 1.5 = 3.5 core-seconds (the reset counts 0).
  EXPECT_DOUBLE_EQ(c.busy_s, 2);
  EXPECT_DOUBLE_EQ(c.avg_busy, 2 / 3.5);
  // Peak: [0, 1] s 1 of 2 = .5; [1, 2] s busy 0 + 1 of 0 + .5 + 1 + 0 = 1.5: 2/3. (Reading
  // the summed values instead let the reset cancel cpu1's work: (-.4 + 1) / 1.1 = .545.)
  EXPECT_NEAR(c.peak_busy, 2.0 / 3, 1e-12);
}

TEST(RunSummaryTest, HostCpu) {
  RunFixture f;
  f.run.info.end_ns = Sec(2);
  f.run.info.interval_ns = Sec(1);
  AddHost(f);
  RunSummary s = SummarizeRun(f.Build());
  ASSERT_EQ(s.hosts.size(), 1u);
  const HostSummary& h = s.hosts[0];
  EXPECT_EQ(h.name, "node1");
  ASSERT_TRUE(h.cpu.has_value());
  EXPECT_EQ(h.cpu->cores, 2);
  EXPECT_EQ(h.cpu->avg_busy, 2.25 / 4);   // core0 1.5 + core1 .75 of 4 core-seconds
  EXPECT_EQ(h.cpu->peak_busy, 0.625);     // interval 2: (.75 + .5) / 2
  EXPECT_EQ(h.cpu->avg_iowait, 0.125 / 4);
  EXPECT_EQ(h.cpu->avg_steal, 0.125 / 4);
  EXPECT_EQ(h.cpu->sampled_s, 2.0);
  ASSERT_EQ(h.cpu->per_core.size(), 2u);
  EXPECT_EQ(h.cpu->per_core[0].name, "cpu0");
  EXPECT_EQ(h.cpu->per_core[0].avg_busy, 0.75);
  EXPECT_EQ(h.cpu->per_core[1].avg_busy, 0.375);
}

TEST(RunSummaryTest, HostMemoryDiskNetGpu) {
  RunFixture f;
  f.run.info.end_ns = Sec(2);
  AddHost(f);
  RunSummary s = SummarizeRun(f.Build());
  const HostSummary& h = s.hosts.at(0);
  ASSERT_TRUE(h.memory.has_value());
  EXPECT_EQ(h.memory->capacity_bytes, 8000);
  EXPECT_EQ(h.memory->peak_used_bytes, 3000);
  EXPECT_EQ(h.memory->avg_used_bytes, 1750);  // (1000 * 1 + 3000 * .5 + 2000 * .5) / 2
  ASSERT_EQ(h.disks.size(), 1u);
  EXPECT_EQ(h.disks[0].name, "sda");
  EXPECT_EQ(h.disks[0].read_bytes, 4000);
  EXPECT_EQ(h.disks[0].write_bytes, 1024);
  EXPECT_EQ(h.disks[0].avg_busy, 0.25);
  ASSERT_EQ(h.nets.size(), 1u);
  EXPECT_EQ(h.nets[0].rx_bytes, 500);
  EXPECT_EQ(h.nets[0].tx_bytes, 50);
  EXPECT_EQ(h.nets[0].capacity_bytes_per_s, 1.25e8);
  ASSERT_EQ(h.gpus.size(), 1u);
  EXPECT_EQ(h.gpus[0].avg_utilization, 0.75);
  EXPECT_EQ(h.gpus[0].peak_utilization, 1);
  EXPECT_EQ(h.gpus[0].peak_memory_used_bytes, 2e9);
  EXPECT_EQ(h.gpus[0].memory_capacity_bytes, 16e9);
  EXPECT_EQ(h.gpus[0].avg_power_w, 150);
  EXPECT_EQ(h.gpus[0].power_limit_w, 300);
}

TEST(RunSummaryTest, AbsentHostResourcesLeaveTheirSectionsEmpty) {
  RunFixture f;
  auto host = f.AddResource(0, ResourceKind::kHost, "node2");
  f.AddResource(host, ResourceKind::kMemory, "memory");  // declared, never sampled
  auto root = f.AddPhase(0, "run", "run", 0, Sec(1));
  f.AddProcess(root, "a", 0, Sec(1), 5, host);  // processes under the host are no host data
  f.Gauge(f.last_process_resource, metric::kProcRss, {{0, 5}});
  RunSummary s = SummarizeRun(f.Build());
  ASSERT_EQ(s.hosts.size(), 1u);
  EXPECT_FALSE(s.hosts[0].cpu.has_value());
  EXPECT_FALSE(s.hosts[0].memory.has_value());
  EXPECT_TRUE(s.hosts[0].disks.empty());
  EXPECT_TRUE(s.hosts[0].nets.empty());
  EXPECT_TRUE(s.hosts[0].gpus.empty());
}

TEST(RunSummaryTest, AShortLastIntervalDoesNotMakeAPeak) {
  RunFixture f;
  f.run.info.interval_ns = Sec(1);
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto core = f.AddResource(host, ResourceKind::kCore, "cpu0");
  // Half busy for a second, then one fully busy clock tick in a 3 ms stub.
  f.Counter(core, metric::kCoreUser, {{Sec(0), 0}, {Sec(1), 0.5}, {Sec(1.003), 0.51}});
  f.Counter(core, metric::kCoreIdle, {{Sec(0), 0}, {Sec(1), 0.5}, {Sec(1.003), 0.5}});
  RunSummary s = SummarizeRun(f.Build());
  EXPECT_EQ(s.hosts.at(0).cpu->peak_busy, 0.5);
}

TEST(RunSummaryTest, SeveralHosts) {
  RunFixture f;
  auto a = f.AddResource(0, ResourceKind::kHost, "a", 0, 0, "a");
  auto b = f.AddResource(0, ResourceKind::kHost, "b", 0, 0, "b");
  f.Gauge(f.AddResource(b, ResourceKind::kMemory, "memory", 0, 0, "b"), metric::kMemUsed, {{0, 7}});
  f.Gauge(f.AddResource(a, ResourceKind::kMemory, "memory", 0, 0, "a"), metric::kMemUsed, {{0, 3}});
  RunSummary s = SummarizeRun(f.Build());
  ASSERT_EQ(s.hosts.size(), 2u);
  EXPECT_EQ(s.hosts[0].name, "a");
  EXPECT_EQ(s.hosts[0].memory->peak_used_bytes, 3);
  EXPECT_EQ(s.hosts[1].memory->peak_used_bytes, 7);
}

// The subtree peaks against a plain sweep over each subtree, on random trees.
TEST(RunSummaryTest, SubtreePeaksMatchAPlainSweep) {
  std::mt19937 rng(42);
  for (int round = 0; round < 30; ++round) {
    RunFixture f;
    f.run.info.end_ns = Sec(100);
    std::vector<model::PhaseId> ids{f.AddPhase(0, "run", "run", 0, Sec(100))};
    int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      model::PhaseId parent = ids[rng() % ids.size()];
      TimeNs start = static_cast<TimeNs>(rng() % 90) * kNsPerSec / 2;
      TimeNs end = (rng() % 5 == 0) ? 0 : start + static_cast<TimeNs>(rng() % 20) * kNsPerSec / 2;
      std::vector<Sample> rss;
      TimeNs t = start;
      int k = static_cast<int>(rng() % 8);
      for (int j = 0; j < k; ++j) {
        rss.push_back({t, static_cast<double>(rng() % 100)});
        t += static_cast<TimeNs>(1 + rng() % 4) * kNsPerSec / 4;
      }
      ids.push_back(AddRssProcess(f, parent, start, end, 100 + i, rss));
    }
    const model::Run& run = f.Build();
    RunSummary s = SummarizeRun(run);
    for (const model::Phase& p : run.phases) {
      // Collect the subtree's tracks and sweep them.
      std::vector<RssTrack> tracks;
      std::vector<model::PhaseId> todo{p.id};
      while (!todo.empty()) {
        model::PhaseId id = todo.back();
        todo.pop_back();
        for (model::PhaseId c : run.ChildrenOf(id)) todo.push_back(c);
        const model::Resource* r = run.ProcessResourceOf(id);
        if (r == nullptr) continue;
        const model::Series* rss = run.FindSeries(r->id, metric::kProcRss);
        if (rss == nullptr || rss->samples.empty()) continue;
        tracks.push_back({rss->samples, s.FindPhase(id)->end_ns});
      }
      EXPECT_EQ(s.FindPhase(p.id)->peak_rss_bytes, PeakOfSum(tracks)) << "round " << round << " phase " << p.id;
    }
  }
}

// The same with PSS recorded on some processes only (the others' PSS is their RSS), samples
// that repeat an instant or hold 0, and the phases stored out of id order: every subtree's
// RSS and PSS peak against a plain sweep of its tracks.
TEST(RunSummaryTest, SubtreeRssAndPssPeaksMatchAPlainSweepWithPartialPss) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 40; ++round) {
    RunFixture f;
    f.run.info.end_ns = Sec(100);
    std::vector<model::PhaseId> ids{f.AddPhase(0, "run", "run", 0, Sec(100))};
    int n = 1 + static_cast<int>(rng() % 50);
    for (int i = 0; i < n; ++i) {
      model::PhaseId parent = ids[rng() % ids.size()];
      TimeNs start = static_cast<TimeNs>(rng() % 90) * kNsPerSec / 2;
      TimeNs end = (rng() % 5 == 0) ? 0 : start + static_cast<TimeNs>(rng() % 20) * kNsPerSec / 2;
      if (rng() % 3 == 0) {
        // A phase of no process (an epoch, a step): no track of its own.
        ids.push_back(f.AddPhase(parent, "epoch", "run/epoch", start, end));
        continue;
      }
      auto track = [&] {
        std::vector<Sample> samples;
        TimeNs t = start;
        int k = static_cast<int>(rng() % 9);
        for (int j = 0; j < k; ++j) {
          samples.push_back({t, static_cast<double>(rng() % 4 == 0 ? 0 : rng() % 100)});
          t += static_cast<TimeNs>(rng() % 4) * kNsPerSec / 4;  // 0: the same instant again
        }
        return samples;
      };
      ids.push_back(AddRssProcess(f, parent, start, end, 100 + i, track()));
      if (rng() % 2 == 0) f.Gauge(f.last_process_resource, metric::kProcPss, track());
    }
    if (round % 2 == 1) std::shuffle(f.run.phases.begin(), f.run.phases.end(), rng);
    const model::Run& run = f.Build();
    RunSummary s = SummarizeRun(run);
    std::vector<RssTrack> all_rss, all_pss;
    for (const model::Phase& p : run.phases) {
      std::vector<RssTrack> rss_tracks, pss_tracks;
      std::vector<model::PhaseId> todo{p.id};
      while (!todo.empty()) {
        model::PhaseId id = todo.back();
        todo.pop_back();
        for (model::PhaseId c : run.ChildrenOf(id)) todo.push_back(c);
        const model::Resource* r = run.ProcessResourceOf(id);
        if (r == nullptr) continue;
        const model::Series* rss = run.FindSeries(r->id, metric::kProcRss);
        const model::Series* pss = run.FindSeries(r->id, metric::kProcPss);
        TimeNs end = s.FindPhase(id)->end_ns;
        if (rss != nullptr && !rss->samples.empty()) rss_tracks.push_back({rss->samples, end});
        if (pss == nullptr || pss->samples.empty()) pss = rss;
        if (pss != nullptr && !pss->samples.empty()) pss_tracks.push_back({pss->samples, end});
      }
      EXPECT_EQ(s.FindPhase(p.id)->peak_rss_bytes, PeakOfSum(rss_tracks)) << "round " << round << " phase " << p.id;
      EXPECT_EQ(s.FindPhase(p.id)->peak_pss_bytes, PeakOfSum(pss_tracks)) << "round " << round << " phase " << p.id;
      if (p.parent == 0) {
        all_rss.insert(all_rss.end(), rss_tracks.begin(), rss_tracks.end());
        all_pss.insert(all_pss.end(), pss_tracks.begin(), pss_tracks.end());
      }
    }
    EXPECT_EQ(s.peak_rss_bytes, PeakOfSum(all_rss)) << "round " << round;
    EXPECT_EQ(s.peak_pss_bytes, PeakOfSum(all_pss)) << "round " << round;
  }
}

// Subtree peaks are exact sums, not sums rounded at each addition: three processes holding
// 2^53, 1 and 1 bytes at once hold 2^53 + 2 (a whole number a double holds), where adding
// 1 to 2^53 in doubles rounds back to 2^53 each time. Each process alone holds its own.
TEST(RunSummaryTest, SubtreePeaksAreExactSums) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  model::PhaseId root = f.AddPhase(0, "run", "run", 0, Sec(10));
  const double big = 9007199254740992.0;  // 2^53
  model::PhaseId a = AddRssProcess(f, root, 0, Sec(10), 10, {{Sec(1), big}});
  model::PhaseId b = AddRssProcess(f, root, 0, Sec(10), 11, {{Sec(1), 1.0}});
  model::PhaseId c = AddRssProcess(f, root, 0, Sec(10), 12, {{Sec(1), 1.0}});
  const model::Run& run = f.Build();
  RunSummary s = SummarizeRun(run);
  EXPECT_EQ(s.FindPhase(root)->peak_rss_bytes, 9007199254740994.0);
  EXPECT_EQ(s.FindPhase(root)->peak_pss_bytes, 9007199254740994.0);
  EXPECT_EQ(s.FindPhase(a)->peak_rss_bytes, big);
  EXPECT_EQ(s.FindPhase(b)->peak_rss_bytes, 1.0);
  EXPECT_EQ(s.FindPhase(c)->peak_rss_bytes, 1.0);
}

// A chain of processes nested deeper than merging sorted lists pays for (each level would
// merge everything below it again) takes the other way, the max-add tree: every subtree's
// peak against a plain sweep of its tracks, in whole bytes (exact either way).
TEST(RunSummaryTest, SubtreePeaksOfADeepChainMatchAPlainSweep) {
  std::mt19937 rng(7);
  RunFixture f;
  constexpr int kDepth = 60;
  f.run.info.end_ns = Sec(100);
  model::PhaseId parent = f.AddPhase(0, "run", "run", 0, Sec(100));
  for (int i = 0; i < kDepth; ++i) {
    std::vector<Sample> rss;
    TimeNs t = Sec(i);
    for (int j = 0; j < 50; ++j) {
      rss.push_back({t, static_cast<double>(4096 * (1 + rng() % 1000))});
      t += static_cast<TimeNs>(1 + rng() % 3) * kNsPerSec / 8;
    }
    parent = AddRssProcess(f, parent, Sec(i), Sec(100), 10 + i, std::move(rss));
  }
  const model::Run& run = f.Build();
  RunSummary s = SummarizeRun(run);
  for (const model::Phase& p : run.phases) {
    std::vector<RssTrack> tracks;
    for (model::PhaseId id = p.id; id != 0;) {
      const model::Resource* r = run.ProcessResourceOf(id);
      if (r != nullptr) tracks.push_back({run.FindSeries(r->id, metric::kProcRss)->samples, s.FindPhase(id)->end_ns});
      const auto& kids = run.ChildrenOf(id);
      id = kids.empty() ? 0 : kids.front();
    }
    EXPECT_EQ(s.FindPhase(p.id)->peak_rss_bytes, PeakOfSum(tracks)) << "phase " << p.id;
  }
}

// A deep chain of processes with many samples: every process counted, the peak that of the
// deepest moment. It must not take depth x samples: bench-check's summary_deep_chain
// (bench/analysis_shapes_bench.cpp, the same shape) says how fast; tests assert no speed.
TEST(RunSummaryTest, ADeepChainWithManySamples) {
  RunFixture f;
  constexpr int kDepth = 2000;
  constexpr int kSamples = 200;  // per process: 400k samples in all
  f.run.info.end_ns = Sec(1000);
  model::PhaseId parent = f.AddPhase(0, "run", "run", 0, Sec(1000));
  for (int i = 0; i < kDepth; ++i) {
    std::vector<Sample> rss;
    for (int j = 0; j < kSamples; ++j) rss.push_back({Sec(i * 0.1 + j * 0.01), static_cast<double>(1 + (j % 7))});
    parent = AddRssProcess(f, parent, Sec(i * 0.1), Sec(1000), 10 + i, std::move(rss));
  }
  const model::Run& run = f.Build();
  RunSummary s = SummarizeRun(run);
  // By hand: each process's last sample is 1 + 199 % 7 = 4 bytes, held to its end (1000 s),
  // so once the last one has sampled (202 s) all 2,000 hold 8,000 bytes at once; none ever
  // holds more than 7.
  EXPECT_GE(s.phases[0].peak_rss_bytes, 4.0 * kDepth);
  EXPECT_LE(s.phases[0].peak_rss_bytes, 7.0 * kDepth);
  EXPECT_EQ(s.phases[0].process_count, kDepth);
}

}  // namespace
}  // namespace grademl::analysis
