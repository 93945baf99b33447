// End-to-end tests of `grademl query`'s `redundant_steps` view (docs/query.md): the reuse
// analysis's redundant steps (analysis/reuse.h, docs/reuse.md), read like the `issues` view,
// over stores built by hand. Every expectation is worked out by hand from the rule: a step that
// ran with a key (and that reuse may skip) is redundant when another run with a smaller id or
// an earlier start ran or reused an execution with the same key; the latest such run is named;
// its outputs are identical when both have as many outputs and each has the hash of the other's
// output at the same path, none unreadable. The last two tests are the cases where the SQL view
// this replaced answered otherwise (earlier by id only; outputs compared by position).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "e2e/command.h"
#include "store/database.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

constexpr TimeNs kRedundantT0 = 1'700'000'000'000'000'000;

model::RunInfo RedundantRunInfo(const std::string& uuid, TimeNs start_ns) {
  return model::RunInfo{.uuid = uuid,
                        .command = {"grademl", "run", "dvc.yaml"},
                        .cwd = "/home/me/project",
                        .host = "node1",
                        .start_ns = start_ns,
                        .grademl_version = "0.1.0",
                        .interval_ns = 100'000'000};
}

// A step execution whose outputs are (path, hash) pairs.
model::StepExecution RedundantExec(model::PhaseId phase, std::string step, std::string key,
                                   std::vector<std::pair<std::string, std::string>> outputs,
                                   DurationNs cost_ns = kNsPerSec, std::string outcome = "ran") {
  model::StepExecution e{.phase = phase,
                         .step = std::move(step),
                         .workflow = "w",
                         .key = std::move(key),
                         .outcome = std::move(outcome),
                         .cost_ns = cost_ns};
  for (auto& [path, hash] : outputs) e.outputs.push_back({.path = path, .hash = hash, .size = 10});
  return e;
}

// Outputs out0, out1, ... with these hashes.
std::vector<std::pair<std::string, std::string>> RedundantOuts(std::vector<std::string> hashes) {
  std::vector<std::pair<std::string, std::string>> outs;
  for (size_t i = 0; i < hashes.size(); ++i) outs.push_back({fmt::format("out{}", i), hashes[i]});
  return outs;
}

class RedundantStepsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = FreshDir(std::string("redundant_steps_") + ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                   "_" + std::to_string(getpid())) +
          "/g.db";
    auto db = store::Database::Open(TestStoreLocation(db_), store::Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status().message();
    store_ = std::move(db).value();
  }

  model::RunId AddRun(const std::string& uuid, std::vector<model::StepExecution> executions,
                      TimeNs start_ns = kRedundantT0) {
    StatusOr<model::RunId> id = store_->CreateRun(RedundantRunInfo(uuid, start_ns));
    EXPECT_TRUE(id.ok()) << id.status().message();
    if (!id.ok()) return 0;
    Status st = store_->WriteDelta(*id, model::RunDelta{.step_executions = std::move(executions)});
    EXPECT_TRUE(st.ok()) << st.message();
    return *id;
  }

  // The view's rows for run `id` as [step, phase_id, cost_s, earlier_run_id, earlier_run_uuid,
  // earlier_step, outputs_identical], by phase.
  json Rows(model::RunId id) {
    store_.reset();  // written: the commands read it
    CommandResult r = RunCommand({GrademlBinary(), "--db", db_, "query", std::to_string(id),
                                  "SELECT step, phase_id, cost_s, earlier_run_id, earlier_run_uuid, earlier_step, "
                                  "outputs_identical FROM redundant_steps ORDER BY phase_id",
                                  "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json rows = json::array();
    if (r.exit_code != 0) return rows;
    for (const json& o : json::parse(r.out)) {
      rows.push_back({o["step"], o["phase_id"], o["cost_s"], o["earlier_run_id"], o["earlier_run_uuid"],
                      o["earlier_step"], o["outputs_identical"]});
    }
    return rows;
  }

  std::string db_;
  std::unique_ptr<store::Database> store_;
};

// Run 1 ran A (key K1) and B (K2); run 2 ran A again with the same key and the same outputs,
// and B with another key (K3). Only A of run 2 is redundant, pointing at run 1.
TEST_F(RedundantStepsE2E, TheRerunOfAnEarlierComputation) {
  model::RunId r1 = AddRun("uuid-1", {RedundantExec(2, "A", "K1", RedundantOuts({"a1", "a2"})),
                                      RedundantExec(3, "B", "K2", RedundantOuts({"b1"}))});
  model::RunId r2 = AddRun("uuid-2", {RedundantExec(2, "A", "K1", RedundantOuts({"a1", "a2"}), 1'500'000'000),
                                      RedundantExec(3, "B", "K3", RedundantOuts({"b2"}))});
  EXPECT_EQ(Rows(r2), json::parse(fmt::format(R"([["A", 2, 1.5, {}, "uuid-1", "A", 1]])", r1)));
  EXPECT_EQ(Rows(r1), json::array());  // run 1 has no earlier run
}

// Three runs. Run 1 ran prep (K1), train (K2) and eval (K4, whose output could not be hashed);
// run 2 reused prep, failed train (K2) and ran eval (K4, again unhashable); run 3 ran prep (K1)
// with other outputs, train (K2) with the same, failed eval, and ran a step with no key, one
// with a new key (K5) and one that reuse never skips (K1 again, `reuse: false`). A fourth run,
// later in id and start, has the same keys.
//   run 3: prep -> run 2 (reused counts, and it is later than run 1), outputs differ: 0;
//          train -> run 1 (run 2's failed execution does not count), identical: 1;
//          eval (failed), the keyless step, K5 and the step reuse never skips: no row.
//   run 2: prep was reused, train failed: no row; eval -> run 1, its hashes equal but
//          unreadable (""): 0.
TEST_F(RedundantStepsE2E, TheLatestEarlierExecutionThatRanOrWasReused) {
  model::RunId r1 = AddRun("uuid-1", {RedundantExec(2, "prep", "K1", RedundantOuts({"p1"})),
                                      RedundantExec(3, "train", "K2", RedundantOuts({"m1"})),
                                      RedundantExec(4, "eval", "K4", RedundantOuts({""}))});
  model::RunId r2 = AddRun("uuid-2", {RedundantExec(2, "prep", "K1", RedundantOuts({"p1"}), 0, "reused"),
                                      RedundantExec(3, "train2", "K2", {}, 1, "failed"),
                                      RedundantExec(4, "eval", "K4", RedundantOuts({""}), 4 * kNsPerSec)});
  model::StepExecution pinned = RedundantExec(7, "pinned", "K1", RedundantOuts({"p1"}));
  pinned.not_reusable = "reuse: false in the spec";
  model::RunId r3 = AddRun("uuid-3", {RedundantExec(2, "prep", "K1", RedundantOuts({"p9"}), 2 * kNsPerSec),
                                      RedundantExec(3, "train", "K2", RedundantOuts({"m1"}), 30 * kNsPerSec),
                                      RedundantExec(4, "eval", "K4", {}, kNsPerSec, "failed"),
                                      RedundantExec(5, "nokey", "", RedundantOuts({"x"})),
                                      RedundantExec(6, "new", "K5", RedundantOuts({"y"})), pinned});
  AddRun("uuid-4", {RedundantExec(2, "prep", "K1", RedundantOuts({"p9"})),
                    RedundantExec(3, "train", "K2", RedundantOuts({"m1"}))},
         kRedundantT0 + kNsPerSec);
  EXPECT_EQ(Rows(r3), json::parse(fmt::format(R"([["prep", 2, 2.0, {}, "uuid-2", "prep", 0],
                                                  ["train", 3, 30.0, {}, "uuid-1", "train", 1]])",
                                              r2, r1)));
  EXPECT_EQ(Rows(r2), json::parse(fmt::format(R"([["eval", 4, 4.0, {}, "uuid-1", "eval", 0]])", r1)));
}

