// The experiment graph's step executions in the store (docs/store.md, schema version 5): written
// by WriteDelta (upserted by phase), loaded with the run, listed by key across runs, migrated
// into a version-4 store, spooled by the agents, and queried as `step_executions`
// (docs/query.md), on both backends.
#include <gtest/gtest.h>
#include "store/postgres/libpq.h"

#include <fmt/format.h>

#include <limits>
#include <span>
#include <string>
#include <vector>

#include "pg_test_server.h"
#include "store/database.h"
#include "store/postgres/pg_schema.h"
#include "store/query_session.h"
#include "store/spool.h"
#include "store/sqlite/schema.h"
#include "store_test_support.h"

namespace grademl::store {
namespace {

using model::StepArtifact;
using model::StepExecution;
using testing::RawDb;
using testing::TempDir;

constexpr TimeNs kStepExecT0 = 1'700'000'000'000'000'000;

model::RunInfo StepExecInfo(const std::string& uuid, TimeNs start_ns = kStepExecT0) {
  return model::RunInfo{.uuid = uuid,
                        .command = {"grademl", "run", "dvc.yaml"},
                        .cwd = "/home/me/project",
                        .host = "node1",
                        .start_ns = start_ns,
                        .grademl_version = "0.1.0",
                        .interval_ns = 100'000'000};
}

// Every field set and none at its default; text with quotes, backslashes, UTF-8 and control
// characters (the JSON columns escape them).
StepExecution StepExecFull(model::PhaseId phase) {
  return StepExecution{
      .phase = phase,
      .step = "train",
      .workflow = "digits",
      .key = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
      .not_reusable = "reuse: false in the spec",
      .outcome = "reused",
      .reused_from = "3f2a9c4e-0000-4000-8000-000000000001",
      .cost_ns = 12'345'678'901,
      .restore_ns = 250'000'000,
      .hash_ns = 3'000'000,
      .hashed_bytes = std::numeric_limits<int64_t>::max(),
      .materialize_ns = 77,
      .inputs = {{.path = "data/train.csv", .hash = "aa11", .size = 1 << 20, .directory = false},
                 {.path = "data/images", .hash = "bb22", .size = 5'000'000'000, .directory = true},
                 {.path = "params.yaml:train.lr", .hash = "cc33", .size = 5, .directory = false}},
      .outputs = {{.path = "models/m \"1\" \\ ünï\ttab", .hash = "", .size = -1, .directory = true}},
  };
}

StepExecution StepExecRan(model::PhaseId phase, std::string step, std::string key,
                          std::vector<std::string> output_hashes, DurationNs cost_ns = kNsPerSec,
                          std::string outcome = "ran") {
  StepExecution e{.phase = phase,
                  .step = std::move(step),
                  .workflow = "w",
                  .key = std::move(key),
                  .outcome = std::move(outcome),
                  .cost_ns = cost_ns};
  for (size_t i = 0; i < output_hashes.size(); ++i) {
    e.outputs.push_back({.path = fmt::format("out{}", i), .hash = output_hashes[i], .size = 10});
  }
  return e;
}

class StepExecutionStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      GRADEML_PG_DATABASE_OR_SKIP(url);
      location_ = url;
    } else {
      location_ = dir_.File("g.db");
    }
    auto db = Database::Open(location_, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status().message();
    db_ = std::move(db).value();
  }

  // A new run with these step executions, written in one delta.
  model::RunId AddRun(const std::string& uuid, std::vector<StepExecution> executions, TimeNs start_ns = kStepExecT0) {
    StatusOr<model::RunId> id = db_->CreateRun(StepExecInfo(uuid, start_ns));
    EXPECT_TRUE(id.ok()) << id.status().message();
    if (!id.ok()) return 0;
    Status st = db_->WriteDelta(*id, model::RunDelta{.step_executions = std::move(executions)});
    EXPECT_TRUE(st.ok()) << st.message();
    return *id;
  }

