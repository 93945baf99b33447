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
#include <atomic>
#include <thread>
#include "skip_or_fail.h"

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

// A child that burns a little CPU (so that its parent's reaped-children CPU moves when it is
// reaped), writes `bytes` to /dev/null, reports its truth, then waits for a byte on
// `exit_fd` and exits. Never returns.
[[noreturn]] void WriterThenWait(int truth_fd, int exit_fd, size_t bytes) {
  volatile unsigned long long sink = 0;
  while (SelfCpu() < 0.06)
    for (int k = 0; k < 100000; ++k) sink = sink * 6364136223846793005ULL + 1;
  int null_fd = open("/dev/null", O_WRONLY);
  std::vector<char> block(1 << 20, 'x');
  for (size_t left = bytes; left > 0;) {
    size_t n = std::min(left, block.size());
    if (write(null_fd, block.data(), n) != static_cast<ssize_t>(n)) _exit(1);
    left -= n;
  }
  BurnerTruth truth{getpid(), SelfCpu(), SelfWchar()};
  if (write(truth_fd, &truth, sizeof truth) != sizeof truth) _exit(1);
  char c;
  if (read(exit_fd, &c, 1) != 1) _exit(1);
  _exit(static_cast<int>(sink & 0));
}

bool IsZombie(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t close_paren = line.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < line.size() && line[close_paren + 2] == 'Z';
}

void Wait(int fd) {
  char c;
  ASSERT_EQ(read(fd, &c, 1), 1);
}
void Tell(int fd) { ASSERT_EQ(write(fd, "x", 1), 1); }

// The end of a test: the wrapper is told to quit, read as a zombie and reaped as grademl
// does; returns each process's totals.
std::map<int32_t, std::map<std::string, double>> FinishWrapper(Fixture& f, ProcessTreeMonitor& monitor, pid_t root,
                                                               int quit_fd) {
  Tell(quit_fd);
  siginfo_t info{};
  EXPECT_EQ(waitid(P_PID, static_cast<id_t>(root), &info, WEXITED | WNOWAIT), 0);
  monitor.OnExited(root, WallClock::Now());
  int status = 0;
  rusage usage{};
  EXPECT_EQ(wait4(root, &status, 0, &usage), root);
  monitor.OnReaped(root, WallClock::Now(), usage);
  monitor.Finish(WallClock::Now());
  return f.Totals();
}

