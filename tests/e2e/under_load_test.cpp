// Issue 25 ("Exact under load"): the load harness (e2e/load.h) itself, and the issue's
// short-children command run many times under it, each process checked against the shells'
// own record of their pids.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"
#include "e2e/under_load.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

// Whether a process of this pid exists and is not a zombie.
bool LoadPidRunning(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// The live processes whose process group is `group` (zombies left out).
std::vector<pid_t> LoadGroupMembers(pid_t group) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = ReadFile(e.path().string() + "/stat");
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (std::sscanf(stat.c_str() + close + 2, "%c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == group && state != 'Z')
      out.push_back(std::stoi(name));
  }
  return out;
}

// Waits up to `seconds` for none of `pids` to be running.
bool LoadAllGone(const std::vector<pid_t>& pids, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    bool any = false;
    for (pid_t p : pids) any = any || LoadPidRunning(p);
    if (!any) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The default load runs, is measured as real, and Stop() leaves nothing of it: no member of
// its group, no busy loop.
TEST(OutsideLoadHarness, TheLoadIsRealAndStopLeavesNothingRunning) {
  OutsideLoad load(OutsideLoad::Default());
  ASSERT_TRUE(load.running()) << load.error();
  pid_t group = load.group();
  std::vector<pid_t> pids = load.pids();
  ASSERT_EQ(pids.size(), static_cast<size_t>(OutsideLoad::Cores() + 2));  // leader, busy loops, storm
  for (pid_t p : pids) EXPECT_EQ(getpgid(p), group);
  EXPECT_NE(getpgid(0), group);  // the test is not in the load's group
  std::this_thread::sleep_for(std::chrono::seconds(2));
  OutsideLoad::Achieved running = load.Measure();
  EXPECT_GT(running.forks, 0);
  load.Stop();
  EXPECT_FALSE(load.running());
  EXPECT_TRUE(LoadWasReal(load));
  OutsideLoad::Achieved a = load.Measure();
  std::printf("achieved: %s\n", load.Describe().c_str());
  EXPECT_GE(a.forks, running.forks);
  EXPECT_EQ(a.fork_failures, 0);
  EXPECT_EQ(a.burners, OutsideLoad::Cores());
  // wait4's account of the busy loops, at least what /proc said of them while they ran.
  EXPECT_GE(a.burner_cpu_seconds + 0.02 * a.burners, running.burner_cpu_seconds);
  for (pid_t p : pids) EXPECT_FALSE(LoadPidRunning(p)) << p;
  EXPECT_TRUE(LoadGroupMembers(group).empty());
  // Stopped twice is stopped once; the figures stay.
  load.Stop();
  EXPECT_EQ(load.Measure().forks, a.forks);
}

// The checks on the load can fail: a load never started, one without its storm, one without
// busy loops, one with a busy loop stopped, one whose short processes all fail, are not
// real, and say why.
TEST(OutsideLoadHarness, ALoadThatDidNotRunIsNotReal) {
  OutsideLoad never;
  EXPECT_FALSE(LoadWasReal(never));
  EXPECT_NE(never.WhyNotReal().find("never ran"), std::string::npos) << never.WhyNotReal();

  OutsideLoad nothing(OutsideLoad::Options{});
  EXPECT_FALSE(nothing.running());
  EXPECT_FALSE(LoadWasReal(nothing));

  OutsideLoad::Options no_storm = OutsideLoad::Default();
  no_storm.forks_per_second = 0;
  OutsideLoad burners_only(no_storm);
  ASSERT_TRUE(burners_only.running()) << burners_only.error();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  burners_only.Stop();
  EXPECT_FALSE(LoadWasReal(burners_only));
  EXPECT_NE(burners_only.WhyNotReal().find("short processes a second"), std::string::npos)
      << burners_only.WhyNotReal();

  OutsideLoad::Options no_burners = OutsideLoad::Default();
  no_burners.burners = 0;
  OutsideLoad storm_only(no_burners);
  ASSERT_TRUE(storm_only.running()) << storm_only.error();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  storm_only.Stop();
  EXPECT_FALSE(LoadWasReal(storm_only));
  EXPECT_NE(storm_only.WhyNotReal().find("no busy loop"), std::string::npos) << storm_only.WhyNotReal();

  // A busy loop stopped (SIGSTOP) does not load the machine: it is not runnable.
  OutsideLoad stopped_burner(OutsideLoad::Default());
  ASSERT_TRUE(stopped_burner.running()) << stopped_burner.error();
  kill(stopped_burner.pids()[1], SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stopped_burner.Stop();
  EXPECT_FALSE(LoadWasReal(stopped_burner));
  EXPECT_NE(stopped_burner.WhyNotReal().find("runnable"), std::string::npos) << stopped_burner.WhyNotReal();

  OutsideLoad::Options failing = OutsideLoad::Default();
  failing.fork_program = "/bin/false";
  OutsideLoad failing_storm(failing);
  ASSERT_TRUE(failing_storm.running()) << failing_storm.error();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  failing_storm.Stop();
  EXPECT_EQ(failing_storm.Measure().forks, 0);
  EXPECT_GT(failing_storm.Measure().fork_failures, 0);
  EXPECT_FALSE(LoadWasReal(failing_storm));
}

// A scope left early (as by a failed ASSERT) stops the load; so does the end of a test
// process killed with SIGKILL (the kernel kills each process of the load with it).
TEST(OutsideLoadHarness, NoLoadOutlivesItsScopeOrItsProcess) {
  std::vector<pid_t> pids;
  pid_t group = 0;
  auto leave_early = [&] {
    OutsideLoad load(OutsideLoad::Default());
    pids = load.pids();
    group = load.group();
    if (load.running()) return;  // the early way out
    ADD_FAILURE() << load.error();
  };
  leave_early();
  ASSERT_FALSE(pids.empty());
  for (pid_t p : pids) EXPECT_FALSE(LoadPidRunning(p)) << p;
  EXPECT_TRUE(LoadGroupMembers(group).empty());

  // A child process starts a load, says its pids and is killed with SIGKILL: no destructor
  // runs, yet the load dies with it.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    OutsideLoad load(OutsideLoad::Default());
    std::string text;
    for (pid_t p : load.pids()) text += std::to_string(p) + " ";
    text += "\n";
    if (write(fds[1], text.data(), text.size()) < 0) _exit(2);
    close(fds[1]);
    for (;;) pause();
  }
  close(fds[1]);
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) {
    text.append(buf, static_cast<size_t>(n));
    if (text.find('\n') != std::string::npos) break;
  }
  close(fds[0]);
  std::vector<pid_t> orphaned;
  size_t at = 0;
  while (at < text.size() && text[at] != '\n') {
    size_t end = text.find(' ', at);
    if (end == std::string::npos) break;
    orphaned.push_back(std::stoi(text.substr(at, end - at)));
    at = end + 1;
  }
  ASSERT_EQ(orphaned.size(), static_cast<size_t>(OutsideLoad::Cores() + 2)) << text;
  for (pid_t p : orphaned) EXPECT_TRUE(LoadPidRunning(p)) << p;
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(LoadAllGone(orphaned, 10)) << "the load outlived the process that started it";
}

// ---------------------------------------------------------------------------------------
// Lost processes under load
// ---------------------------------------------------------------------------------------

// The pids the shells of one run wrote of themselves: the outer shell, the one that exits 3,
// the one that kills itself with SIGTERM.
struct LostTruth {
  int outer = 0, exited = 0, killed = 0;
};

// The command, each shell writing its pid ($$) first: only builtins besides the
// three shells, so the run has exactly three processes.
std::string LostCommand(const std::string& dir) {
  return "echo $$ > " + dir + "/outer; /bin/sh -c 'echo $$ > " + dir + "/exited; exit 3'; /bin/sh -c 'echo $$ > " +
         dir + "/killed; kill -TERM $$'; true";
}

int LostPidIn(const std::string& path) {
  std::string text = ReadFile(path);
  return text.empty() ? 0 : std::atoi(text.c_str());
}

// What is not exact in the run's processes, one line each ("" for none): a process that ran
// (truth) with no phase, or with more than one; a phase with the wrong parent, exit code or
// signal; a process phase for a pid the command never ran.
std::vector<std::string> LostProcesses(const json& report, const LostTruth& truth) {
  std::vector<std::string> out;
  const json& phases = report["phases"];
  if (!phases.is_array() || phases.empty()) return {"no phases at all"};
  const json& root = phases[0];
  std::map<int, std::vector<const json*>> by_pid;
  for (const json& p : phases) {
    if (p["pid"].is_number() && p["type"].get<std::string>().find("process") != std::string::npos)
      by_pid[p["pid"].get<int>()].push_back(&p);
  }
  auto phase_of = [&](int pid, const std::string& role) -> const json* {
    if (pid <= 0) {
      out.push_back(role + ": the shell wrote no pid");
      return nullptr;
    }
    auto it = by_pid.find(pid);
    if (it == by_pid.end()) {
      out.push_back(role + " (pid " + std::to_string(pid) + "): no phase");
      return nullptr;
    }
    if (it->second.size() > 1)
      out.push_back(role + " (pid " + std::to_string(pid) + "): " + std::to_string(it->second.size()) + " phases");
    return it->second[0];
  };
  auto ending = [](const json& p) {
    const json& tags = p["tags"];
    return (tags.is_object() ? tags.value("exit_code", "-") : "-") + "/" +
           (tags.is_object() ? tags.value("exit_signal", "-") : "-");
  };
  const json* outer = phase_of(truth.outer, "the outer shell");
  if (outer != nullptr && (*outer)["parent"] != root["id"])
    out.push_back("the outer shell's phase is not the run's child (parent " + (*outer)["parent"].dump() + ")");
  struct Expected {
    int pid;
    const char* role;
    const char* ending;
  };
  for (const Expected& e : {Expected{truth.exited, "the shell that exits 3", "3/-"},
                            Expected{truth.killed, "the shell killed by SIGTERM", "-/15"}}) {
    const json* p = phase_of(e.pid, e.role);
    if (p == nullptr) continue;
    if (outer != nullptr && (*p)["parent"] != (*outer)["id"])
      out.push_back(std::string(e.role) + ": parent phase " + (*p)["parent"].dump() + ", not the outer shell's " +
                    (*outer)["id"].dump());
    if (ending(*p) != e.ending)
      out.push_back(std::string(e.role) + ": ended " + ending(*p) + " (exit_code/exit_signal), not " + e.ending);
  }
  for (const auto& [pid, list] : by_pid) {
    if (pid == truth.outer || pid == truth.exited || pid == truth.killed) continue;
    out.push_back("a phase for pid " + std::to_string(pid) + " (" + (*list[0])["name"].get<std::string>() +
                  "), which the command never ran");
  }
  return out;
}

// Of the run's three processes, those whose phase has no duration (start == end: grademl
// never saw it alive; it read the fork after the process was gone, so it has no name, no
// duration and no CPU of its own). Not counted as lost (the definition), but printed.
int LostUnseen(const json& report, const LostTruth& truth) {
  int n = 0;
  for (const json& p : report["phases"]) {
    if (!p["pid"].is_number() || p["end_ns"].is_null()) continue;
    int pid = p["pid"].get<int>();
    if ((pid == truth.outer || pid == truth.exited || pid == truth.killed) && p["end_ns"] == p["start_ns"]) ++n;
  }
  return n;
}

struct LostRun {
  int exit_code = -1;
  std::string err;
  LostTruth truth;
  json report;
};

LostRun LostRunOnce(const std::string& dir) {
  LostRun run;
  std::string db = dir + "/g.db";
  CommandResult r =
      RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/bin/sh", "-c", LostCommand(dir)});
  run.exit_code = r.exit_code;
  run.err = r.err;
  run.truth = {LostPidIn(dir + "/outer"), LostPidIn(dir + "/exited"), LostPidIn(dir + "/killed")};
  if (r.exit_code == 0) run.report = ReportJson(db);
  return run;
}

// The check finds what it is meant to: a real run's report, with a phase removed, its
// parent changed, its exit code or signal changed, or a stranger's phase added, is not exact.
TEST(LostProcessE2E, TheCheckFindsEveryKindOfLoss) {
  std::string dir = FreshDir("lost_process_planted");
  LostRun run = LostRunOnce(dir);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  if (run.report["run"]["process_events"] != "proc_connector") {
    SKIP_OR_FAIL_IN_CI("the kernel's process events are not available here (they need root)");
  }
  EXPECT_EQ(LostProcesses(run.report, run.truth), std::vector<std::string>{}) << run.report["phases"].dump(1);

  auto planted = [&](const std::function<void(json&)>& change) {
    json copy = run.report;
    change(copy);
    return LostProcesses(copy, run.truth);
  };
  auto find = [](json& report, int pid) -> json& {
    for (json& p : report["phases"])
      if (p["pid"] == pid) return p;
    static json none;
    return none;
  };
  // Removed.
  EXPECT_EQ(planted([&](json& r) {
              json kept = json::array();
              for (const json& p : r["phases"])
                if (p["pid"] != run.truth.exited) kept.push_back(p);
              r["phases"] = kept;
            }).size(),
            1u);
  // Under the wrong parent (the run instead of the outer shell).
  EXPECT_EQ(planted([&](json& r) { find(r, run.truth.killed)["parent"] = r["phases"][0]["id"]; }).size(), 1u);
  // Exit code and signal wrong or missing.
  EXPECT_EQ(planted([&](json& r) { find(r, run.truth.exited)["tags"]["exit_code"] = "0"; }).size(), 1u);
  EXPECT_EQ(planted([&](json& r) { find(r, run.truth.killed)["tags"].erase("exit_signal"); }).size(), 1u);
  EXPECT_EQ(planted([&](json& r) { find(r, run.truth.killed)["tags"]["exit_code"] = "143"; }).size(), 1u);
  // Twice, or a stranger.
  EXPECT_EQ(planted([&](json& r) { r["phases"].push_back(find(r, run.truth.outer)); }).size(), 1u);
  EXPECT_EQ(planted([&](json& r) {
              json stranger = find(r, run.truth.exited);
              stranger["pid"] = 1;
              r["phases"].push_back(stranger);
            }).size(),
            1u);
  // A wrong truth is a loss too (the shells' pids are the reference).
  EXPECT_FALSE(LostProcesses(run.report, {run.truth.outer, run.truth.exited, run.truth.outer}).empty());
}

// The command, run GRADEML_LOST_PROCESS_RUNS times (20 by default, 5-20 s on the
// shared 2-core VM; bench/lost_processes_under_load.sh runs 100, which took 10-94 s there)
// beside one busy loop per core and a storm of 200 short processes a second: every process
// of every run must have its phase, under its parent, with how it ended. Prints "lost: K of
// N runs" (the figure of docs/reliability.md, "Under load").
TEST(LostProcessE2E, ShortChildrenUnderLoadAreNeverLost) {
  int runs = 20;
  if (const char* n = std::getenv("GRADEML_LOST_PROCESS_RUNS"); n != nullptr && std::atoi(n) > 0) runs = std::atoi(n);
  OutsideLoad load(OutsideLoad::Default());
  ASSERT_TRUE(load.running()) << load.error();
  int inexact = 0, processes_lost = 0, unseen = 0;
  std::vector<std::string> first;
  for (int i = 0; i < runs; ++i) {
    std::string dir = FreshDir("lost_process_under_load/" + std::to_string(i));
    LostRun run = LostRunOnce(dir);
    ASSERT_EQ(run.exit_code, 0) << "run " << i << ": " << run.err;
    if (i == 0 && run.report["run"]["process_events"] != "proc_connector") {
      SKIP_OR_FAIL_IN_CI("the kernel's process events are not available here (they need root): short processes "
                         "are not all phases");
    }
    unseen += LostUnseen(run.report, run.truth);
    std::vector<std::string> lost = LostProcesses(run.report, run.truth);
    if (lost.empty()) continue;
    ++inexact;
    processes_lost += static_cast<int>(lost.size());
    for (const std::string& l : lost)
      if (first.size() < 12) first.push_back("run " + std::to_string(i) + " (" + dir + "): " + l);
  }
  load.Stop();
  std::printf("lost: %d of %d runs inexact (%d findings; besides, %d phases of 0 s, never seen alive) under load: %s\n",
              inexact, runs, processes_lost, unseen, load.Describe().c_str());
  EXPECT_TRUE(LoadWasReal(load));
  std::string detail;
  for (const std::string& l : first) detail += "\n  " + l;
  EXPECT_EQ(inexact, 0) << inexact << " of " << runs << " runs lost or mislabelled processes:" << detail;
}

}  // namespace
}  // namespace grademl::testing
