#include "analysis/bottlenecks.h"

#include <gtest/gtest.h>

#include <cmath>

#include "run_fixture.h"

namespace grademl::analysis {
namespace {

namespace metric = model::metric;
using model::ResourceKind;
using model::Sample;
using testing::RunFixture;
using testing::Sec;

using testing::kEps;
constexpr int kCpu = static_cast<int>(BoundResource::kCpu);
constexpr int kMemory = static_cast<int>(BoundResource::kMemory);
constexpr int kDisk = static_cast<int>(BoundResource::kDisk);
constexpr int kNet = static_cast<int>(BoundResource::kNet);
constexpr int kGpu = static_cast<int>(BoundResource::kGpu);

// How fast each counter of a process rises, per second.
struct Rates {
  double run = 0, wait = 0, disk_wait = 0, user = 0, system = 0, minflt = 0, majflt = 0, rb = 0, wb = 0, rc = 0,
         wc = 0, net_wait = 0;
};

// Samples of a counter rising at `rate` from `start`, every `step` seconds up to `end`.
std::vector<Sample> Rising(double start, double end, double rate, double step = 1.0) {
  std::vector<Sample> out;
  int n = std::max(1, static_cast<int>(std::lround((end - start) / step)));
  for (int k = 0; k <= n; ++k) {
    double t = start + (end - start) * k / n;
    out.push_back({Sec(t), rate * (t - start)});
  }
  return out;
}

// Which series a test process gets.
enum class Series { kAll, kNoSched };

// A process phase with its resource and counters rising at constant rates.
model::PhaseId AddProc(RunFixture& f, model::PhaseId parent, int32_t pid, double start, double end, const Rates& r,
                       Series which = Series::kAll, double step = 1.0) {
  model::PhaseId id = f.AddProcess(parent, "p" + std::to_string(pid), Sec(start), Sec(end), pid);
  model::ResourceId res = f.last_process_resource;
  if (which == Series::kAll) {
    f.Counter(res, metric::kProcSchedRun, Rising(start, end, r.run, step));
    f.Counter(res, metric::kProcSchedWait, Rising(start, end, r.wait, step));
    f.Counter(res, metric::kProcStateDiskWait, Rising(start, end, r.disk_wait, step));
    f.Counter(res, metric::kProcMinorFaults, Rising(start, end, r.minflt, step));
    f.Counter(res, metric::kProcMajorFaults, Rising(start, end, r.majflt, step));
    if (r.net_wait > 0) f.Counter(res, metric::kProcStateNetWait, Rising(start, end, r.net_wait, step));
  }
  f.Counter(res, metric::kProcCpuUser, Rising(start, end, r.user, step));
  f.Counter(res, metric::kProcCpuSystem, Rising(start, end, r.system, step));
  f.Counter(res, metric::kProcReadBytes, Rising(start, end, r.rb, step));
  f.Counter(res, metric::kProcWriteBytes, Rising(start, end, r.wb, step));
  f.Counter(res, metric::kProcReadChars, Rising(start, end, r.rc, step));
  f.Counter(res, metric::kProcWriteChars, Rising(start, end, r.wc, step));
  return id;
}

// A host "node1" with `cores` cores, each busy `busy` of the time, over [0, end].
void AddHostCpu(RunFixture& f, int cores, double busy, double end) {
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto cpu = f.AddResource(host, ResourceKind::kCpu, "cpu");
  for (int i = 0; i < cores; ++i) {
    auto core = f.AddResource(cpu, ResourceKind::kCore, "cpu" + std::to_string(i));
    f.Counter(core, metric::kCoreUser, Rising(0, end, busy), 1);
    f.Counter(core, metric::kCoreSystem, Rising(0, end, 0), 1);
    f.Counter(core, metric::kCoreIowait, Rising(0, end, 0), 1);
    f.Counter(core, metric::kCoreSteal, Rising(0, end, 0), 1);
    f.Counter(core, metric::kCoreIdle, Rising(0, end, 1 - busy), 1);
  }
}

// Every category adds up to the duration, and saturated time is part of bound time.
void ExpectConsistent(const Bottlenecks& b) {
  for (const PhaseBottlenecks& p : b.phases) {
    double sum = p.waiting_child_s + p.waiting_s + p.unknown_s;
    for (int r = 0; r < kBoundResourceCount; ++r) {
      sum += p.bound_s[r];
      EXPECT_LE(p.saturated_s[r], p.bound_s[r] + kEps);
    }
    EXPECT_NEAR(sum, p.duration_s, 1e-6) << "phase " << p.phase;
  }
}

TEST(BottlenecksTest, ResourceNames) {
  EXPECT_EQ(BoundResourceName(BoundResource::kCpu), "cpu");
  EXPECT_EQ(BoundResourceName(BoundResource::kMemory), "memory");
  EXPECT_EQ(BoundResourceName(BoundResource::kDisk), "disk");
  EXPECT_EQ(BoundResourceName(BoundResource::kNet), "network");
  EXPECT_EQ(BoundResourceName(BoundResource::kGpu), "gpu");
}

TEST(BottlenecksTest, ACpuBurnerIsCpuBoundForItsWholeDuration) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {.run = 1, .user = 1});
  Bottlenecks b = FindBottlenecks(f.Build());
  ASSERT_EQ(b.phases.size(), 2u);
  const PhaseBottlenecks* bp = b.Find(p);
  ASSERT_NE(bp, nullptr);
  EXPECT_NEAR(bp->duration_s, 4, kEps);
  EXPECT_NEAR(bp->bound_s[kCpu], 4, kEps);
  EXPECT_NEAR(bp->saturated_s[kCpu], 0, kEps);  // no host series: never saturated
  EXPECT_NEAR(bp->waiting_s, 0, kEps);
  EXPECT_EQ(bp->main_resource(), BoundResource::kCpu);
  EXPECT_NEAR(b.Find(root)->bound_s[kCpu], 4, kEps);  // the run through its one process
  ExpectConsistent(b);
}