  std::vector<StepExecution> Load(model::RunId id) {
    auto run = db_->LoadRun(id);
    EXPECT_TRUE(run.ok()) << run.status().message();
    return run.ok() ? run->step_executions : std::vector<StepExecution>{};
  }

  std::unique_ptr<QuerySession> Session(model::RunId id) {
    auto session = QuerySession::Open(location_, std::to_string(id));
    EXPECT_TRUE(session.ok()) << session.status().message();
    return session.ok() ? std::move(session).value() : nullptr;
  }

  TempDir dir_;
  std::string location_;
  std::unique_ptr<Database> db_;
};

TEST_P(StepExecutionStoreTest, EveryFieldRoundTripsThroughWriteDeltaAndLoadRun) {
  StepExecution full = StepExecFull(7);
  StepExecution plain = StepExecRan(3, "prep", "", {});  // defaults: no key, no artifacts
  plain.workflow = "";
  model::RunBuilder b(StepExecInfo("uuid-1"));
  model::RunId id = db_->CreateRun(b.run_info()).value();
  b.AddPhase({.name = "run", .type = "run", .start_ns = kStepExecT0, .host = "node1"}, kStepExecT0 + kNsPerSec);
  b.SetStepExecution(full);
  b.SetStepExecution(plain);
  ASSERT_TRUE(db_->WriteDelta(id, b.TakeDelta(true)).ok());
  auto run = db_->LoadRun(id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  // By phase id.
  EXPECT_EQ(run->step_executions, (std::vector<StepExecution>{plain, full}));
  ASSERT_EQ(run->phases.size(), 1u);
  // A read-only connection reads the same.
  auto ro = Database::Open(location_, Database::Mode::kReadOnly);
  ASSERT_TRUE(ro.ok()) << ro.status().message();
  EXPECT_EQ((*ro)->LoadRun(id)->step_executions, run->step_executions);
}

TEST_P(StepExecutionStoreTest, ALaterExecutionOfThePhaseReplacesTheEarlier) {
  model::RunId id = AddRun("uuid-1", {StepExecRan(5, "train", "k1", {"h1"}), StepExecRan(9, "eval", "k2", {})});
  // A later delta re-sends phase 5 (its outcome now known), and within one delta the last wins.
  StepExecution failed = StepExecRan(5, "train", "k1b", {"h2", "h3"}, 2 * kNsPerSec, "failed");
  StepExecution last = StepExecFull(5);
  ASSERT_TRUE(db_->WriteDelta(id, model::RunDelta{.step_executions = {failed, StepExecRan(2, "prep", "k0", {}), last}})
                  .ok());
  EXPECT_EQ(Load(id), (std::vector<StepExecution>{StepExecRan(2, "prep", "k0", {}), last,
                                                  StepExecRan(9, "eval", "k2", {})}));
  // WriteDeltaOnce goes through the same path, once per sequence number.
  StepExecution again = StepExecRan(9, "eval", "k2", {"h9"});
  EXPECT_TRUE(db_->WriteDeltaOnce(id, "h/1", 1, model::RunDelta{.step_executions = {again}}).value());
  EXPECT_FALSE(db_->WriteDeltaOnce(id, "h/1", 1, model::RunDelta{.step_executions = {StepExecFull(9)}}).value());
  EXPECT_EQ(Load(id).back(), again);
  // Another run's phase 5 is another row.
  model::RunId other = AddRun("uuid-2", {StepExecRan(5, "train", "k1", {"h1"})});
  EXPECT_EQ(Load(other), (std::vector<StepExecution>{StepExecRan(5, "train", "k1", {"h1"})}));
  EXPECT_EQ(Load(id).size(), 3u);
}

TEST_P(StepExecutionStoreTest, ListStepExecutionsFindsAKeyAcrossRunsOrListsAll) {
  EXPECT_TRUE(db_->ListStepExecutions("").value().empty());
  const TimeNs start2 = kStepExecT0 + 3600 * kNsPerSec;
  model::RunId r1 = AddRun("uuid-1", {StepExecRan(3, "B", "K2", {"b1"}), StepExecRan(2, "A", "K1", {"a1"})});
  model::RunId r2 = AddRun("uuid-2", {StepExecRan(4, "B", "K3", {}), StepExecRan(2, "A", "K1", {"a1"}, 3, "reused")},
                           start2);
  ASSERT_LT(r1, r2);
  auto k1 = db_->ListStepExecutions("K1");
  ASSERT_TRUE(k1.ok()) << k1.status().message();
  EXPECT_EQ(*k1, (std::vector<model::StoredStepExecution>{
                     {.run = r1, .run_uuid = "uuid-1", .run_start_ns = kStepExecT0,
                      .execution = StepExecRan(2, "A", "K1", {"a1"})},
                     {.run = r2, .run_uuid = "uuid-2", .run_start_ns = start2,
                      .execution = StepExecRan(2, "A", "K1", {"a1"}, 3, "reused")},
                 }));
  auto k3 = db_->ListStepExecutions("K3");
  ASSERT_TRUE(k3.ok());
  ASSERT_EQ(k3->size(), 1u);
  EXPECT_EQ((*k3)[0].run, r2);
  EXPECT_EQ((*k3)[0].execution.step, "B");
  EXPECT_TRUE(db_->ListStepExecutions("nope").value().empty());
  // All of them: by run, then phase.
  auto all = db_->ListStepExecutions("");
  ASSERT_TRUE(all.ok());
  std::vector<std::pair<model::RunId, model::PhaseId>> order;
  for (const auto& x : *all) order.push_back({x.run, x.execution.phase});
  EXPECT_EQ(order, (std::vector<std::pair<model::RunId, model::PhaseId>>{{r1, 2}, {r1, 3}, {r2, 2}, {r2, 4}}));
  // Read-only too.
  auto ro = Database::Open(location_, Database::Mode::kReadOnly);
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ((*ro)->ListStepExecutions("K1").value(), *k1);
}

// The run's own step executions in `step_executions`, seconds for nanoseconds. (Which steps
// were redundant, the `redundant_steps` view, is the reuse analysis's, filled by `grademl
// query`: tests/e2e/redundant_steps_test.cpp.)
TEST_P(StepExecutionStoreTest, TheStepExecutionsViewShowsTheRunsOwn) {
  model::RunId r1 = AddRun("uuid-1", {StepExecRan(2, "A", "K1", {"a1", "a2"}), StepExecRan(3, "B", "K2", {"b1"})});
  model::RunId r2 = AddRun("uuid-2", {StepExecRan(2, "A", "K1", {"a1", "a2"}, 1'500'000'000),
                                      StepExecRan(3, "B", "K3", {"b2"})});
  db_.reset();
  auto s2 = Session(r2);
  ASSERT_NE(s2, nullptr);
  auto own = s2->Query("SELECT phase_id, step, key, outcome, cost_s, json_extract(outputs, '$[0].hash') "
                       "FROM step_executions");
  ASSERT_TRUE(own.ok()) << own.status().message();
  ASSERT_EQ(own->rows.size(), 2u);
  EXPECT_EQ(own->rows[0], (std::vector<QueryValue>{int64_t{2}, std::string("A"), std::string("K1"),
                                                   std::string("ran"), 1.5, std::string("a1")}));
  EXPECT_EQ(own->rows[1][2], QueryValue(std::string("K3")));
  auto s1 = Session(r1);
  ASSERT_NE(s1, nullptr);
  EXPECT_EQ(s1->Query("SELECT count(*) FROM step_executions").value().rows[0][0], QueryValue(int64_t{2}));
  // The session makes no redundant_steps view of its own.
  EXPECT_FALSE(s1->Query("SELECT * FROM redundant_steps").ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, StepExecutionStoreTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

// The lookups by key (ListStepExecutions, which the reuse analysis's graph is read with) are index seeks.
TEST(StepExecutionSqliteTest, LookupsByKeyUseTheIndex) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok());
    for (int r = 0; r < 3; ++r) {
      model::RunId id = (*db)->CreateRun(StepExecInfo(fmt::format("u{}", r))).value();
      ASSERT_TRUE((*db)->WriteDelta(id, model::RunDelta{.step_executions = {StepExecRan(2, "A", "K", {"h"})}}).ok());
    }
  }
  RawDb raw(path);
  auto plan = [&](const std::string& sql) {
    std::string out;
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(raw.get(), ("EXPLAIN QUERY PLAN " + sql).c_str(), -1, &s, nullptr), SQLITE_OK);
    while (s != nullptr && sqlite3_step(s) == SQLITE_ROW) {
      out += reinterpret_cast<const char*>(sqlite3_column_text(s, 3));
      out += "\n";
    }
    sqlite3_finalize(s);
    return out;
  };
  // ListStepExecutions' statement.
  std::string by_key = plan("SELECT e.run_id, r.uuid, r.start_ns, e.phase_id, e.step, e.outputs FROM step_executions e "
                            "JOIN runs r ON r.id = e.run_id WHERE e.key = 'K' ORDER BY e.run_id, e.phase_id");
  EXPECT_NE(by_key.find("INDEX step_executions_by_key (key=?)"), std::string::npos) << by_key;
  EXPECT_EQ(by_key.find("TEMP B-TREE"), std::string::npos) << by_key;  // no sort: the index's order
}

// A store of schema version 4 (before step executions) gets the table and its index when a
// writer opens it; its runs stay as they were.
TEST(StepExecutionSqliteTest, AVersion4FileIsMigrated) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  {
    RawDb raw(path);
    std::span<const std::string_view> steps = SchemaSteps().first(4);
    ASSERT_TRUE(MigrateSchema(raw.get(), path, steps).ok());
    ASSERT_EQ(raw.Int("PRAGMA user_version"), 4);
    raw.Exec("INSERT INTO runs (uuid, command, cwd, host, start_ns, complete, error, grademl_version, interval_ns) "
             "VALUES ('old', '[\"ls\"]', '/', 'h', 5, 1, '', '0.0.9', 100)");
  }
  auto ro = Database::Open(path, Database::Mode::kReadOnly);
  ASSERT_FALSE(ro.ok());
  EXPECT_EQ(ro.status().message(),
            fmt::format("{}: schema 4 is older than this grademl's {}; open it for writing once to upgrade it", path,
                        CurrentSchemaVersion()));
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ(CurrentSchemaVersion(), 8);  // 7: phase type paths interned (phase_types); 8: run owners
  auto old = (*db)->LoadRun(1);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->info.uuid, "old");
  EXPECT_TRUE(old->step_executions.empty());
  ASSERT_TRUE((*db)->WriteDelta(1, model::RunDelta{.step_executions = {StepExecFull(4)}}).ok());
  EXPECT_EQ((*db)->LoadRun(1)->step_executions, (std::vector<StepExecution>{StepExecFull(4)}));
  db->reset();
  RawDb raw(path);
  EXPECT_EQ(raw.Int("PRAGMA user_version"), 8);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM sqlite_schema WHERE name = 'step_executions_by_key'"), 1);
  // The JSON columns as docs/store.md shows them.
  EXPECT_EQ(raw.Text("SELECT json_extract(inputs, '$[1].directory') || ',' || json_extract(inputs, '$[1].size') "
                     "FROM step_executions"),
            "1,5000000000");
}

