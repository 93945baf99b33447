// End-to-end tests of cores available per process and the threads lever: a command pinned
// to one CPU (taskset) is recorded with 1 core available (its affinity, read again after its
// exec), shown in `report --json`, and `whatif #ID:threads=2` never gives it more than that.
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

TEST(LeversE2E, APinnedCommandHasOneCoreAvailableAndTheThreadsLeverKeepsToIt) {
  if (access("/usr/bin/taskset", X_OK) != 0) SKIP_OR_FAIL_IN_CI("no /usr/bin/taskset (util-linux)");
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &set)) ++cpu;
  std::string dir = FreshDir("levers_pinned");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/taskset", "-c",
                                std::to_string(cpu), HelperBinary("burn_and_write"), "--cpu", "1.5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = ReportJson(db);
  const json* burn = nullptr;
  for (const json& p : report["phases"]) {
    if (p["type"] == "run/process") burn = &p;
  }
  ASSERT_NE(burn, nullptr);
  const json& cores = (*burn)["cores"];
  ASSERT_TRUE(cores.is_object()) << burn->dump();
  EXPECT_EQ(cores["available"], 1.0) << cores.dump();
  EXPECT_EQ(cores["available_from"], "affinity");
  EXPECT_GE(cores["threads"].get<int>(), 1);
  // 1.5 CPU-seconds on one core: at most 1 core on average (a 10% margin for tick rounding).
  EXPECT_LE(cores["avg_used"].get<double>(), 1.1);
  for (const json& i : report["issues"]) EXPECT_NE(i["kind"], "underused_cores") << i.dump();

  std::string id = std::to_string((*burn)["id"].get<int64_t>());
  CommandResult w = RunCommand({GrademlBinary(), "--db", db, "whatif", "#" + id + ":threads=2", "--json"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  json out = json::parse(w.out);
  std::string note = out["changes"][0]["note"];
  EXPECT_NE(note.find("(of 1 available, affinity)"), std::string::npos) << note;
  EXPECT_NE(note.find("upper bound"), std::string::npos) << note;

  CommandResult bad = RunCommand({GrademlBinary(), "--db", db, "whatif", "#" + id + ":threads=0"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "grademl: bad change '#" + id + ":threads=0': threads must be from 1 to 4096 (at character " +
                         std::to_string(id.size() + 11) + ")\n");
}

// A torch DataLoader loading in the main process (num_workers=0, an expensive __getitem__):
// the data_wait issue names the num_workers lever, and its saving is at most the time the
// loop waited for batches (the sum of the data_wait phases, read from the report).
TEST(LeversE2E, AMainProcessDataLoaderIsToldToUseWorkers) {
  REQUIRE_PYTHON_MODULES("torch");
  std::string dir = FreshDir("levers_loader");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3",
                                std::string(GRADEML_SOURCE_DIR) + "/bench/validation/lever_loader.py", "0", "320"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = ReportJson(db);
  double waited = 0;
  int waits = 0;
  for (const json& p : report["phases"]) {
    const std::string type = p["type"];
    if (type.size() >= 10 && type.ends_with("/data_wait")) {
      waited += p["duration_s"].get<double>();
      ++waits;
    }
  }
  ASSERT_EQ(waits, 21) << "320 samples in batches of 16, and the final StopIteration";
  const json* issue = nullptr;
  for (const json& i : report["issues"]) {
    if (i["kind"] == "data_wait") issue = &i;
  }
  ASSERT_NE(issue, nullptr) << report["issues"].dump();
  const std::string change = (*issue)["change"];
  EXPECT_TRUE(std::regex_match(change, std::regex("#[0-9]+:num_workers=[1-4]"))) << change;
  EXPECT_GT((*issue)["impact_seconds"].get<double>(), 0);
  EXPECT_LE((*issue)["impact_seconds"].get<double>(), waited + 1e-6);
  EXPECT_NE((*issue)["text"].get<std::string>().find("loaded in the main process (num_workers=0)"), std::string::npos);

  CommandResult w = RunCommand({GrademlBinary(), "--db", db, "whatif", change, "--json"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  json out = json::parse(w.out);
  EXPECT_NEAR(out["baseline_s"].get<double>() - out["predicted_s"].get<double>(), (*issue)["impact_seconds"].get<double>(),
              1e-6);
  EXPECT_NE(out["changes"][0]["note"].get<std::string>().find("21 data waits"), std::string::npos) << out.dump();
}

}  // namespace
}  // namespace grademl::testing