TEST(BottlenecksTest, ADiskWriterInDiskWaitIsDiskBound) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {.run = 0.1, .disk_wait = 0.9, .user = 0.1, .wb = 50e6});
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto disk = f.AddResource(host, ResourceKind::kDisk, "sda");
  f.Counter(disk, metric::kDiskBusy, Rising(0, 4, 0.5), 1);  // the disk is half busy: a local bound
  Bottlenecks b = FindBottlenecks(f.Build());
  const PhaseBottlenecks* bp = b.Find(p);
  EXPECT_NEAR(bp->bound_s[kDisk], 3.6, kEps);
  EXPECT_NEAR(bp->saturated_s[kDisk], 0, kEps);
  EXPECT_NEAR(bp->bound_s[kCpu], 0.4, kEps);
  EXPECT_EQ(bp->main_resource(), BoundResource::kDisk);
  ExpectConsistent(b);
}

TEST(BottlenecksTest, StorageTrafficWhileAsleepIsADiskWaitTheSamplingMissed) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {.run = 0.25, .system = 0.25, .wb = 50e6});
  auto q = AddProc(f, root, 11, 0, 4, {.run = 0.25, .system = 0.25, .wb = 0.5e6});  // a trickle: waiting
  Bottlenecks b = FindBottlenecks(f.Build());
  // Asleep 3 s while its own writes move: disk; its 1 s of system CPU is the write path's.
  EXPECT_NEAR(b.Find(p)->bound_s[kDisk], 4, kEps);
  EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 0, kEps);
  EXPECT_NEAR(b.Find(q)->waiting_s, 3, kEps);
  EXPECT_NEAR(b.Find(q)->bound_s[kCpu], 1, kEps);  // 0.5 MB/s justifies no kernel time
  EXPECT_NEAR(b.Find(q)->cpu_system_s, 1, kEps);
}

