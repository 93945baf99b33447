// Phase type paths stored once per run (schema version 7, docs/store.md): the phase_types
// table and phases.type_id, on SQLite and PostgreSQL; a store of version 6 migrated with its
// rows read as before; a path whose id another path took is written inline; loaded phases
// share their paths (model/type_path.h); `grademl query`'s phases view still has `type`.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "model/run.h"
#include "model/run_builder.h"
#include "pg_test_server.h"
#include "store/database.h"
#include "store/postgres/libpq.h"
#include "store/postgres/pg_schema.h"
#include "store/query_session.h"
#include "store/sqlite/schema.h"
#include "store/tables.h"
#include "store_test_support.h"

namespace grademl::store {
namespace phase_types_test {

using testing::RawDb;
using testing::TempDir;

model::RunInfo Info(const std::string& uuid) {
  model::RunInfo info;
  info.uuid = uuid;
  info.command = {"python", "train.py"};
  info.host = "h";
  info.start_ns = 1'000;
  return info;
}

// A run of `depth` nested identical phases under run/process, plus 100 siblings of one type:
// depth + 102 phases, depth + 3 distinct type paths (each nested one its own).
model::RunDelta NestedDelta(int depth) {
  model::RunBuilder b(model::RunInfo{});
  model::PhaseId run = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 1'000});
  model::PhaseId proc = b.BeginPhase({.parent = run, .name = "p", .type = "process", .start_ns = 1'000});
  for (int i = 0; i < 100; ++i) b.AddPhase({.parent = proc, .name = "op", .type = "op", .start_ns = 2'000 + i}, 2'001 + i);
  model::PhaseId at = proc;
  for (int i = 0; i < depth; ++i) at = b.AddPhase({.parent = at, .name = "x", .type = "x", .start_ns = 3'000 + i}, 9'000 - i);
  b.EndPhase(proc, 10'000);
  b.EndPhase(run, 10'000);
  return b.TakeDelta(true);
}

// What the phases' types are, by id, as text.
std::map<model::PhaseId, std::string> TypesOf(const std::vector<model::Phase>& phases) {
  std::map<model::PhaseId, std::string> out;
  for (const model::Phase& p : phases) out[p.id] = p.type.str();
  return out;
}

void ExpectSharedPaths(const model::Run& run) {
  std::map<std::string, std::set<uintptr_t>> nodes;
  for (const model::Phase& p : run.phases) nodes[p.type.str()].insert(p.type.node_id());
  for (const auto& [path, ids] : nodes) EXPECT_EQ(ids.size(), 1u) << path;
}

TEST(PhaseTypesSqliteTest, EachPathIsStoredOnceAndReadBack) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  const model::RunDelta delta = NestedDelta(50);
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status().message();
    model::RunId id = (*db)->CreateRun(Info("u1")).value();
    // Written in two deltas: the second finds the ids the first wrote.
    model::RunDelta first, second;
    first.phases.assign(delta.phases.begin(), delta.phases.begin() + 60);
    second.phases.assign(delta.phases.begin() + 60, delta.phases.end());
    ASSERT_TRUE((*db)->WriteDelta(id, first).ok());
    ASSERT_TRUE((*db)->WriteDelta(id, second).ok());
    auto run = (*db)->LoadRun(id);
    ASSERT_TRUE(run.ok()) << run.status().message();
    EXPECT_EQ(TypesOf(run->phases), TypesOf(delta.phases));
    ExpectSharedPaths(*run);
  }
  RawDb raw(path);
  // run, run/process, run/process/op and the 50 nested paths.
  EXPECT_EQ(raw.Int("SELECT count(*) FROM phase_types"), 53);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM phases"), 152);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM phases WHERE type = '' AND type_id IS NOT NULL"), 152);
  EXPECT_EQ(raw.Int("SELECT count(DISTINCT type_id) FROM phases"), 53);
  EXPECT_EQ(raw.Text("SELECT t.path FROM phases p JOIN phase_types t ON t.run_id = p.run_id AND t.id = p.type_id "
                     "WHERE p.name = 'op' LIMIT 1"),
            "run/process/op");
  // The id is the description's (tables::PhaseTypeId), the same for every writer.
  EXPECT_EQ(raw.Int("SELECT id FROM phase_types WHERE path = 'run/process/op'"),
            tables::PhaseTypeId("run/process/op"));
}

// A delta whose transaction fails after it added phase_types rows (rolled back with it), then
// written again: the retry must write those rows again, not reuse their ids from the writer's
// cache (its phases would name rows that are not there: Corrupt when the run is loaded).
TEST(PhaseTypesSqliteTest, ADeltaRetriedAfterARollbackWritesItsPathsAgain) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  model::RunDelta delta = NestedDelta(5);
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  model::RunId id = (*db)->CreateRun(Info("u1")).value();
  {
    // The phases' insert fails once their paths are in phase_types, inside the transaction.
    RawDb raw(path);
    raw.Exec("CREATE TRIGGER fail_once BEFORE INSERT ON phases WHEN NEW.name = 'x' "
             "BEGIN SELECT RAISE(ABORT, 'planted failure'); END");
  }
  EXPECT_FALSE((*db)->WriteDelta(id, delta).ok());
  {
    RawDb raw(path);
    EXPECT_EQ(raw.Int("SELECT count(*) FROM phase_types"), 0);  // rolled back
    raw.Exec("DROP TRIGGER fail_once");
  }
  ASSERT_TRUE((*db)->WriteDelta(id, delta).ok());
  auto run = (*db)->LoadRun(id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(TypesOf(run->phases), TypesOf(delta.phases));
}

TEST(PhaseTypesSqliteTest, DeepNestingCostsTheStoreEachPathOnce) {
  // 3,000 nested identical phases: their paths (bounded at 2 KB each) are stored once per
  // distinct path, not once per phase. Before version 7 each row held its own path: about
  // 3,000 * 1 KB on average = 3 MB of text in phases. Now phases hold ids.
  TempDir dir;
  const std::string path = dir.File("g.db");
  const model::RunDelta delta = NestedDelta(3000);
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok());
    model::RunId id = (*db)->CreateRun(Info("deep")).value();
    ASSERT_TRUE((*db)->WriteDelta(id, delta).ok());
  }
  RawDb raw(path);
  EXPECT_EQ(raw.Int("SELECT sum(length(type)) FROM phases"), 0);
  size_t text = 0;
  for (const model::Phase& p : delta.phases) text += p.type.size();
  std::set<std::string> distinct;
  size_t distinct_text = 0;
  for (const model::Phase& p : delta.phases) {
    if (distinct.insert(p.type.str()).second) distinct_text += p.type.size();
  }
  EXPECT_EQ(raw.Int("SELECT sum(length(path)) FROM phase_types"), static_cast<int64_t>(distinct_text));
  EXPECT_EQ(raw.Int("SELECT count(*) FROM phase_types"), static_cast<int64_t>(distinct.size()));
  EXPECT_LT(distinct.size(), delta.phases.size());  // past 2 KB, paths repeat
  EXPECT_GT(text, size_t{5} << 19);  // 2.5 MB
}

TEST(PhaseTypesSqliteTest, APathWhoseIdIsTakenIsWrittenInline) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok());
  model::RunId id = (*db)->CreateRun(Info("forged")).value();
  // Another writer (or a forger) put another path under run/process's id.
  RawDb(path).Exec(fmt::format("INSERT INTO phase_types VALUES ({}, {}, 'run/forged')", id,
                               tables::PhaseTypeId("run/process")));
  model::RunDelta d;
  d.phases.push_back({.id = 1, .name = "run", .type = "run", .start_ns = 1'000, .end_ns = 2'000});
  d.phases.push_back({.id = 2, .parent = 1, .name = "p", .type = "run/process", .start_ns = 1'000, .end_ns = 2'000});
  ASSERT_TRUE((*db)->WriteDelta(id, d).ok());
  auto run = (*db)->LoadRun(id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->phases.size(), 2u);
  EXPECT_EQ(run->phases[1].type, "run/process");
  EXPECT_EQ(RawDb(path).Text("SELECT type FROM phases WHERE id = 2"), "run/process");
  EXPECT_EQ(RawDb(path).Int("SELECT count(*) FROM phases WHERE id = 2 AND type_id IS NULL"), 1);
}

