// QuerySession: the run's views, tables added by the caller, and the refusal of anything
// but one read.
#include "store/query_session.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "store/database.h"
#include "store_test_support.h"

namespace grademl::store {
namespace {

using testing::ReadBytes;
using testing::TempDir;

constexpr TimeNs kT0 = 1'700'000'000'000'000'000;
constexpr TimeNs kSec = 1'000'000'000;

model::Phase MakePhase(model::PhaseId id, model::PhaseId parent, std::string name, std::string type, TimeNs start,
                       TimeNs end, int32_t pid = 0) {
  model::Phase p;
  p.id = id;
  p.parent = parent;
  p.name = std::move(name);
  p.type = std::move(type);
  p.start_ns = start;
  p.end_ns = end;
  p.host = "node1";
  p.pid = pid;
  return p;
}

// Two runs: run 1 (complete, 4 s: run > python train.py > epoch 1, epoch 2; an edge; an RSS
// series) and run 2 (incomplete: run > make, still open; a CPU sample at +9 s).
class QuerySessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("g.db");
    auto db = Database::Open(path_, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status().message();

    model::RunInfo info{.uuid = "u1", .command = {"python", "train.py"}, .cwd = "/", .host = "node1",
                        .start_ns = kT0, .end_ns = kT0 + 4 * kSec, .exit_code = 0, .complete = true,
                        .grademl_version = "0.1.0", .interval_ns = kSec / 10};
    auto id = (*db)->CreateRun(info);
    ASSERT_TRUE(id.ok());
    model::RunDelta d;
    d.info = info;
    d.phases = {MakePhase(1, 0, "run", "run", kT0, kT0 + 4 * kSec),
                MakePhase(2, 1, "python train.py", "run/process", kT0 + kSec / 2, kT0 + 3 * kSec + kSec / 2, 101),
                MakePhase(3, 2, "epoch 1", "run/process/epoch", kT0 + kSec, kT0 + 2 * kSec, 101),
                MakePhase(4, 2, "epoch 2", "run/process/epoch", kT0 + 2 * kSec, kT0 + 3 * kSec, 101)};
    d.phases[2].tags = {{"epoch", "1"}};
    d.edges = {{.from = 3, .to = 4, .kind = "data"}};
    d.resources = {{.id = 1, .kind = model::ResourceKind::kHost, .name = "node1", .host = "node1"},
                   {.id = 2, .parent = 1, .kind = model::ResourceKind::kProcess, .name = "101", .host = "node1",
                    .pid = 101, .phase = 2}};
    d.series = {{.id = 1, .resource = 2, .name = "memory.rss", .unit = "bytes", .kind = model::SeriesKind::kGauge}};
    d.samples = {{1, {kT0 + kSec, 100}}, {1, {kT0 + 2 * kSec, 300}}};
    ASSERT_TRUE((*db)->WriteDelta(*id, d).ok());

    model::RunInfo info2{.uuid = "u2", .command = {"make"}, .cwd = "/", .host = "node1", .start_ns = kT0 + 100 * kSec,
                         .grademl_version = "0.1.0", .interval_ns = kSec / 10};
    auto id2 = (*db)->CreateRun(info2);
    ASSERT_TRUE(id2.ok());
    model::RunDelta d2;
    d2.info = info2;
    d2.phases = {MakePhase(1, 0, "run", "run", kT0 + 100 * kSec, 0),
                 MakePhase(2, 1, "make", "run/process", kT0 + 101 * kSec, 0, 200)};
    d2.resources = {{.id = 1, .kind = model::ResourceKind::kProcess, .name = "200", .host = "node1", .pid = 200,
                     .phase = 2}};
    d2.series = {{.id = 1, .resource = 1, .name = "cpu.user", .unit = "s", .kind = model::SeriesKind::kCounter}};
    d2.samples = {{1, {kT0 + 102 * kSec, 0.5}}, {1, {kT0 + 109 * kSec, 2}}};
    ASSERT_TRUE((*db)->WriteDelta(*id2, d2).ok());
  }

  std::unique_ptr<QuerySession> Open(const std::string& spec) {
    auto s = QuerySession::Open(path_, spec);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }

  QueryResult Query(QuerySession& s, const std::string& sql) {
    auto r = s.Query(sql);
    EXPECT_TRUE(r.ok()) << sql << ": " << r.status().message();
    return r.ok() ? *r : QueryResult{};
  }