// "Earlier" is a smaller id OR an earlier start (runs recorded elsewhere and merged, agents'
// runs): run 1 (id 1) started an hour after run 2 (id 2); run 3 started last. Both run 1 and
// run 2 ran A with key K, run 3 too.
//   run 1: run 2 started before it: redundant, earlier run 2 (run 3 is neither smaller in id
//          nor earlier in start). The SQL view (earlier by id only) listed nothing.
//   run 2: run 1 has the smaller id: redundant, earlier run 1 (as before).
//   run 3: runs 1 and 2 are earlier; the latest by id is run 2 (as before).
TEST_F(RedundantStepsE2E, AnEarlierStartIsEarlierWhateverTheId) {
  const TimeNs hour = 3600 * kNsPerSec;
  model::RunId r1 = AddRun("uuid-1", {RedundantExec(2, "A", "K", RedundantOuts({"h"}), 3 * kNsPerSec)},
                           kRedundantT0 + hour);
  model::RunId r2 = AddRun("uuid-2", {RedundantExec(2, "A", "K", RedundantOuts({"h"}), 5 * kNsPerSec)},
                           kRedundantT0);
  model::RunId r3 = AddRun("uuid-3", {RedundantExec(2, "A", "K", RedundantOuts({"h"}), 7 * kNsPerSec)},
                           kRedundantT0 + 2 * hour);
  ASSERT_LT(r1, r2);
  EXPECT_EQ(Rows(r1), json::parse(fmt::format(R"([["A", 2, 3.0, {}, "uuid-2", "A", 1]])", r2)));
  EXPECT_EQ(Rows(r2), json::parse(fmt::format(R"([["A", 2, 5.0, {}, "uuid-1", "A", 1]])", r1)));
  EXPECT_EQ(Rows(r3), json::parse(fmt::format(R"([["A", 2, 7.0, {}, "uuid-2", "A", 1]])", r2)));
}

// Outputs are compared by path, not by position. Run 2 ran, with run 1's keys:
//   A: the same two outputs listed in the other order: identical (the SQL view: 0);
//   B: run 1's hash at another path: not identical (the SQL view: 1);
//   C: no outputs at all (and nothing saying reuse never skips it): not identical, there is
//      nothing to compare (the SQL view: 1).
TEST_F(RedundantStepsE2E, OutputsAreComparedByPath) {
  model::RunId r1 = AddRun("uuid-1", {RedundantExec(2, "A", "KA", {{"a.txt", "h1"}, {"b.txt", "h2"}}),
                                      RedundantExec(3, "B", "KB", {{"x.txt", "h3"}}),
                                      RedundantExec(4, "C", "KC", {})});
  model::RunId r2 = AddRun("uuid-2", {RedundantExec(2, "A", "KA", {{"b.txt", "h2"}, {"a.txt", "h1"}}),
                                      RedundantExec(3, "B", "KB", {{"y.txt", "h3"}}),
                                      RedundantExec(4, "C", "KC", {})});
  EXPECT_EQ(Rows(r2), json::parse(fmt::format(R"([["A", 2, 1.0, {0}, "uuid-1", "A", 1],
                                                  ["B", 3, 1.0, {0}, "uuid-1", "B", 0],
                                                  ["C", 4, 1.0, {0}, "uuid-1", "C", 0]])",
                                              r1)));
}

// The view is the report's: `grademl report --json`'s reuse steps marked redundant are the
// view's rows, with the same earlier run.
TEST_F(RedundantStepsE2E, TheViewIsTheReportsReuseSection) {
  const TimeNs hour = 3600 * kNsPerSec;
  model::RunId r1 = AddRun("uuid-1", {RedundantExec(2, "A", "K", RedundantOuts({"h"}))}, kRedundantT0 + hour);
  model::RunId r2 = AddRun("uuid-2", {RedundantExec(2, "A", "K", RedundantOuts({"h"}))}, kRedundantT0);
  AddRun("uuid-3", {RedundantExec(2, "A", "K", RedundantOuts({"h"}))}, kRedundantT0 + 2 * hour);
  json rows = Rows(r1);
  CommandResult report = RunCommand({GrademlBinary(), "--db", db_, "report", std::to_string(r1), "--json"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const json parsed = json::parse(report.out);
  json redundant = json::array();
  for (const json& s : parsed["reuse"]["steps"]) {
    if (s["redundant"] == true) redundant.push_back({s["step"], s["earlier_run"], s["earlier_uuid"]});
  }
  ASSERT_EQ(rows.size(), 1u) << rows.dump();
  EXPECT_EQ(redundant, json::parse(fmt::format(R"([["A", {}, "uuid-2"]])", r2)));
  EXPECT_EQ(json::array({rows[0][0], rows[0][3], rows[0][4]}), redundant[0]);
}

}  // namespace
}  // namespace grademl::testing
