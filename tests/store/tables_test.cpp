// The table description (store/tables.h) and what it drives: the schema steps it generates
// are the text existing stores were created with (frozen_schema.h, copied from the hand-written
// steps it replaced), each backend's writer puts every model field in the column the
// description names (read back by name, not through the backend's own loader), and both
// backends keep one sample per series and time, the last written.
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>
#include "store/postgres/libpq.h"

#include <map>
#include <string>
#include <vector>

#include "frozen_schema.h"
#include "pg_test_server.h"
#include "store/database.h"
#include "store/postgres/pg_database.h"
#include "store/postgres/pg_schema.h"
#include "store/sqlite/schema.h"
#include "store/tables.h"
#include "store_test_support.h"

namespace grademl::store {
namespace {

using testing::RawDb;
using testing::TempDir;

TEST(TablesTest, GeneratedStepsAreTodaysText) {
  std::span<const std::string_view> sqlite = SchemaSteps();
  ASSERT_GE(sqlite.size(), std::size(frozen::kSqliteSteps));
  for (size_t i = 0; i < std::size(frozen::kSqliteSteps); ++i) {
    EXPECT_EQ(sqlite[i], frozen::kSqliteSteps[i]) << "SQLite step to version " << i + 1;
  }
  std::span<const std::string_view> pg = pg::PgSchemaSteps();
  ASSERT_GE(pg.size(), std::size(frozen::kPgSteps));
  for (size_t i = 0; i < std::size(frozen::kPgSteps); ++i) {
    EXPECT_EQ(pg[i], frozen::kPgSteps[i]) << "PostgreSQL step " << i;
  }
  EXPECT_EQ(CurrentSchemaVersion(), tables::CurrentVersion());
  EXPECT_EQ(pg::PgCurrentSchemaVersion(), tables::CurrentVersion());
}

// The hot paths' statements (phases upserted, samples inserted, many rows a statement) take
// their columns from the description: the lists are the ones the hand-written statements
// named, in the same order (the binders bind in that order: TablesBackendTest below).
TEST(TablesTest, HotPathColumnListsAreTheHandWrittenOnes) {
  EXPECT_EQ(tables::ColumnList(tables::Get("phases")),
            "run_id, id, parent_id, name, type, tags, start_ns, end_ns, host, pid, track_id, type_id");
  EXPECT_EQ(tables::KeyList(tables::Get("phases")), "run_id, id");
  EXPECT_EQ(tables::UpsertSet(tables::Get("phases")),
            "parent_id = excluded.parent_id, name = excluded.name, type = excluded.type, tags = excluded.tags, "
            "start_ns = excluded.start_ns, end_ns = excluded.end_ns, host = excluded.host, pid = excluded.pid, "
            "track_id = excluded.track_id, type_id = excluded.type_id");
  EXPECT_EQ(tables::ColumnList(tables::Get("samples")), "run_id, series_id, t_ns, value");
  EXPECT_EQ(tables::ColumnList(tables::Get("edges")), "run_id, from_id, to_id, kind");  // seq: the server's
  EXPECT_EQ(tables::PgSelectList(tables::Get("runs"), {"writers"}),
            "id, uuid, command, cwd, host, start_ns, end_ns, exit_code::bigint, exit_signal::bigint, "
            "complete::int::bigint, error, grademl_version, interval_ns, monitor_cpu_seconds, owner");
  EXPECT_EQ(tables::PgSelectList(tables::Get("tracks"), {"run_id"}),
            "id, kind, source_id, host, pid::bigint, process_start_ns, tid, device::bigint, stream, name");
}

// The schema objects of an SQLite file, as SQLite keeps them.
std::vector<std::string> SqliteSchemaObjects(const std::string& path) {
  RawDb db(path, SQLITE_OPEN_READONLY);
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db.get(), "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name", -1, &s,
                               nullptr),
            SQLITE_OK);
  std::vector<std::string> out;
  while (sqlite3_step(s) == SQLITE_ROW) {
    std::string row;
    for (int c = 0; c < 4; ++c) {
      const unsigned char* t = sqlite3_column_text(s, c);
      row += (t != nullptr ? reinterpret_cast<const char*>(t) : "NULL");
      row += " | ";
    }
    out.push_back(row);
  }
  sqlite3_finalize(s);
  return out;
}