// The stage: buffered 1 MiB writes, each fsync'ed, with 74% of the time in system
// CPU inside the write path and the rest in disk wait. The kernel worked for the disk.
TEST(BottlenecksTest, SystemTimeSpentWritingToStorageIsDisk) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {.run = 0.76, .disk_wait = 0.24, .user = 0.02, .system = 0.74, .wb = 100e6},
                   Series::kAll, 0.1);
  Bottlenecks b = FindBottlenecks(f.Build());
  const PhaseBottlenecks* bp = b.Find(p);
  // On a CPU 3.04 s: 74/76 of it system time, justified by 100 MB/s (up to 2 s per second).
  EXPECT_NEAR(bp->bound_s[kDisk], 0.96 + 3.04 * 0.74 / 0.76, 1e-6);
  EXPECT_NEAR(bp->bound_s[kCpu], 3.04 * 0.02 / 0.76, 1e-6);  // the user time
  EXPECT_NEAR(bp->cpu_system_s, 0, 1e-6);
  EXPECT_EQ(bp->main_resource(), BoundResource::kDisk);
  ExpectConsistent(b);
}

// System time is the disk's only up to what the bytes justify (io_bytes_per_kernel_s): a
// process making system calls all the time while it writes a 2 MB/s log is CPU-bound.
TEST(BottlenecksTest, StorageBytesJustifyOnlySoMuchSystemTime) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {.run = 1, .user = 0.1, .system = 0.9, .wb = 2e6});
  auto q = AddProc(f, root, 11, 0, 4, {.run = 1, .user = 0.4, .system = 0.6});  // no I/O at all
  Bottlenecks b = FindBottlenecks(f.Build());
  // 2 MB/s / 50 MB per CPU-second = 0.04 s of system time per second.
  EXPECT_NEAR(b.Find(p)->bound_s[kDisk], 0.16, 1e-9);
  EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 3.84, 1e-9);
  EXPECT_NEAR(b.Find(p)->cpu_system_s, 4 * 0.86, 1e-9);
  EXPECT_EQ(b.Find(p)->main_resource(), BoundResource::kCpu);
  EXPECT_NEAR(b.Find(q)->bound_s[kCpu], 4, kEps);
  EXPECT_NEAR(b.Find(q)->cpu_system_s, 2.4, 1e-9);
  BottleneckOptions stingy;
  stingy.io_bytes_per_kernel_s = 1e9;
  EXPECT_NEAR(FindBottlenecks(f.run, stingy).Find(p)->bound_s[kDisk], 4 * 2e6 / 1e9, 1e-9);
  ExpectConsistent(b);
}

// Socket I/O: bytes through read()/write() beyond storage, while the host's network moves
// as much, justify system time as network; the same bytes with a quiet network (a pipe, a
// cached file) do not.
TEST(BottlenecksTest, SystemTimeMovingSocketBytesIsNetwork) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  // On a CPU 90% of the time, asleep on its socket the rest.
  auto p = AddProc(f, root, 10, 0, 2, {.run = 0.9, .user = 0.18, .system = 0.72, .rc = 100e6, .net_wait = 0.1});
  auto q = AddProc(f, root, 11, 2, 4, {.run = 1, .user = 0.2, .system = 0.8, .rc = 100e6});
  // The network moves, but the process never waits on a socket: reading cached files.
  auto c = AddProc(f, root, 12, 0, 2, {.run = 1, .user = 0.2, .system = 0.8, .rc = 100e6});
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto eth = f.AddResource(host, ResourceKind::kNet, "eth0");
  f.Counter(eth, metric::kNetRxBytes, {{Sec(0), 0}, {Sec(2), 200e6}, {Sec(4), 200e6}});
  f.Counter(eth, metric::kNetTxBytes, {{Sec(0), 0}, {Sec(4), 0}});
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->bound_s[kNet], 0.2 + 1.8 * 0.8, 1e-9);
  EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 1.8 * 0.2, 1e-9);
  EXPECT_NEAR(b.Find(c)->bound_s[kNet], 0, 1e-9);
  EXPECT_NEAR(b.Find(c)->bound_s[kCpu], 2, 1e-9);
  EXPECT_NEAR(b.Find(q)->bound_s[kNet], 0, 1e-9);
  EXPECT_NEAR(b.Find(q)->bound_s[kCpu], 2, 1e-9);
  EXPECT_NEAR(b.Find(q)->cpu_system_s, 1.6, 1e-9);
  ExpectConsistent(b);
}

