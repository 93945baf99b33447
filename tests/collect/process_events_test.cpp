// Tests of ProcessEvents (the kernel's proc connector): datagrams are parsed per process
// (threads' events dropped) and never read past their end; against the real kernel, a
// child's fork and exit are reported; and ProcessTreeMonitor follows at most
// max_event_processes processes through events, counting the rest.
#include "collect/process_events.h"
#include "core/time.h"

#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "collect/process_tree_monitor.h"
#include "skip_or_fail.h"

namespace grademl::collect {
namespace {

using Kind = ProcessEvents::Event::Kind;

// One netlink message carrying one proc connector event, as the kernel sends it.
std::string Datagram(const proc_event& ev) {
  constexpr size_t kCn = offsetof(cn_msg, data);
  std::string out(NLMSG_SPACE(kCn + sizeof ev), '\0');
  nlmsghdr nl{};
  nl.nlmsg_len = static_cast<uint32_t>(NLMSG_LENGTH(kCn + sizeof ev));
  nl.nlmsg_type = NLMSG_DONE;
  cn_msg msg{};
  msg.id.idx = CN_IDX_PROC;
  msg.id.val = CN_VAL_PROC;
  msg.len = sizeof ev;
  std::memcpy(out.data(), &nl, sizeof nl);
  std::memcpy(out.data() + NLMSG_HDRLEN, &msg, kCn);
  std::memcpy(out.data() + NLMSG_HDRLEN + kCn, &ev, sizeof ev);
  return out;
}

proc_event Fork(pid_t parent, pid_t child_pid, pid_t child_tgid) {
  proc_event ev{};
  ev.what = proc_event::PROC_EVENT_FORK;
  ev.event_data.fork = {parent, parent, child_pid, child_tgid};
  return ev;
}

proc_event Exit(pid_t pid, pid_t tgid, uint32_t code) {
  proc_event ev{};
  ev.what = proc_event::PROC_EVENT_EXIT;
  ev.event_data.exit.process_pid = pid;
  ev.event_data.exit.process_tgid = tgid;
  ev.event_data.exit.exit_code = code;
  return ev;
}

TEST(ProcessEventsTest, ProcessesAreReportedAndThreadsDropped) {
  proc_event exec{};
  exec.what = proc_event::PROC_EVENT_EXEC;
  exec.event_data.exec = {42, 42};
  std::string data = Datagram(Fork(10, 42, 42)) + Datagram(Fork(10, 43, 10)) + Datagram(exec) +
                     Datagram(Exit(43, 10, 0)) + Datagram(Exit(42, 42, 3 << 8));
  std::vector<ProcessEvents::Event> events;
  ParseProcessEventDatagram(data.data(), data.size(), &events);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, Kind::kFork);
  EXPECT_EQ(events[0].pid, 42);
  EXPECT_EQ(events[0].parent, 10);
  EXPECT_EQ(events[1].kind, Kind::kExec);
  EXPECT_EQ(events[1].pid, 42);
  EXPECT_EQ(events[2].kind, Kind::kExit);
  EXPECT_EQ(events[2].pid, 42);
  EXPECT_EQ(WEXITSTATUS(events[2].exit_status), 3);
}

TEST(ProcessEventsTest, TruncatedOrForeignDatagramsYieldNothingMore) {
  std::string one = Datagram(Fork(10, 42, 42));
  for (size_t n = 0; n < one.size(); ++n) {
    std::vector<ProcessEvents::Event> events;
    std::string cut = one.substr(0, n);  // its own buffer: reading past it is caught by ASan
    ParseProcessEventDatagram(cut.data(), cut.size(), &events);
    EXPECT_TRUE(events.empty()) << n;
  }
  std::string foreign = one;
  foreign[NLMSG_HDRLEN] = 7;  // another connector's index
  std::vector<ProcessEvents::Event> events;
  ParseProcessEventDatagram(foreign.data(), foreign.size(), &events);
  EXPECT_TRUE(events.empty());
}

// The real kernel's events need root (CAP_NET_ADMIN): without them the tests below skip, and
// fail under CI=true (tests/skip_or_fail.h).
TEST(ProcessEventsTest, TheKernelReportsAChildsForkAndExit) {
  std::string why;
  std::unique_ptr<ProcessEvents> events = ProcessEvents::Open(&why);
  if (!events) SKIP_OR_FAIL_IN_CI("the kernel's process events are not available (they need root): " << why);
  int64_t before = WallClock::MonotonicNow();
  pid_t child = fork();
  if (child == 0) _exit(5);
  ASSERT_GT(child, 0);
  int status = 0;
  waitpid(child, &status, 0);
  int64_t after = WallClock::MonotonicNow();
  bool forked = false, exited = false;
  int64_t fork_t = 0, exit_t = 0;
  for (int i = 0; i < 200 && !(forked && exited); ++i) {
    pollfd fd{events->fd(), POLLIN, 0};
    poll(&fd, 1, 10);
    std::vector<ProcessEvents::Event> got;
    events->Drain(&got);
    for (const auto& e : got) {
      if (e.kind == Kind::kFork && e.pid == child && e.parent == getpid()) {
        forked = true;
        fork_t = e.monotonic_ns;
      }
      if (e.kind == Kind::kExit && e.pid == child) {
        exited = true;
        exit_t = e.monotonic_ns;
        EXPECT_EQ(WEXITSTATUS(e.exit_status), 5);
      }
    }
  }
  EXPECT_TRUE(forked);
  EXPECT_TRUE(exited);
  // Stamped by the kernel when they happened (CLOCK_MONOTONIC): the monitor's phase start
  // and end for a process it could not read in time.
  EXPECT_GE(fork_t, before);
  EXPECT_LE(fork_t, exit_t);
  EXPECT_LE(exit_t, after);
}

// A fork bomb must not grow the monitor without bound: past max_event_processes, forks
// reported by the kernel are counted, not followed.
TEST(ProcessEventsTest, TheMonitorFollowsAtMostItsCapThroughEvents) {
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId run =
      builder.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = WallClock::Now(), .host = "h"});
  model::ResourceId host = builder.AddResource({.parent = 0, .kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  ProcessTreeMonitor monitor(&builder, run, host, "h", {.max_event_processes = 3});
  if (monitor.process_events() != "proc_connector") {
    SKIP_OR_FAIL_IN_CI("the kernel's process events are not available (they need root): "
                       << monitor.process_events_error());
  }
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t root = monitor.LaunchRoot(
      [&] {
        pid_t child = fork();
        if (child == 0) {
          char c;
          if (read(go[0], &c, 1) != 1) _exit(1);
          for (int i = 0; i < 10; ++i) {
            pid_t k = fork();
            if (k == 0) _exit(0);
            waitpid(k, nullptr, 0);
          }
          _exit(0);
        }
        return child;
      },
      {"forker"}, WallClock::Now(), 0);
  ASSERT_GT(root, 0);
  ASSERT_EQ(write(go[1], "x", 1), 1);
  int status = 0;
  while (waitpid(root, &status, WNOHANG) == 0) {
    pollfd fd{monitor.exit_notification_fd(), POLLIN, 0};
    poll(&fd, 1, 5);
    monitor.HandleExitNotifications(WallClock::Now());
  }
  for (int i = 0; i < 10; ++i) {  // the last events may still be on their way
    usleep(5000);
    monitor.HandleExitNotifications(WallClock::Now());
  }
  monitor.Finish(WallClock::Now());
  EXPECT_EQ(monitor.processes_dropped(), 7u);
  size_t processes = 0;
  for (const model::Phase& p : builder.TakeDelta(true).phases) processes += p.leaf_type() == model::kPhaseTypeProcess;
  EXPECT_EQ(processes, 4u);  // the root and the 3 followed
  close(go[0]);
  close(go[1]);
}

// The launching thread can run late after the command's exec on a loaded machine (it waits
// for the exec, then for a CPU): the command's first child may meanwhile fork, exec, run and
// be reaped. It is still followed while it lives, named after its command line, under the
// command. Here `started` returns only once that first child was reaped by the command: it
// lets the child end as soon as the sampling thread has followed it (or after 2 s: the
// old LaunchRoot held the monitor's lock through `started`, so that the sampling thread
// read the fork only after the child was gone: a "[pid N]" phase).
TEST(ProcessEventsTest, TheFirstChildOfACommandIsFollowedWhileTheLaunchWaitsForItsExec) {
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId run =
      builder.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = WallClock::Now(), .host = "h"});
  model::ResourceId host = builder.AddResource({.parent = 0, .kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  ProcessTreeMonitor monitor(&builder, run, host, "h", {});
  if (monitor.process_events() != "proc_connector") {
    SKIP_OR_FAIL_IN_CI("the kernel's process events are not available (they need root): "
                       << monitor.process_events_error());
  }
  char tmpl[] = "/tmp/grademl_first_child_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, fifo = dir + "/gate", pid_file = dir + "/child.pid", done = dir + "/done";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // The first child writes its pid, then waits at the gate as `head` (a second exec).
  const std::string head = "/usr/bin/head -c 1 " + fifo;
  const std::string script = "/bin/sh -c 'echo $$ > " + pid_file + ".tmp && mv " + pid_file + ".tmp " + pid_file +
                             " && exec " + head + "'; : > " + done;
  // The sampling thread, as the recording's loop: events as they come, a pass now and then.
  std::atomic<bool> stop{false}, followed{false};
  std::thread sampler([&] {
    pid_t child = 0;
    int rounds_after = -1;
    for (int i = 0; !stop; ++i) {
      pollfd fd{monitor.exit_notification_fd(), POLLIN, 0};
      poll(&fd, 1, 5);
      monitor.HandleExitNotifications(WallClock::Now());
      if (i % 4 == 0) monitor.Sample(WallClock::Now());
      if (child == 0) {
        std::ifstream in(pid_file);
        in >> child;
      }
      if (child > 0 && rounds_after < 0 && monitor.Lookup(child).phase != 0) {
        // Followed; once it waits at the gate as head (its exec event sent), one more round
        // reads that event.
        std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
        std::string line;
        std::getline(stat, line);
        if (line.find("(head) S") != std::string::npos) rounds_after = 0;
      } else if (rounds_after >= 0 && ++rounds_after >= 2) {
        followed = true;
      }
    }
  });
  pid_t root = monitor.LaunchRoot(
      [&] {
        pid_t child = fork();
        if (child == 0) {
          int null_fd = open("/dev/null", O_WRONLY);
          dup2(null_fd, STDOUT_FILENO);
          execl("/bin/sh", "/bin/sh", "-c", script.c_str(), static_cast<char*>(nullptr));
          _exit(127);
        }
        return child;
      },
      {"/bin/sh", "-c", script}, WallClock::Now(), 0,
      [&](pid_t) {
        // Late: the first child lives until it was followed (2 s at most), then is reaped.
        for (int i = 0; i < 400 && !followed; ++i) usleep(5000);
        int gate = open(fifo.c_str(), O_WRONLY);
        if (gate >= 0) {
          (void)!write(gate, "x", 1);
          close(gate);
        }
        for (int i = 0; i < 2000 && !std::filesystem::exists(done); ++i) usleep(5000);
        return true;
      });
  ASSERT_GT(root, 0);
  EXPECT_TRUE(std::filesystem::exists(done)) << "the command did not reap its first child";
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(root, &status, 0, &usage), root);
  stop = true;
  sampler.join();
  monitor.OnReaped(root, WallClock::Now(), usage);
  monitor.Finish(WallClock::Now());
  pid_t child = 0;
  std::ifstream(pid_file) >> child;
  ASSERT_GT(child, 0);
  std::vector<model::Phase> phases = builder.TakeDelta(true).phases;
  const model::Phase *root_phase = nullptr, *child_phase = nullptr;
  for (const model::Phase& p : phases) {
    if (p.leaf_type() != model::kPhaseTypeProcess) continue;
    if (p.pid == root) root_phase = &p;
    if (p.pid == child) child_phase = &p;
  }
  ASSERT_NE(root_phase, nullptr);
  ASSERT_NE(child_phase, nullptr) << "the first child has no phase";
  EXPECT_EQ(child_phase->name, head) << "not followed while it lived";
  EXPECT_EQ(child_phase->parent, root_phase->id);
  std::string exit_code;
  for (const auto& [k, v] : child_phase->tags)
    if (k == "exit_code") exit_code = v;
  EXPECT_EQ(exit_code, "0");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace grademl::collect