  TempDir dir_;
  std::string path_;
};

TEST_F(QuerySessionTest, PhasesOfTheChosenRunOnly) {
  auto s = Open("1");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->run_id(), 1);
  QueryResult r = Query(*s, "SELECT id, parent_id, name, leaf_type, path, depth, pid, start_s, end_s, duration_s, "
                            "open, json_extract(tags, '$.epoch') FROM phases ORDER BY id");
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_EQ(r.columns[4], "path");
  const auto& epoch1 = r.rows[2];
  EXPECT_EQ(epoch1[0], QueryValue(int64_t{3}));
  EXPECT_EQ(epoch1[1], QueryValue(int64_t{2}));
  EXPECT_EQ(epoch1[2], QueryValue(std::string("epoch 1")));
  EXPECT_EQ(epoch1[3], QueryValue(std::string("epoch")));
  EXPECT_EQ(epoch1[4], QueryValue(std::string("run > python train.py > epoch 1")));
  EXPECT_EQ(epoch1[5], QueryValue(int64_t{2}));
  EXPECT_EQ(epoch1[6], QueryValue(int64_t{101}));
  EXPECT_EQ(epoch1[7], QueryValue(1.0));
  EXPECT_EQ(epoch1[8], QueryValue(2.0));
  EXPECT_EQ(epoch1[9], QueryValue(1.0));
  EXPECT_EQ(epoch1[10], QueryValue(int64_t{0}));
  EXPECT_EQ(epoch1[11], QueryValue(std::string("1")));
  EXPECT_EQ(r.rows[0][1], QueryValue());  // the root has no parent
  EXPECT_EQ(r.rows[0][6], QueryValue());  // nor a pid
  EXPECT_EQ(r.rows[0][5], QueryValue(int64_t{0}));

  // The latest run (the default) is run 2; "-2" is run 1 again.
  auto latest = Open("");
  ASSERT_NE(latest, nullptr);
  EXPECT_EQ(latest->run_id(), 2);
  EXPECT_EQ(Query(*latest, "SELECT group_concat(name, ',') FROM phases").rows[0][0], QueryValue(std::string("run,make")));
  EXPECT_EQ(Open("-2")->run_id(), 1);
}

TEST_F(QuerySessionTest, OpenPhasesEndAtTheRunsLastTimeSeen) {
  auto s = Open("2");
  ASSERT_NE(s, nullptr);
  // Run 2 never ended: its last sample (+9 s from its start) is its end.
  QueryResult r = Query(*s, "SELECT start_s, end_s, duration_s, open, end_ns FROM phases WHERE id = 2");
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0][0], QueryValue(1.0));
  EXPECT_EQ(r.rows[0][1], QueryValue(9.0));
  EXPECT_EQ(r.rows[0][2], QueryValue(8.0));
  EXPECT_EQ(r.rows[0][3], QueryValue(int64_t{1}));
  EXPECT_EQ(r.rows[0][4], QueryValue());
}

TEST_F(QuerySessionTest, EdgesAndSamplesOfTheChosenRunOnly) {
  auto s = Open("1");
  ASSERT_NE(s, nullptr);
  QueryResult e = Query(*s, "SELECT from_id, to_id, kind, from_name, to_name FROM edges");
  ASSERT_EQ(e.rows.size(), 1u);
  EXPECT_EQ(e.rows[0][3], QueryValue(std::string("epoch 1")));
  EXPECT_EQ(e.rows[0][4], QueryValue(std::string("epoch 2")));
  QueryResult r = Query(*s, "SELECT metric, resource, resource_kind, pid, phase_id, t_s, value FROM samples ORDER BY t_s");
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0][0], QueryValue(std::string("memory.rss")));
  EXPECT_EQ(r.rows[0][1], QueryValue(std::string("101")));
  EXPECT_EQ(r.rows[0][2], QueryValue(std::string("process")));
  EXPECT_EQ(r.rows[0][3], QueryValue(int64_t{101}));
  EXPECT_EQ(r.rows[0][4], QueryValue(int64_t{2}));
  EXPECT_EQ(r.rows[1][5], QueryValue(2.0));
  EXPECT_EQ(r.rows[1][6], QueryValue(300.0));

  auto s2 = Open("2");
  ASSERT_NE(s2, nullptr);
  EXPECT_TRUE(Query(*s2, "SELECT * FROM edges").rows.empty());
  EXPECT_EQ(Query(*s2, "SELECT count(*), max(t_s) FROM samples").rows[0],
            (std::vector<QueryValue>{int64_t{2}, 9.0}));
  // The store's own tables stay readable, every run in them.
  EXPECT_EQ(Query(*s2, "SELECT count(*) FROM main.phases").rows[0][0], QueryValue(int64_t{6}));
  EXPECT_EQ(Query(*s2, "SELECT count(*) FROM runs").rows[0][0], QueryValue(int64_t{2}));
}

