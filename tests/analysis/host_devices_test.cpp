// Tests of the host-devices layer: which disks and interfaces count, on hosts shaped like
// LVM (sda + dm-0 on top), NVMe with a partition, and loopback beside a real link; and the
// counter sums and rates every consumer reads them with. Expectations by hand.
#include "analysis/derived/host_devices.h"

#include <gtest/gtest.h>

#include "analysis/run_fixture.h"
#include "analysis/run_summary.h"

namespace grademl::analysis {
namespace {

namespace metric = model::metric;
using model::ResourceKind;
using testing::RunFixture;
using testing::Sec;

std::vector<std::string> Names(const std::vector<const model::Resource*>& v) {
  std::vector<std::string> out;
  for (const model::Resource* r : v) out.push_back(r->name);
  return out;
}

TEST(HostDevicesTest, DiskRolesByName) {
  std::vector<std::string> host = {"sda", "sda1", "dm-0", "md127", "nvme0n1", "nvme0n1p1", "mmcblk0", "mmcblk0p2",
                                   "loop3", "ram0", "zram0", "vdb1", "sdaa"};
  EXPECT_EQ(ClassifyDisk("sda", host), DiskRole::kPhysical);
  EXPECT_EQ(ClassifyDisk("sdaa", host), DiskRole::kPhysical);  // the 27th disk, not a partition of sda
  EXPECT_EQ(ClassifyDisk("sda1", host), DiskRole::kPartition);
  EXPECT_EQ(ClassifyDisk("nvme0n1", host), DiskRole::kPhysical);
  EXPECT_EQ(ClassifyDisk("nvme0n1p1", host), DiskRole::kPartition);
  EXPECT_EQ(ClassifyDisk("mmcblk0p2", host), DiskRole::kPartition);
  EXPECT_EQ(ClassifyDisk("vdb1", host), DiskRole::kPhysical);  // its disk vdb is not recorded
  EXPECT_EQ(ClassifyDisk("dm-0", host), DiskRole::kStacked);
  EXPECT_EQ(ClassifyDisk("md127", host), DiskRole::kStacked);
  EXPECT_EQ(ClassifyDisk("loop3", host), DiskRole::kVirtual);
  EXPECT_EQ(ClassifyDisk("ram0", host), DiskRole::kVirtual);
  EXPECT_EQ(ClassifyDisk("zram0", host), DiskRole::kVirtual);
  EXPECT_TRUE(IsLoopback("lo"));
  EXPECT_FALSE(IsLoopback("lo0x"));
  EXPECT_FALSE(IsLoopback("eth0"));
}

TEST(HostDevicesTest, OnlyPhysicalDisksAndLinksThatLeaveTheHostCount) {
  RunFixture f;
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  for (const char* d : {"sda", "dm-0", "nvme0n1", "nvme0n1p1", "loop0"}) f.AddResource(host, ResourceKind::kDisk, d);
  f.AddResource(host, ResourceKind::kNet, "lo");
  f.AddResource(host, ResourceKind::kNet, "eth0");
  // A second host with only a device-mapper disk: it stands for the storage there.
  auto other = f.AddResource(0, ResourceKind::kHost, "node2", 0, 0, "node2");
  f.AddResource(other, ResourceKind::kDisk, "dm-1", 0, 0, "node2");
  std::vector<HostDevices> hosts = ListHostDevices(f.Build());
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].host, "node1");
  EXPECT_EQ(Names(hosts[0].disks), (std::vector<std::string>{"sda", "nvme0n1"}));
  EXPECT_EQ(Names(hosts[0].uncounted_disks), (std::vector<std::string>{"nvme0n1p1", "loop0", "dm-0"}));
  EXPECT_EQ(Names(hosts[0].nets), (std::vector<std::string>{"eth0"}));
  EXPECT_EQ(Names(hosts[0].loopback), (std::vector<std::string>{"lo"}));
  EXPECT_EQ(Names(hosts[1].disks), (std::vector<std::string>{"dm-1"}));
  EXPECT_EQ(DevicesOfHost(f.run, "node2").disks.size(), 1u);
  EXPECT_TRUE(DevicesOfHost(f.run, "nowhere").disks.empty());
}

