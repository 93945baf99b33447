#include "collect/host_monitor.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "model/metric_names.h"

namespace grademl::collect {
namespace {

namespace fs = std::filesystem;
using model::Resource;
using model::ResourceKind;
using model::RunBuilder;
using model::RunDelta;
using model::Sample;
using model::SeriesInfo;
using model::SeriesKind;

const std::string kData = GRADEML_TESTDATA_DIR;
const std::string kSys = kData + "/sys/host_a";

// A fixture /proc tree copied to a temporary directory. HostMonitor holds its files open, so
// a later snapshot is written over the same files (same inodes), as the kernel would.
class ProcTree {
 public:
  explicit ProcTree(const std::string& snapshot) {
    std::string templ = (fs::temp_directory_path() / "grademl_host_XXXXXX").string();
    GRADEML_CHECK(::mkdtemp(templ.data()) != nullptr);
    root_ = templ;
    fs::copy(kData + "/proc/" + snapshot, root_, fs::copy_options::recursive);
  }
  ~ProcTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  const std::string& root() const { return root_; }

  // Overwrites stat, meminfo, diskstats and net/dev in place with another snapshot's.
  void Become(const std::string& snapshot) {
    for (const char* name : {"stat", "meminfo", "diskstats", "net/dev"}) {
      std::ifstream in(kData + "/proc/" + snapshot + "/" + name, std::ios::binary);
      std::stringstream contents;
      contents << in.rdbuf();
      std::ofstream out(root_ + "/" + name, std::ios::binary | std::ios::trunc);
      out << contents.str();
    }
  }

 private:
  std::string root_;
};

// Lookups over everything the builder handed out so far.
class Collected {
 public:
  void Add(RunDelta delta) {
    for (auto& r : delta.resources) resources_.push_back(r);
    for (auto& s : delta.series) series_.push_back(s);
    last_samples_.clear();
    for (auto& s : delta.samples) last_samples_[s.series].push_back(s.sample);
  }

  const Resource* Res(std::string_view name) const {
    const Resource* found = nullptr;
    for (const auto& r : resources_) {
      if (r.name != name) continue;
      EXPECT_EQ(found, nullptr) << "two resources named " << name;
      found = &r;
    }
    return found;
  }
  const SeriesInfo* Ser(std::string_view resource, std::string_view name) const {
    const Resource* r = Res(resource);
    if (r == nullptr) return nullptr;
    for (const auto& s : series_)
      if (s.resource == r->id && s.name == name) return &s;
    return nullptr;
  }
  // The samples of the last delta added, of one series.
  std::vector<Sample> Last(std::string_view resource, std::string_view name) const {
    const SeriesInfo* s = Ser(resource, name);
    if (s == nullptr) {
      ADD_FAILURE() << "no series " << resource << "/" << name;
      return {};
    }
    auto it = last_samples_.find(s->id);
    return it == last_samples_.end() ? std::vector<Sample>{} : it->second;
  }
  // The single sample of the last delta at time t; NaN (and a failure) otherwise.
  double At(std::string_view resource, std::string_view name, TimeNs t) const {
    std::vector<Sample> samples = Last(resource, name);
    if (samples.size() != 1 || samples[0].t != t) {
      ADD_FAILURE() << resource << "/" << name << ": expected one sample at " << t << ", got " << samples.size();
      return std::nan("");
    }
    return samples[0].v;
  }
  std::vector<const Resource*> OfKind(ResourceKind kind) const {
    std::vector<const Resource*> out;
    for (const auto& r : resources_)
      if (r.kind == kind) out.push_back(&r);
    return out;
  }
  const std::vector<SeriesInfo>& series() const { return series_; }

 private:
  std::vector<Resource> resources_;
  std::vector<SeriesInfo> series_;
  std::map<model::SeriesId, std::vector<Sample>> last_samples_;
};

std::vector<std::string> Names(const std::vector<const Resource*>& resources) {
  std::vector<std::string> out;
  for (const Resource* r : resources) out.push_back(r->name);
  return out;
}

double Tck() { return static_cast<double>(::sysconf(_SC_CLK_TCK)); }

class HostMonitorFixtureTest : public ::testing::Test {
 protected:
  HostMonitorFixtureTest() : builder_(model::RunInfo{}) {
    host_ = builder_.AddResource({.kind = ResourceKind::kHost, .name = "node1", .host = "node1"});
  }
  void Take() { got_.Add(builder_.TakeDelta(/*final=*/true)); }