TEST(PhaseTypesSqliteTest, AnIdMissingFromPhaseTypesIsACorruptError) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok());
  model::RunId id = (*db)->CreateRun(Info("broken")).value();
  ASSERT_TRUE((*db)->WriteDelta(id, NestedDelta(2)).ok());
  RawDb(path).Exec("DELETE FROM phase_types WHERE path = 'run/process/op'");
  auto run = (*db)->LoadRun(id);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(run.status().message().find("is not in phase_types"), std::string::npos) << run.status().message();
  EXPECT_EQ(run.status().message().find('\n'), std::string::npos);
}

// A file written by the previous grademl (schema 6, the type path in every row) is migrated
// by the first writer: its rows read as they were, new rows use phase_types, and the query
// view's `type` column shows both.
TEST(PhaseTypesSqliteTest, AVersion6FileIsMigratedAndItsRowsReadAsBefore) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  {
    RawDb raw(path);
    ASSERT_TRUE(MigrateSchema(raw.get(), path, SchemaSteps().first(6)).ok());
    ASSERT_EQ(raw.Int("PRAGMA user_version"), 6);
    raw.Exec("INSERT INTO runs (uuid, command, cwd, host, start_ns, end_ns, complete, error, grademl_version, "
             "interval_ns) VALUES ('old', '[\"ls\"]', '/', 'h', 1000, 9000, 1, '', '0.0.9', 100)");
    raw.Exec("INSERT INTO phases (run_id, id, parent_id, name, type, tags, start_ns, end_ns, host) VALUES "
             "(1, 1, NULL, 'run', 'run', '{}', 1000, 9000, 'h'), "
             "(1, 2, 1, 'p', 'run/process', '{}', 1000, 9000, 'h')");
  }
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status().message();
    auto old = (*db)->LoadRun(1);
    ASSERT_TRUE(old.ok()) << old.status().message();
    EXPECT_EQ(TypesOf(old->phases), (std::map<model::PhaseId, std::string>{{1, "run"}, {2, "run/process"}}));
    model::RunDelta d;
    d.phases.push_back({.id = 3, .parent = 2, .name = "op", .type = "run/process/op", .start_ns = 2000, .end_ns = 3000});
    ASSERT_TRUE((*db)->WriteDelta(1, d).ok());
    auto both = (*db)->LoadRun(1);
    ASSERT_TRUE(both.ok());
    EXPECT_EQ(TypesOf(both->phases),
              (std::map<model::PhaseId, std::string>{{1, "run"}, {2, "run/process"}, {3, "run/process/op"}}));
  }
  RawDb raw(path);
  EXPECT_EQ(raw.Int("PRAGMA user_version"), 8);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM phases WHERE type_id IS NULL"), 2);  // the old rows, untouched
  EXPECT_EQ(raw.Int("SELECT count(*) FROM phase_types"), 1);

  auto session = QuerySession::Open(path, "1");
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto r = (*session)->Query("SELECT group_concat(type, ',') FROM (SELECT type FROM phases ORDER BY id)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->rows[0][0], QueryValue(std::string("run,run/process,run/process/op")));
  r = (*session)->Query("SELECT leaf_type FROM phases WHERE id = 3");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows[0][0], QueryValue(std::string("op")));
}

