// End-to-end tests of `grademl run`'s command line and what it prints while running: flags
// out of range are one-line usage errors (exit 2) before anything is recorded, a lone
// directory or missing workflow file is not taken for a command, untrusted step names reach
// the terminal escaped, and a command that cannot start does not get misleading figures.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

// Each case: one line on stderr, exit 2, nothing on stdout, no store created.
void ExpectUsageErrors(const std::string& dir, const std::vector<std::vector<std::string>>& cases,
                       const std::vector<std::string>& must_say = {}) {
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string db = dir + "/case" + std::to_string(i) + ".db";
    // A hang guard: the grademl of before spun forever on --interval 1ns.
    std::vector<std::string> argv = {"/usr/bin/timeout", "-s", "KILL", "20", GrademlBinary(), "--db", db};
    argv.insert(argv.end(), cases[i].begin(), cases[i].end());
    std::string what;
    for (const auto& a : cases[i]) what += a + " ";
    CommandResult r = RunCommand(argv);
    EXPECT_EQ(r.exit_code, 2) << what << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), r.err.find("Run 'grademl --help'") == std::string::npos ? 1 : 2)
        << what << r.err;
    EXPECT_LT(r.err.size(), 300u) << what << r.err;  // no 309-digit bound
    EXPECT_TRUE(r.err.rfind("grademl: ", 0) == 0) << what << r.err;
    EXPECT_TRUE(r.out.empty()) << what << r.out;
    EXPECT_FALSE(std::filesystem::exists(db)) << what << ": a run was recorded";
    if (i < must_say.size() && !must_say[i].empty()) {
      EXPECT_NE(r.err.find(must_say[i]), std::string::npos) << what << r.err;
    }
  }
}

// --overhead-budget: a percentage from 0.1% to 100%, with its % sign.
TEST(RunCliE2E, OverheadBudgetsOutOfRangeOrWithoutAPercentSignAreRefused) {
  std::string dir = FreshDir("cli_budget");
  std::vector<std::vector<std::string>> cases;
  std::vector<std::string> says;
  for (const char* value : {"1", "0.01", "0%", "0.05%", "101%", "-1%", "nan%", "inf%", "%", "1%%", "abc"}) {
    cases.push_back({"run", "--no-report", "--overhead-budget", value, "--", "/bin/true"});
    says.push_back("is not a percentage from 0.1% to 100%");
  }
  ExpectUsageErrors(dir, cases, says);
  for (const char* ok : {"0.1%", "2%", "100%"}) {
    CommandResult r =
        RunCommand({GrademlBinary(), "--db", dir + "/ok.db", "run", "--no-report", "--overhead-budget", ok, "--", "/bin/true"});
    EXPECT_EQ(r.exit_code, 0) << ok << r.err;
  }
}