TEST_F(QuerySessionTest, ViewsHaveTheDocumentedColumns) {
  auto s = Open("");
  ASSERT_NE(s, nullptr);
  for (const QueryView& view : QuerySession::BuiltinViews()) {
    QueryResult r = Query(*s, "SELECT * FROM " + view.name + " LIMIT 0");
    std::vector<std::string> documented;
    for (const auto& c : view.columns) documented.push_back(c.name);
    EXPECT_EQ(r.columns, documented) << view.name;
  }
}

TEST_F(QuerySessionTest, WritesAreRefused) {
  const std::string before = ReadBytes(path_);
  const std::string copy = dir_.File("copy.db");
  auto s = Open("1");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->AddTable({"extra", "", {{"a", "INTEGER", ""}}}, {{int64_t{1}}}).ok());
  struct Case {
    std::string sql;
    std::string what;
  };
  for (const Case& c : std::vector<Case>{
           {"INSERT INTO main.runs (uuid) VALUES ('x')", "INSERT"},
           {"INSERT INTO extra VALUES (2)", "INSERT"},
           {"insert into phases (id) values (99)", "INSERT"},
           {"UPDATE main.phases SET name = 'x'", "UPDATE"},
           {"UPDATE phases SET name = 'x'", "UPDATE"},
           {"DELETE FROM main.samples", "DELETE"},
           {"DELETE FROM sqlite_master", "DELETE"},
           {"REPLACE INTO main.runs (uuid) VALUES ('x')", "REPLACE"},
           {"INSERT INTO nosuch VALUES (1)", "INSERT"},
           {"-- a comment\n/* another */ DROP TABLE main.runs", "DROP TABLE"},
           {"EXPLAIN DELETE FROM main.runs", "DELETE"},
           {"UPDATE sqlite_temp_master SET sql = ''", "UPDATE"},
           {"WITH x AS (SELECT 1) DELETE FROM main.runs", "DELETE"},
           {"CREATE TABLE t (a)", "CREATE TABLE"},
           {"CREATE TEMP TABLE t AS SELECT * FROM phases", "CREATE TABLE"},
           {"CREATE VIEW v AS SELECT 1", "CREATE VIEW"},
           {"CREATE INDEX i ON runs (uuid)", "CREATE INDEX"},
           {"DROP TABLE main.runs", "DROP TABLE"},
           {"DROP TABLE extra", "DROP TABLE"},
           {"DROP VIEW samples", "DROP VIEW"},
           {"ALTER TABLE main.runs ADD COLUMN z", "ALTER TABLE"},
           {"ATTACH '" + copy + "' AS other", "ATTACH"},
           {"DETACH temp", "DETACH"},
           {"PRAGMA user_version = 3", "PRAGMA user_version"},
           {"PRAGMA main.journal_mode = WAL", "PRAGMA journal_mode"},
           {"pragma writable_schema = 1", "PRAGMA writable_schema"},
           {"PRAGMA query_only = 0", "PRAGMA query_only"},
           {"BEGIN", "BEGIN"},
           {"COMMIT", "COMMIT"},
           {"SAVEPOINT a", "SAVEPOINT"},
           {"REINDEX", "REINDEX"},
           {"ANALYZE", "ANALYZE"},
           {"VACUUM", "VACUUM"},
           {"VACUUM INTO '" + copy + "'", "VACUUM"},
           {"SELECT load_extension('/tmp/x.so')", "load_extension()"},
       }) {
    auto r = s->Query(c.sql);
    ASSERT_FALSE(r.ok()) << c.sql;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.sql;
    EXPECT_EQ(r.status().message(), "query is read-only: " + c.what + " is not allowed") << c.sql;
  }
  // Nothing changed: not the file, not the views, not the caller's table.
  EXPECT_EQ(Query(*s, "SELECT count(*) FROM phases").rows[0][0], QueryValue(int64_t{4}));
  EXPECT_EQ(Query(*s, "SELECT count(*) FROM extra").rows[0][0], QueryValue(int64_t{1}));
  s.reset();
  EXPECT_EQ(ReadBytes(path_), before);
  EXPECT_FALSE(std::filesystem::exists(copy));
}

