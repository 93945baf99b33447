// Tests of ProcessTreeMonitor with real processes: an exited command that nobody reaped yet
// (a zombie) is not taken for a new process, signals reach processes that left the
// command's process group, and CPU and I/O reaped through a chain of wrappers are counted
// once, to the process that used them.
#include "collect/process_tree_monitor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

namespace grademl::collect {
namespace {

struct Fixture {
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId run = 0;
  model::ResourceId host = 0;
  Fixture() {
    run = builder.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = WallClock::Now(), .host = "h"});
    host = builder.AddResource({.parent = 0, .kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  }
  // The last value of each series of each process, by pid: "cpu" is the phase's own CPU
  // (user + system + unseen children), "wchar" its own write characters.
  std::map<int32_t, std::map<std::string, double>> Totals() {
    model::RunDelta d = builder.TakeDelta(true);
    std::map<model::ResourceId, int32_t> pid_of;
    for (const model::Resource& r : d.resources)
      if (r.kind == model::ResourceKind::kProcess) pid_of[r.id] = r.pid;
    std::map<model::SeriesId, std::pair<int32_t, std::string>> series;
    for (const model::SeriesInfo& s : d.series)
      if (pid_of.count(s.resource)) series[s.id] = {pid_of[s.resource], s.name};
    std::map<int32_t, std::map<std::string, double>> last;
    for (const model::SampleRecord& r : d.samples) {
      auto it = series.find(r.series);
      if (it != series.end()) last[it->second.first][it->second.second] = r.sample.v;
    }
    std::map<int32_t, std::map<std::string, double>> out;
    for (auto& [pid, m] : last) {
      out[pid]["cpu"] = m["cpu.user"] + m["cpu.system"] + m["cpu.unseen_children"];
      out[pid]["wchar"] = m["io.write_chars"];
    }
    return out;
  }
  std::vector<model::Phase> Processes() {
    std::vector<model::Phase> out;
    for (model::Phase& p : builder.TakeDelta(true).phases)
      if (p.leaf_type() == model::kPhaseTypeProcess) out.push_back(std::move(p));
    return out;
  }
};

// A command that exits at once, as one that cannot be started does: its process exits
// before grademl reaps it. It used to come back as a second process, a phantom "[NAME]"
// phase under the run starting before the run itself.
TEST(ProcessTreeMonitorTest, AnUnreapedExitedCommandIsNotFollowedTwice) {
  Fixture f;
  ProcessTreeMonitor monitor(&f.builder, f.run, f.host, "h", {});
  TimeNs start = WallClock::Now();
  pid_t pid = monitor.LaunchRoot(
      [] {
        pid_t child = fork();
        if (child == 0) _exit(127);
        return child;
      },
      {"/no/such/program"}, start, 0);
  ASSERT_GT(pid, 0);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);  // a zombie now
  monitor.HandleExitNotifications(WallClock::Now());
  monitor.Sample(WallClock::Now());
  monitor.Sample(WallClock::Now());
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(pid, &status, 0, &usage), pid);
  monitor.OnReaped(pid, WallClock::Now(), usage);
  monitor.Finish(WallClock::Now());
  std::vector<model::Phase> processes = f.Processes();
  ASSERT_EQ(processes.size(), 1u);
  EXPECT_EQ(processes[0].name, "/no/such/program");
  EXPECT_GE(processes[0].start_ns, start);
}

// A child that left the command's process group (setpgid, as setsid does) is still
// signalled; one still in a skipped group is left to kill(-group).
TEST(ProcessTreeMonitorTest, SignalsReachProcessesOutsideTheSkippedGroups) {
  Fixture f;
  ProcessTreeMonitor monitor(&f.builder, f.run, f.host, "h", {});
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t root = monitor.LaunchRoot(
      [&] {
        pid_t child = fork();
        if (child == 0) {
          setpgid(0, 0);
          pid_t inside = fork();  // stays in the root's group
          if (inside == 0) {
            pause();
            _exit(0);
          }
          pid_t outside = fork();  // leaves it
          if (outside == 0) {
            setpgid(0, 0);
            pause();
            _exit(0);
          }
          setpgid(outside, outside);  // here too: it has left the group before `ready` is written
          char c = 'x';
          ssize_t n = write(ready[1], &c, 1);
          (void)n;
          int st;
          while (wait(&st) > 0) {
          }
          _exit(0);
        }
        setpgid(child, child);
        return child;
      },
      {"root"}, WallClock::Now(), 0);
  ASSERT_GT(root, 0);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  monitor.Sample(WallClock::Now());
  EXPECT_TRUE(monitor.AnyRunning());
  // The root's group is skipped: only the process that left it gets the signal.
  EXPECT_EQ(monitor.SignalOutsideGroups(SIGTERM, {root}), 1);
  kill(-root, SIGTERM);  // the group: the root and the child inside
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(root, &status, 0, &usage), root);
  monitor.OnReaped(root, WallClock::Now(), usage);
  // The root waited for both children before it died of the signal, or died first and
  // left them to init: either way nothing of the tree runs.
  for (int i = 0; i < 200 && monitor.AnyRunning(); ++i) usleep(10000);
  EXPECT_FALSE(monitor.AnyRunning());
  monitor.Finish(WallClock::Now());
  close(ready[0]);
  close(ready[1]);
}

// What the burner at the bottom of a wrapper chain really used, from the kernel.
struct BurnerTruth {
  pid_t pid = 0;
  double cpu = 0;
  double wchar = 0;
};

double SelfCpu() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double SelfWchar() {
  std::ifstream io("/proc/self/io");
  std::string key;
  double value = 0;
  while (io >> key >> value)
    if (key == "wchar:") return value;
  return 0;
}