// A parent read for its memory (its family changed: a child exited) right after the pass
// resolved its reaped children, but after it reaped one more: its I/O then held that
// child's, which nobody had handed out yet. Emitted as the parent's own, it stayed there
// (emitted counters never go back) and the child claimed it again once noticed: 8 MB
// written once, counted twice in the run's total (seen in CI, under ASan's slower timing).
TEST(ProcessTreeMonitorTest, IoOfAChildReapedWhileThePassRunsIsCountedOnce) {
  Fixture f;
  bool armed = false;
  int pipes[5][2];
  for (auto& p : pipes) ASSERT_EQ(pipe(p), 0);
  // The pipes' names (pointers: clang 14 cannot capture a structured binding in a lambda).
  int *truth_pipe = pipes[0], *exit_pipe = pipes[1], *reap_pipe = pipes[2];
  int *reaped_pipe = pipes[3], *quit_pipe = pipes[4];
  ProcessTreeMonitor::Options options;
  options.test_stage = [&](const char* stage) {
    if (!armed || std::string(stage) != "resolved") return;
    armed = false;
    Tell(reap_pipe[1]);  // the wrapper reaps the writer now, between the two
    Wait(reaped_pipe[0]);
  };
  ProcessTreeMonitor monitor(&f.builder, f.run, f.host, "h", options);
  constexpr size_t kBytes = 8 << 20;
  pid_t root = monitor.LaunchRoot(
      [&] {
        pid_t wrapper = fork();
        if (wrapper == 0) {
          pid_t writer = fork();
          if (writer == 0) WriterThenWait(truth_pipe[1], exit_pipe[0], kBytes);
          char c;
          if (read(reap_pipe[0], &c, 1) != 1 || waitpid(writer, nullptr, 0) != writer) _exit(1);
          if (write(reaped_pipe[1], "x", 1) != 1 || read(quit_pipe[0], &c, 1) != 1) _exit(1);
          _exit(0);
        }
        return wrapper;
      },
      {"wrapper"}, WallClock::Now(), 0);
  ASSERT_GT(root, 0);
  BurnerTruth truth;
  ASSERT_EQ(read(truth_pipe[0], &truth, sizeof truth), static_cast<ssize_t>(sizeof truth));
  // Both seen; then enough passes for the waiting wrapper to be idle (read every 10th pass,
  // by pid) and a next pass that skips it.
  int passes = 0;
  while (passes < 5 || (passes + 1 + root) % 10 == 0) {
    monitor.Sample(WallClock::Now());
    ++passes;
    usleep(20000);
  }
  Tell(exit_pipe[1]);
  for (int i = 0; i < 500 && !IsZombie(truth.pid); ++i) usleep(2000);
  ASSERT_TRUE(IsZombie(truth.pid));
  monitor.HandleExitNotifications(WallClock::Now());
  armed = true;
  monitor.Sample(WallClock::Now());
  EXPECT_FALSE(armed) << "the pass never resolved its parents";
  auto totals = FinishWrapper(f, monitor, root, quit_pipe[1]);
  ASSERT_EQ(totals.size(), 2u);
  EXPECT_NEAR(totals[truth.pid]["wchar"], truth.wchar, 0.05 * truth.wchar);
  EXPECT_LT(totals[root]["wchar"], 0.05 * kBytes) << "the writer's I/O went to the wrapper too";
  for (auto& p : pipes)
    for (int fd : p) close(fd);
}

// A parent read again because a child was reaped, while another child, read as alive in
// the same pass, exited and was reaped just before: the second child's I/O is in the parent's
// counters and must be handed to it, not shared between the first child and the parent.
TEST(ProcessTreeMonitorTest, IoOfASecondChildReapedBeforeTheParentIsReadAgainIsCountedOnce) {
  Fixture f;
  bool armed = false;
  int pipes[6][2];
  for (auto& p : pipes) ASSERT_EQ(pipe(p), 0);
  // The pipes' names (pointers: clang 14 cannot capture a structured binding in a lambda).
  int *truth_pipe = pipes[0], *exit1_pipe = pipes[1], *exit2_pipe = pipes[2];
  int *reap2_pipe = pipes[3], *reaped_pipe = pipes[4], *quit_pipe = pipes[5];
  ProcessTreeMonitor::Options options;
  options.test_stage = [&](const char* stage) {
    if (!armed || std::string(stage) != "reread_parent") return;
    armed = false;
    Tell(exit2_pipe[1]);  // the second writer exits and is reaped right now
    Tell(reap2_pipe[1]);
    Wait(reaped_pipe[0]);
  };
  ProcessTreeMonitor monitor(&f.builder, f.run, f.host, "h", options);
  constexpr size_t kBytes = 8 << 20;
  pid_t root = monitor.LaunchRoot(
      [&] {
        pid_t wrapper = fork();
        if (wrapper == 0) {
          pid_t w1 = fork();
          if (w1 == 0) WriterThenWait(truth_pipe[1], exit1_pipe[0], kBytes);
          pid_t w2 = fork();
          if (w2 == 0) WriterThenWait(truth_pipe[1], exit2_pipe[0], kBytes);
          char c;
          if (waitpid(w1, nullptr, 0) != w1 || read(reap2_pipe[0], &c, 1) != 1 || waitpid(w2, nullptr, 0) != w2) _exit(1);
          if (write(reaped_pipe[1], "x", 1) != 1 || read(quit_pipe[0], &c, 1) != 1) _exit(1);
          _exit(0);
        }
        return wrapper;
      },
      {"wrapper"}, WallClock::Now(), 0);
  ASSERT_GT(root, 0);
  BurnerTruth truths[2];
  for (BurnerTruth& t : truths) ASSERT_EQ(read(truth_pipe[0], &t, sizeof t), static_cast<ssize_t>(sizeof t));
  for (int i = 0; i < 3; ++i) {
    monitor.Sample(WallClock::Now());
    usleep(20000);
  }
  // The first writer (whichever reported first is the one told to exit first: find which).
  pid_t w1 = 0;
  {
    std::ifstream children("/proc/" + std::to_string(root) + "/task/" + std::to_string(root) + "/children");
    children >> w1;  // the first child forked
  }
  ASSERT_GT(w1, 0);
  Tell(exit1_pipe[1]);
  for (int i = 0; i < 500 && kill(w1, 0) == 0; ++i) usleep(2000);  // exited and reaped
  ASSERT_NE(kill(w1, 0), 0);
  monitor.HandleExitNotifications(WallClock::Now());
  armed = true;
  monitor.Sample(WallClock::Now());
  EXPECT_FALSE(armed) << "the pass never read the parent again";
  auto totals = FinishWrapper(f, monitor, root, quit_pipe[1]);
  ASSERT_EQ(totals.size(), 3u);
  double sum = 0;
  for (auto& [pid, m] : totals) sum += m["wchar"];
  for (const BurnerTruth& t : truths) EXPECT_NEAR(totals[t.pid]["wchar"], t.wchar, 0.05 * t.wchar) << t.pid;
  EXPECT_LT(totals[root]["wchar"], 0.05 * kBytes) << "a writer's I/O went to the wrapper too";
  EXPECT_NEAR(sum, truths[0].wchar + truths[1].wchar, 0.05 * kBytes);
  for (auto& p : pipes)
    for (int fd : p) close(fd);
}

