// Tests of OutsideProcessMonitor against real processes: the CPU of a child and grandchild
// that exit together (the grandchild reaped by the child, the child by the test) is counted
// once, against their rusage (wait4), and not again as the reaper's "unseen children".
#include "collect/outside_process_monitor.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <fstream>

#include "model/metric_names.h"

namespace grademl::collect {
namespace {

double SelfCpu(int who) {
  rusage ru{};
  getrusage(who, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

void Burn(double seconds) {
  volatile unsigned long long sink = 0;
  while (SelfCpu(RUSAGE_SELF) < seconds) {
    for (int k = 0; k < 100000; ++k) sink = sink * 6364136223846793005ULL + 1;
  }
}

const OutsideProcessMonitor::Offender* Find(const std::vector<OutsideProcessMonitor::Offender>& all, pid_t pid) {
  for (const auto& o : all)
    if (o.pid == pid) return &o;
  return nullptr;
}

TEST(OutsideProcessMonitorTest, AChildAndGrandchildExitingTogetherAreCountedOnce) {
  model::RunBuilder builder(model::RunInfo{});
  model::ResourceId host = builder.AddResource({.kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  // No process is grademl's here (a pid above any pid_max): the test process is outside too.
  OutsideProcessMonitor monitor(&builder, host, "h", {.self_pid = 1 << 23});
  monitor.Sample(WallClock::Now());
  double self0 = SelfCpu(RUSAGE_SELF);

  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child: a grandchild burns 0.4 s, the child reaps it and exits at once.
    pid_t grandchild = fork();
    if (grandchild == 0) {
      Burn(0.4);
      _exit(0);
    }
    (void)!write(ready[1], &grandchild, sizeof grandchild);
    Burn(0.1);
    int st = 0;
    waitpid(grandchild, &st, 0);
    _exit(0);
  }
  close(ready[1]);
  pid_t grandchild = 0;
  ASSERT_EQ(read(ready[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  close(ready[0]);
  // Sample while they run (hang guard: 60 s), then reap the child for its truth.
  int status = 0;
  rusage ru{};
  pid_t reaped = 0;
  for (int i = 0; i < 1200 && reaped == 0; ++i) {
    monitor.Sample(WallClock::Now());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    reaped = wait4(child, &status, WNOHANG, &ru);
  }
  ASSERT_EQ(reaped, child);
  double truth = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  monitor.Sample(WallClock::Now());
  monitor.Sample(WallClock::Now());
  double self_used = SelfCpu(RUSAGE_SELF) - self0;

  std::vector<OutsideProcessMonitor::Offender> all = monitor.Top(100000);
  const auto* c = Find(all, child);
  const auto* g = Find(all, grandchild);
  ASSERT_NE(c, nullptr);
  ASSERT_NE(g, nullptr);
  EXPECT_NEAR(c->cpu_seconds + g->cpu_seconds, truth, 0.05 + 0.1 * truth);
  EXPECT_NE(g->command.find("collect_tests"), std::string::npos) << g->command;
  // The reaper (this process) used only its own CPU: the two were not counted again as
  // its unseen children (before the fix, most of the grandchild's 0.4 s landed here).
  const auto* self = Find(all, getpid());
  double self_counted = self != nullptr ? self->cpu_seconds : 0.0;
  EXPECT_LE(self_counted, self_used + 0.05) << "truth " << truth;
  EXPECT_GE(monitor.cpu_seconds(), c->cpu_seconds + g->cpu_seconds - 1e-9);
}

TEST(OutsideProcessMonitorTest, FinishDeclaresTheTopProcessesWithTheirSeries) {
  model::RunBuilder builder(model::RunInfo{});
  model::ResourceId host = builder.AddResource({.kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  OutsideProcessMonitor monitor(&builder, host, "h", {.self_pid = 1 << 23, .top = 2});
  monitor.Sample(WallClock::Now());
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Burn(0.2);
    _exit(0);
  }
  int status = 0;
  for (int i = 0; i < 1200; ++i) {
    monitor.Sample(WallClock::Now());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (waitpid(child, &status, WNOHANG) == child) break;
  }
  monitor.Finish(WallClock::Now());
  model::RunDelta delta = builder.TakeDelta(true);
  int outside = 0;
  for (const model::Resource& r : delta.resources) {
    if (r.kind != model::ResourceKind::kOutsideProcess) continue;
    ++outside;
    EXPECT_EQ(r.parent, host);
    EXPECT_GT(r.pid, 0);
    EXPECT_FALSE(r.name.empty());
  }
  EXPECT_GE(outside, 1);
  EXPECT_LE(outside, 2);
  int host_series = 0;
  for (const model::SeriesInfo& s : delta.series) {
    if (s.resource == host) ++host_series;
  }
  EXPECT_EQ(host_series, 2);  // other.cpu, other.rss
  // A second Finish adds nothing.
  monitor.Finish(WallClock::Now());
  EXPECT_TRUE(builder.TakeDelta(true).resources.empty());
}

// Privacy (docs/privacy.md): another user's process is kept as its executable's base name and
// its user, never its arguments; the recording user's own keeps its command line; --outside-details
// keeps everyone's. Another user: a child that drops to an unused uid (root only).
// dash burning CPU until `stop` exists, with the secret as its $0: alive for every sample
// the test takes before it creates `stop`, however loaded the machine (a burner of fixed
// work could end unseen while the sampling thread waited for a core).
constexpr const char* kBurnUntil = "while [ ! -e \"$1\" ]; do i=$((i+1)); done";
pid_t StartShellBurnerAs(uid_t uid, const char* secret_arg, const std::string& stop) {
  pid_t child = fork();
  if (child == 0) {
    if (uid != getuid() && (setgid(uid) != 0 || setuid(uid) != 0)) _exit(99);
    execl("/bin/sh", "/bin/sh", "-c", kBurnUntil, secret_arg, stop.c_str(), static_cast<char*>(nullptr));
    _exit(98);
  }
  return child;
}

std::string OutsideNameOf(const model::RunDelta& delta, pid_t pid) {
  for (const model::Resource& r : delta.resources)
    if (r.kind == model::ResourceKind::kOutsideProcess && r.pid == pid) return r.name;
  return "<none>";
}

void CheckOutsidePrivacy(bool details) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to run a process as another user";
  const uid_t other = 54000 + static_cast<uid_t>(getpid() % 1000);
  model::RunBuilder builder(model::RunInfo{}, 0, nullptr);  // names as the monitor gives them
  model::ResourceId host = builder.AddResource({.kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  OutsideProcessMonitor monitor(&builder, host, "h",
                                {.self_pid = 1 << 23, .top = 100000, .min_top_cpu_seconds = 0, .details = details});
  monitor.Sample(WallClock::Now());
  const std::string stop = std::filesystem::temp_directory_path() / ("grademl_outside_stop_" + std::to_string(getpid()));
  std::filesystem::remove(stop);
  pid_t theirs = StartShellBurnerAs(other, "their-SECRET-arg", stop);
  pid_t mine = StartShellBurnerAs(getuid(), "my-own-arg", stop);
  ASSERT_GT(theirs, 0);
  ASSERT_GT(mine, 0);
  int done = 0, status = 0;
  for (int i = 0; i < 3000 && done < 2; ++i) {
    monitor.Sample(WallClock::Now());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (i == 150) {
      std::ofstream(stop).put('x');  // after 150 samples with both alive, in their own shells
      ASSERT_EQ(chmod(stop.c_str(), 0644), 0);
    }
    for (pid_t p : {theirs, mine}) {
      pid_t r = waitpid(p, &status, WNOHANG);
      if (r == p) {
        ++done;
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
      }
    }
  }
  std::filesystem::remove(stop);
  ASSERT_EQ(done, 2);
  monitor.Finish(WallClock::Now());
  model::RunDelta delta = builder.TakeDelta(true);
  std::string their_name = OutsideNameOf(delta, theirs), my_name = OutsideNameOf(delta, mine);
  // Their user is a uid without a name; dash is what /bin/sh runs on Debian.
  std::string sh = std::filesystem::path(std::filesystem::canonical("/bin/sh")).filename().string();
  if (details) {
    EXPECT_EQ(their_name, std::to_string(other) + ":/bin/sh -c " + kBurnUntil + " their-SECRET-arg " + stop);
  } else {
    EXPECT_EQ(their_name, std::to_string(other) + ":" + sh);
  }
  std::string me = "root";
  EXPECT_EQ(my_name, me + ":/bin/sh -c " + kBurnUntil + " my-own-arg " + stop);
}

TEST(OutsideProcessMonitorTest, AnotherUsersProcessKeepsOnlyItsExecutableAndUser) { CheckOutsidePrivacy(false); }
TEST(OutsideProcessMonitorTest, OutsideDetailsKeepsEveryonesCommandLine) { CheckOutsidePrivacy(true); }

}  // namespace
}  // namespace grademl::collect