  RunBuilder builder_;
  model::ResourceId host_ = 0;
  Collected got_;
};

TEST_F(HostMonitorFixtureTest, DeclaresTheResourceTree) {
  ProcTree proc("host_a");
  HostMonitor monitor(&builder_, host_, "node1", proc.root(), kSys);
  ASSERT_TRUE(monitor.Init().ok());
  Take();

  EXPECT_EQ(monitor.num_cores(), 4u);
  EXPECT_EQ(monitor.num_disks(), 3u);
  EXPECT_EQ(monitor.num_interfaces(), 4u);

  const Resource* cpu = got_.Res("cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->kind, ResourceKind::kCpu);
  EXPECT_EQ(cpu->parent, host_);
  EXPECT_EQ(cpu->host, "node1");
  EXPECT_EQ(Names(got_.OfKind(ResourceKind::kCore)), (std::vector<std::string>{"cpu0", "cpu1", "cpu2", "cpu3"}));
  for (const Resource* core : got_.OfKind(ResourceKind::kCore)) EXPECT_EQ(core->parent, cpu->id);

  const Resource* memory = got_.Res("memory");
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory->kind, ResourceKind::kMemory);
  EXPECT_EQ(memory->parent, host_);

  // Whole disks only, in /proc/diskstats order: no partitions, loop, zram, ram, or sr0
  // (in /sys/block but not in diskstats).
  EXPECT_EQ(Names(got_.OfKind(ResourceKind::kDisk)), (std::vector<std::string>{"nvme0n1", "sda", "vda"}));
  EXPECT_EQ(Names(got_.OfKind(ResourceKind::kNet)), (std::vector<std::string>{"lo", "eth0", "wlan0", "eth1"}));
  for (ResourceKind kind : {ResourceKind::kMemory, ResourceKind::kDisk, ResourceKind::kNet})
    for (const Resource* r : got_.OfKind(kind)) EXPECT_EQ(r->parent, host_) << r->name;
}

TEST_F(HostMonitorFixtureTest, DeclaresSeriesWithUnitsKindsAndCapacities) {
  namespace m = model::metric;
  ProcTree proc("host_a");
  HostMonitor monitor(&builder_, host_, "node1", proc.root(), kSys);
  ASSERT_TRUE(monitor.Init().ok());
  Take();
  // 4 cores x 5 + memory 2 + 3 disks x 3 + 4 interfaces x 2.
  EXPECT_EQ(got_.series().size(), 20u + 2u + 9u + 8u);

  auto expect = [&](std::string_view res, std::string_view name, std::string_view unit, SeriesKind kind,
                    double capacity) {
    const SeriesInfo* s = got_.Ser(res, name);
    ASSERT_NE(s, nullptr) << res << "/" << name;
    EXPECT_EQ(s->unit, unit) << res << "/" << name;
    EXPECT_EQ(s->kind, kind) << res << "/" << name;
    if (std::isnan(capacity)) {
      EXPECT_FALSE(s->has_capacity()) << res << "/" << name;
    } else {
      EXPECT_EQ(s->capacity, capacity) << res << "/" << name;
    }
  };
  for (const char* core : {"cpu0", "cpu1", "cpu2", "cpu3"})
    for (auto name : {m::kCoreUser, m::kCoreSystem, m::kCoreIowait, m::kCoreSteal, m::kCoreIdle})
      expect(core, name, m::kUnitSeconds, SeriesKind::kCounter, 1);
  const double mem_total = 16384000.0 * 1024;
  expect("memory", m::kMemUsed, m::kUnitBytes, SeriesKind::kGauge, mem_total);
  expect("memory", m::kMemAvailable, m::kUnitBytes, SeriesKind::kGauge, mem_total);
  for (const char* disk : {"nvme0n1", "sda", "vda"}) {
    expect(disk, m::kDiskReadBytes, m::kUnitBytes, SeriesKind::kCounter, model::kNoCapacity);
    expect(disk, m::kDiskWriteBytes, m::kUnitBytes, SeriesKind::kCounter, model::kNoCapacity);
    expect(disk, m::kDiskBusy, m::kUnitSeconds, SeriesKind::kCounter, 1);
  }
  // eth0: 10000 Mbit/s. lo: no speed file; wlan0: -1 (unknown); eth1: 0.
  expect("eth0", m::kNetRxBytes, m::kUnitBytes, SeriesKind::kCounter, 10000 * 125000.0);
  expect("eth0", m::kNetTxBytes, m::kUnitBytes, SeriesKind::kCounter, 10000 * 125000.0);
  for (const char* net : {"lo", "wlan0", "eth1"}) {
    expect(net, m::kNetRxBytes, m::kUnitBytes, SeriesKind::kCounter, model::kNoCapacity);
    expect(net, m::kNetTxBytes, m::kUnitBytes, SeriesKind::kCounter, model::kNoCapacity);
  }
}

TEST_F(HostMonitorFixtureTest, SamplesExactValues) {
  namespace m = model::metric;
  ProcTree proc("host_a");
  HostMonitor monitor(&builder_, host_, "node1", proc.root(), kSys);
  ASSERT_TRUE(monitor.Init().ok());
  const TimeNs t1 = 1'700'000'000'000'000'000;
  monitor.Sample(t1);
  Take();
  const double tck = Tck();

  // cpu0 1000 50 300 9000 20 5 15 2: user = user + nice, system = system + irq + softirq.
  EXPECT_DOUBLE_EQ(got_.At("cpu0", m::kCoreUser, t1), 1050 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu0", m::kCoreSystem, t1), 320 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu0", m::kCoreIowait, t1), 20 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu0", m::kCoreSteal, t1), 2 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu0", m::kCoreIdle, t1), 9000 / tck);
  // cpu3 1100 50 400 9000 40 10 15 3.
  EXPECT_DOUBLE_EQ(got_.At("cpu3", m::kCoreUser, t1), 1150 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu3", m::kCoreSystem, t1), 425 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu3", m::kCoreIowait, t1), 40 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu3", m::kCoreSteal, t1), 3 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu3", m::kCoreIdle, t1), 9000 / tck);

  EXPECT_EQ(got_.At("memory", m::kMemUsed, t1), (16384000.0 - 12000000.0) * 1024);
  EXPECT_EQ(got_.At("memory", m::kMemAvailable, t1), 12000000.0 * 1024);

  EXPECT_EQ(got_.At("nvme0n1", m::kDiskReadBytes, t1), 400000.0 * 512);
  EXPECT_EQ(got_.At("nvme0n1", m::kDiskWriteBytes, t1), 800000.0 * 512);
  EXPECT_DOUBLE_EQ(got_.At("nvme0n1", m::kDiskBusy, t1), 4.5);
  EXPECT_EQ(got_.At("sda", m::kDiskReadBytes, t1), 3232026.0 * 512);
  EXPECT_EQ(got_.At("sda", m::kDiskWriteBytes, t1), 4246040.0 * 512);
  EXPECT_DOUBLE_EQ(got_.At("sda", m::kDiskBusy, t1), 16.776);
  // vda has the 11-field line of older kernels.
  EXPECT_EQ(got_.At("vda", m::kDiskReadBytes, t1), 20000.0 * 512);
  EXPECT_EQ(got_.At("vda", m::kDiskWriteBytes, t1), 40000.0 * 512);
  EXPECT_DOUBLE_EQ(got_.At("vda", m::kDiskBusy, t1), 0.7);

  EXPECT_EQ(got_.At("lo", m::kNetRxBytes, t1), 3267);
  EXPECT_EQ(got_.At("lo", m::kNetTxBytes, t1), 3267);
  EXPECT_EQ(got_.At("eth0", m::kNetRxBytes, t1), 123279619);
  EXPECT_EQ(got_.At("eth0", m::kNetTxBytes, t1), 143289);
  EXPECT_EQ(got_.At("wlan0", m::kNetRxBytes, t1), 5000);
  EXPECT_EQ(got_.At("wlan0", m::kNetTxBytes, t1), 6000);
  // "eth1:9876543210" without a space after the colon, as old kernels print wide numbers.
  EXPECT_EQ(got_.At("eth1", m::kNetRxBytes, t1), 9876543210.0);
  EXPECT_EQ(got_.At("eth1", m::kNetTxBytes, t1), 1234567890.0);
}