TEST_F(QuerySessionTest, OneStatementOnly) {
  auto s = Open("1");
  ASSERT_NE(s, nullptr);
  for (const std::string sql : {"SELECT 1; SELECT 2", "SELECT 1; DROP TABLE main.runs", "SELECT 1;;\n x"}) {
    auto r = s->Query(sql);
    ASSERT_FALSE(r.ok()) << sql;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), "query: only one statement is allowed (found more after the first ';')") << sql;
  }
  // Trailing semicolons and comments are fine.
  for (const std::string sql : {"SELECT 1;", "SELECT 1; -- done\n", "SELECT 1 /* a */ ; /* b */ ;  "}) {
    auto r = s->Query(sql);
    ASSERT_TRUE(r.ok()) << sql << ": " << r.status().message();
    EXPECT_EQ(r->rows.size(), 1u);
  }
}

TEST_F(QuerySessionTest, ErrorsInTheSqlAreInvalidArgument) {
  auto s = Open("1");
  ASSERT_NE(s, nullptr);
  struct Case {
    std::string sql, message;
  };
  for (const Case& c : std::vector<Case>{
           {"SELEC 1", "query: near \"SELEC\": syntax error"},
           {"SELECT * FROM nosuch", "query: no such table: nosuch"},
           {"SELECT nosuch FROM phases", "query: no such column: nosuch"},
           {"", "query: the query is empty"},
           {"  -- nothing\n", "query: the query is empty"},
           {"SELECT json_extract('{', '$')", "query: malformed JSON"},
       }) {
    auto r = s->Query(c.sql);
    ASSERT_FALSE(r.ok()) << c.sql;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.sql;
    EXPECT_EQ(r.status().message(), c.message);
  }
}

TEST_F(QuerySessionTest, IntrospectionIsAllowed) {
  auto s = Open("1");
  ASSERT_NE(s, nullptr);
  QueryResult r = Query(*s, "PRAGMA table_info(samples)");
  EXPECT_EQ(r.rows.size(), QuerySession::BuiltinViews()[2].columns.size());
  r = Query(*s, "SELECT name FROM sqlite_temp_master WHERE type = 'view' ORDER BY name");
  EXPECT_EQ(r.rows.size(), 4u);  // edges, kernels, samples, step_executions
  r = Query(*s, "EXPLAIN QUERY PLAN SELECT * FROM phases WHERE id = 2");
  EXPECT_FALSE(r.rows.empty());
  r = Query(*s, "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 5) SELECT sum(x) FROM n");
  EXPECT_EQ(r.rows[0][0], QueryValue(int64_t{15}));
}

TEST_F(QuerySessionTest, AddedTablesHoldEveryKindOfValue) {
  auto s = Open("1");
  ASSERT_NE(s, nullptr);
  QueryView view{"things", "", {{"i", "INTEGER", ""}, {"r", "REAL", ""}, {"t", "TEXT", ""}, {"b", "", ""}}};
  std::vector<std::vector<QueryValue>> rows = {
      {int64_t{1}, 0.5, std::string("a\"b"), QueryBlob{std::string("\0\1", 2)}},
      {QueryValue(), std::nan(""), std::string(), QueryValue()},
  };
  ASSERT_TRUE(s->AddTable(view, rows).ok());
  QueryResult r = Query(*s, "SELECT * FROM things ORDER BY rowid");
  EXPECT_EQ(r.columns, (std::vector<std::string>{"i", "r", "t", "b"}));
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0], rows[0]);
  EXPECT_EQ(r.rows[1], (std::vector<QueryValue>{QueryValue(), QueryValue(), std::string(), QueryValue()}));
  // A view joins the run's views.
  ASSERT_TRUE(s->AddTable({"per_phase", "", {{"phase_id", "INTEGER", ""}, {"x", "REAL", ""}}},
                          {{int64_t{3}, 1.5}, {int64_t{4}, 2.5}})
                  .ok());
  r = Query(*s, "SELECT p.name, x FROM per_phase JOIN phases p ON p.id = phase_id ORDER BY x DESC LIMIT 1");
  EXPECT_EQ(r.rows[0][0], QueryValue(std::string("epoch 2")));

  EXPECT_EQ(s->AddTable(view, {}).code(), StatusCode::kInvalidArgument);  // taken
  EXPECT_EQ(s->AddTable({"short", "", {{"a", "INTEGER", ""}}}, {{int64_t{1}, int64_t{2}}}).code(),
            StatusCode::kInvalidArgument);
}

