// Tests of ProcessTreeMonitor with real processes: an exited command that nobody reaped yet
// (a zombie) is not taken for a new process, and signals reach processes that left the
// command's process group.
#include "collect/process_tree_monitor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace grademl::collect