TEST_F(HostMonitorFixtureTest, SecondSnapshotSurvivesVanishedAndResetDevices) {
  namespace m = model::metric;
  ProcTree proc("host_a");
  HostMonitor monitor(&builder_, host_, "node1", proc.root(), kSys);
  ASSERT_TRUE(monitor.Init().ok());
  const TimeNs t1 = 1'000'000'000, t2 = 1'100'000'000;
  monitor.Sample(t1);
  Take();
  // host_b: cpu3 went offline, cpu1's iowait stepped back (35 < 40), sda vanished,
  // nvme0n1 was re-added (counters restarted), sdb and tun0 appeared, wlan0 vanished.
  proc.Become("host_b");
  monitor.Sample(t2);
  Take();
  const double tck = Tck();

  EXPECT_DOUBLE_EQ(got_.At("cpu0", m::kCoreUser, t2), 1150 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu0", m::kCoreSystem, t2), 352 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu1", m::kCoreIowait, t2), 40 / tck);  // held, not 35
  EXPECT_DOUBLE_EQ(got_.At("cpu1", m::kCoreIdle, t2), 9150 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu2", m::kCoreIowait, t2), 40 / tck);
  EXPECT_TRUE(got_.Last("cpu3", m::kCoreUser).empty());

  EXPECT_EQ(got_.At("memory", m::kMemUsed, t2), (16384000.0 - 11000000.0) * 1024);

  EXPECT_TRUE(got_.Last("sda", m::kDiskReadBytes).empty());
  EXPECT_TRUE(got_.Last("sda", m::kDiskBusy).empty());
  // Rebased: the old total plus what was counted since the restart.
  EXPECT_EQ(got_.At("nvme0n1", m::kDiskReadBytes, t2), (400000.0 + 100) * 512);
  EXPECT_EQ(got_.At("nvme0n1", m::kDiskWriteBytes, t2), (800000.0 + 300) * 512);
  EXPECT_DOUBLE_EQ(got_.At("nvme0n1", m::kDiskBusy, t2), 4.505);
  EXPECT_EQ(got_.At("vda", m::kDiskReadBytes, t2), 21000.0 * 512);
  EXPECT_DOUBLE_EQ(got_.At("vda", m::kDiskBusy, t2), 0.75);

  EXPECT_TRUE(got_.Last("wlan0", m::kNetRxBytes).empty());
  EXPECT_EQ(got_.At("eth0", m::kNetRxBytes, t2), 123280000);
  EXPECT_EQ(got_.At("eth0", m::kNetTxBytes, t2), 143500);
  EXPECT_EQ(got_.At("eth1", m::kNetRxBytes, t2), 9876543999.0);

  // Newcomers are ignored: nothing was declared after Init().
  EXPECT_EQ(got_.Res("sdb"), nullptr);
  EXPECT_EQ(got_.Res("tun0"), nullptr);
  EXPECT_EQ(got_.series().size(), 39u);

  // And the vanished ones come back to life when their lines return.
  proc.Become("host_a");
  const TimeNs t3 = 1'200'000'000;
  monitor.Sample(t3);
  Take();
  EXPECT_EQ(got_.At("sda", m::kDiskReadBytes, t3), 3232026.0 * 512);
  EXPECT_DOUBLE_EQ(got_.At("cpu3", m::kCoreUser, t3), 1150 / tck);
  EXPECT_EQ(got_.At("wlan0", m::kNetRxBytes, t3), 5000);
}