// A damaged JSON column is a one-line Corrupt error naming the run and phase, not a crash.
TEST(StepExecutionSqliteTest, ADamagedArtifactsColumnIsACorruptError) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok());
  model::RunId id = (*db)->CreateRun(StepExecInfo("u")).value();
  ASSERT_TRUE((*db)->WriteDelta(id, model::RunDelta{.step_executions = {StepExecFull(4)}}).ok());
  RawDb(path).Exec("UPDATE step_executions SET outputs = '[{\"path\":1}]'");
  auto run = (*db)->LoadRun(id);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(run.status().message().rfind(path + ": run 1: step execution 4: outputs: bad JSON at byte", 0), 0u)
      << run.status().message();
  EXPECT_EQ((*db)->ListStepExecutions("").status().code(), StatusCode::kCorrupt);
}

// The same on PostgreSQL: a database at version 4 is upgraded to 5 by a writer.
TEST(StepExecutionPgTest, AVersion4DatabaseIsMigrated) {
  GRADEML_PG_DATABASE_OR_SKIP(url);
  {
    PGconn* conn = PQconnectdb(url.c_str());
    ASSERT_EQ(PQstatus(conn), CONNECTION_OK);
    std::string v4 = "CREATE TABLE grademl_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);" +
                     std::string(pg::PgSchemaSteps()[0]) +
                     "INSERT INTO grademl_meta VALUES ('schema_version', '4');"
                     "INSERT INTO runs (uuid, command, cwd, host, start_ns, complete, error, grademl_version, "
                     "interval_ns) VALUES ('old', '[\"ls\"]', '/', 'h', 5, true, '', '0.0.9', 100);";
    PGresult* r = PQexec(conn, v4.c_str());
    EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQresultErrorMessage(r);
    PQclear(r);
    PQfinish(conn);
  }
  auto ro = Database::Open(url, Database::Mode::kReadOnly);
  ASSERT_FALSE(ro.ok());
  EXPECT_NE(ro.status().message().find("schema 4 is older than this grademl's 8"), std::string::npos)
      << ro.status().message();
  auto db = Database::Open(url, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ(pg::PgCurrentSchemaVersion(), 8);
  auto old = (*db)->LoadRun(1);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->info.uuid, "old");
  ASSERT_TRUE((*db)->WriteDelta(1, model::RunDelta{.step_executions = {StepExecFull(4)}}).ok());
  EXPECT_EQ((*db)->LoadRun(1)->step_executions, (std::vector<StepExecution>{StepExecFull(4)}));
  EXPECT_EQ((*db)->ListStepExecutions(StepExecFull(4).key).value().size(), 1u);
  PGconn* conn = PQconnectdb(url.c_str());
  PGresult* r = PQexec(conn, "SELECT value FROM grademl_meta WHERE key = 'schema_version'");
  ASSERT_EQ(PQntuples(r), 1);
  EXPECT_EQ(std::string(PQgetvalue(r, 0, 0)), "8");
  PQclear(r);
  r = PQexec(conn, "SELECT count(*) FROM pg_indexes WHERE indexname = 'step_executions_by_key'");
  EXPECT_EQ(std::string(PQgetvalue(r, 0, 0)), "1");
  PQclear(r);
  PQfinish(conn);
}