// A store the generated steps create has the schema objects (sqlite_schema's rows, the text
// of every CREATE included) of one the hand-written steps created, and a store created by
// those steps opens and migrates to today's version.
TEST(TablesTest, AFreshSqliteStoreHasTheHandWrittenSchema) {
  TempDir dir;
  {
    RawDb raw(dir.File("old.db"));
    std::vector<std::string_view> steps(std::begin(frozen::kSqliteSteps), std::end(frozen::kSqliteSteps));
    ASSERT_TRUE(MigrateSchema(raw.get(), dir.File("old.db"), steps).ok());
  }
  ASSERT_TRUE(Database::Open(dir.File("old.db"), Database::Mode::kReadWrite).ok());
  ASSERT_TRUE(Database::Open(dir.File("new.db"), Database::Mode::kReadWrite).ok());
  std::vector<std::string> old_schema = SqliteSchemaObjects(dir.File("old.db"));
  EXPECT_GT(old_schema.size(), 14u);
  EXPECT_EQ(SqliteSchemaObjects(dir.File("new.db")), old_schema);
}

// ---- Every field in its column, on both backends ----

class TablesBackendTest : public ::testing::TestWithParam<std::string> {
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

  // Who the store names as a new run's owner: the test server's role (its URL's user=) on
  // PostgreSQL, the OS user running the test on SQLite (from the password database).
  std::string ExpectedOwner() const {
    if (GetParam() == "postgresql") return "postgres";
    struct passwd* pw = getpwuid(geteuid());
    return pw != nullptr ? pw->pw_name : "?";
  }