TEST_F(HostMonitorFixtureTest, OddContentsSkipLinesWithoutCrashing) {
  namespace m = model::metric;
  ProcTree proc("host_a");
  HostMonitor monitor(&builder_, host_, "node1", proc.root(), kSys);
  ASSERT_TRUE(monitor.Init().ok());
  monitor.Sample(1);
  Take();
  proc.Become("garbled");
  monitor.Sample(2);
  Take();
  const double tck = Tck();

  EXPECT_TRUE(got_.Last("cpu0", m::kCoreUser).empty());  // "abc" where idle should be
  // cpu1 has only user nice system idle: the missing fields read 0, held at their last value.
  EXPECT_DOUBLE_EQ(got_.At("cpu1", m::kCoreUser, 2), 2260 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu1", m::kCoreSystem, 2), 700 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu1", m::kCoreIdle, 2), 9500 / tck);
  EXPECT_DOUBLE_EQ(got_.At("cpu1", m::kCoreIowait, 2), 40 / tck);
  EXPECT_TRUE(got_.Last("cpu2", m::kCoreUser).empty());
  // No MemAvailable: MemFree + Buffers + Cached stands in.
  EXPECT_EQ(got_.At("memory", m::kMemAvailable, 2), 4200000.0 * 1024);
  EXPECT_EQ(got_.At("memory", m::kMemUsed, 2), (16384000.0 - 4200000.0) * 1024);
  EXPECT_TRUE(got_.Last("nvme0n1", m::kDiskReadBytes).empty());
  EXPECT_TRUE(got_.Last("sda", m::kDiskReadBytes).empty());
  EXPECT_EQ(got_.At("vda", m::kDiskReadBytes, 2), 21000.0 * 512);
  EXPECT_TRUE(got_.Last("lo", m::kNetRxBytes).empty());
  EXPECT_EQ(got_.At("eth0", m::kNetRxBytes, 2), 123279700);

  // Empty files too.
  for (const char* name : {"stat", "meminfo", "diskstats", "net/dev"})
    std::ofstream(proc.root() + "/" + name, std::ios::trunc);
  monitor.Sample(3);
  RunDelta empty = builder_.TakeDelta(/*final=*/true);
  for (const auto& s : empty.samples) EXPECT_NE(s.sample.t, 3);
}