TEST(BottlenecksTest, ASaturatedDiskIsAGlobalBound) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {.disk_wait = 1});
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto d1 = f.AddResource(host, ResourceKind::kDisk, "sda");
  auto d2 = f.AddResource(host, ResourceKind::kDisk, "sdb");
  f.Counter(d1, metric::kDiskBusy, Rising(0, 4, 0.1), 1);
  f.Counter(d2, metric::kDiskBusy, Rising(0, 4, 0.98), 1);  // the busiest disk counts
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->bound_s[kDisk], 4, kEps);
  EXPECT_NEAR(b.Find(p)->saturated_s[kDisk], 4, kEps);
}

TEST(BottlenecksTest, ASleeperWaits) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {});
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->waiting_s, 4, kEps);
  EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 0, kEps);
  EXPECT_EQ(b.Find(p)->main_resource(), std::nullopt);
  EXPECT_NEAR(b.Find(root)->waiting_s, 4, kEps);
}

TEST(BottlenecksTest, AParentShellWaitingOnABurningChildIsCpuBoundThroughIt) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto sh = AddProc(f, root, 10, 0, 4, {});
  auto child = AddProc(f, sh, 11, 1, 3, {.run = 1, .user = 1});
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(child)->bound_s[kCpu], 2, kEps);
  const PhaseBottlenecks* s = b.Find(sh);
  EXPECT_NEAR(s->bound_s[kCpu], 2, kEps);  // while the child ran
  EXPECT_NEAR(s->waiting_s, 2, kEps);      // before and after it
  EXPECT_NEAR(s->waiting_child_s, 0, kEps);
  EXPECT_NEAR(b.Find(root)->bound_s[kCpu], 2, kEps);
  ExpectConsistent(b);
}

TEST(BottlenecksTest, WaitingOnASleepingChildIsWaitingChild) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto sh = AddProc(f, root, 10, 0, 4, {});
  auto child = AddProc(f, sh, 11, 0, 4, {});
  auto grandchild = AddProc(f, child, 12, 2, 4, {.run = 1, .user = 1});
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(grandchild)->bound_s[kCpu], 2, kEps);
  EXPECT_NEAR(b.Find(child)->bound_s[kCpu], 2, kEps);
  EXPECT_NEAR(b.Find(child)->waiting_s, 2, kEps);
  // The shell's child waited for 2 s, then was CPU-bound through the grandchild.
  EXPECT_NEAR(b.Find(sh)->waiting_child_s, 2, kEps);
  EXPECT_NEAR(b.Find(sh)->bound_s[kCpu], 2, kEps);
  EXPECT_NEAR(b.Find(sh)->waiting_s, 0, kEps);
  ExpectConsistent(b);
}

TEST(BottlenecksTest, TwoChildrenShareTheirParentsWaitEqually) {
  RunFixture f;
  f.run.info.end_ns = Sec(2);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(2));
  auto sh = AddProc(f, root, 10, 0, 2, {});
  AddProc(f, sh, 11, 0, 2, {.run = 1, .user = 1});
  AddProc(f, sh, 12, 0, 2, {.disk_wait = 1});
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(sh)->bound_s[kCpu], 1, kEps);
  EXPECT_NEAR(b.Find(sh)->bound_s[kDisk], 1, kEps);
  ExpectConsistent(b);
}

