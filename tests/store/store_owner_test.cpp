// Run owners in the store (docs/store.md, schema version 8): the store names a new run's
// owner itself (SQLite: the OS user, or the owner of a run being copied; PostgreSQL: the
// connection's role, whatever the client sends), a later write of the run's info never
// changes it, and a store of version 7 (before owners) is migrated by a writer, its runs'
// owner unknown ("").
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <string>

#include "pg_test_server.h"
#include "store/database.h"
#include "store/postgres/libpq.h"
#include "store/postgres/pg_schema.h"
#include "store/sqlite/schema.h"
#include "store_test_support.h"

namespace grademl::store {
namespace {

using testing::RawDb;
using testing::TempDir;

std::string OwnerOsUser() {
  struct passwd* pw = getpwuid(geteuid());
  return pw != nullptr ? pw->pw_name : "?";
}

model::RunInfo OwnerInfo(const std::string& uuid, const std::string& owner) {
  return {.uuid = uuid, .command = {"true"}, .cwd = "/", .host = "h", .start_ns = 10, .interval_ns = 1,
          .owner = owner};
}

// The run's info written again (the delta path's UPDATE) with another owner: it stays.
void OwnerRewriteInfo(Database& db, model::RunId id) {
  model::RunDelta d;
  d.info = OwnerInfo("u", "mallory");
  d.info->end_ns = 20;
  ASSERT_TRUE(db.WriteDelta(id, d).ok());
}

TEST(StoreOwnerTest, SqliteNamesTheOsUserAndKeepsACopiedRunsOwner) {
  TempDir dir;
  auto db = Database::Open(dir.File("g.db"), Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto mine = (*db)->CreateRun(OwnerInfo("a", ""));
  ASSERT_TRUE(mine.ok());
  auto copied = (*db)->CreateRun(OwnerInfo("b", "alice"));
  ASSERT_TRUE(copied.ok());
  OwnerRewriteInfo(**db, *mine);
  auto runs = (*db)->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].owner, OwnerOsUser());
  EXPECT_EQ((*runs)[1].owner, "alice");
  EXPECT_EQ((*db)->LoadRun(*mine)->info.owner, OwnerOsUser());
  EXPECT_EQ((*db)->LoadRun(*mine)->info.end_ns, 20);
}

TEST(StoreOwnerTest, AVersion7SqliteFileIsMigratedWithItsRunsOwnerUnknown) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  {
    RawDb raw(path);
    ASSERT_TRUE(MigrateSchema(raw.get(), path, SchemaSteps().first(7)).ok());
    raw.Exec("INSERT INTO runs (uuid, command, cwd, host, start_ns, complete, error, grademl_version, interval_ns) "
             "VALUES ('old', '[\"ls\"]', '/', 'h', 5, 1, '', '0.0.9', 100)");
  }
  {
    // Read-only, an old file is refused until a writer upgrades it.
    auto ro = Database::Open(path, Database::Mode::kReadOnly);
    EXPECT_FALSE(ro.ok());
  }
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ((*db)->LoadRun(1)->info.owner, "");
  auto id = (*db)->CreateRun(OwnerInfo("new", ""));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ((*db)->LoadRun(*id)->info.owner, OwnerOsUser());
  db->reset();
  RawDb raw(path);
  EXPECT_EQ(raw.Int("PRAGMA user_version"), 8);
  EXPECT_EQ(raw.Text("SELECT owner FROM runs WHERE id = 1"), "");
}

// One statement as the test server's superuser; its first value.
std::string OwnerPgValue(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  EXPECT_EQ(PQstatus(conn), CONNECTION_OK);
  PGresult* r = PQexec(conn, sql.c_str());
  std::string v;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) v = PQgetvalue(r, 0, 0);
  EXPECT_TRUE(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK)
      << sql << ": " << PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(conn);
  return v;
}

TEST(StoreOwnerTest, PostgresNamesTheConnectionsRoleWhateverTheClientSends) {
  GRADEML_PG_DATABASE_OR_SKIP(url);
  auto db = Database::Open(url, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto id = (*db)->CreateRun(OwnerInfo("a", "mallory"));
  ASSERT_TRUE(id.ok()) << id.status().message();
  OwnerRewriteInfo(**db, *id);
  // The tests connect as user=postgres (PgTestUrl).
  EXPECT_EQ((*db)->LoadRun(*id)->info.owner, "postgres");
  EXPECT_EQ(OwnerPgValue(url, "SELECT owner FROM runs WHERE id = " + std::to_string(*id)), "postgres");
  EXPECT_EQ((*db)->ListRuns()->at(0).owner, "postgres");
}

TEST(StoreOwnerTest, AVersion7PostgresDatabaseIsMigratedWithItsRunsOwnerUnknown) {
  GRADEML_PG_DATABASE_OR_SKIP(url);
  OwnerPgValue(url, "CREATE TABLE grademl_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);" +
                        std::string(pg::PgSchemaSteps()[0]) + std::string(pg::PgSchemaSteps()[1]) +
                        std::string(pg::PgSchemaSteps()[2]) + std::string(pg::PgSchemaSteps()[3]) +
                        "INSERT INTO grademl_meta VALUES ('schema_version', '7');"
                        "INSERT INTO runs (uuid, command, cwd, host, start_ns, complete, error, grademl_version, "
                        "interval_ns) VALUES ('old', '[\"ls\"]', '/', 'h', 5, true, '', '0.0.9', 100);");
  auto db = Database::Open(url, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ((*db)->LoadRun(1)->info.owner, "");
  auto id = (*db)->CreateRun(OwnerInfo("new", ""));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ((*db)->LoadRun(*id)->info.owner, "postgres");
  EXPECT_EQ(OwnerPgValue(url, "SELECT value FROM grademl_meta WHERE key = 'schema_version'"), "8");
  EXPECT_EQ(OwnerPgValue(url, "SELECT owner FROM runs WHERE id = 1"), "");
}

// Roles belong to the whole server: once any database on it was made shared, grademl_reader
// exists, and a superuser is a member of every role. A read-only connection to another,
// unshared database must still read as itself (before: it switched to grademl_reader, which
// may read nothing there: "permission denied for table grademl_meta" for every query and
// report of that store).
TEST(StoreOwnerTest, AnUnsharedPostgresStoreIsReadAsItselfWhereAReaderRoleExists) {
  GRADEML_PG_DATABASE_OR_SKIP(url);
  OwnerPgValue(url, "DO $$ BEGIN CREATE ROLE grademl_reader NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;"
                    "SELECT 1");
  model::RunId id = 0;
  {
    auto db = Database::Open(url, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status().message();
    auto made = (*db)->CreateRun(OwnerInfo("u", ""));
    ASSERT_TRUE(made.ok()) << made.status().message();
    id = *made;
  }
  auto ro = Database::Open(url, Database::Mode::kReadOnly);
  ASSERT_TRUE(ro.ok()) << ro.status().message();
  auto run = (*ro)->LoadRun(id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->info.owner, "postgres");
}

}  // namespace
}  // namespace grademl::store
