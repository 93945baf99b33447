// End-to-end tests of `grademl query`: queries over two hand-built runs stored in a real
// database, compared with golden files under tests/data/query/ (GRADEML_UPDATE_GOLDENS=1
// rewrites them); how RUN and SQL are told apart; and the one-line errors, writes first.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"
#include "report/golden.h"
#include "report/sample_runs.h"
#include "store/database.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

// Stores a hand-built run as one delta; returns its id.
model::RunId StoreRun(store::Database& db, const model::Run& run) {
  auto id = db.CreateRun(run.info);
  EXPECT_TRUE(id.ok()) << id.status().message();
  model::RunDelta delta;
  delta.info = run.info;
  delta.phases = run.phases;
  delta.edges = run.edges;
  delta.resources = run.resources;
  delta.sources = run.sources;
  delta.tracks = run.tracks;
  delta.ingest_stats = run.ingest_stats;
  for (const model::Series& s : run.series) {
    delta.series.push_back(s.info);
    for (const model::Sample& sample : s.samples) delta.samples.push_back({s.info.id, sample});
  }
  Status st = db.WriteDelta(*id, delta);
  EXPECT_TRUE(st.ok()) << st.message();
  return *id;
}

// Run 1: the incomplete `make` run; run 2 (the latest): the complete training run.
class QueryE2E : public ::testing::Test {
 protected:
  // ctest runs each test in its own process, in parallel: each process builds its own db.
  static void SetUpTestSuite() {
    db_ = FreshDir("query_golden_" + std::to_string(getpid())) + "/g.db";
    auto db = store::Database::Open(TestStoreLocation(db_), store::Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status().message();
    EXPECT_EQ(StoreRun(**db, IncompleteRun()), 1);
    EXPECT_EQ(StoreRun(**db, BasicRun()), 2);
  }

  static CommandResult Query(const std::vector<std::string>& args, const std::string& stdin_text = "") {
    std::vector<std::string> argv = {GrademlBinary(), "--db", db_, "query"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, stdin_text);
  }

  // Runs a query that must succeed and compares its output with a golden file.
  static void ExpectGolden(const std::vector<std::string>& args, const std::string& golden) {
    CommandResult r = Query(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    ExpectMatchesGolden(r.out, "../query/" + golden);
  }

  static std::string db_;
};

std::string QueryE2E::db_;

TEST_F(QueryE2E, PhasesAsATable) {
  ExpectGolden({"SELECT id, parent_id, name, leaf_type, depth, pid, start_s, end_s, duration_s, open FROM phases "
                "ORDER BY id"},
               "phases.txt");
}

TEST_F(QueryE2E, IncompleteRunAsCsvAndTable) {
  // Open phases end at the run's last time seen; a name with a line break is quoted in CSV
  // and sanitized in the table.
  const std::string sql =
      "SELECT id, name, path, depth, start_s, end_s, open FROM phases WHERE id <= 3 OR id IN (6, 13, 14) ORDER BY id";
  ExpectGolden({"1", sql, "--format", "csv"}, "incomplete.csv");
  ExpectGolden({"1", sql, "--max-width", "40"}, "incomplete.txt");
}

TEST_F(QueryE2E, EdgesAsJson) { ExpectGolden({"SELECT * FROM edges", "--json"}, "edges.json"); }

TEST_F(QueryE2E, SamplesAsCsv) {
  ExpectGolden({"SELECT resource, pid, phase_id, metric, unit, t_s, value FROM samples "
                "WHERE resource_kind = 'process' AND metric = 'memory.rss' ORDER BY resource, t_s",
                "--csv"},
               "samples.csv");
}

TEST_F(QueryE2E, CounterRatesWithWindowFunctions) {
  // The docs' example: cores used per process between samples.
  ExpectGolden({"SELECT pid, round(t_s, 3) AS t_s, round((value - lag(value) OVER w) / (t_s - lag(t_s) OVER w), 3) "
                "AS cores FROM samples WHERE metric = 'cpu.user' AND resource_kind = 'process' "
                "WINDOW w AS (PARTITION BY series_id ORDER BY t_ns) ORDER BY pid, t_s"},
               "cpu_rates.txt");
}

TEST_F(QueryE2E, BottlenecksAsCsv) {
  // Rounded: the last bits of the analyses' sums are not the point here.
  ExpectGolden({"SELECT phase_id, name, resource, round(seconds, 9) AS seconds, round(saturated_seconds, 9) AS saturated, "
                "round(local_seconds, 9) AS local, round(fraction, 9) AS fraction FROM bottlenecks "
                "ORDER BY phase_id, resource",
                "--format", "csv"},
               "bottlenecks.csv");
}

TEST_F(QueryE2E, BottlenecksJoinedWithPhases) {
  ExpectGolden({"SELECT p.path, b.resource, round(b.fraction, 3) AS share FROM bottlenecks b "
                "JOIN phases p ON p.id = b.phase_id WHERE p.leaf_type = 'process' ORDER BY b.seconds DESC, p.id "
                "LIMIT 6",
                "--max-width", "0"},
               "bottlenecks_join.txt");
}

TEST_F(QueryE2E, AttributionAsATable) {
  ExpectGolden({"SELECT phase_id, name, metric, unit, round(usage, 3) AS usage, round(self_usage, 3) AS self, "
                "round(could_have_used, 3) AS could, round(utilization, 3) AS util FROM attribution "
                "WHERE metric IN ('cpu', 'memory.rss', 'gpu.utilization') ORDER BY phase_id, metric"},
               "attribution.txt");
}

TEST_F(QueryE2E, IssuesAsJson) {
  ExpectGolden({"SELECT rank, kind, phase_id, name, round(impact_seconds, 9) AS impact_seconds, "
                "round(impact_fraction, 9) AS impact_fraction, change, text FROM issues ORDER BY rank",
                "--json"},
               "issues.json");
}

TEST_F(QueryE2E, ListViews) {
  ExpectGolden({"--list-views"}, "list_views.txt");
  // Every listed column is what the view really has, in that order.
  CommandResult r = Query({"--list-views", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::vector<std::string>> listed;
  std::vector<std::string> order;
  for (const json& row : json::parse(r.out)) {
    std::string view = row["view"];
    if (listed.find(view) == listed.end()) order.push_back(view);
    listed[view].push_back(row["column"]);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"phases", "edges", "samples", "kernels", "step_executions",
                                             "redundant_steps", "attribution", "bottlenecks", "issues",
                                             "gpu_breakdown"}));
  for (const auto& [view, columns] : listed) {
    CommandResult header = Query({"SELECT * FROM " + view + " LIMIT 0", "--csv"});
    ASSERT_EQ(header.exit_code, 0) << header.err;
    std::string expected;
    for (const auto& c : columns) expected += (expected.empty() ? "" : ",") + c;
    EXPECT_EQ(header.out, expected + "\n") << view;
  }
  // And docs/query.md documents each of them under the view's heading.
  std::string doc = ReadFile(std::string(GRADEML_SOURCE_DIR) + "/docs/query.md");
  for (const auto& [view, columns] : listed) {
    size_t start = doc.find("### `" + view + "`");
    ASSERT_NE(start, std::string::npos) << view;
    size_t end = doc.find("\n### ", start + 1);
    std::string section = doc.substr(start, end == std::string::npos ? std::string::npos : end - start);
    for (const auto& c : columns) EXPECT_NE(section.find("| `" + c + "` |"), std::string::npos) << view << "." << c;
  }
}

TEST_F(QueryE2E, RunAndSqlArguments) {
  auto count = [&](const std::vector<std::string>& args, const std::string& stdin_text = "") {
    CommandResult r = Query(args, stdin_text);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string sql = "SELECT count(*) AS n FROM phases";
  EXPECT_EQ(count({sql, "--csv"}), "n\n7\n");  // the latest run
  EXPECT_EQ(count({"latest", sql, "--csv"}), "n\n7\n");
  EXPECT_EQ(count({"1", sql, "--csv"}), "n\n14\n");
  EXPECT_EQ(count({"-2", sql, "--csv"}), "n\n14\n");
  EXPECT_EQ(count({"--run", "1", sql, "--csv"}), "n\n14\n");
  EXPECT_EQ(count({"--csv", "-"}, sql + ";\n"), "n\n7\n");  // SQL from stdin
  EXPECT_EQ(count({"2", "-", "--csv"}, sql), "n\n7\n");
  // The table format with one row and a NULL.
  EXPECT_EQ(count({"SELECT 1 AS one, NULL AS none_, 'x' AS t"}), "one  none_  t\n---  -----  -\n  1  NULL   x\n(1 row)\n");
  EXPECT_EQ(count({"SELECT 1 AS a, 2 AS a, 'q\"x,y' AS b", "--json"}), "[\n  {\"a\":1,\"a:2\":2,\"b\":\"q\\\"x,y\"}\n]\n");
  EXPECT_EQ(count({"SELECT 1 AS a WHERE 0", "--json"}), "[]\n");
  // Table-valued functions read (their first use makes SQLite check its schema table as if
  // written: that is not a write of the user's; the query was refused as an UPDATE).
  EXPECT_EQ(count({"SELECT key FROM json_each('{\"a\":1,\"b\":2}')", "--csv"}), "key\na\nb\n");
  EXPECT_EQ(count({"SELECT count(*) AS n FROM phases p, json_each(p.tags) WHERE 0", "--csv"}), "n\n0\n");
  EXPECT_EQ(count({"SELECT 1 AS a WHERE 0"}), "a\n-\n(0 rows)\n");
  EXPECT_EQ(count({"SELECT 'q\"x,y' AS b, x'00ff' AS c, 0.1 + 0.2 AS d", "--csv"}), "b,c,d\n\"q\"\"x,y\",x'00ff',0.30000000000000004\n");
}

TEST_F(QueryE2E, WritesAreRefused) {
  const std::string before = ReadFile(db_);
  struct Case {
    std::string sql, what;
  };
  for (const Case& c : std::vector<Case>{
           {"INSERT INTO main.runs (uuid) VALUES ('x')", "INSERT"},
           {"UPDATE main.phases SET name = 'x'", "UPDATE"},
           {"DELETE FROM main.samples", "DELETE"},
           {"DROP TABLE main.runs", "DROP TABLE"},
           {"CREATE TABLE t (a)", "CREATE TABLE"},
           {"ATTACH 'x.db' AS x", "ATTACH"},
           {"PRAGMA user_version = 99", "PRAGMA user_version"},
           {"DELETE FROM issues", "DELETE"},
           {"VACUUM", "VACUUM"},
       }) {
    CommandResult r = Query({c.sql});
    EXPECT_EQ(r.exit_code, 2) << c.sql;
    EXPECT_EQ(r.err, "grademl: query is read-only: " + c.what + " is not allowed\n") << c.sql;
    EXPECT_EQ(r.out, "") << c.sql;
  }
  EXPECT_EQ(ReadFile(db_), before);
}

TEST_F(QueryE2E, ErrorsAreOneLine) {
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string err;  // the whole of stderr, or "" to check only that it is one line
  };
  for (const Case& c : std::vector<Case>{
           {{"SELEC 1"}, 2, "grademl: query: near \"SELEC\": syntax error\n"},
           {{"SELECT * FROM nosuch"}, 2, "grademl: query: no such table: nosuch\n"},
           {{"SELECT 1; SELECT 2"}, 2, "grademl: query: only one statement is allowed (found more after the first ';')\n"},
           {{}, 2, "grademl: query: no SQL given, e.g. grademl query \"SELECT name, duration_s FROM phases\"\n"},
           {{"1", "2", "SELECT 1"}, 2, "grademl: query: 3 arguments given, expected [RUN] SQL (quote the SQL as one argument)\n"},
           {{"--run", "1", "2", "SELECT 1"}, 2, "grademl: query: the run is given twice (RUN and --run)\n"},
           {{"9", "SELECT 1"}, 1, "grademl: " + db_ + ": no run 9 (the latest run is 2)\n"},
           {{"abc", "SELECT 1"}, 2, "grademl: query: 'abc' is not a run (an id, -N or latest): give the run first, then the SQL\n"},
           {{"SELECT 1", "2"}, 2, "grademl: query: 'SELECT 1' is not a run (an id, -N or latest): give the run first, then the SQL\n"},
           {{"0", "SELECT 1"}, 1, ""},
           {{"--list-views", "SELECT 1"}, 2, "grademl: --list-views takes no run and no SQL\n"},
           {{"--format", "xml", "SELECT 1"}, 2, ""},
       }) {
    CommandResult r = Query(c.args);
    std::string what = c.args.empty() ? "(none)" : c.args.back();
    EXPECT_EQ(r.exit_code, c.exit_code) << what << ": " << r.err;
    EXPECT_EQ(r.out, "") << what;
    if (!c.err.empty()) {
      EXPECT_EQ(r.err, c.err) << what;
    } else {
      EXPECT_TRUE(r.err.rfind("grademl: ", 0) == 0) << r.err;
      if (c.exit_code == 1) {
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      }
    }
  }
  CommandResult r = RunCommand({GrademlBinary(), "--db", FreshDir("query_nodb") + "/none.db", "query", "SELECT 1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no GradeML database here"), std::string::npos) << r.err;
}

// The imported traces' views over testing::ImportedGpuRun stored alone. Expected values by
// hand from the fixture (sample_runs.h) and HTA's definitions (docs/gpu.md): rank 0's
// kernels are sm80_gemm [1.25, 1.5] s (COMPUTATION, stream 7), ncclKernel_AllReduce [1.3, 1.6]
// (COMMUNICATION, stream 20) and a memcpy [1.6, 1.7] (MEMORY, stream 7): span 450 ms, never
// idle, computation 250 ms, the rest 200 ms, and 200 of the 300 ms of communication overlap
// the gemm; rank 1 runs one kernel of 100 ms, computation (by its name), no communication.
// One ProfilerStep only: no iteration filter.
class QueryImportedE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    db_ = FreshDir("query_imported_" + std::to_string(getpid())) + "/g.db";
    auto db = store::Database::Open(TestStoreLocation(db_), store::Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status().message();
    EXPECT_EQ(StoreRun(**db, ImportedGpuRun()), 1);
  }
  static json QueryJson(const std::string& sql) {
    CommandResult r = RunCommand({GrademlBinary(), "--db", db_, "query", sql, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? json::parse(r.out) : json::array();
  }
  static std::string db_;
};

std::string QueryImportedE2E::db_;

TEST_F(QueryImportedE2E, KernelsAreTheStreamsPhasesWithTheirLaunch) {
  json rows = QueryJson(
      "SELECT rank, device, stream, name, type, correlation, launch_name, round(launch_delay_s * 1e3, 6) AS delay_ms "
      "FROM kernels ORDER BY start_ns");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0], (json{{"rank", 0}, {"device", 0}, {"stream", 7}, {"name", "sm80_gemm"}, {"type", "kernel"},
                           {"correlation", 77}, {"launch_name", "cudaLaunchKernel"}, {"delay_ms", 50.0}}));
  EXPECT_EQ(rows[1]["name"], "ncclKernel_AllReduce");
  EXPECT_EQ(rows[1]["stream"], 20);
  EXPECT_TRUE(rows[1]["launch_name"].is_null());
  EXPECT_EQ(rows[2]["name"], "Memcpy HtoD");
  EXPECT_EQ(rows[2]["type"], "memcpy");
  EXPECT_EQ(rows[3]["rank"], 1);
  EXPECT_EQ(rows[3]["name"], "<img src=x onerror=alert(1)>\x1b[31m");
  // The other phases of the traces (threads, async) are not kernels.
  EXPECT_EQ(QueryJson("SELECT count(*) AS n FROM phases WHERE track_id IS NOT NULL")[0]["n"], 11);
}

TEST_F(QueryImportedE2E, GpuBreakdownPerRank) {
  json rows = QueryJson(
      "SELECT rank, round(kernel_us) AS span, round(idle_us) AS idle, round(compute_us) AS compute, "
      "round(non_compute_us) AS non_compute, round(idle_pct, 3) AS idle_pct, round(compute_pct, 3) AS compute_pct, "
      "round(non_compute_pct, 3) AS non_compute_pct, round(comm_comp_overlap_pct, 3) AS overlap "
      "FROM gpu_breakdown ORDER BY rank");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (json{{"rank", 0}, {"span", 450000.0}, {"idle", 0.0}, {"compute", 250000.0},
                           {"non_compute", 200000.0}, {"idle_pct", 0.0}, {"compute_pct", 55.556},
                           {"non_compute_pct", 44.444}, {"overlap", 66.667}}));
  EXPECT_EQ(rows[1], (json{{"rank", 1}, {"span", 100000.0}, {"idle", 0.0}, {"compute", 100000.0},
                           {"non_compute", 0.0}, {"idle_pct", 0.0}, {"compute_pct", 100.0},
                           {"non_compute_pct", 0.0}, {"overlap", nullptr}}));
}

}  // namespace
}  // namespace grademl::testing

