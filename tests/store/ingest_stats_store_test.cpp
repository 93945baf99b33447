// Ingest stats in the store (docs/store.md, schema version 6): each stat's severity and
// description are stored with it on both backends; a store of version 5 (before they were
// kept) is migrated by a writer, and its stats read back with the list's severity and
// description by reason (model/ingest_stats.h), "info" for a reason the list does not have.
#include <gtest/gtest.h>
#include "store/postgres/libpq.h"

#include <span>
#include <string>
#include <vector>

#include "model/ingest_stats.h"
#include "pg_test_server.h"
#include "store/database.h"
#include "store/postgres/pg_schema.h"
#include "store/sqlite/schema.h"
#include "store_test_support.h"

namespace grademl::store {
namespace {

using model::IngestStat;
using model::StatSeverity;
using testing::RawDb;
using testing::TempDir;

// What a version-5 store's two rows read back as: end_without_begin is data_loss in the
// list (an E with nothing open is not imported); "mystery" is no stat of the list.
std::vector<IngestStat> ExpectedOldStats() {
  return {{.source = 1,
           .reason = "end_without_begin",
           .count = 4,
           .severity = StatSeverity::kDataLoss,
           .description = "an end (E) with no slice open on its track"},
          {.source = 1, .reason = "mystery", .count = 2, .severity = StatSeverity::kInfo, .description = ""}};
}

// A stat of another grademl: its stored severity and description are kept as they are.
IngestStat ForeignStat() {
  return {.source = 1, .reason = "zz_future_reason", .count = 3, .severity = StatSeverity::kError,
          .description = "from a newer grademl"};
}

// A delta adding one more end_without_begin (as the list describes it) and a foreign stat.
model::RunDelta NewStats() {
  model::RunDelta d;
  d.ingest_stats = {ExpectedOldStats()[0], ForeignStat()};
  d.ingest_stats[0].count = 1;
  return d;
}

TEST(IngestStatsSqliteTest, AVersion5FileIsMigratedAndItsStatsGetTheListsSeverity) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  {
    RawDb raw(path);
    ASSERT_TRUE(MigrateSchema(raw.get(), path, SchemaSteps().first(5)).ok());
    raw.Exec("INSERT INTO runs (uuid, command, cwd, host, start_ns, complete, error, grademl_version, interval_ns) "
             "VALUES ('old', '[\"ls\"]', '/', 'h', 5, 1, '', '0.0.9', 100)");
    raw.Exec("INSERT INTO ingest_stats VALUES (1, 1, 'end_without_begin', 4), (1, 1, 'mystery', 2)");
  }
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto old = (*db)->LoadRun(1);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->ingest_stats, ExpectedOldStats());
  // New counts add to the old row and store the severity with it.
  ASSERT_TRUE((*db)->WriteDelta(1, NewStats()).ok());
  std::vector<IngestStat> want = ExpectedOldStats();
  want[0].count = 5;
  want.push_back(ForeignStat());  // by reason: last
  EXPECT_EQ((*db)->LoadRun(1)->ingest_stats, want);
  db->reset();
  RawDb raw(path);
  EXPECT_EQ(raw.Int("PRAGMA user_version"), 8);
  EXPECT_EQ(raw.Text("SELECT severity FROM ingest_stats WHERE reason = 'end_without_begin'"), "data_loss");
  EXPECT_EQ(raw.Text("SELECT severity || ':' || description FROM ingest_stats WHERE reason = 'zz_future_reason'"),
            "error:from a newer grademl");
  EXPECT_EQ(raw.Text("SELECT severity FROM ingest_stats WHERE reason = 'mystery'"), "");
}

TEST(IngestStatsPgTest, AVersion5DatabaseIsMigratedAndItsStatsGetTheListsSeverity) {
  GRADEML_PG_DATABASE_OR_SKIP(url);
  {
    PGconn* conn = PQconnectdb(url.c_str());
    ASSERT_EQ(PQstatus(conn), CONNECTION_OK);
    std::string v5 = "CREATE TABLE grademl_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);" +
                     std::string(pg::PgSchemaSteps()[0]) + std::string(pg::PgSchemaSteps()[1]) +
                     "INSERT INTO grademl_meta VALUES ('schema_version', '5');"
                     "INSERT INTO runs (uuid, command, cwd, host, start_ns, complete, error, grademl_version, "
                     "interval_ns) VALUES ('old', '[\"ls\"]', '/', 'h', 5, true, '', '0.0.9', 100);"
                     "INSERT INTO ingest_stats VALUES (1, 1, 'end_without_begin', 4), (1, 1, 'mystery', 2);";
    PGresult* r = PQexec(conn, v5.c_str());
    EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQresultErrorMessage(r);
    PQclear(r);
    PQfinish(conn);
  }
  auto db = Database::Open(url, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto old = (*db)->LoadRun(1);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->ingest_stats, ExpectedOldStats());
  ASSERT_TRUE((*db)->WriteDelta(1, NewStats()).ok());
  std::vector<IngestStat> want = ExpectedOldStats();
  want[0].count = 5;
  want.push_back(ForeignStat());
  EXPECT_EQ((*db)->LoadRun(1)->ingest_stats, want);
  PGconn* conn = PQconnectdb(url.c_str());
  PGresult* r = PQexec(conn, "SELECT severity FROM ingest_stats WHERE reason = 'end_without_begin'");
  ASSERT_EQ(PQntuples(r), 1);
  EXPECT_EQ(std::string(PQgetvalue(r, 0, 0)), "data_loss");
  PQclear(r);
  r = PQexec(conn, "SELECT value FROM grademl_meta WHERE key = 'schema_version'");
  EXPECT_EQ(std::string(PQgetvalue(r, 0, 0)), "8");
  PQclear(r);
  PQfinish(conn);
}

}  // namespace
}  // namespace grademl::store