TEST(HostDevicesTest, SumsOfCounters) {
  RunFixture f;
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto a = f.AddResource(host, ResourceKind::kDisk, "sda");
  auto b = f.AddResource(host, ResourceKind::kDisk, "sdb");
  f.Counter(a, metric::kDiskWriteBytes, {{0, 100}, {Sec(2), 300}});          // 100 B/s
  f.Counter(b, metric::kDiskWriteBytes, {{Sec(1), 0}, {Sec(3), 400}});       // 200 B/s from t=1
  const model::Run& run = f.Build();
  HostDevices d = DevicesOfHost(run, "node1");
  std::vector<model::Sample> sum = SumOfCounters(run, d.disks, metric::kDiskWriteBytes);
  // The summed increase since 0 s: [0, 1] s: a +100, b unknown; [1, 2] s: a +100, b +200;
  // [2, 3] s: a unknown (after its last sample), b +200.
  EXPECT_EQ(sum, (std::vector<model::Sample>{{0, 0}, {Sec(1), 100}, {Sec(2), 400}, {Sec(3), 600}}));
}

TEST(HostDevicesTest, AResetOnOneDiskIsNotOffsetByAnothersGrowth) {
  RunFixture f;
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto a = f.AddResource(host, ResourceKind::kDisk, "sda");
  auto b = f.AddResource(host, ResourceKind::kDisk, "sdb");
  // sda resets between 1 s and 2 s (500 -> 100); sdb grows by 500 there.
  f.Counter(a, metric::kDiskReadBytes, {{0, 0}, {Sec(1), 500}, {Sec(2), 100}, {Sec(3), 300}});
  f.Counter(b, metric::kDiskReadBytes, {{0, 0}, {Sec(1), 100}, {Sec(2), 600}, {Sec(3), 700}});
  const model::Run& run = f.Build();
  std::vector<model::Sample> sum = SumOfCounters(run, DevicesOfHost(run, "node1").disks, metric::kDiskReadBytes);
  // Per interval: [0, 1] s 500 + 100; [1, 2] s 0 (the reset) + 500; [2, 3] s 200 + 100. The
  // interpolated sum (0, 600, 700, 1000) made [1, 2] s 100 bytes: sdb's 500 minus sda's drop.
  EXPECT_EQ(sum, (std::vector<model::Sample>{{0, 0}, {Sec(1), 600}, {Sec(2), 1100}, {Sec(3), 1400}}));
}

TEST(HostDevicesTest, TheRunSummaryMarksWhatDoesNotCount) {
  RunFixture f;
  f.run.info.end_ns = Sec(10);
  f.AddPhase(0, "run", "run", 0, Sec(10));
  auto host = f.AddResource(0, ResourceKind::kHost, "node1");
  auto sda = f.AddResource(host, ResourceKind::kDisk, "sda");
  auto dm = f.AddResource(host, ResourceKind::kDisk, "dm-0");
  f.Counter(sda, metric::kDiskWriteBytes, {{0, 0}, {Sec(10), 100e6}});
  f.Counter(dm, metric::kDiskWriteBytes, {{0, 0}, {Sec(10), 100e6}});
  auto lo = f.AddResource(host, ResourceKind::kNet, "lo");
  f.Counter(lo, metric::kNetRxBytes, {{0, 0}, {Sec(10), 5e6}});
  RunSummary s = SummarizeRun(f.Build());
  ASSERT_EQ(s.hosts.size(), 1u);
  ASSERT_EQ(s.hosts[0].disks.size(), 2u);
  double counted_writes = 0;
  for (const DiskSummary& d : s.hosts[0].disks) {
    EXPECT_EQ(d.counted, d.name == "sda") << d.name;
    if (d.counted) counted_writes += d.write_bytes;
  }
  EXPECT_DOUBLE_EQ(counted_writes, 100e6);  // not 200e6: dm-0 repeats sda
  ASSERT_EQ(s.hosts[0].nets.size(), 1u);
  EXPECT_FALSE(s.hosts[0].nets[0].counted);
}

}  // namespace
}  // namespace grademl::analysis