// The agents' spool keeps a delta's step executions (the codec's version 2), and a spooled
// delta reaches the store through WriteDeltaOnce as an uploader sends it.
TEST(StepExecutionSpoolTest, SpooledStepExecutionsReachTheStore) {
  TempDir dir;
  model::RunDelta d{.step_executions = {StepExecFull(4), StepExecRan(6, "eval", "k", {"h", ""})}};
  {
    auto spool = Spool::Open(dir.path().string());
    ASSERT_TRUE(spool.ok()) << spool.status().message();
    ASSERT_TRUE((*spool)->Append("uuid-1", "h1/1", d).ok());
  }
  auto spool = Spool::Open(dir.path().string());
  ASSERT_TRUE(spool.ok());
  auto entries = (*spool)->Oldest(10);
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].delta.step_executions, d.step_executions);
  auto db = Database::Open(dir.File("g.db"), Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok());
  model::RunId id = (*db)->CreateRun(StepExecInfo("uuid-1")).value();
  EXPECT_TRUE((*db)->WriteDeltaOnce(id, (*entries)[0].writer, (*entries)[0].seq, (*entries)[0].delta).value());
  EXPECT_EQ((*db)->LoadRun(id)->step_executions, d.step_executions);
}

}  // namespace
}  // namespace grademl::store