// In a forked child: `wrappers` processes that each fork the next and wait for it, then a
// burner that says when it is `seen_at` seconds into its CPU, burns to `total` seconds,
// writes `bytes` to /dev/null and reports its truth. Never returns.
[[noreturn]] void Chain(int wrappers, int ready_fd, int truth_fd, double seen_at, double total, size_t bytes) {
  if (wrappers > 0) {
    pid_t child = fork();
    if (child == 0) Chain(wrappers - 1, ready_fd, truth_fd, seen_at, total, bytes);
    int st;
    waitpid(child, &st, 0);
    _exit(0);
  }
  volatile unsigned long long sink = 0;
  bool told = false;
  while (SelfCpu() < total) {
    for (int k = 0; k < 100000; ++k) sink = sink * 6364136223846793005ULL + 1;
    if (!told && SelfCpu() >= seen_at) {
      char c = 'x';
      if (write(ready_fd, &c, 1) != 1) _exit(1);
      told = true;
    }
  }
  int null_fd = open("/dev/null", O_WRONLY);
  std::vector<char> block(1 << 20, 'x');
  for (size_t left = bytes; left > 0;) {
    size_t n = std::min(left, block.size());
    if (write(null_fd, block.data(), n) != static_cast<ssize_t>(n)) _exit(1);
    left -= n;
  }
  BurnerTruth truth{getpid(), SelfCpu(), SelfWchar()};
  if (write(truth_fd, &truth, sizeof truth) != sizeof truth) _exit(1);
  _exit(static_cast<int>(sink & 0));
}

// sh -c 'timeout 60 prog; true' in miniature: the burner is seen once mid-run, then it
// exits, its wrapper reaps it and exits, and so on up to the root, all before the next
// pass. Every wrapper's reaped-children counters then hold the burner's totals, and the
// root's final rusage does too. The burner's CPU and I/O must be counted once, and to the
// burner: they used to go a second time to the root as its own tail and unseen children.
void CheckWrapperChain(int wrappers, bool root_read_as_zombie = true) {
  Fixture f;
  ProcessTreeMonitor monitor(&f.builder, f.run, f.host, "h", {});
  int ready[2], truth_pipe[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(truth_pipe), 0);
  constexpr size_t kBytes = 8 << 20;
  pid_t root = monitor.LaunchRoot(
      [&] {
        pid_t child = fork();
        if (child == 0) Chain(wrappers, ready[1], truth_pipe[1], 0.1, 0.6, kBytes);
        return child;
      },
      {"wrapper"}, WallClock::Now(), 0);
  ASSERT_GT(root, 0);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  // Passes 100 ms apart, as grademl run makes them: the chain is found with the burner at
  // 0.1 s, then its rate is measured. It has more than 0.2 s left to burn.
  for (int i = 0; i < 3; ++i) {
    if (i > 0) usleep(100000);
    monitor.Sample(WallClock::Now());
  }
  BurnerTruth truth;
  ASSERT_EQ(read(truth_pipe[0], &truth, sizeof truth), static_cast<ssize_t>(sizeof truth));
  // As grademl reaps its children: read as a zombie, then reaped. (Or reaped unread: the
  // rusage then tells the root's own CPU only together with its children's.)
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(root), &info, WEXITED | WNOWAIT), 0);
  if (root_read_as_zombie) monitor.OnExited(root, WallClock::Now());
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(root, &status, 0, &usage), root);
  double tree_cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  monitor.OnReaped(root, WallClock::Now(), usage);
  monitor.Finish(WallClock::Now());
  auto totals = f.Totals();
  ASSERT_EQ(totals.size(), static_cast<size_t>(wrappers + 1));
  double sum_cpu = 0, sum_wchar = 0;
  for (auto& [pid, m] : totals) {
    sum_cpu += m["cpu"];
    sum_wchar += m["wchar"];
    if (pid != truth.pid) {
      EXPECT_LT(m["cpu"], 0.03) << "wrapper " << pid << " of " << wrappers;
      EXPECT_LT(m["wchar"], 0.05 * kBytes) << "wrapper " << pid << " of " << wrappers;
    }
  }
  // The kernel's account of the tree: 5% and two ticks per process.
  EXPECT_NEAR(sum_cpu, tree_cpu, 0.05 * tree_cpu + 0.02 * (wrappers + 1));
  EXPECT_NEAR(totals[truth.pid]["cpu"], truth.cpu, 0.05 * truth.cpu + 0.02);
  if (root_read_as_zombie) {  // rusage has no character counts: only a zombie's io tells them
    EXPECT_NEAR(totals[truth.pid]["wchar"], truth.wchar, 0.05 * truth.wchar);
    EXPECT_NEAR(sum_wchar, truth.wchar, 0.05 * truth.wchar);
  }
  for (int fd : {ready[0], ready[1], truth_pipe[0], truth_pipe[1]}) close(fd);
}

TEST(ProcessTreeMonitorTest, CpuAndIoReapedThroughOneWrapperAreCountedOnce) { CheckWrapperChain(1); }
TEST(ProcessTreeMonitorTest, CpuAndIoReapedThroughTwoWrappersAreCountedOnce) { CheckWrapperChain(2); }
TEST(ProcessTreeMonitorTest, CpuAndIoReapedThroughThreeWrappersAreCountedOnce) { CheckWrapperChain(3); }
TEST(ProcessTreeMonitorTest, CpuReapedThroughWrappersIsCountedOnceWhenTheRootIsReapedUnread) {
  CheckWrapperChain(2, false);
}

}  // namespace
}  // namespace grademl::collect
