// End-to-end tests of log rules applied to a single command (`grademl run --rules FILE --
// CMD`): its epochs are found, its stdout and stderr still reach grademl's byte for byte,
// a grademl killed mid-run does not harm it (its writes neither fail nor raise SIGPIPE), and
// epochs the in-process events recorded are not found twice.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

// A rule for fairseq's "| end of epoch N |" lines, printed when epoch N ends.
std::string WriteRules(const std::string& dir) {
  std::string path = dir + "/rules.yaml";
  std::ofstream(path) << "rules:\n"
                         "  - name: fairseq-epoch\n"
                         "    type: epoch\n"
                         "    begin: '^\\| end of epoch (\\d+) \\|'\n"
                         "    marks: end\n"
                         "    key: epoch\n"
                         "    tags: [epoch]\n"
                         "    phase_name: 'epoch {epoch}'\n";
  return path;
}

std::vector<std::string> PhaseNamesOfType(const json& report, const std::string& leaf) {
  std::vector<std::string> out;
  for (const json& p : report["phases"]) {
    std::string type = p["type"];
    if (type.size() >= leaf.size() && type.compare(type.size() - leaf.size(), leaf.size(), leaf) == 0 &&
        (type.size() == leaf.size() || type[type.size() - leaf.size() - 1] == '/'))
      out.push_back(p["name"]);
  }
  return out;
}

TEST(LogRulesCommandE2E, EpochsOfASingleCommandAndOutputPassedThroughByteForByte) {
  std::string dir = FreshDir("log_rules_command");
  std::string db = dir + "/grademl.db";
  std::string rules = WriteRules(dir);
  // Lines on both streams, a carriage return, bytes that are not UTF-8, and a last line
  // without a newline.
  std::string script =
      "for i in 1 2 3; do printf '| end of epoch %s |\\n' $i; printf 'err %s\\n' $i >&2; sleep 0.2; done; "
      "printf 'bar 50%%\\rbar 100%%\\n\\377\\376 raw'; printf 'last err' >&2";
  CommandResult r =
      RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--rules", rules, "--", "/bin/sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string("| end of epoch 1 |\n| end of epoch 2 |\n| end of epoch 3 |\nbar 50%\rbar 100%\n") +
                       "\xff\xfe raw");
  EXPECT_EQ(r.err, "err 1\nerr 2\nerr 3\nlast err");
  json report = ReportJson(db);
  EXPECT_EQ(PhaseNamesOfType(report, "epoch"), (std::vector<std::string>{"epoch 1", "epoch 2", "epoch 3"}));
  // Epochs 2 and 3 lasted about the 0.2 s between the lines.
  for (const json& p : report["phases"]) {
    if (p["name"] == "epoch 2" || p["name"] == "epoch 3") {
      EXPECT_GT(p["duration_s"].get<double>(), 0.1) << p["name"];
      EXPECT_LT(p["duration_s"].get<double>(), 5.0) << p["name"];
    }
  }
}

// grademl is SIGKILLed while the command writes: the command goes on writing, all of its
// output still arrives, and it ends with its own exit code (recorded by a wrapper shell).
TEST(LogRulesCommandE2E, KillingGrademlDoesNotHarmTheCommandsWrites) {
  std::string dir = FreshDir("log_rules_command_kill");
  std::string db = dir + "/grademl.db";
  std::string rules = WriteRules(dir);
  std::string truth = dir + "/truth";
  std::string out_path = dir + "/out.txt";
  std::ofstream(dir + "/inner.sh")
      << "i=0; while [ $i -lt 40 ]; do printf '| end of epoch %s |\\n' $i || exit 9; printf 'e%s\\n' $i >&2 || exit 10; "
         "i=$((i+1)); sleep 0.05; done; exit 7\n";
  std::string script = "/bin/sh " + dir + "/inner.sh; echo code=$? > " + truth;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open((dir + "/err.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    std::string g = GrademlBinary();
    execl(g.c_str(), g.c_str(), "--db", db.c_str(), "run", "--no-report", "--rules", rules.c_str(), "--", "/bin/sh",
          "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  // The command outlives grademl: wait for its wrapper's verdict (hang guard: 30 s).
  double code = NAN;
  for (int i = 0; i < 300 && std::isnan(code); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    code = ReadTruth(truth, "code");
  }
  EXPECT_EQ(code, 7) << "the command did not end with its own code (9/10: a write failed; none: killed)";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the relay's last copy
  std::string expected, expected_err;
  for (int i = 0; i < 40; ++i) {
    expected += "| end of epoch " + std::to_string(i) + " |\n";
    expected_err += "e" + std::to_string(i) + "\n";
  }
  EXPECT_EQ(ReadFile(out_path), expected);
  EXPECT_EQ(ReadFile(dir + "/err.txt"), expected_err);
}

// Epochs the program recorded itself (libgrademl here; Python's auto-instrumentation the
// same way) are not found a second time in its "epoch N" lines.
TEST(LogRulesCommandE2E, EpochsTheProgramRecordedAreNotDuplicatedByLogRules) {
  std::string dir = FreshDir("log_rules_command_dedupe");
  std::string db = dir + "/grademl.db";
  std::string rules = WriteRules(dir);
  CommandResult r = RunCommand(
      {GrademlBinary(), "--db", db, "run", "--no-report", "--rules", rules, "--", HelperBinary("instrumented_epochs"), "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "epoch 1\nepoch 2\nepoch 3\n");
  json report = ReportJson(db);
  EXPECT_EQ(PhaseNamesOfType(report, "epoch").size(), 3u) << report["phases"].dump(1);
}

}  // namespace
}  // namespace grademl::testing