  // Each row of `table` for run `run`, as column name -> value as text ("NULL" for none),
  // read by the column names of the description: `SELECT name::text`, not the backend's loader.
  std::vector<std::map<std::string, std::string>> Rows(const std::string& table, model::RunId run,
                                                      const std::string& order) {
    const tables::Table& t = tables::Get(table);
    std::vector<std::string> names;
    std::string select;
    for (const tables::Column& c : t.columns) {
      if (c.type == tables::Type::kSeq) continue;
      names.emplace_back(c.name);
      if (!select.empty()) select += ", ";
      select += "CAST(" + std::string(c.name) + " AS TEXT)";
    }
    const std::string where = table == "runs" ? "id" : "run_id";
    const std::string sql =
        "SELECT " + select + " FROM " + table + " WHERE " + where + " = " + std::to_string(run) + " ORDER BY " + order;
    std::vector<std::map<std::string, std::string>> out;
    if (GetParam() == "postgresql") {
      PGconn* conn = PQconnectdb(location_.c_str());
      PGresult* r = PQexec(conn, sql.c_str());
      EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << sql << ": " << PQerrorMessage(conn);
      for (int i = 0; i < PQntuples(r); ++i) {
        auto& row = out.emplace_back();
        for (size_t c = 0; c < names.size(); ++c) {
          row[names[c]] = PQgetisnull(r, i, static_cast<int>(c)) ? "NULL" : PQgetvalue(r, i, static_cast<int>(c));
        }
      }
      PQclear(r);
      PQfinish(conn);
    } else {
      RawDb raw(location_, SQLITE_OPEN_READONLY);
      sqlite3_stmt* s = nullptr;
      EXPECT_EQ(sqlite3_prepare_v2(raw.get(), sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sql;
      while (sqlite3_step(s) == SQLITE_ROW) {
        auto& row = out.emplace_back();
        for (size_t c = 0; c < names.size(); ++c) {
          const unsigned char* v = sqlite3_column_text(s, static_cast<int>(c));
          row[names[c]] = v != nullptr ? reinterpret_cast<const char*>(v) : "NULL";
        }
      }
      sqlite3_finalize(s);
    }
    return out;
  }

  TempDir dir_;
  std::string location_;
  std::unique_ptr<Database> db_;
};

using TableRow = std::map<std::string, std::string>;

// One row per table with a distinct value in every column, written through the backend's
// writer (the hot paths, phases and samples, included), then read back column by column.
// The expected rows are written here from the model objects, column name by column name.
TEST_P(TablesBackendTest, EveryFieldIsWrittenToTheColumnTheDescriptionNames) {
  model::RunInfo info{.uuid = "u-1", .command = {"a"}, .cwd = "/w", .host = "h1", .start_ns = 1000,
                      .grademl_version = "9.9", .interval_ns = 77};
  model::RunId id = db_->CreateRun(info).value();
  const std::string run = std::to_string(id);
  model::RunDelta d;
  d.phases.push_back({.id = 11, .parent = 10, .name = "ph", .type = "run/step", .tags = {{"k", "v"}}, .start_ns = 1001,
                      .end_ns = 1002, .host = "h2", .pid = 4242, .track = 13});
  d.edges.push_back({.from = 11, .to = 12, .kind = "data"});
  d.resources.push_back({.id = 21, .parent = 20, .kind = model::ResourceKind::kProcess, .name = "r", .host = "h3",
                         .pid = 4343, .phase = 11, .start_ns = 1003});
  d.series.push_back(
      {.id = 31, .resource = 21, .name = "cpu.user", .unit = "s", .kind = model::SeriesKind::kCounter, .capacity = 2.5});
  d.samples.push_back({31, {.t = 1004, .v = 0.5}});
  d.logs.push_back({.phase = 11, .t = 1005, .stream = 2, .text = "out"});
  d.hosts.push_back({.name = "h4", .machine_id = "m4", .clock_offset_ns = 1006, .clock_uncertainty_ns = 1007});
  d.sources.push_back({.id = 41, .path = "/p", .format = "chrome_json", .tags = {{"rank", "3"}}});
  d.tracks.push_back({.id = 51, .kind = model::TrackKind::kAsync, .source = 41, .host = "h5", .pid = 4444,
                      .process_start_ns = 1008, .tid = 4445, .device = 6, .stream = 7, .name = "t"});
  d.ingest_stats.push_back({.source = 41, .reason = "no end", .count = 8, .severity = model::StatSeverity::kDataLoss,
                            .description = "d8"});
  d.clock_estimates.push_back({.host = "h4", .t = 1009, .offset_ns = 1010, .uncertainty_ns = 1011});
  model::StepExecution e;
  e.phase = 11;
  e.step = "train";
  e.workflow = "wf";
  e.key = "k1";
  e.not_reusable = "nr";
  e.outcome = "ran";
  e.reused_from = "rf";
  e.cost_ns = 1012;
  e.restore_ns = 1013;
  e.hash_ns = 1014;
  e.hashed_bytes = 1015;
  e.materialize_ns = 1016;
  d.step_executions.push_back(e);
  ASSERT_TRUE(db_->WriteDelta(id, d).ok());

  const std::string type_id = std::to_string(tables::PhaseTypeId("run/step"));
  EXPECT_EQ(Rows("phases", id, "id"), (std::vector<TableRow>{{{"run_id", run}, {"id", "11"}, {"parent_id", "10"},
                                                         {"name", "ph"}, {"type", ""},
                                                         {"tags", R"({"k":"v"})"}, {"start_ns", "1001"},
                                                         {"end_ns", "1002"}, {"host", "h2"}, {"pid", "4242"},
                                                         {"track_id", "13"}, {"type_id", type_id}}}));
  // The type path once, in phase_types (schema version 7).
  EXPECT_EQ(Rows("phase_types", id, "id"),
            (std::vector<TableRow>{{{"run_id", run}, {"id", type_id}, {"path", "run/step"}}}));
  EXPECT_EQ(Rows("edges", id, "from_id"),
            (std::vector<TableRow>{{{"run_id", run}, {"from_id", "11"}, {"to_id", "12"}, {"kind", "data"}}}));
  EXPECT_EQ(Rows("resources", id, "id"),
            (std::vector<TableRow>{{{"run_id", run}, {"id", "21"}, {"parent_id", "20"}, {"kind", "process"}, {"name", "r"},
                               {"host", "h3"}, {"pid", "4343"}, {"phase_id", "11"}, {"start_ns", "1003"}}}));
  EXPECT_EQ(Rows("series", id, "id"),
            (std::vector<TableRow>{{{"run_id", run}, {"id", "31"}, {"resource_id", "21"}, {"name", "cpu.user"},
                               {"unit", "s"}, {"kind", "counter"}, {"capacity", "2.5"}}}));
  EXPECT_EQ(Rows("samples", id, "t_ns"),
            (std::vector<TableRow>{{{"run_id", run}, {"series_id", "31"}, {"t_ns", "1004"}, {"value", "0.5"}}}));
  EXPECT_EQ(Rows("logs", id, "t_ns"), (std::vector<TableRow>{{{"run_id", run}, {"phase_id", "11"}, {"t_ns", "1005"},
                                                         {"stream", "2"}, {"text", "out"}}}));
  EXPECT_EQ(Rows("hosts", id, "name"),
            (std::vector<TableRow>{{{"run_id", run}, {"name", "h4"}, {"machine_id", "m4"}, {"clock_offset_ns", "1006"},
                               {"clock_uncertainty_ns", "1007"}}}));
  EXPECT_EQ(Rows("sources", id, "id"), (std::vector<TableRow>{{{"run_id", run}, {"id", "41"}, {"path", "/p"},
                                                          {"format", "chrome_json"}, {"tags", R"({"rank":"3"})"}}}));
  EXPECT_EQ(Rows("tracks", id, "id"),
            (std::vector<TableRow>{{{"run_id", run}, {"id", "51"}, {"kind", "async"}, {"source_id", "41"}, {"host", "h5"},
                               {"pid", "4444"}, {"process_start_ns", "1008"}, {"tid", "4445"}, {"device", "6"},
                               {"stream", "7"}, {"name", "t"}}}));
  EXPECT_EQ(Rows("ingest_stats", id, "reason"), (std::vector<TableRow>{{{"run_id", run}, {"source_id", "41"},
                                                                   {"reason", "no end"}, {"count", "8"},
                                                                   {"severity", "data_loss"}, {"description", "d8"}}}));
  EXPECT_EQ(Rows("clock_estimates", id, "t_ns"),
            (std::vector<TableRow>{{{"run_id", run}, {"host", "h4"}, {"t_ns", "1009"}, {"offset_ns", "1010"},
                               {"uncertainty_ns", "1011"}}}));
  EXPECT_EQ(Rows("step_executions", id, "phase_id"),
            (std::vector<TableRow>{{{"run_id", run}, {"phase_id", "11"}, {"step", "train"}, {"workflow", "wf"},
                               {"key", "k1"}, {"not_reusable", "nr"}, {"outcome", "ran"}, {"reused_from", "rf"},
                               {"cost_ns", "1012"}, {"restore_ns", "1013"}, {"hash_ns", "1014"},
                               {"hashed_bytes", "1015"}, {"materialize_ns", "1016"}, {"inputs", "[]"},
                               {"outputs", "[]"}}}));
  // The run's row, rewritten by the delta path (UPDATE) after CreateRun's INSERT.
  model::RunDelta end;
  end.info = info;
  end.info->end_ns = 2000;
  end.info->exit_code = 3;
  end.info->exit_signal = 9;
  end.info->error = "boom";
  end.info->monitor_cpu_seconds = 0.25;
  ASSERT_TRUE(db_->WriteDelta(id, end).ok());
  const std::string complete = GetParam() == "postgresql" ? "false" : "0";
  EXPECT_EQ(Rows("runs", id, "id"),
            (std::vector<TableRow>{{{"id", run}, {"uuid", "u-1"}, {"command", R"(["a"])"}, {"cwd", "/w"}, {"host", "h1"},
                               {"start_ns", "1000"}, {"end_ns", "2000"}, {"exit_code", "3"}, {"exit_signal", "9"},
                               {"complete", complete}, {"error", "boom"}, {"grademl_version", "9.9"},
                               {"interval_ns", "77"}, {"monitor_cpu_seconds", "0.25"}, {"writers", "0"},
                               {"owner", ExpectedOwner()}}}));
  // And the loader reads each column into its field: the same values through LoadRun.
  auto loaded = db_->LoadRun(id);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->phases.size(), 1u);
  EXPECT_EQ(loaded->phases[0].track, 13);
  EXPECT_EQ(loaded->phases[0].pid, 4242);
  ASSERT_EQ(loaded->tracks.size(), 1u);
  EXPECT_EQ(loaded->tracks[0].process_start_ns, 1008);
  EXPECT_EQ(loaded->tracks[0].device, 6);
  ASSERT_EQ(loaded->series.size(), 1u);
  ASSERT_EQ(loaded->series[0].samples.size(), 1u);
  EXPECT_EQ(loaded->series[0].samples[0].t, 1004);
  EXPECT_EQ(loaded->series[0].samples[0].v, 0.5);
  EXPECT_EQ(loaded->info.exit_signal, 9);
}

// ---- One sample per series and time, the last written, on both backends ----

// A sample written twice for one series and time keeps the value written last: within one
// delta (the later record) and across deltas (the later delta), on both backends. Before,
// SQLite kept the last (its primary key, INSERT OR REPLACE) while PostgreSQL stored both and
// its loader kept whichever the server's sort put last.
TEST_P(TablesBackendTest, ASampleWrittenTwiceKeepsTheLastValue) {
  model::RunInfo info{.uuid = "u-2", .command = {"a"}, .host = "h", .start_ns = 1, .interval_ns = 1};
  model::RunId id = db_->CreateRun(info).value();
  model::RunDelta first;
  first.resources.push_back({.id = 1, .kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  first.series.push_back({.id = 1, .resource = 1, .name = "g", .unit = "x"});
  first.series.push_back({.id = 2, .resource = 1, .name = "h", .unit = "x"});
  // Within one delta: t=10 twice, 20 three times (out of order between), NaN then a number.
  for (auto [series, t, v] : std::vector<std::tuple<int, int64_t, double>>{{1, 10, 1.0},
                                                                           {2, 10, 5.0},
                                                                           {1, 20, 2.0},
                                                                           {1, 10, 3.0},
                                                                           {1, 20, 4.0},
                                                                           {1, 20, 6.0},
                                                                           {2, 30, std::nan("")},
                                                                           {2, 30, 7.0}}) {
    first.samples.push_back({series, {.t = t, .v = v}});
  }
  ASSERT_TRUE(db_->WriteDelta(id, first).ok());
  // Across deltas: series 2 at t=10 again, then twice more in a third delta.
  for (double v : {8.0, 9.0}) {
    model::RunDelta again;
    again.samples.push_back({2, {.t = 10, .v = v}});
    ASSERT_TRUE(db_->WriteDelta(id, again).ok());
  }
  model::RunDelta last;
  last.samples.push_back({2, {.t = 10, .v = 10.0}});
  last.samples.push_back({2, {.t = 10, .v = 11.0}});
  ASSERT_TRUE(db_->WriteDelta(id, last).ok());
  auto run = db_->LoadRun(id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->series.size(), 2u);
  EXPECT_EQ(run->series[0].samples, (std::vector<model::Sample>{{10, 3.0}, {20, 6.0}}));
  EXPECT_EQ(run->series[1].samples, (std::vector<model::Sample>{{10, 11.0}, {30, 7.0}}));
}

INSTANTIATE_TEST_SUITE_P(Backends, TablesBackendTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

// ---- PostgreSQL: the samples are loaded in chunks ----

// A run's samples come through a cursor a chunk at a time (forced down to 7 rows here): every
// sample of every series arrives, in order, and a duplicate split across two chunks is still
// read once, with its last value.
TEST(PgStreamingLoadTest, SamplesLoadedInChunksAreAllThereInOrder) {
  GRADEML_PG_DATABASE_OR_SKIP(url);
  auto db = Database::Open(url, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  model::RunInfo info{.uuid = "u-3", .command = {"a"}, .host = "h", .start_ns = 1, .interval_ns = 1};
  model::RunId id = (*db)->CreateRun(info).value();
  model::RunDelta d;
  d.resources.push_back({.id = 1, .kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  for (int s = 1; s <= 3; ++s) d.series.push_back({.id = s, .resource = 1, .name = "s" + std::to_string(s), .unit = "x"});
  // Series 1: t = 0..9 (10 rows), series 2: t = 0..4 (5), series 3: t = 0..19 (20): 35 rows.
  std::vector<std::vector<model::Sample>> want(3);
  for (int s = 1; s <= 3; ++s) {
    const int n = s == 1 ? 10 : s == 2 ? 5 : 20;
    for (int t = 0; t < n; ++t) {
      d.samples.push_back({s, {.t = t, .v = s * 100.0 + t}});
      want[s - 1].push_back({t, s * 100.0 + t});
    }
  }
  ASSERT_TRUE((*db)->WriteDelta(id, d).ok());
  // Rows 7 and 8 of the sorted result (series 1, t=6, its first and second value): the
  // boundary between the first two chunks falls between them.
  model::RunDelta dup;
  dup.samples.push_back({1, {.t = 6, .v = -1.0}});
  ASSERT_TRUE((*db)->WriteDelta(id, dup).ok());
  want[0][6].v = -1.0;
  PgDatabase::SetSampleChunkRowsForTesting(7);
  auto run = (*db)->LoadRun(id);
  PgDatabase::SetSampleChunkRowsForTesting(0);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->series.size(), 3u);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(run->series[s].samples, want[s]) << "series " << s + 1;
}

}  // namespace
}  // namespace grademl::store
