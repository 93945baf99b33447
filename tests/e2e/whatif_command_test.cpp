// End-to-end tests of `grademl whatif`: predictions on real recorded runs, checked against a
// re-run of the changed workflow or command; and its errors.
#include <cmath>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

// a -> (b ‖ c) -> d with sleeps; b is the long branch.
std::string Pipeline(const std::string& b_sleep) {
  return "steps:\n"
         "  a:\n    cmd: sleep 0.2\n"
         "  b:\n    cmd: sleep " + b_sleep + "\n    after: [a]\n"
         "  c:\n    cmd: sleep 0.3\n    after: [a]\n"
         "  d:\n    cmd: sleep 0.1\n    after: [b, c]\n";
}

// The run's duration as recorded, from `grademl report --json`.
double RunSeconds(const std::string& db) {
  json report = ReportJson(db);
  for (const json& p : report["phases"]) {
    if (p["parent"].is_null()) return p["duration_s"].get<double>();
  }
  ADD_FAILURE() << "no root phase";
  return NAN;
}

json Whatif(const std::string& db, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {GrademlBinary(), "--db", db, "whatif"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--json");
  CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json();
}

TEST(WhatifE2E, PredictsAFasterStepAndTheRerunAgrees) {
  std::string dir = FreshDir("whatif_workflow");
  std::ofstream(dir + "/pipeline.yaml") << Pipeline("1.0");
  std::ofstream(dir + "/faster.yaml") << Pipeline("0.5");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "-j", "2", dir + "/pipeline.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double measured = RunSeconds(db);

  // Unchanged, the replay is the recording.
  json same = Whatif(db, {});
  EXPECT_NEAR(same["baseline_s"].get<double>(), measured, 1e-6);
  EXPECT_NEAR(same["predicted_s"].get<double>(), measured, 1e-6);
  EXPECT_EQ(same["critical_path_names"], json({"a", "b", "d"}));

  json w = Whatif(db, {"b*0.5"});
  const double predicted = w["predicted_s"].get<double>();
  EXPECT_NEAR(w["baseline_s"].get<double>(), measured, 1e-6);
  EXPECT_EQ(w["critical_path_names"], json({"a", "b", "d"}));
  ASSERT_EQ(w["critical_path"].size(), 3u);
  std::map<std::string, json> steps;
  for (const json& s : w["steps"]) steps[s["name"].get<std::string>()] = s;
  ASSERT_EQ(steps.size(), 4u);
  // b (1 s of sleep and a few ms of starting processes) is critical: half of it is saved.
  const double b_s = steps["b"]["baseline_duration_s"].get<double>();
  EXPECT_GT(b_s, 1.0);
  EXPECT_NEAR(measured - predicted, 0.5 * b_s, 1e-6) << w.dump(2);
  EXPECT_NEAR(steps["b"]["duration_s"].get<double>(), 0.5 * steps["b"]["baseline_duration_s"].get<double>(), 1e-6);
  EXPECT_TRUE(steps["b"]["critical"].get<bool>());
  EXPECT_FALSE(steps["c"]["critical"].get<bool>());
  EXPECT_NEAR(steps["d"]["start_s"].get<double>(), steps["b"]["end_s"].get<double>(), 0.01);
  EXPECT_EQ(w["changes"][0]["text"], "b*0.5");

  // Run the workflow with b really taking 0.5 s: the prediction matches it.
  std::string db2 = dir + "/faster.db";
  r = RunCommand({GrademlBinary(), "--db", db2, "run", "--no-report", "-j", "2", dir + "/faster.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double rerun = RunSeconds(db2);
  EXPECT_NEAR(predicted, rerun, 0.1 + 0.05 * rerun) << "measured " << measured << ", predicted " << predicted;
  EXPECT_LT(std::abs(predicted - rerun), std::abs(measured - rerun) / 3);

  // Halving the short branch instead changes nothing; -j 1 puts c after b.
  json off = Whatif(db, {"c*0.5"});
  EXPECT_NEAR(off["predicted_s"].get<double>(), measured, 1e-6);
  json serial = Whatif(db, {"-j", "1"});
  const double c_s = steps["c"]["baseline_duration_s"].get<double>();
  EXPECT_NEAR(serial["predicted_s"].get<double>() - measured, c_s, 0.02);
  EXPECT_EQ(serial["jobs"], 1);
  EXPECT_EQ(serial["baseline_jobs"], 2);
  // One at a time, every step is on the path: a first, d last, and b and c (independent,
  // started within a few ms of each other under -j 2) in the order the replay takes them,
  // which follows their recorded starts.
  EXPECT_TRUE(serial["critical_path_names"] == json({"a", "b", "c", "d"}) ||
              serial["critical_path_names"] == json({"a", "c", "b", "d"}))
      << serial["critical_path_names"].dump();
  // Removing b: c becomes critical. The run can be named first, here as -1.
  json removed = Whatif(db, {"-1", "-b"});
  EXPECT_EQ(removed["critical_path_names"], json({"a", "c", "d"}));
  const double b_end = steps["b"]["baseline_end_s"].get<double>(), c_end = steps["c"]["baseline_end_s"].get<double>();
  EXPECT_NEAR(measured - removed["predicted_s"].get<double>(), b_end - c_end, 0.01);

  // The text output.
  CommandResult text = RunCommand({GrademlBinary(), "--db", db, "whatif", "--run", "1", "b*0.5"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("predicted"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("saves 0.5"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("before  a → b → d"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("b*0.5: scales 1 phase (b) by 0.5"), std::string::npos) << text.out;
}

TEST(WhatifE2E, SingleCommandChildProcessesInSequence) {
  std::string dir = FreshDir("whatif_command");
  std::string db = dir + "/g.db";
  CommandResult r =
      RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/bin/sh", "-c", "sleep 0.6; sleep 0.2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double measured = RunSeconds(db);
  double first_s = NAN;  // the recorded duration of the first sleep's process
  const json report = ReportJson(db);  // not a temporary: the loop holds a reference into it
  for (const json& p : report["phases"]) {
    if (p["name"] == "sleep 0.6") first_s = p["duration_s"].get<double>();
  }
  json w = Whatif(db, {"sleep 0.6*0.5"});
  const double predicted = w["predicted_s"].get<double>();
  EXPECT_NEAR(measured - predicted, 0.5 * first_s, 0.02) << w.dump(2);  // half of that process
  EXPECT_FALSE(w["workflow"].get<bool>());
  // The shell waited for one command, then the other.
  std::vector<std::string> inside;
  for (const json& l : w["critical_path_detail"]) {
    if (l["depth"] == 1) inside.push_back(l["name"]);
  }
  EXPECT_EQ(inside, (std::vector<std::string>{"sleep 0.6", "sleep 0.2"})) << w.dump(2);

  std::string db2 = dir + "/rerun.db";
  r = RunCommand({GrademlBinary(), "--db", db2, "run", "--no-report", "--", "/bin/sh", "-c", "sleep 0.3; sleep 0.2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double rerun = RunSeconds(db2);
  // A loaded machine starts processes late: a generous tolerance (make validate measures).
  EXPECT_NEAR(predicted, rerun, 0.15 + 0.1 * rerun) << "measured " << measured;
}

TEST(WhatifE2E, BadChangesAreOneLineErrors) {
  std::string dir = FreshDir("whatif_errors");
  std::string db = dir + "/g.db";
  std::ofstream(dir + "/pipeline.yaml") << "steps:\n  only:\n    cmd: 'true'\n";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", dir + "/pipeline.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Arguments after `whatif`, the exit code and the whole of stderr.
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"only*fast"}, 2, "grademl: bad change 'only*fast': expected a number after '*' (at character 6)\n"},
           {{"missing*0.5"}, 2, "grademl: change 'missing*0.5': no phase matches 'missing'\n"},
           {{"only"}, 2,
            "grademl: bad change 'only': expected '*FACTOR' (train*0.5), a leading '-' to remove, "
            "SEL:RESOURCE*FACTOR, balance:SEL or jobs=N (at character 5)\n"},
           {{"only*0.5", "1"}, 2, "grademl: bad change '1': a run id must come before the changes (or use --run 1)\n"},
           {{"-j"}, 2, "grademl: -j needs a number of jobs\n"},
           {{"--bogus"}, 2, "grademl: bad change '--bogus': unknown option (at character 1)\n"},
           {{"9", "only*0.5"}, 1, ""},  // no run 9: the store's one-line error
       }) {
    std::vector<std::string> argv = {GrademlBinary(), "--db", db, "whatif"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    CommandResult e = RunCommand(argv);
    EXPECT_EQ(e.exit_code, c.exit_code) << c.args[0] << ": " << e.err;
    EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
    if (!c.message.empty()) {
      EXPECT_EQ(e.err, c.message);
    }
    EXPECT_TRUE(e.out.empty()) << e.out;
  }
}

}  // namespace
}  // namespace grademl::testing