TEST_F(QuerySessionTest, StopsWhenTheCallerSaysSo) {
  auto s = Open("1");
  ASSERT_NE(s, nullptr);
  int rows = 0;
  std::vector<std::string> columns;
  Status st = s->Execute(
      "SELECT id FROM phases", [&](const std::vector<std::string>& c) { columns = c; },
      [&](const std::vector<QueryValue>&) { return ++rows < 2; });
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(rows, 2);
  EXPECT_EQ(columns, std::vector<std::string>{"id"});
}

// Interrupt from another thread stops a statement that would never end, with the reason
// given; one that came before the statement started stops it at once.
TEST_F(QuerySessionTest, InterruptStopsTheStatementWithTheReasonGiven) {
  auto s = Open("1");
  ASSERT_NE(s, nullptr);
  const Status reason = FailedPrecondition("query: stopped by the test");
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    s->Interrupt(reason);
  });
  int64_t rows = 0;
  Status st = s->Execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
                         [](const std::vector<std::string>&) {}, [&](const std::vector<QueryValue>&) { return ++rows; });
  stopper.join();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "query: stopped by the test");
  EXPECT_EQ(rows, 0);
  st = s->Execute("SELECT 1", [](const std::vector<std::string>&) {}, [](const std::vector<QueryValue>&) { return true; });
  EXPECT_EQ(st.message(), "query: stopped by the test");
}

// The limits: a value past an eighth of the memory limit, a sort past the memory limit,
// each a one-line error naming it; the process's heap limit is back when the session closes.
TEST_F(QuerySessionTest, LimitsStopAStatementWithOneLineNamingThem) {
  const int64_t before = sqlite3_hard_heap_limit64(-1);
  const int64_t soft_before = sqlite3_soft_heap_limit64(-1);
  {
    auto s = QuerySession::Open(path_, "1", {.limits = {.memory_bytes = int64_t{32} << 20}});
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ((*s)->Query("SELECT length(zeroblob(4194305))").status().message(),
              "query: stopped at the 4 MiB limit on one string or BLOB, an eighth of the 32 MiB memory limit "
              "(--max-memory SIZE raises both)");
    EXPECT_EQ((*s)->Query("SELECT length(zeroblob(4194304))").value().rows[0][0], QueryValue(int64_t{4194304}));
    EXPECT_EQ(sqlite3_hard_heap_limit64(-1), int64_t{32} << 20);
    auto sorted = (*s)->Query(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000) "
        "SELECT x, printf('%020d', x) FROM c ORDER BY x DESC");
    EXPECT_EQ(sorted.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(sorted.status().message(),
              "query: stopped at the 32 MiB memory limit (--max-memory SIZE raises it, 0 for none)");
  }
  EXPECT_EQ(sqlite3_hard_heap_limit64(-1), before);
  EXPECT_EQ(sqlite3_soft_heap_limit64(-1), soft_before);
  // No limit: SQLite's own on one value.
  auto s = QuerySession::Open(path_, "1", {.limits = {.memory_bytes = 0}});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->Query("SELECT zeroblob(1000000001)").status().message(),
            "query: stopped at SQLite's limit of 1000000000 bytes on one string or BLOB");
}

TEST_F(QuerySessionTest, OpenErrors) {
  auto s = QuerySession::Open(path_, "9");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.status().message(), path_ + ": no run 9 (the latest run is 2)");
  s = QuerySession::Open(dir_.File("none.db"), "");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_.File("none.db")));
}

