// End-to-end tests of `grademl diff`: two real workflow runs in one database, one step made
// slower; and the verb's one-line errors.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <tuple>

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
// and an evaluate step is new. `wall_s`: each run's wall time as the test saw it (around the
// whole `grademl run`), an upper bound of what grademl can have recorded.
std::string TwoRuns(const std::string& name, double wall_s[2] = nullptr) {
  std::string dir = FreshDir(name);
  std::string db = dir + "/g.db";
  for (int i = 0; i < 2; ++i) {
    std::ofstream(dir + "/pipeline.yaml") << (i == 0 ? Pipeline("0.2", false) : Pipeline("0.8", true));
    auto t0 = std::chrono::steady_clock::now();
    CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", dir + "/pipeline.yaml"});
    if (wall_s != nullptr) wall_s[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  return db;
}

// What run `run` recorded, by the same keys as the diff: each top-level step and the sleep
// under it (its shell is a wrapper), with its duration from the phase's own start and end;
// and the run's duration.
std::map<std::string, double> DiffRecorded(const std::string& db, int run) {
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "report", std::to_string(run), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  json report = json::parse(r.out);
  std::map<std::string, double> out;
  out[""] = report["run"]["duration_s"].get<double>();
  std::map<int64_t, std::string> step_of;  // phase id -> step name
  const json& phases = report["phases"];
  for (const json& p : phases) {
    if (p["type"].get<std::string>().ends_with("step")) step_of[p["id"].get<int64_t>()] = p["name"];
  }
  auto seconds = [](const json& p) {
    return p["end_ns"].is_null() ? -1.0 : static_cast<double>(p["end_ns"].get<int64_t>() - p["start_ns"].get<int64_t>()) / 1e9;
  };
  std::map<int64_t, const json*> by_id;
  for (const json& p : phases) by_id[p["id"].get<int64_t>()] = &p;
  for (const json& p : phases) {
    int64_t id = p["id"].get<int64_t>();
    if (step_of.count(id)) out[step_of[id]] = seconds(p);
    if (p["pid"].is_null() || p["name"].get<std::string>().rfind("sleep", 0) != 0) continue;
    // The step above the sleep (through its shell).
    for (const json* q = &p; !(*q)["parent"].is_null();) {
      int64_t parent = (*q)["parent"].get<int64_t>();
      if (step_of.count(parent)) {
        out[step_of[parent] + "/sleep"] = seconds(p);
        break;
      }
      if (!by_id.count(parent)) break;
      q = by_id[parent];
    }
  }
  return out;
}

// The diff of two real runs. Their durations are wall-clock time, which a loaded machine
// stretches by hundreds of milliseconds (the shells' start-up, a sleep's wake-up), so that
// whether `prepare` (the same sleep twice) took the same time, or whether train's 0.6 s more
// of sleep shows as 0.6 s, depends on the machine. So nothing here assumes it: every figure
// of the diff is checked against what the two runs recorded (`grademl report RUN --json`,
// phase start and end), what the runs recorded against what cannot be otherwise (a sleep
// lasts at least what it was asked, a run at most what the test waited for it; every
// process recorded), which keys changed against the noise floor the diff applied, and the
// order of the changes against their sizes.
TEST(DiffE2E, TwoRunsOfAWorkflow) {
  double wall_s[2] = {0, 0};
  std::string db = TwoRuns("diff_workflow", wall_s);
  std::map<std::string, double> a = DiffRecorded(db, 1), b = DiffRecorded(db, 2);
  const std::string recorded = "recorded: run 1 " + json(a).dump() + ", run 2 " + json(b).dump();
  // Every step and its sleep, in both runs (evaluate in the second): a process missing
  // here is lost by the recording, not changed by the workflow.
  for (const char* key : {"prepare", "prepare/sleep", "train", "train/sleep"}) {
    ASSERT_TRUE(a.count(key)) << "run 1 has no " << key << "; " << recorded;
    ASSERT_TRUE(b.count(key)) << "run 2 has no " << key << "; " << recorded;
  }
  ASSERT_TRUE(b.count("evaluate") && b.count("evaluate/sleep")) << recorded;
  // What the runs recorded, against the truth.
  for (auto [key, asked_a, asked_b] : {std::tuple{"prepare/sleep", 0.1, 0.1}, std::tuple{"train/sleep", 0.2, 0.8}}) {
    EXPECT_GE(a[key], asked_a) << key << " lasted at least what it was asked; " << recorded;
    EXPECT_GE(b[key], asked_b) << key << " lasted at least what it was asked; " << recorded;
  }
  EXPECT_GE(b["evaluate/sleep"], 0.2) << recorded;
  EXPECT_LE(a[""], wall_s[0]) << recorded;
  EXPECT_LE(b[""], wall_s[1]) << recorded;
  for (const char* key : {"prepare", "train"}) {
    const std::string sleep = std::string(key) + "/sleep";
    EXPECT_LE(a[sleep], a[key]) << recorded;
    EXPECT_LE(b[sleep], b[key]) << recorded;
    EXPECT_LE(a[key], a[""]) << recorded;
    EXPECT_LE(b[key], b[""]) << recorded;
  }

  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "diff", "1", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["schema"], "grademl.diff/1");
  EXPECT_EQ(j["a"]["id"], 1);
  EXPECT_EQ(j["b"]["id"], 2);
  // The diff's figures are the runs' (rounded to the microsecond).
  const double us = 2e-6;
  EXPECT_NEAR(j["makespan"]["a_s"].get<double>(), a[""], us);
  EXPECT_NEAR(j["makespan"]["b_s"].get<double>(), b[""], us);
  EXPECT_NEAR(j["makespan"]["delta_s"].get<double>(), b[""] - a[""], us);
  std::map<std::string, json> by_key;
  for (const json& p : j["phases"]) by_key[p["key"].get<std::string>()] = p;
  for (const char* key : {"prepare", "prepare/sleep", "train", "train/sleep"}) {
    ASSERT_TRUE(by_key.count(key)) << key << ": " << j.dump(2);
    EXPECT_NEAR(by_key[key]["delta_s"].get<double>(), b[key] - a[key], us) << key;
    EXPECT_EQ(by_key[key]["kind"], std::string(key).find('/') == std::string::npos ? "step" : "process") << key;
  }
  ASSERT_TRUE(by_key.count("evaluate"));
  EXPECT_EQ(by_key["evaluate"]["status"], "added");
  EXPECT_NEAR(by_key["evaluate"]["b"]["total_s"].get<double>(), b["evaluate"], us);
  // The step's sleep matched; its shell (a wrapper: one child) is left out of the key.
  EXPECT_EQ(by_key["train/sleep"]["status"], "changed");  // by at least 0.8 s less all of train in run 1
  EXPECT_GE(by_key["train/sleep"]["delta_s"].get<double>(), 0.8 - a["train"] - us);
  // Sleeping: its time was waiting on nothing measured, and that is what grew.
  EXPECT_EQ(by_key["train/sleep"]["main_change"]["resource"], "waiting") << by_key["train/sleep"].dump();
  EXPECT_EQ(j["top_level"], json({"prepare", "train", "evaluate"}));
  // Changed or not: by the noise floor the diff applied (the larger of 1% of the longer run
  // and 50 ms), whatever the load made of each.
  const double floor_s = j["min_change_s"].get<double>();
  EXPECT_NEAR(floor_s, std::max(0.05, 0.01 * std::max(a[""], b[""])), us);
  for (const char* key : {"prepare", "prepare/sleep", "train", "train/sleep"}) {
    EXPECT_EQ(by_key[key]["status"], std::abs(b[key] - a[key]) >= floor_s ? "changed" : "unchanged")
        << key << ": " << a[key] << " s, then " << b[key] << " s; noise floor " << floor_s << " s";
  }
  // Largest first: the significant changes, by size, then the rest.
  std::string ranked;
  for (const json& p : j["phases"])
    ranked += " " + p["rank"].dump() + ". " + p["key"].dump() + " " + p["status"].dump() + " " + p["delta_s"].dump() + ";";
  double last = 1e300;
  bool significant = true;
  for (const json& p : j["phases"]) {
    bool sig = p["significant"].get<bool>();
    EXPECT_EQ(p["rank"].is_number(), sig) << ranked;
    EXPECT_TRUE(significant || !sig) << "a significant change after an insignificant one:" << ranked;
    if (sig != significant) last = 1e300;
    significant = sig;
    double size = std::abs(p["delta_s"].get<double>());
    EXPECT_LE(size, last + us) << "not largest first:" << ranked;
    last = size;
  }
  // With a noise floor given between two keys' changes, the one below is unchanged and the
  // one above changed, as every other key by its own change.
  const double small = std::min(std::abs(b["prepare/sleep"] - a["prepare/sleep"]), std::abs(b["train/sleep"] - a["train/sleep"]));
  const double large = std::max(std::abs(b["prepare/sleep"] - a["prepare/sleep"]), std::abs(b["train/sleep"] - a["train/sleep"]));
  const double between = (small + large) / 2;
  CommandResult given = RunCommand(
      {GrademlBinary(), "--db", db, "diff", "1", "2", "--json", "--min-change", std::to_string(between)});
  ASSERT_EQ(given.exit_code, 0) << given.err;
  const json given_diff = json::parse(given.out);
  EXPECT_NEAR(given_diff["min_change_s"].get<double>(), between, us);
  std::map<std::string, json> given_by_key;
  for (const json& p : given_diff["phases"]) given_by_key[p["key"].get<std::string>()] = p;
  for (const char* key : {"prepare", "prepare/sleep", "train", "train/sleep"}) {
    EXPECT_EQ(given_by_key[key]["status"], std::abs(b[key] - a[key]) >= between ? "changed" : "unchanged")
        << key << ": " << a[key] << " s, then " << b[key] << " s; noise floor " << between << " s";
  }
  EXPECT_EQ(given_by_key["evaluate"]["status"], "added");

  // The text, with runs named relative to the latest; the same diff. Its first change is the
  // largest, or the step or process it is part of when that changed as much (within the
  // noise floor: then the text names the part inside it).
  CommandResult text = RunCommand({GrademlBinary(), "--db", db, "diff", "--", "-2", "-1"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Run 1 → run 2: the run took"), std::string::npos) << text.out;
  const json& top = j["phases"][0];
  size_t first = text.out.find(" 1. ");
  ASSERT_NE(first, std::string::npos) << text.out;
  std::string first_line = text.out.substr(first, text.out.find('\n', first) - first);
  std::string top_key = top["key"].get<std::string>();
  bool named = false;
  for (const auto& [key, p] : by_key) {
    if (key != top_key && top_key.rfind(key + "/", 0) != 0) continue;
    if (p["status"] == "unchanged") continue;
    std::string subject = p["kind"] == "step" ? "Step " + key : p["kind"] == "process" ? "Process " + key : key;
    named = named || first_line.rfind(" 1. " + subject + " ", 0) == 0;
  }
  EXPECT_TRUE(named) << "the largest change is " << top_key << ":" << ranked << "\n" << text.out;
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
