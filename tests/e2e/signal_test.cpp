// End-to-end tests of how `grademl run` launches and signals the workload: each command and
// each workflow step in a process group of its own, signals to grademl reaching the whole
// recorded tree (processes that left the group included), and a command run from a terminal
// (a real pseudo-terminal here) holding the terminal's foreground.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Whether a process is running (a zombie is not).
bool Running(pid_t pid) {
  if (pid <= 0) return false;
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

pid_t ReadPid(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

// Waits up to `limit` for a file to hold a pid.
pid_t WaitForPid(const std::string& path, std::chrono::milliseconds limit = 10000ms) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pid_t pid = ReadPid(path); pid > 0) return pid;
    std::this_thread::sleep_for(20ms);
  }
  return 0;
}

// Waits for a child; a hang guard kills it after `limit` (the result is then 128+9).
int WaitWithLimit(pid_t pid, std::chrono::milliseconds limit = 20000ms) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// A tree: the command's shell, a grandchild shell, its sleep and a great-grandchild that
// left the session (setsid). Each writes its pid into `dir`.
const char* kTreeScript =
    "sh -c 'setsid sh -c \"echo \\$\\$ > %D/setsid.pid; exec sleep 100\" & echo $$ > %D/grandchild.pid; "
    "sleep 100 & echo $! > %D/sleep.pid; wait' & wait";

std::string TreeScript(const std::string& dir) {
  std::string s = kTreeScript;
  for (size_t at; (at = s.find("%D")) != std::string::npos;) s.replace(at, 2, dir);
  return s;
}

// Kills what a failing test left running.
void KillLeftovers(const std::vector<pid_t>& pids) {
  for (pid_t p : pids)
    if (Running(p)) kill(p, SIGKILL);
}

TEST(SignalE2E, SigtermStopsTheWholeTreeOfACommand) {
  std::string dir = FreshDir("signal_tree");
  std::string db = dir + "/g.db";
  pid_t grademl = StartCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--interval", "50ms", "--",
                                "/bin/sh", "-c", TreeScript(dir)});
  pid_t setsid_pid = WaitForPid(dir + "/setsid.pid");
  pid_t grandchild = WaitForPid(dir + "/grandchild.pid");
  pid_t sleeper = WaitForPid(dir + "/sleep.pid");
  ASSERT_GT(setsid_pid, 0);
  ASSERT_GT(grandchild, 0);
  ASSERT_GT(sleeper, 0);
  std::this_thread::sleep_for(500ms);  // several passes: the monitor follows all of them
  kill(grademl, SIGTERM);
  EXPECT_EQ(WaitWithLimit(grademl), 128 + SIGTERM);
  std::vector<pid_t> tree = {grandchild, sleeper, setsid_pid};
  for (pid_t p : tree) EXPECT_FALSE(Running(p)) << "pid " << p << " still runs after SIGTERM to grademl";
  KillLeftovers(tree);
  json report = ReportJson(db);
  EXPECT_TRUE(report["run"]["complete"].get<bool>());
  EXPECT_EQ(report["run"]["exit_signal"].get<int>(), SIGTERM);
  // Every process of the tree was recorded, and none is open past the run's end.
  int64_t run_end = report["run"]["end_ns"];
  for (pid_t p : tree) {
    bool found = false;
    for (const json& ph : report["phases"]) {
      if (ph["pid"].is_number() && ph["pid"].get<pid_t>() == p) {
        found = true;
        EXPECT_LE(ph["end_ns"].get<int64_t>(), run_end);
      }
    }
    EXPECT_TRUE(found) << "pid " << p << " not recorded";
  }
}

TEST(SignalE2E, SigtermStopsTheWholeTreeOfAWorkflowStep) {
  std::string dir = FreshDir("signal_workflow");
  std::string db = dir + "/g.db";
  std::string script = TreeScript(dir);
  std::string quoted;  // a YAML single-quoted scalar
  for (char c : script) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  std::ofstream(dir + "/pipeline.yaml") << "steps:\n  tree:\n    cmd: '" << quoted << "'\n  other:\n    cmd: sleep 100\n";
  pid_t grademl = StartCommand({GrademlBinary(), "--db", db, "run", "--no-report", "-j", "2", dir + "/pipeline.yaml"});
  pid_t setsid_pid = WaitForPid(dir + "/setsid.pid");
  pid_t grandchild = WaitForPid(dir + "/grandchild.pid");
  pid_t sleeper = WaitForPid(dir + "/sleep.pid");
  ASSERT_GT(setsid_pid, 0);
  std::this_thread::sleep_for(600ms);
  kill(grademl, SIGTERM);
  EXPECT_EQ(WaitWithLimit(grademl), 130);  // a stopped workflow
  std::vector<pid_t> tree = {grandchild, sleeper, setsid_pid};
  for (pid_t p : tree) EXPECT_FALSE(Running(p)) << "pid " << p << " still runs after SIGTERM to grademl";
  KillLeftovers(tree);
  json report = ReportJson(db);
  EXPECT_TRUE(report["run"]["complete"].get<bool>());
  for (const json& ph : report["phases"]) {
    if (ph["type"] == "run/step") {
      EXPECT_EQ(ph["tags"]["exit_code"], "143") << ph["name"];
    }
  }
}