TEST(ProcessTreeMonitorTest, CpuAndIoReapedThroughOneWrapperAreCountedOnce) { CheckWrapperChain(1); }
TEST(ProcessTreeMonitorTest, CpuAndIoReapedThroughTwoWrappersAreCountedOnce) { CheckWrapperChain(2); }
TEST(ProcessTreeMonitorTest, CpuAndIoReapedThroughThreeWrappersAreCountedOnce) { CheckWrapperChain(3); }
TEST(ProcessTreeMonitorTest, CpuReapedThroughWrappersIsCountedOnceWhenTheRootIsReapedUnread) {
  CheckWrapperChain(2, false);
}

}  // namespace
}  // namespace grademl::collect

namespace grademl::collect {
namespace {

// A child that writes only once told to exit, then exits: its I/O is all in its unread tail.
[[noreturn]] void WaitThenWriteAndExit(int truth_fd, int exit_fd, size_t bytes) {
  BurnerTruth truth{getpid(), 0, SelfWchar() + static_cast<double>(sizeof(BurnerTruth)) + static_cast<double>(bytes)};
  if (write(truth_fd, &truth, sizeof truth) != sizeof truth) _exit(1);
  char c;
  if (read(exit_fd, &c, 1) != 1) _exit(1);
  int null_fd = open("/dev/null", O_WRONLY);
  std::vector<char> block(1 << 20, 'x');
  for (size_t left = bytes; left > 0;) {
    size_t n = std::min(left, block.size());
    if (write(null_fd, block.data(), n) != static_cast<ssize_t>(n)) _exit(1);
    left -= n;
  }
  _exit(0);
}

// A parent read again because a child was reaped, while a second child exits and is reaped
// right AFTER that read (before its children are looked at again): the second child's I/O is
// not in the counters just read. It used to be handed out from them anyway (it had none of
// its own there, so its bytes later became the parent's own): the parent must be read again.
TEST(ProcessTreeMonitorTest, IoOfAChildReapedRightAfterTheParentWasReadAgainGoesToTheChild) {
  Fixture f;
  bool armed = false;
  int pipes[6][2];
  for (auto& p : pipes) ASSERT_EQ(pipe(p), 0);
  // The pipes' names (pointers: clang 14 cannot capture a structured binding in a lambda).
  int *truth_pipe = pipes[0], *exit1_pipe = pipes[1], *exit2_pipe = pipes[2];
  int *reap2_pipe = pipes[3], *reaped_pipe = pipes[4], *quit_pipe = pipes[5];
  ProcessTreeMonitor::Options options;
  options.test_stage = [&](const char* stage) {
    if (!armed || std::string(stage) != "parent_read_again") return;
    armed = false;
    Tell(exit2_pipe[1]);  // the second child writes, exits and is reaped right now
    Tell(reap2_pipe[1]);
    Wait(reaped_pipe[0]);
  };
  ProcessTreeMonitor monitor(&f.builder, f.run, f.host, "h", options);
  constexpr size_t kBytes = 8 << 20;
  pid_t w1 = 0, w2 = 0;
  int ids[2][2];
  ASSERT_EQ(pipe(ids[0]), 0);
  pid_t root = monitor.LaunchRoot(
      [&] {
        pid_t wrapper = fork();
        if (wrapper == 0) {
          pid_t c1 = fork();
          if (c1 == 0) WriterThenWait(truth_pipe[1], exit1_pipe[0], kBytes);
          pid_t c2 = fork();
          if (c2 == 0) WaitThenWriteAndExit(truth_pipe[1], exit2_pipe[0], kBytes);
          pid_t both[2] = {c1, c2};
          if (write(ids[0][1], both, sizeof both) != sizeof both) _exit(1);
          char c;
          if (waitpid(c1, nullptr, 0) != c1 || read(reap2_pipe[0], &c, 1) != 1 || waitpid(c2, nullptr, 0) != c2) _exit(1);
          if (write(reaped_pipe[1], "x", 1) != 1 || read(quit_pipe[0], &c, 1) != 1) _exit(1);
          _exit(0);
        }
        return wrapper;
      },
      {"wrapper"}, WallClock::Now(), 0);
  ASSERT_GT(root, 0);
  pid_t both[2];
  ASSERT_EQ(read(ids[0][0], both, sizeof both), static_cast<ssize_t>(sizeof both));
  w1 = both[0];
  w2 = both[1];
  std::map<pid_t, BurnerTruth> truths;
  for (int i = 0; i < 2; ++i) {
    BurnerTruth t;
    ASSERT_EQ(read(truth_pipe[0], &t, sizeof t), static_cast<ssize_t>(sizeof t));
    truths[t.pid] = t;
  }
  ASSERT_EQ(truths.count(w1) + truths.count(w2), 2u);
  for (int i = 0; i < 3; ++i) {
    monitor.Sample(WallClock::Now());
    usleep(20000);
  }
  Tell(exit1_pipe[1]);
  for (int i = 0; i < 500 && kill(w1, 0) == 0; ++i) usleep(2000);  // exited and reaped
  ASSERT_NE(kill(w1, 0), 0);
  monitor.HandleExitNotifications(WallClock::Now());
  armed = true;
  monitor.Sample(WallClock::Now());
  EXPECT_FALSE(armed) << "the pass never read the parent again";
  auto totals = FinishWrapper(f, monitor, root, quit_pipe[1]);
  ASSERT_EQ(totals.size(), 3u);
  // Counted once in all. Who gets the second child's unread tail is a share-out by rates
  // here (none of the three had an I/O rate): exact only with the kernel's exit records.
  double sum = 0;
  for (auto& [pid, m] : totals) sum += m["wchar"];
  EXPECT_NEAR(sum, truths[w1].wchar + truths[w2].wchar, 0.05 * kBytes);
  for (auto& p : pipes)
    for (int fd : p) close(fd);
  for (int fd : ids[0]) close(fd);
}

// The root exited (a zombie, not reaped yet) after forking a child that is already gone:
// a pass that notices the exit first reads the kernel's fork events, so the child is still a
// phase under the root (it used to be dropped: a fork whose parent was gone was not followed).
TEST(ProcessTreeMonitorTest, AChildOfARootThatExitedBeforeAnyPassIsStillAPhase) {
  Fixture f;
  ProcessTreeMonitor monitor(&f.builder, f.run, f.host, "h", {});
  if (monitor.process_events() != "proc_connector") {
    SKIP_OR_FAIL_IN_CI("the kernel's process events are not available here (they need root): "
                       << monitor.process_events_error());
  }
  int ids[2];
  ASSERT_EQ(pipe(ids), 0);
  pid_t root = monitor.LaunchRoot(
      [&] {
        pid_t r = fork();
        if (r == 0) {
          pid_t c = fork();
          if (c == 0) _exit(3);
          if (write(ids[1], &c, sizeof c) != sizeof c || waitpid(c, nullptr, 0) != c) _exit(1);
          _exit(0);
        }
        return r;
      },
      {"root"}, WallClock::Now(), 0);
  ASSERT_GT(root, 0);
  pid_t child = 0;
  ASSERT_EQ(read(ids[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(root), &info, WEXITED | WNOWAIT), 0);  // a zombie now
  monitor.Sample(WallClock::Now());  // the first to look: the root is a zombie
  monitor.OnExited(root, WallClock::Now());
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(root, &status, 0, &usage), root);
  monitor.OnReaped(root, WallClock::Now(), usage);
  monitor.Finish(WallClock::Now());
  std::vector<model::Phase> processes = f.Processes();
  ASSERT_EQ(processes.size(), 2u) << "the child was lost";
  const model::Phase* root_phase = nullptr;
  const model::Phase* child_phase = nullptr;
  for (const model::Phase& p : processes) (p.pid == root ? root_phase : child_phase) = &p;
  ASSERT_NE(root_phase, nullptr);
  ASSERT_NE(child_phase, nullptr);
  EXPECT_EQ(child_phase->pid, child);
  EXPECT_EQ(child_phase->parent, root_phase->id);
  std::string exit_code;
  for (const auto& [k, v] : child_phase->tags)
    if (k == "exit_code") exit_code = v;
  EXPECT_EQ(exit_code, "3");
  close(ids[0]);
  close(ids[1]);
}

// A pass that waited for the lock while LaunchRoot held it (through fork and exec) stamps an
// exit no earlier than the moment it got the lock: never before the exit happened, never
// before the phase began (the time it was given was read before the wait).
TEST(ProcessTreeMonitorTest, AnExitNoticedAfterWaitingForTheLockIsNotStampedBeforeItHappened) {
  Fixture f;
  ProcessTreeMonitor monitor(&f.builder, f.run, f.host, "h", {});
  std::atomic<bool> forked{false};
  std::atomic<TimeNs> told{0};
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  TimeNs stale = WallClock::Now();  // as the sampling loop read it, before the launch
  usleep(5000);
  pid_t root = 0;
  std::thread launcher([&] {
    root = monitor.LaunchRoot(
        [&] {
          pid_t r = fork();
          if (r == 0) {
            char c;
            _exit(read(go[0], &c, 1) == 1 ? 0 : 1);
          }
          told = WallClock::Now();  // it exits after this
          if (write(go[1], "x", 1) != 1) return r;
          siginfo_t info{};
          (void)waitid(P_PID, static_cast<id_t>(r), &info, WEXITED | WNOWAIT);  // a zombie now
          forked = true;
          usleep(50000);  // the rest of a slow exec, with the lock held
          return r;
        },
        {"root"}, WallClock::Now(), 0);
  });
  while (!forked) usleep(100);
  monitor.Sample(stale);  // blocks until the launch returns
  launcher.join();
  ASSERT_GT(root, 0);
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(root, &status, 0, &usage), root);
  monitor.OnReaped(root, WallClock::Now(), usage);
  monitor.Finish(WallClock::Now());
  std::vector<model::Phase> processes = f.Processes();
  ASSERT_EQ(processes.size(), 1u);
  EXPECT_GE(processes[0].end_ns, processes[0].start_ns);
  EXPECT_GE(processes[0].end_ns, told.load()) << "the exit was stamped before it happened";
  close(go[0]);
  close(go[1]);
}

}  // namespace
}  // namespace grademl::collect