TEST(BottlenecksTest, CpuIsSaturatedWhenTheHostIsFullAndLocalOtherwise) {
  for (double busy : {0.5, 1.0}) {
    RunFixture f;
    f.run.info.end_ns = Sec(4);
    auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
    auto p = AddProc(f, root, 10, 0, 4, {.run = 0.5, .wait = 0.5, .user = 0.5});
    AddHostCpu(f, 2, busy, 4);
    Bottlenecks b = FindBottlenecks(f.Build());
    const PhaseBottlenecks* bp = b.Find(p);
    EXPECT_NEAR(bp->bound_s[kCpu], 4, kEps) << busy;  // 2 s on a CPU + 2 s waiting for one
    EXPECT_NEAR(bp->saturated_s[kCpu], busy == 1.0 ? 4 : 0, kEps) << busy;
    ExpectConsistent(b);
  }
}

TEST(BottlenecksTest, PageFaultDominatedCpuIsMemoryBound) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  // 500k faults per CPU-second (rates are per second), far over the threshold: the system
  // time (80%) is memory, the user time stays CPU.
  auto p = AddProc(f, root, 10, 0, 4, {.run = 1, .user = 0.2, .system = 0.8, .minflt = 500000});
  auto q = AddProc(f, root, 11, 0, 4, {.run = 1, .user = 0.2, .system = 0.8, .minflt = 1000});  // few faults
  // Like `import torch`: many faults per CPU-second, but most of the time is user time (the
  // interpreter running the imported code). Memory is never more than the system time.
  auto v = AddProc(f, root, 12, 0, 4, {.run = 1, .user = 0.8, .system = 0.2, .minflt = 75000});
  auto k = AddProc(f, root, 13, 0, 4, {.run = 1, .user = 0.1, .system = 0.9, .minflt = 60000});
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->bound_s[kMemory], 3.2, kEps);
  EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 0.8, kEps);
  EXPECT_NEAR(b.Find(p)->cpu_system_s, 0, kEps);
  EXPECT_NEAR(b.Find(p)->saturated_s[kMemory], 0, kEps);
  EXPECT_EQ(b.Find(p)->main_resource(), BoundResource::kMemory);
  EXPECT_NEAR(b.Find(q)->bound_s[kCpu], 4, kEps);
  EXPECT_NEAR(b.Find(q)->cpu_system_s, 3.2, kEps);
  EXPECT_NEAR(b.Find(v)->bound_s[kMemory], 0.8, kEps);
  EXPECT_NEAR(b.Find(v)->bound_s[kCpu], 3.2, kEps);
  EXPECT_EQ(b.Find(v)->main_resource(), BoundResource::kCpu);
  EXPECT_NEAR(b.Find(k)->bound_s[kMemory], 3.6, kEps);
  ExpectConsistent(b);
}

// CPU times come in 10 ms ticks: a process on a CPU 30% of each 100 ms interval, all of it
// in the kernel faulting pages, may see the 90 ms of system time of three intervals counted
// in one of them and none in the two others. Its system share is read over neighbouring intervals, so all of its time
// on a CPU is memory, not a third of it.
TEST(BottlenecksTest, TheSystemShareIsReadAcrossClockTicks) {
  RunFixture f;
  f.run.info.end_ns = Sec(3);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(3));
  auto p = f.AddProcess(root, "toucher", 0, Sec(3), 10);
  auto res = f.last_process_resource;
  std::vector<Sample> run, sys, user, faults, zero;
  for (int k = 0; k <= 30; ++k) {
    double t = 0.1 * k;
    run.push_back({Sec(t), 0.3 * t});
    sys.push_back({Sec(t), 0.09 * (k / 3)});  // +0.09 every third sample
    user.push_back({Sec(t), 0});
    faults.push_back({Sec(t), 60000 * t});
    zero.push_back({Sec(t), 0});
  }
  f.Counter(res, metric::kProcSchedRun, run);
  f.Counter(res, metric::kProcSchedWait, zero);
  f.Counter(res, metric::kProcStateDiskWait, zero);
  f.Counter(res, metric::kProcCpuSystem, sys);
  f.Counter(res, metric::kProcCpuUser, user);
  f.Counter(res, metric::kProcMinorFaults, faults);
  f.Counter(res, metric::kProcMajorFaults, zero);
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->bound_s[kMemory], 0.9, 1e-6);
  EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 0, 1e-6);
  ExpectConsistent(b);
}