TEST_F(HostMonitorFixtureTest, InitOnOddContentsKeepsWhatParses) {
  ProcTree proc("garbled");
  HostMonitor monitor(&builder_, host_, "node1", proc.root(), kSys);
  ASSERT_TRUE(monitor.Init().ok());
  Take();
  EXPECT_EQ(Names(got_.OfKind(ResourceKind::kCore)), (std::vector<std::string>{"cpu1"}));
  EXPECT_EQ(Names(got_.OfKind(ResourceKind::kDisk)), (std::vector<std::string>{"vda"}));
  EXPECT_EQ(Names(got_.OfKind(ResourceKind::kNet)), (std::vector<std::string>{"eth0"}));
  ASSERT_NE(got_.Ser("memory", model::metric::kMemUsed), nullptr);
  EXPECT_EQ(got_.Ser("memory", model::metric::kMemUsed)->capacity, 16384000.0 * 1024);
}

TEST_F(HostMonitorFixtureTest, InitFailsWithoutProcAndDeclaresNothing) {
  HostMonitor monitor(&builder_, host_, "node1", kData + "/proc/does_not_exist", kSys);
  Status status = monitor.Init();
  EXPECT_EQ(status.code(), StatusCode::kNotFound) << status.ToString();
  monitor.Sample(1);  // harmless
  RunDelta delta = builder_.TakeDelta(/*final=*/true);
  EXPECT_EQ(delta.resources.size(), 1u);  // the host only
  EXPECT_TRUE(delta.series.empty());
  EXPECT_TRUE(delta.samples.empty());
}

TEST_F(HostMonitorFixtureTest, MissingDiskstatsAndNetDevMeanNoDisksOrInterfaces) {
  ProcTree proc("host_a");
  fs::remove(proc.root() + "/diskstats");
  fs::remove_all(proc.root() + "/net");
  HostMonitor monitor(&builder_, host_, "node1", proc.root(), kData + "/sys/does_not_exist");
  ASSERT_TRUE(monitor.Init().ok());
  EXPECT_EQ(monitor.num_cores(), 4u);
  EXPECT_EQ(monitor.num_disks(), 0u);
  EXPECT_EQ(monitor.num_interfaces(), 0u);
  monitor.Sample(1);
}

TEST(HostMonitorRealProcTest, SanityOnThisMachine) {
  namespace m = model::metric;
  RunBuilder builder(model::RunInfo{});
  auto host = builder.AddResource({.kind = ResourceKind::kHost, .name = "localhost"});
  HostMonitor monitor(&builder, host, "localhost");
  Status status = monitor.Init();
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(static_cast<long>(monitor.num_cores()), ::sysconf(_SC_NPROCESSORS_ONLN));

  Collected got;
  monitor.Sample(1);
  got.Add(builder.TakeDelta(/*final=*/true));
  const SeriesInfo* mem = got.Ser("memory", m::kMemUsed);
  ASSERT_NE(mem, nullptr);
  EXPECT_GT(mem->capacity, 0);
  EXPECT_GT(got.At("memory", m::kMemUsed, 1), 0);
  EXPECT_LE(got.At("memory", m::kMemUsed, 1), mem->capacity);

  std::map<model::SeriesId, double> first;
  for (const SeriesInfo& s : got.series()) {
    if (s.name.rfind("cpu.", 0) != 0) continue;
    const Resource* r = nullptr;
    for (const Resource* c : got.OfKind(ResourceKind::kCore))
      if (c->id == s.resource) r = c;
    ASSERT_NE(r, nullptr);
    first[s.id] = got.At(r->name, s.name, 1);
  }
  ASSERT_EQ(first.size(), monitor.num_cores() * 5);

  volatile double sink = 0;  // burn a little CPU so the counters move
  for (int i = 0; i < 20'000'000; ++i) sink = sink + i * 0.5;
  monitor.Sample(2);
  RunDelta d2 = builder.TakeDelta(/*final=*/true);
  size_t checked = 0;
  for (const auto& rec : d2.samples) {
    auto it = first.find(rec.series);
    if (it == first.end()) continue;
    EXPECT_GE(rec.sample.v, it->second);
    ++checked;
  }
  EXPECT_EQ(checked, first.size());
}

}  // namespace
}  // namespace grademl::collect
