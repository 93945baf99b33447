// End-to-end tests of `grademl diff`: two real workflow runs in one database, one step made
// slower; and the verb's one-line errors.
#include <algorithm>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

std::string Pipeline(const std::string& train_sleep, bool evaluate) {
  std::string text =
      "steps:\n"
      "  prepare:\n    cmd: sleep 0.1\n"
      "  train:\n    cmd: sleep " + train_sleep + "\n    after: [prepare]\n";
  if (evaluate) text += "  evaluate:\n    cmd: sleep 0.2\n    after: [train]\n";
  return text;
}

// A database with two runs of the same workflow: in the second, train sleeps 0.6 s longer
// and an evaluate step is new.
std::string TwoRuns(const std::string& name) {
  std::string dir = FreshDir(name);
  std::ofstream(dir + "/pipeline.yaml") << Pipeline("0.2", false);
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", dir + "/pipeline.yaml"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ofstream(dir + "/pipeline.yaml") << Pipeline("0.8", true);
  r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", dir + "/pipeline.yaml"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return db;
}

TEST(DiffE2E, TwoRunsOfAWorkflow) {
  std::string db = TwoRuns("diff_workflow");
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "diff", "1", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["schema"], "grademl.diff/1");
  EXPECT_EQ(j["a"]["id"], 1);
  EXPECT_EQ(j["b"]["id"], 2);
  EXPECT_NEAR(j["makespan"]["delta_s"].get<double>(), 0.8, 0.25);
  std::map<std::string, json> by_key;
  for (const json& p : j["phases"]) by_key[p["key"].get<std::string>()] = p;
  ASSERT_TRUE(by_key.count("train")) << j.dump(2);
  const json& train = by_key["train"];
  EXPECT_EQ(train["kind"], "step");
  EXPECT_EQ(train["status"], "changed");
  EXPECT_NEAR(train["delta_s"].get<double>(), 0.6, 0.15);
  EXPECT_EQ(train["main_change"]["resource"], "waiting");  // sleep: waiting on nothing measured
  EXPECT_LE(train["rank"].get<int>(), 3) << j.dump(2);  // with its process and the sleep, about as much
  // The step's sleep matched; its shell (a wrapper: one child) is left out of the key.
  ASSERT_TRUE(by_key.count("train/sleep")) << j.dump(2);
  EXPECT_EQ(by_key["train/sleep"]["status"], "changed");
  ASSERT_TRUE(by_key.count("evaluate"));
  EXPECT_EQ(by_key["evaluate"]["status"], "added");
  ASSERT_TRUE(by_key.count("prepare"));
  EXPECT_EQ(by_key["prepare"]["status"], "unchanged");
  EXPECT_EQ(j["top_level"], json({"prepare", "train", "evaluate"}));

  // The text, with runs named relative to the latest; the same diff.
  CommandResult text = RunCommand({GrademlBinary(), "--db", db, "diff", "--", "-2", "-1"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Run 1 → run 2: the run took"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" 1. Step train got "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" slower (+"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Step evaluate is new in run 2"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("more time waiting on nothing measured"), std::string::npos) << text.out;
  // --db after the verb, a high noise floor: nothing but the new step is left.
  CommandResult coarse = RunCommand({GrademlBinary(), "diff", "1", "2", "--db", db, "--min-change", "5"});
  ASSERT_EQ(coarse.exit_code, 0) << coarse.err;
  EXPECT_NE(coarse.out.find("Nothing changed by 5.00 s or more."), std::string::npos) << coarse.out;
}

TEST(DiffE2E, ErrorsAreOneLine) {
  std::string dir = FreshDir("diff_errors");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectErrors({GrademlBinary(), "--db", db, "diff"}, {
      {{"1", "9"}, 1},                          // no run 9
      {{"7", "1"}, 1},                          // no run 7
      {{"1", "1", "--db", dir + "/none.db"}, 1},  // no database
      {{"1"}, 2},                               // RUN_B missing
      {{"1", "1", "--min-change", "x"}, 2},     // not a number
      {{"1", "1", "--bogus"}, 2},
  });
  // The same run twice is no error: nothing changed.
  CommandResult same = RunCommand({GrademlBinary(), "--db", db, "diff", "1", "1"});
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("the run took as long"), std::string::npos) << same.out;
  // --help names the verb's options.
  CommandResult help = RunCommand({GrademlBinary(), "diff", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--min-change"), std::string::npos) << help.out;
}

// The same script run plainly and behind `timeout 60` (a process of its own that forks and
// waits): the python processes are matched, and only the wrapper is new.
TEST(DiffE2E, MatchesProcessesThroughAnAddedWrapper) {
  std::string dir = FreshDir("diff_wrapper");
  std::ofstream(dir + "/x.py") << "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n";
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--no-auto", "--", "/usr/bin/python3", dir + "/x.py"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--no-auto", "--", "timeout", "60", "/usr/bin/python3",
                  dir + "/x.py"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (bool forward : {true, false}) {
    CommandResult d = RunCommand({GrademlBinary(), "--db", db, "diff", forward ? "1" : "2", forward ? "2" : "1", "--json"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    json j = json::parse(d.out);
    std::map<std::string, json> by_key;
    for (const json& p : j["phases"]) by_key[p["key"].get<std::string>()] = p;
    ASSERT_TRUE(by_key.count("python3 x.py")) << j.dump(2);
    const json& py = by_key["python3 x.py"];
    EXPECT_EQ(py["a"]["count"], 1) << j.dump(2);
    EXPECT_EQ(py["b"]["count"], 1) << j.dump(2);
    EXPECT_NE(py["status"], "added");
    EXPECT_NE(py["status"], "removed");
    EXPECT_TRUE(py["top_level"].get<bool>());
    ASSERT_TRUE(by_key.count("timeout")) << j.dump(2);
    EXPECT_TRUE(by_key["timeout"]["wrapper"].get<bool>());
    EXPECT_FALSE(by_key["timeout"]["significant"].get<bool>());
    EXPECT_EQ(j["top_level"], json({"python3 x.py"}));
    for (const auto& [key, p] : by_key) {  // nothing else is new or gone
      if (key == "timeout") continue;
      EXPECT_TRUE(p["status"] == "changed" || p["status"] == "unchanged") << key;
    }
    EXPECT_EQ(j["critical_path"]["a"], j["critical_path"]["b"]);
  }
}

}  // namespace
}  // namespace grademl::testing