// A PostgreSQL store on a machine without the PostgreSQL client library (loaded only when
// such a store is used): a one-line error naming the store, the library and the package.
TEST(RunCliE2E, APostgresStoreWithoutLibpqIsAOneLineError) {
  CommandResult r = RunCommand({"/usr/bin/env", "GRADEML_TEST_LIBPQ=/nonexistent/libpq.so.5", GrademlBinary(), "--db",
                                "postgresql://u:secret@localhost/grademl", "ls"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("libpq5"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/libpq.so.5"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("secret"), std::string::npos) << r.err;
  // And nothing of it for an SQLite store: no libpq needed.
  if (const char* backend = std::getenv("GRADEML_TEST_BACKEND"); backend && std::string(backend) == "postgresql") return;
  std::string dir = FreshDir("cli_no_libpq");
  CommandResult ok = RunCommand({"/usr/bin/env", "GRADEML_TEST_LIBPQ=/nonexistent/libpq.so.5", GrademlBinary(), "--db",
                                 dir + "/g.db", "run", "--no-report", "--", "/bin/true"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST(RunCliE2E, IntervalsOutOfRangeOrWithoutAUnitAreRefused) {
  std::string dir = FreshDir("cli_interval");
  std::vector<std::vector<std::string>> cases;
  std::vector<std::string> says;
  for (auto [value, say] : std::vector<std::pair<std::string, std::string>>{
           {"1ns", "outside 1ms to 1h"}, {"999us", "outside 1ms to 1h"}, {"2h", "outside 1ms to 1h"},
           {"inf", "add a unit"}, {"infs", ""}, {"1e30s", ""}, {"1e400s", ""}, {"nan", ""}, {"nanms", ""},
           {"0", "add a unit"}, {"5", "add a unit: 5ms or 5s"}, {"-1s", "positive"}}) {
    cases.push_back({"run", "--no-report", "--interval", value, "--", "/bin/true"});
    says.push_back(say);
  }
  ExpectUsageErrors(dir, cases, says);
  // The bounds themselves are fine.
  for (const char* ok : {"1ms", "1h"}) {
    CommandResult r = RunCommand({GrademlBinary(), "--db", dir + "/ok.db", "run", "--no-report", "--interval", ok, "--", "/bin/true"});
    EXPECT_EQ(r.exit_code, 0) << ok << r.err;
  }
}

TEST(RunCliE2E, NumericFlagsOfEveryVerbHaveARange) {
  std::string dir = FreshDir("cli_numbers");
  ExpectUsageErrors(dir,
                    {{"run", "-j", "-1", "--", "/bin/true"},
                     {"run", "-j", "1e9", "--", "/bin/true"},
                     {"run", "-j", "99999999999999999999999", "--", "/bin/true"},
                     {"run", "-j", "2x", "--", "/bin/true"},
                     {"report", "--max-phases", "-5"},
                     {"report", "--max-phases", "18446744073709551615"},
                     {"diff", "1", "2", "--top", "-1"},
                     {"diff", "1", "2", "--min-change", "-1"},
                     {"diff", "1", "2", "--min-change", "nan"},
                     {"diff", "1", "2", "--min-change", "inf"},
                     {"query", "--max-width", "-3", "select 1"}},
                    {"'-1' is not a whole number from 0 to 1024"});
}

TEST(RunCliE2E, ADirectoryOrAMissingWorkflowFileIsNotACommand) {
  std::string dir = FreshDir("cli_not_a_command");
  std::filesystem::create_directories(dir + "/somedir");
  ExpectUsageErrors(dir,
                    {{"run", dir + "/missing.yaml"}, {"run", dir + "/missing.YML"}, {"run", dir + "/somedir"},
                     {"run", "--rules", dir + "/somedir", "--", "/bin/true"},
                     {"run", "--rules", dir + "/nope.rules", "--", "/bin/true"}},
                    {"workflow file " + dir + "/missing.yaml does not exist", "does not exist",
                     dir + "/somedir is a directory"});
}

TEST(RunCliE2E, UntrustedStepNamesAreEscapedOnTheTerminal) {
  std::string dir = FreshDir("cli_step_names");
  // A step name with an escape sequence and a newline (YAML double quotes: \e is ESC).
  std::ofstream(dir + "/pipeline.yaml") << "steps:\n"
                                           "  \"red\\e[31m\\nline\":\n"
                                           "    cmd: echo out; exit 3\n"
                                           "  after:\n"
                                           "    cmd: echo never\n"
                                           "    after: [\"red\\e[31m\\nline\"]\n";
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", dir + "/pipeline.yaml"});
  ASSERT_NE(r.exit_code, 2) << r.err;  // the spec itself is accepted
  std::string all = r.out + r.err;
  EXPECT_EQ(all.find('\x1b'), std::string::npos) << all;
  EXPECT_NE(r.err.find("[grademl] start red\\x1b[31m\\nline\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[grademl] FAILED red\\x1b[31m\\nline (exit 3"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("red\\x1b[31m\\nline | out\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("grademl: step(s) failed: red\\x1b[31m\\nline\n"), std::string::npos) << r.err;

  // whatif: a change naming no phase is an error that quotes it, escaped.
  CommandResult w = RunCommand({GrademlBinary(), "--db", db, "whatif", "nosuch\x1b[31m\nx*0.5"});
  EXPECT_NE(w.exit_code, 0);
  EXPECT_EQ(w.err.find('\x1b'), std::string::npos) << w.err;
  EXPECT_NE(w.err.find("nosuch\\x1b[31m\\nx"), std::string::npos) << w.err;
  EXPECT_EQ(std::count(w.err.begin(), w.err.end(), '\n'), 1) << w.err;
}

// A command that cannot be started: no phantom process phase, no share of a core computed
// over a few milliseconds, no resource the process was "bound by".
TEST(RunCliE2E, ACommandThatCannotStartGetsNoMisleadingFigures) {
  std::string dir = FreshDir("cli_missing_command");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--", "/no/such/program"});
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_EQ(r.err.find("of one core"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("of CPU time"), std::string::npos) << r.err;
  json report = ReportJson(db);
  int64_t run_start = report["run"]["start_ns"];
  int processes = 0;
  for (const json& p : report["phases"]) {
    EXPECT_EQ(p["name"].get<std::string>().find("[grademl]"), std::string::npos) << p.dump();
    EXPECT_GE(p["start_ns"].get<int64_t>(), run_start) << p.dump();
    if (p["type"] == "run/process") {
      ++processes;
      EXPECT_EQ(p["name"], "/no/such/program");
    }
  }
  EXPECT_EQ(processes, 1);
  // The process never became the command: what bound it is unknown, nothing else.
  for (const json& b : report["bottlenecks"]) {
    EXPECT_EQ(b["resource"], "unknown") << b.dump();
  }
}

}  // namespace
}  // namespace grademl::testing