// A run with an imported trace: a runtime call on a thread track launching a kernel on GPU 0
// stream 7 (a `launch` edge), a memcpy on the same stream with no launch, and a phase on a
// thread track that is not a kernel. The kernels view holds the two stream phases only, with
// the values written here (launch delay: 1.25 s - 1.2 s = 50 ms).
TEST_F(QuerySessionTest, KernelsViewListsDeviceTrackPhasesWithTheirLaunch) {
  {
    auto db = Database::Open(path_, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status().message();
    model::RunInfo info{.uuid = "u3", .command = {"grademl", "import"}, .cwd = "/", .host = "node1",
                        .start_ns = kT0, .end_ns = kT0 + 4 * kSec, .complete = true, .grademl_version = "0.1.0"};
    auto id = (*db)->CreateRun(info);
    ASSERT_TRUE(id.ok());
    model::RunDelta d;
    d.info = info;
    d.sources = {{.id = 1, .path = "rank3.json", .format = "kineto", .tags = {{"rank", "3"}, {"clock", "absolute"}}}};
    d.tracks = {{.id = 1, .kind = model::TrackKind::kThread, .source = 1, .host = "node1", .pid = 77, .tid = 78},
                {.id = 2, .kind = model::TrackKind::kDevice, .source = 1, .host = "node1", .pid = 77, .device = 0,
                 .stream = 7, .name = "stream 7"}};
    d.phases = {MakePhase(1, 0, "run", "run", kT0, kT0 + 4 * kSec),
                MakePhase(2, 1, "python", "run/process", kT0, kT0 + 4 * kSec, 77),
                MakePhase(3, 2, "cudaLaunchKernel", "run/process/runtime", kT0 + 1200 * kSec / 1000,
                          kT0 + 1210 * kSec / 1000, 77),
                MakePhase(4, 2, "sm80_gemm", "run/process/kernel", kT0 + 1250 * kSec / 1000,
                          kT0 + 1500 * kSec / 1000, 77),
                MakePhase(5, 2, "Memcpy HtoD", "run/process/memcpy", kT0 + 2 * kSec, kT0 + 3 * kSec, 77)};
    d.phases[2].track = 1;
    d.phases[2].tags = {{"cat", "cuda_runtime"}, {"correlation", "9"}};
    d.phases[3].track = 2;
    d.phases[3].tags = {{"cat", "kernel"}, {"stream", "7"}, {"correlation", "9"}};
    d.phases[4].track = 2;
    d.phases[4].tags = {{"cat", "gpu_memcpy"}};
    d.edges = {{.from = 3, .to = 4, .kind = "launch"}, {.from = 2, .to = 5, .kind = "data"}};
    ASSERT_TRUE((*db)->WriteDelta(*id, d).ok());
  }
  auto s = Open("3");
  ASSERT_NE(s, nullptr);
  QueryResult r = Query(*s,
                        "SELECT run_id, phase_id, name, type, cat, rank, source_id, pid, device, stream, start_s, "
                        "correlation, launch_phase_id, launch_name, round(launch_delay_s * 1e6) FROM kernels");
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0], (std::vector<QueryValue>{int64_t{3}, int64_t{4}, std::string("sm80_gemm"), std::string("kernel"),
                                                std::string("kernel"), int64_t{3}, int64_t{1}, int64_t{77}, int64_t{0},
                                                int64_t{7}, 1.25, int64_t{9}, int64_t{3},
                                                std::string("cudaLaunchKernel"), 50000.0}));
  EXPECT_EQ(r.rows[1], (std::vector<QueryValue>{int64_t{3}, int64_t{5}, std::string("Memcpy HtoD"),
                                                std::string("memcpy"), std::string("gpu_memcpy"), int64_t{3},
                                                int64_t{1}, int64_t{77}, int64_t{0}, int64_t{7}, 2.0, QueryValue(),
                                                QueryValue(), QueryValue(), QueryValue()}));
  EXPECT_EQ(Query(*s, "SELECT track_id FROM phases WHERE id IN (2, 3, 4) ORDER BY id").rows,
            (std::vector<std::vector<QueryValue>>{{QueryValue()}, {int64_t{1}}, {int64_t{2}}}));
  // Run 1 has no imported work: no kernel.
  auto s1 = Open("1");
  ASSERT_NE(s1, nullptr);
  EXPECT_TRUE(Query(*s1, "SELECT * FROM kernels").rows.empty());
}

}  // namespace
}  // namespace grademl::store