TEST(BottlenecksTest, PagingUnderFullMemoryIsAMemoryBound) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {.disk_wait = 1, .majflt = 100});
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto mem = f.AddResource(host, ResourceKind::kMemory, "memory");
  f.Gauge(mem, metric::kMemUsed, {{Sec(0), 99}, {Sec(4), 99}}, 100);
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->bound_s[kMemory], 4, kEps);
  EXPECT_NEAR(b.Find(p)->saturated_s[kMemory], 4, kEps);
  EXPECT_NEAR(b.Find(p)->bound_s[kDisk], 0, kEps);
}

TEST(BottlenecksTest, APhaseInsideAProcessGetsItsOwnInterval) {
  RunFixture f;
  f.run.info.end_ns = Sec(2);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(2));
  // Burns during [0, 1], sleeps during [1, 2]: sampled at 0, 1, 2.
  auto p = f.AddProcess(root, "python", 0, Sec(2), 10);
  auto res = f.last_process_resource;
  f.Counter(res, metric::kProcSchedRun, {{0, 0}, {Sec(1), 1}, {Sec(2), 1}});
  f.Counter(res, metric::kProcCpuUser, {{0, 0}, {Sec(1), 1}, {Sec(2), 1}});
  auto epoch = f.AddPhase(p, "epoch", "run/process/epoch", Sec(0.5), Sec(1.5), 10);
  auto inner = f.AddPhase(epoch, "forward", "run/process/epoch/forward", Sec(1.25), Sec(1.5), 10);
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(epoch)->duration_s, 1, kEps);
  EXPECT_NEAR(b.Find(epoch)->bound_s[kCpu], 0.5, kEps);
  EXPECT_NEAR(b.Find(epoch)->waiting_s, 0.5, kEps);
  EXPECT_NEAR(b.Find(inner)->waiting_s, 0.25, kEps);
  EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 1, kEps);
  ExpectConsistent(b);
}

TEST(BottlenecksTest, ALogPhaseUnderAStepUsesTheProcessOfItsPid) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto step = f.AddPhase(root, "train", "run/step", 0, Sec(4));
  AddProc(f, step, 10, 0, 4, {.run = 1, .user = 1});
  auto epoch = f.AddPhase(step, "epoch 1", "run/step/epoch", Sec(1), Sec(3), 10);
  auto untied = f.AddPhase(step, "note", "run/step/note", Sec(1), Sec(2));  // no pid: the step's processes
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(epoch)->bound_s[kCpu], 2, kEps);
  EXPECT_NEAR(b.Find(untied)->bound_s[kCpu], 1, kEps);
  EXPECT_NEAR(b.Find(step)->bound_s[kCpu], 4, kEps);
  ExpectConsistent(b);
}

TEST(BottlenecksTest, ACompositePhaseWeighsItsProcessesEquallyPerSlice) {
  RunFixture f;
  f.run.info.end_ns = Sec(5);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(5));
  auto a = f.AddPhase(root, "a", "run/step", 0, Sec(4));
  auto c = f.AddPhase(root, "c", "run/step", 0, Sec(2));
  AddProc(f, a, 10, 0, 4, {.run = 1, .user = 1});
  AddProc(f, c, 11, 0, 2, {});
  Bottlenecks b = FindBottlenecks(f.Build());
  const PhaseBottlenecks* r = b.Find(root);
  // [0, 2]: one burner and one sleeper; [2, 4]: the burner alone; [4, 5]: no process.
  EXPECT_NEAR(r->bound_s[kCpu], 3, kEps);
  EXPECT_NEAR(r->waiting_s, 1, kEps);
  EXPECT_NEAR(r->unknown_s, 1, kEps);
  EXPECT_NEAR(b.Find(a)->bound_s[kCpu], 4, kEps);
  EXPECT_NEAR(b.Find(c)->waiting_s, 2, kEps);
  ExpectConsistent(b);
}

