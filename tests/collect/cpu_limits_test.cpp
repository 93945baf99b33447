// CpuLimitsReader against a fake /proc and fake cgroup trees (v2, hybrid v1 + v2), and the
// small parsers it is built on.
#include "collect/cpu_limits.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "collect/process_tree_monitor.h"
#include "model/metric_names.h"

namespace grademl::collect {
namespace {

namespace fs = std::filesystem;

class FakeTree {
 public:
  FakeTree() {
    std::string templ = (fs::temp_directory_path() / "grademl_cpulimits_XXXXXX").string();
    EXPECT_NE(::mkdtemp(templ.data()), nullptr);
    root_ = templ;
  }
  ~FakeTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void Write(const std::string& rel, const std::string& text) {
    fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  CpuLimitsReader::Paths paths() const { return {root_ + "/proc", root_ + "/cgroup"}; }

 private:
  std::string root_;
};

TEST(CpuLimitsTest, CountsCpuLists) {
  EXPECT_EQ(CountCpuList("0-3,8,10-11"), 7);
  EXPECT_EQ(CountCpuList("0"), 1);
  EXPECT_EQ(CountCpuList("0-1\n"), 2);
  EXPECT_EQ(CountCpuList(""), std::nullopt);
  EXPECT_EQ(CountCpuList("3-1"), std::nullopt);
  EXPECT_EQ(CountCpuList("a-b"), std::nullopt);
  EXPECT_EQ(CountCpuList("1,,2"), std::nullopt);
  EXPECT_EQ(CountCpuList("0-99999999"), std::nullopt);  // bounded, not a huge loop
}

TEST(CpuLimitsTest, ParsesCpuMax) {
  EXPECT_DOUBLE_EQ(*ParseCpuMax("150000 100000\n"), 1.5);
  EXPECT_DOUBLE_EQ(*ParseCpuMax("max 100000\n"), 0.0);
  EXPECT_EQ(ParseCpuMax("150000"), std::nullopt);
  EXPECT_EQ(ParseCpuMax("x 100000"), std::nullopt);
  EXPECT_EQ(ParseCpuMax("100 0"), std::nullopt);
}

TEST(CpuLimitsTest, AvailableIsTheTighterLimit) {
  EXPECT_DOUBLE_EQ((CpuLimits{.affinity_cores = 4, .quota_cores = 1.5}).available(), 1.5);
  EXPECT_DOUBLE_EQ((CpuLimits{.affinity_cores = 2, .quota_cores = 3}).available(), 2.0);
  EXPECT_DOUBLE_EQ((CpuLimits{.affinity_cores = 2, .quota_cores = 0}).available(), 2.0);
  EXPECT_DOUBLE_EQ((CpuLimits{.affinity_cores = 0, .quota_cores = 0.5}).available(), 0.5);
  EXPECT_DOUBLE_EQ(CpuLimits{}.available(), 0.0);
}

TEST(CpuLimitsTest, ReadsAffinityAndTheTightestV2QuotaUpTheTree) {
  FakeTree t;
  t.Write("proc/42/status", "Name:\tcrunch\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\nMems_allowed_list:\t0\n");
  t.Write("proc/42/cgroup", "0::/jobs/a\n");
  t.Write("cgroup/cgroup.controllers", "cpu memory\n");
  t.Write("cgroup/jobs/cpu.max", "250000 100000\n");   // 2.5 cores for all jobs
  t.Write("cgroup/jobs/a/cpu.max", "max 100000\n");   // none of its own
  CpuLimitsReader reader(t.paths());
  CpuLimits l = reader.Read(42, 0);
  EXPECT_EQ(l.affinity_cores, 4);
  EXPECT_DOUBLE_EQ(l.quota_cores, 2.5);
  EXPECT_DOUBLE_EQ(l.available(), 2.5);

  // A tighter limit below: the smallest on the way up wins.
  t.Write("cgroup/jobs/a/cpu.max", "50000 100000\n");
  // Cached for the same cgroup within the TTL...
  EXPECT_DOUBLE_EQ(reader.Read(42, 1 * kNsPerSec).quota_cores, 2.5);
  // ... read again after it.
  EXPECT_DOUBLE_EQ(reader.Read(42, 1 * kNsPerSec + CpuLimitsReader::kQuotaTtlNs).quota_cores, 0.5);
}

TEST(CpuLimitsTest, ReadsAHybridV1CpuQuota) {
  FakeTree t;
  t.Write("proc/7/status", "Cpus_allowed_list:\t0-1\n");
  t.Write("proc/7/cgroup", "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n0::/\n");
  t.Write("cgroup/unified/cgroup.controllers", "");
  t.Write("cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  t.Write("cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  t.Write("cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000\n");
  t.Write("cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  CpuLimits l = CpuLimitsReader(t.paths()).Read(7, 0);
  EXPECT_EQ(l.affinity_cores, 2);
  EXPECT_DOUBLE_EQ(l.quota_cores, 1.5);
  EXPECT_DOUBLE_EQ(l.available(), 1.5);
}

TEST(CpuLimitsTest, ANamespacedViewFallsBackToTheMountRoot) {
  // Inside a container the path names the host's cgroup, which is the mount's root here.
  FakeTree t;
  t.Write("proc/7/status", "Cpus_allowed_list:\t0-7\n");
  t.Write("proc/7/cgroup", "1:cpu:/kubepods/pod1/c1\n");
  t.Write("cgroup/cpu/cpu.cfs_quota_us", "200000\n");
  t.Write("cgroup/cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(CpuLimitsReader(t.paths()).Read(7, 0).available(), 2.0);
}

TEST(CpuLimitsTest, MissingOrHostileFilesAreUnknownNotErrors) {
  FakeTree t;
  t.Write("proc/9/status", "Cpus_allowed_list:\tgarbage\n");
  t.Write("proc/9/cgroup", "0::/../../etc\nnonsense\n::\n");
  t.Write("cgroup/cgroup.controllers", "");
  t.Write("cgroup/cpu.max", "1 1\n");  // would be read only by climbing out
  CpuLimitsReader reader(t.paths());
  CpuLimits l = reader.Read(9, 0);
  EXPECT_EQ(l.affinity_cores, 0);
  EXPECT_DOUBLE_EQ(l.quota_cores, 0);
  EXPECT_DOUBLE_EQ(reader.Read(12345, 0).available(), 0);  // no such process
}

TEST(CpuLimitsTest, TheRealProcessMatchesSchedGetaffinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  CpuLimits l = CpuLimitsReader().Read(getpid(), 0);
  EXPECT_EQ(l.affinity_cores, CPU_COUNT(&set));
  EXPECT_GE(l.quota_cores, 0);
}

// The monitor records a followed process's limits as its cpu.affinity and cpu.quota series:
// a real child pinned to one CPU, under a fake cgroup root with a half-core quota.
TEST(CpuLimitsTest, TheMonitorRecordsAFollowedProcesssLimits) {
  FakeTree t;
  t.Write("cgroup/cgroup.controllers", "cpu\n");
  t.Write("cgroup/cpu.max", "50000 100000\n");
  t.Write("cgroup/unified/cgroup.controllers", "cpu\n");  // the same, wherever the real file points
  t.Write("cgroup/unified/cpu.max", "50000 100000\n");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof(set), &set);
    int first = 0;
    while (!CPU_ISSET(first, &set)) ++first;
    CPU_ZERO(&set);
    CPU_SET(first, &set);
    sched_setaffinity(0, sizeof(set), &set);
    char c = 1;
    (void)!write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  close(ready[1]);

  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId run =
      builder.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = WallClock::Now(), .host = "h"});
  model::ResourceId host = builder.AddResource({.parent = 0, .kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  // The child's /proc/PID/cgroup is the real one; whatever path it names, the fake root's
  // own cpu.max is on its way up.
  {
    ProcessTreeMonitor monitor(&builder, run, host, "h", {.cgroup_root = t.paths().cgroup_root});
    monitor.AddRoot(child, {"pinned"}, WallClock::Now());
    monitor.Sample(WallClock::Now());
    kill(child, SIGKILL);
    int status = 0;
    rusage usage{};
    ASSERT_EQ(wait4(child, &status, 0, &usage), child);
    monitor.OnReaped(child, WallClock::Now(), usage);
    monitor.Finish(WallClock::Now());
  }
  model::RunDelta delta = builder.TakeDelta(true);
  model::SeriesId affinity = 0, quota = 0;
  for (const model::SeriesInfo& s : delta.series) {
    if (s.name == model::metric::kProcCpuAffinity) affinity = s.id;
    if (s.name == model::metric::kProcCpuQuota) quota = s.id;
  }
  ASSERT_NE(affinity, 0);
  ASSERT_NE(quota, 0);
  std::vector<double> affinity_values, quota_values;
  for (const model::SampleRecord& r : delta.samples) {
    if (r.series == affinity) affinity_values.push_back(r.sample.v);
    if (r.series == quota) quota_values.push_back(r.sample.v);
  }
  ASSERT_FALSE(affinity_values.empty());
  EXPECT_DOUBLE_EQ(affinity_values.front(), 1.0);
  // The fake quota applies only when the real cgroup path resolves under the fake root
  // ("0::/" and hybrid v1 "cpu:/" do; a deeper path skips the missing levels to the root).
  ASSERT_FALSE(quota_values.empty());
  EXPECT_DOUBLE_EQ(quota_values.front(), 0.5);
}

}  // namespace
}  // namespace grademl::collect