TEST(PhaseTypesPgTest, EachPathIsStoredOnceAndReadBack) {
  GRADEML_PG_DATABASE_OR_SKIP(url);
  const model::RunDelta delta = NestedDelta(50);
  auto db = Database::Open(url, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  model::RunId id = (*db)->CreateRun(Info("u1")).value();
  model::RunDelta first, second;
  first.phases.assign(delta.phases.begin(), delta.phases.begin() + 60);
  second.phases.assign(delta.phases.begin() + 60, delta.phases.end());
  ASSERT_TRUE((*db)->WriteDelta(id, first).ok());
  ASSERT_TRUE((*db)->WriteDelta(id, second).ok());
  auto run = (*db)->LoadRun(id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(TypesOf(run->phases), TypesOf(delta.phases));
  ExpectSharedPaths(*run);
  PGconn* conn = PQconnectdb(url.c_str());
  ASSERT_EQ(PQstatus(conn), CONNECTION_OK);
  auto one = [&](const char* sql) {
    PGresult* r = PQexec(conn, sql);
    std::string v = PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "?";
    PQclear(r);
    return v;
  };
  EXPECT_EQ(one("SELECT count(*) FROM phase_types"), "53");
  EXPECT_EQ(one("SELECT count(*) FROM phases WHERE type = '' AND type_id IS NOT NULL"), "152");
  EXPECT_EQ(one("SELECT id FROM phase_types WHERE path = 'run/process/op'"),
            std::to_string(tables::PhaseTypeId("run/process/op")));
  PQfinish(conn);
}

TEST(PhaseTypesPgTest, AVersion6DatabaseIsMigratedAndItsRowsReadAsBefore) {
  GRADEML_PG_DATABASE_OR_SKIP(url);
  {
    PGconn* conn = PQconnectdb(url.c_str());
    ASSERT_EQ(PQstatus(conn), CONNECTION_OK);
    // Versions 4 (step 0), 5 and 6 (steps 1 and 2).
    std::string v6 = "CREATE TABLE grademl_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);" +
                     std::string(pg::PgSchemaSteps()[0]) + std::string(pg::PgSchemaSteps()[1]) +
                     std::string(pg::PgSchemaSteps()[2]) +
                     "INSERT INTO grademl_meta VALUES ('schema_version', '6');"
                     "INSERT INTO runs (uuid, command, cwd, host, start_ns, end_ns, complete, error, grademl_version, "
                     "interval_ns) VALUES ('old', '[\"ls\"]', '/', 'h', 1000, 9000, true, '', '0.0.9', 100);"
                     "INSERT INTO phases (run_id, id, parent_id, name, type, tags, start_ns, end_ns, host) VALUES "
                     "(1, 1, NULL, 'run', 'run', '{}', 1000, 9000, 'h'), "
                     "(1, 2, 1, 'p', 'run/process', '{}', 1000, 9000, 'h');";
    PGresult* r = PQexec(conn, v6.c_str());
    EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQresultErrorMessage(r);
    PQclear(r);
    PQfinish(conn);
  }
  auto db = Database::Open(url, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto old = (*db)->LoadRun(1);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(TypesOf(old->phases), (std::map<model::PhaseId, std::string>{{1, "run"}, {2, "run/process"}}));
  model::RunDelta d;
  d.phases.push_back({.id = 3, .parent = 2, .name = "op", .type = "run/process/op", .start_ns = 2000, .end_ns = 3000});
  ASSERT_TRUE((*db)->WriteDelta(1, d).ok());
  auto both = (*db)->LoadRun(1);
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(TypesOf(both->phases),
            (std::map<model::PhaseId, std::string>{{1, "run"}, {2, "run/process"}, {3, "run/process/op"}}));
  EXPECT_EQ(pg::PgCurrentSchemaVersion(), 8);
}

}  // namespace phase_types_test
}  // namespace grademl::store