// A process that ignores SIGTERM: the third signal kills the tree, and grademl ends.
TEST(SignalE2E, TheThirdSignalKillsWhatIgnoresTheFirst) {
  std::string dir = FreshDir("signal_escalation");
  std::string db = dir + "/g.db";
  pid_t grademl = StartCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/bin/sh", "-c",
                                "trap '' TERM; sleep 100 & echo $! > " + dir + "/sleep.pid; wait; wait"});
  pid_t sleeper = WaitForPid(dir + "/sleep.pid");
  ASSERT_GT(sleeper, 0);
  std::this_thread::sleep_for(300ms);
  kill(grademl, SIGTERM);  // the sleep dies (trap '' is inherited: it ignores it too)
  std::this_thread::sleep_for(300ms);
  int status = 0;
  EXPECT_EQ(waitpid(grademl, &status, WNOHANG), 0) << "grademl ended while its command still ran";
  kill(grademl, SIGTERM);
  std::this_thread::sleep_for(100ms);
  kill(grademl, SIGTERM);
  EXPECT_EQ(WaitWithLimit(grademl), 128 + SIGKILL);
  EXPECT_FALSE(Running(sleeper));
  KillLeftovers({sleeper});
  EXPECT_TRUE(ReportJson(db)["run"]["complete"].get<bool>());
}

// grademl under a real pseudo-terminal, as from an interactive shell.
class PtySession {
 public:
  explicit PtySession(const std::vector<std::string>& argv) {
    winsize ws{.ws_row = 24, .ws_col = 80, .ws_xpixel = 0, .ws_ypixel = 0};
    pid_ = forkpty(&master_, nullptr, nullptr, &ws);
    if (pid_ == 0) {
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~PtySession() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }
  bool ok() const { return pid_ > 0 && master_ >= 0; }
  void Write(const std::string& text) {
    ssize_t n = write(master_, text.data(), text.size());
    (void)n;
  }
  // Reads the terminal until `text` shows up or `limit` passes.
  bool ReadUntil(const std::string& text, std::chrono::milliseconds limit = 10000ms) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (output_.find(text) == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd fd{master_, POLLIN, 0};
      if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      ssize_t n = read(master_, buf, sizeof buf);
      if (n <= 0) return output_.find(text) != std::string::npos;
      output_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  int Wait() {
    ReadUntil("\x01never", 300ms);  // drain what is left
    exited_ = true;
    return WaitWithLimit(pid_);
  }
  const std::string& output() const { return output_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int master_ = -1;
  bool exited_ = false;
  std::string output_;
};

TEST(SignalE2E, ACommandOnATerminalReadsItsInput) {
  std::string dir = FreshDir("signal_pty_read");
  PtySession pty({GrademlBinary(), "--db", dir + "/g.db", "run", "--no-report", "--", "/bin/sh", "-c",
                  "echo ready; read x; echo got $x"});
  ASSERT_TRUE(pty.ok());
  ASSERT_TRUE(pty.ReadUntil("ready")) << pty.output();
  pty.Write("hello\n");
  EXPECT_TRUE(pty.ReadUntil("got hello")) << pty.output();
  EXPECT_EQ(pty.Wait(), 0) << pty.output();
}

TEST(SignalE2E, CtrlCOnATerminalStopsTheCommand) {
  std::string dir = FreshDir("signal_pty_intr");
  PtySession pty({GrademlBinary(), "--db", dir + "/g.db", "run", "--no-report", "--", "/bin/sh", "-c",
                  // A grandchild in the foreground (sh ignores SIGINT in what it starts with &).
                  "sh -c 'echo $$ > " + dir + "/sleep.pid; echo ready; exec sleep 100'; echo not reached"});
  ASSERT_TRUE(pty.ok());
  ASSERT_TRUE(pty.ReadUntil("ready")) << pty.output();
  pid_t sleeper = WaitForPid(dir + "/sleep.pid");
  std::this_thread::sleep_for(200ms);
  pty.Write("\x03");  // the terminal's INTR character
  EXPECT_EQ(pty.Wait(), 128 + SIGINT) << pty.output();
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(Running(sleeper)) << "the grandchild did not get the Ctrl-C";
  EXPECT_EQ(pty.output().find("not reached"), std::string::npos) << pty.output();
  KillLeftovers({sleeper});
  EXPECT_EQ(ReportJson(dir + "/g.db")["run"]["exit_signal"].get<int>(), SIGINT);
}

// Ctrl-Z stops the command's job and grademl's with it; continued, the command gets the
// terminal back and its read works.
TEST(SignalE2E, CtrlZStopsGrademlAndContinueResumesTheCommand) {
  std::string dir = FreshDir("signal_pty_stop");
  PtySession pty({GrademlBinary(), "--db", dir + "/g.db", "run", "--no-report", "--", "/bin/sh", "-c",
                  "echo ready; read x; echo got $x"});
  ASSERT_TRUE(pty.ok());
  ASSERT_TRUE(pty.ReadUntil("ready")) << pty.output();
  std::this_thread::sleep_for(200ms);
  pty.Write("\x1a");  // the terminal's SUSP character
  int status = 0;
  pid_t got = 0;
  for (int i = 0; i < 500 && got == 0; ++i) {
    got = waitpid(pty.pid(), &status, WNOHANG | WUNTRACED);
    if (got == 0) std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(got, pty.pid());
  EXPECT_TRUE(WIFSTOPPED(status)) << "grademl did not stop with its command";
  kill(pty.pid(), SIGCONT);
  pty.Write("again\n");
  EXPECT_TRUE(pty.ReadUntil("got again")) << pty.output();
  EXPECT_EQ(pty.Wait(), 0) << pty.output();
}

}  // namespace
}  // namespace grademl::testing