TEST(BottlenecksTest, WithoutSchedSeriesTheCpuRateDecides) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto burner = AddProc(f, root, 10, 0, 4, {.user = 1}, Series::kNoSched);
  auto writer = AddProc(f, root, 11, 0, 4, {.user = 0.25, .wb = 20e6}, Series::kNoSched);
  auto sleeper = AddProc(f, root, 12, 0, 4, {.user = 0.25}, Series::kNoSched);
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(burner)->bound_s[kCpu], 4, kEps);
  EXPECT_NEAR(b.Find(writer)->bound_s[kCpu], 1, kEps);
  EXPECT_NEAR(b.Find(writer)->bound_s[kDisk], 3, kEps);
  EXPECT_NEAR(b.Find(sleeper)->bound_s[kCpu], 1, kEps);
  EXPECT_NEAR(b.Find(sleeper)->waiting_s, 3, kEps);
  ExpectConsistent(b);
}

TEST(BottlenecksTest, OtherThreadsComputingWhileTheMainThreadSleepsIsCpu) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {.run = 0.25, .user = 2.25});
  auto q = AddProc(f, root, 11, 0, 4, {.run = 0.25, .user = 0.5});  // other threads: 0.25 core
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 4, kEps);
  EXPECT_NEAR(b.Find(q)->bound_s[kCpu], 1, kEps);
  EXPECT_NEAR(b.Find(q)->waiting_s, 3, kEps);
}

TEST(BottlenecksTest, SleepingWhileAGpuIsBusyIsGpuBound) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {.run = 0.5, .user = 0.5});
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto gpu = f.AddResource(host, ResourceKind::kGpu, "gpu0");
  f.Gauge(gpu, metric::kGpuUtilization, {{0, 0.2}, {Sec(2), 0.99}, {Sec(4), 0.99}}, 1);
  Bottlenecks b = FindBottlenecks(f.Build());
  const PhaseBottlenecks* bp = b.Find(p);
  EXPECT_NEAR(bp->bound_s[kCpu], 2, kEps);
  EXPECT_NEAR(bp->bound_s[kGpu], 1, kEps);  // asleep half of [2, 4], with the GPU full
  EXPECT_NEAR(bp->saturated_s[kGpu], 1, kEps);
  EXPECT_NEAR(bp->waiting_s, 1, kEps);      // asleep half of [0, 2], with the GPU at 20%
  ExpectConsistent(b);
}

TEST(BottlenecksTest, SleepingOnSocketsWhileTheNetworkMovesIsNetworkBound) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {.rc = 50e6});
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto eth = f.AddResource(host, ResourceKind::kNet, "eth0");
  f.Counter(eth, metric::kNetRxBytes, Rising(0, 4, 120e6), 125e6);  // 96% of a 1 Gbit/s link
  f.Counter(eth, metric::kNetTxBytes, Rising(0, 4, 1e6), 125e6);
  auto lo = f.AddResource(host, ResourceKind::kNet, "lo");
  f.Counter(lo, metric::kNetRxBytes, Rising(0, 4, 1e9));
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->bound_s[kNet], 4, kEps);
  EXPECT_NEAR(b.Find(p)->saturated_s[kNet], 4, kEps);
  ExpectConsistent(b);
}

// A socket to a local service is waited on like a remote one.
TEST(BottlenecksTest, LoopbackTrafficIsTheNetworkToo) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {.rc = 50e6});
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto lo = f.AddResource(host, ResourceKind::kNet, "lo");
  f.Counter(lo, metric::kNetRxBytes, Rising(0, 4, 50e6));
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->bound_s[kNet], 4, kEps);
  EXPECT_NEAR(b.Find(p)->saturated_s[kNet], 0, kEps);  // loopback has no speed: never saturated
  EXPECT_NEAR(b.Find(p)->waiting_s, 0, kEps);
}

TEST(BottlenecksTest, TimeAfterTheLastSampleIsUnknown) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 3, {.run = 1, .user = 1});
  f.run.phases.back().end_ns = Sec(4);  // the process lived on, unsampled
  auto bare = f.AddProcess(root, "bare", Sec(1), Sec(2), 11);  // no series at all
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 3, kEps);
  EXPECT_NEAR(b.Find(p)->unknown_s, 1, kEps);
  EXPECT_NEAR(b.Find(bare)->unknown_s, 1, kEps);
  ExpectConsistent(b);
}

TEST(BottlenecksTest, CountersCountFromTheProcessStart) {
  // Found 0.5 s after it started, the process had already used 0.5 s of CPU.
  RunFixture f;
  f.run.info.end_ns = Sec(2);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(2));
  auto p = f.AddProcess(root, "late", 0, Sec(2), 10);
  f.Counter(f.last_process_resource, metric::kProcSchedRun, {{Sec(0.5), 0.5}, {Sec(2), 2}});
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 2, kEps);
}

TEST(BottlenecksTest, OpenPhasesEndAtTheRunsEnd) {
  RunFixture f;
  f.run.info.end_ns = 0;  // grademl was killed
  auto root = f.AddPhase(0, "run", "run", 0, 0);
  auto p = AddProc(f, root, 10, 0, 3, {.run = 1, .user = 1});
  f.run.phases.back().end_ns = 0;
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->duration_s, 3, kEps);
  EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 3, kEps);
  EXPECT_NEAR(b.Find(root)->bound_s[kCpu], 3, kEps);
  EXPECT_EQ(b.Find(12345), nullptr);
}

TEST(BottlenecksTest, EmptyRunsAndPhasesWithoutProcesses) {
  RunFixture f;
  EXPECT_TRUE(FindBottlenecks(f.Build()).phases.empty());
  RunFixture g;
  auto root = g.AddPhase(0, "run", "run", 0, Sec(2));
  auto x = g.AddPhase(root, "x", "run/x", 0, Sec(1));
  Bottlenecks b = FindBottlenecks(g.Build());
  EXPECT_NEAR(b.Find(root)->unknown_s, 2, kEps);
  EXPECT_NEAR(b.Find(x)->unknown_s, 1, kEps);
}

TEST(BottlenecksTest, IrregularSamplingMatchesRegularSampling) {
  // The same burner sampled every 0.1 s and every 0.7 s gives the same answers.
  for (double step : {0.1, 0.7}) {
    RunFixture f;
    f.run.info.end_ns = Sec(7);
    auto root = f.AddPhase(0, "run", "run", 0, Sec(7));
    auto p = AddProc(f, root, 10, 0, 7, {.run = 0.75, .user = 0.75}, Series::kAll, step);
    auto it = f.AddPhase(p, "it", "run/process/it", Sec(1.05), Sec(3.3), 10);
    Bottlenecks b = FindBottlenecks(f.Build());
    EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 5.25, 1e-6) << step;
    EXPECT_NEAR(b.Find(it)->bound_s[kCpu], 0.75 * 2.25, 1e-6) << step;
    EXPECT_NEAR(b.Find(it)->waiting_s, 0.25 * 2.25, 1e-6) << step;
  }
}

// Asleep on a socket (state.net_wait, from the wait channel): network-bound, even when the
// socket's bytes do not show in read_chars (recv() is not counted there).
TEST(BottlenecksTest, SocketWaitIsTheNetwork) {
  RunFixture f;
  f.run.info.end_ns = Sec(4);
  auto root = f.AddPhase(0, "run", "run", 0, Sec(4));
  auto p = AddProc(f, root, 10, 0, 4, {.run = 0.1, .user = 0.1, .net_wait = 0.75});
  Bottlenecks b = FindBottlenecks(f.Build());
  EXPECT_NEAR(b.Find(p)->bound_s[kNet], 3, kEps);
  EXPECT_NEAR(b.Find(p)->bound_s[kCpu], 0.4, kEps);
  EXPECT_NEAR(b.Find(p)->waiting_s, 0.6, kEps);
  EXPECT_EQ(b.Find(p)->main_resource(), BoundResource::kNet);
  ExpectConsistent(b);
}

}  // namespace
}  // namespace grademl::analysis
