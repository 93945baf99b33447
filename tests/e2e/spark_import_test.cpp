// End-to-end tests of Spark event logs through the real binary: `grademl import` of the
// fixture (tests/data/importer/spark) and of the shared logs (../shared/traces/spark, skipped
// when absent, failed then under CI=true), read back with `grademl report --json` (the `spark` section, the ranked
// issues) and the terminal and HTML reports; a truncated log (partial run, the line in a
// one-line error, exit 1); an lz4 log refused; `grademl run --import GLOB` and a workflow
// step whose outs hold a rolling eventlog_v2 directory. Expected figures come from the
// README's table of the shared logs and from the fixture's generator, not from grademl.
// C++ only: fit for the sanitizer lists.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Fixture(const std::string& name) { return std::string(GRADEML_TESTDATA_DIR) + "/importer/spark/" + name; }

const json* IssueOfKind(const json& report, const std::string& kind) {
  for (const json& i : report["issues"])
    if (i["kind"] == kind) return &i;
  return nullptr;
}

TEST(SparkImportE2E, FixtureThroughImportAndEveryReport) {
  std::string dir = FreshDir("spark_import_fixture");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", Fixture("fixture_app.log")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 55 lines, one event each; 1 application + 1 SQL execution + 2 jobs + 4 stages + 16 tasks.
  EXPECT_NE(r.out.find("55 events, 24 phases, 3 edges, 0 dropped (spark, clock absolute)"), std::string::npos) << r.out;
  json report = ReportJson(db);
  ASSERT_TRUE(report["spark"].is_object()) << report["spark"].dump();
  const json& app = report["spark"]["applications"][0];
  EXPECT_EQ(app["name"], "<script>alert('XSS')</script>");
  EXPECT_EQ(app["jobs"], 2);
  EXPECT_EQ(app["stages"], 4);
  EXPECT_EQ(app["skipped_stages"], 1);
  EXPECT_EQ(app["tasks"], 16);
  EXPECT_EQ(app["failed_tasks"], 1);
  EXPECT_EQ(app["killed_tasks"], 1);
  EXPECT_EQ(app["speculative_tasks"], 1);
  EXPECT_EQ(app["executors"], 2);
  EXPECT_DOUBLE_EQ(app["gc_s"].get<double>(), 2.2);
  std::vector<std::string> bottlenecks;
  for (const json& st : app["stage_attempts"]) bottlenecks.push_back(st["bottleneck"]);
  EXPECT_EQ(bottlenecks, (std::vector<std::string>{"gc", "shuffle_wait", "skew", "scheduler_delay"}));
  EXPECT_NE(IssueOfKind(report, "spark_gc"), nullptr);
  EXPECT_NE(IssueOfKind(report, "spark_shuffle_wait"), nullptr);
  EXPECT_NE(IssueOfKind(report, "imbalance"), nullptr);  // the skewed stage's tasks

  CommandResult text = RunCommand({GrademlBinary(), "--db", db, "report"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Spark  <script>alert('XSS')</script>"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("2 jobs (0 failed), 4 stage attempts (0 failed, 1 skipped), 16 tasks (1 failed, 1 killed, 1 speculative)"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("garbage collection"), std::string::npos) << text.out;

  std::string html = dir + "/r.html";
  CommandResult h = RunCommand({GrademlBinary(), "--db", db, "report", "--html", html});
  ASSERT_EQ(h.exit_code, 0) << h.err;
  std::string page = ReadFile(html);
  EXPECT_EQ(page.find("<script>alert('XSS')"), std::string::npos) << "the app name reaches the page as data only";
  EXPECT_NE(page.find("\"spark\":{\"applications\""), std::string::npos);
}

TEST(SparkImportE2E, SharedLogsReportTheReadmesCounts) {
  REQUIRE_SHARED_TRACES(yarn_log, "spark/application_1516285256255_0012");
  const fs::path dir = yarn_log.parent_path();
  struct Case {
    const char* path;
    int64_t jobs, stages, tasks, failed;
    double duration_s;
  };
  // ../shared/traces/spark/README.md: jobs / stages / tasks, app duration; failed attempts from its notes.
  const Case cases[] = {{"application_1516285256255_0012", 1, 2, 24, 4, 472.819},
                        {"eventlog_v2_local-1766844910796", 1, 1, 2, 0, 2.006},
                        {"local-1422981780767", 3, 4, 32, 1, 9.011}};
  for (const Case& c : cases) {
    std::string db = FreshDir(std::string("spark_shared_") + c.path) + "/g.db";
    CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", (dir / c.path).string()});
    ASSERT_EQ(r.exit_code, 0) << c.path << ": " << r.err;
    json report = ReportJson(db);
    const json& app = report["spark"]["applications"][0];
    EXPECT_EQ(app["jobs"], c.jobs) << c.path;
    EXPECT_EQ(app["stages"], c.stages) << c.path;
    EXPECT_EQ(app["tasks"], c.tasks) << c.path;
    EXPECT_EQ(app["failed_tasks"].get<int64_t>() + app["killed_tasks"].get<int64_t>(), c.failed) << c.path;
    EXPECT_NEAR(app["duration_s"].get<double>(), c.duration_s, 1e-6) << c.path;
    EXPECT_NEAR(report["run"]["duration_s"].get<double>(), c.duration_s, 1e-6) << c.path;
  }
}

TEST(SparkImportE2E, ATruncatedLogIsAPartialRunAndAnLz4LogIsRefused) {
  std::string dir = FreshDir("spark_import_damaged");
  std::string log = ReadFile(Fixture("fixture_app.log"));
  size_t at = 0;
  for (int i = 0; i < 40; ++i) at = log.find('\n', at) + 1;
  std::ofstream(dir + "/cut.log") << log.substr(0, at + 30);  // inside line 41
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", dir + "/cut.log"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("PARTIAL"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "grademl: " + dir + "/cut.log: line 41: truncated event (the file ends inside it)\n");
  json report = ReportJson(db);
  EXPECT_FALSE(report["run"]["complete"].get<bool>());
  EXPECT_EQ(report["spark"]["applications"][0]["jobs"], 2);  // both started before the cut

  std::string db2 = dir + "/g2.db";
  CommandResult lz4 = RunCommand({GrademlBinary(), "--db", db2, "import", Fixture("fixture_app.lz4")});
  EXPECT_EQ(lz4.exit_code, 1);
  EXPECT_EQ(std::count(lz4.err.begin(), lz4.err.end(), '\n'), 1) << lz4.err;
  EXPECT_NE(lz4.err.find("fixture_app.lz4: a Spark event log compressed with lz4"), std::string::npos) << lz4.err;
  EXPECT_TRUE(lz4.out.empty()) << lz4.out;
}

// hostile_text.log: a byte that is not UTF-8 and lone surrogate escapes in the application's
// and the stage's names and the executor's host. Every line imports (exit 0, a complete run),
// each such character U+FFFD. Before: line 2 ended the import, exit 1.
TEST(SparkImportE2E, InvalidUtf8AndLoneSurrogatesInALogAreReplacedNotFatal) {
  const std::string fffd = "\xEF\xBF\xBD";
  std::string db = FreshDir("spark_import_hostile_text") + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", Fixture("hostile_text.log")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("12 events, 5 phases"), std::string::npos) << r.out;
  json report = ReportJson(db);
  EXPECT_TRUE(report["run"]["complete"].get<bool>());
  std::set<std::string> names;
  for (const json& p : report["phases"]) names.insert(p["name"].get<std::string>());
  EXPECT_TRUE(names.count("caf" + fffd + " " + fffd + " app")) << r.out;
  EXPECT_TRUE(names.count("stage 0: map " + fffd + " at x.py:1")) << r.out;
  EXPECT_TRUE(names.count("task 1.0")) << r.out;
}

// eventlog_v2_app-gap-0001: files 1, 2, 3, 5 and 8 of a rolling log (4, 6 and 7 gone). What is
// there is imported; one line names the missing files; the run is stored incomplete and its
// source says which files are missing; the reports say so; exit 1. Before: imported as
// complete, exit 0, nothing said.
TEST(SparkImportE2E, ARollingLogWithMissingFilesImportsTheRestAndSaysWhatIsMissing) {
  std::string dir = Fixture("eventlog_v2_app-gap-0001");
  std::string db = FreshDir("spark_import_gap") + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "grademl: " + dir +
                       ": the rolling event log is incomplete: events_4_*, events_6_* to events_7_* are missing; the other "
                       "files were imported\n");
  EXPECT_NE(r.out.find("13 events"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PARTIAL"), std::string::npos) << r.out;
  json report = ReportJson(db);
  EXPECT_FALSE(report["run"]["complete"].get<bool>());
  EXPECT_NE(report["run"]["error"].get<std::string>().find("events_4_*, events_6_* to events_7_* are missing"),
            std::string::npos)
      << report["run"]["error"];
  ASSERT_EQ(report["sources"].size(), 1u);
  EXPECT_EQ(report["sources"][0]["tags"]["missing_files"], "4,6-7");
  EXPECT_EQ(report["sources"][0]["tags"]["partial"], "1");
  EXPECT_EQ(report["spark"]["applications"][0]["tasks"], 3);  // tasks 0, 1 and 3; 2 was in file 4
  r = RunCommand({GrademlBinary(), "--db", db, "report"});
  EXPECT_NE(r.out.find("incomplete: files 4,6-7 of the rolling log are missing"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(what could be read was kept)"), std::string::npos) << r.out;
  r = RunCommand({GrademlBinary(), "--db", db, "ls"});
  EXPECT_NE(r.out.find("partial import"), std::string::npos) << r.out;
}

// A rolling log holding a file called events_... whose index is not a number: refused with one
// line naming that file and why, exit 1, nothing stored, whether or not other files are there.
// Before: the file was skipped silently (or, alone, "a directory, and not one GradeML can
// import", naming no file). Under `grademl run --import` the refusal is reported and the
// workload's exit code kept.
TEST(SparkImportE2E, ARollingLogWithAnUnreadableFileIndexIsRefusedNamingTheFile) {
  std::string root = FreshDir("spark_import_bad_index");
  std::string dir = root + "/eventlog_v2_app-gap-0001";
  fs::create_directories(dir);
  fs::copy_file(Fixture("eventlog_v2_app-gap-0001/events_1_app-gap-0001"), dir + "/events_1_app-gap-0001");
  std::ofstream(dir + "/events_2x_app-gap-0001") << "";
  const std::string message = dir +
                              "/events_2x_app-gap-0001: not a file of a rolling event log: no '_<appId>' after its "
                              "index (Spark names them events_<index>_<appId>)";
  std::string db = root + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "grademl: " + message + "\n");
  EXPECT_EQ(r.out, "");
  r = RunCommand({GrademlBinary(), "--db", db, "ls"});
  EXPECT_EQ(r.out.find("import"), std::string::npos) << r.out;  // no run
  fs::remove(dir + "/events_1_app-gap-0001");
  r = RunCommand({GrademlBinary(), "--db", db, "import", dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "grademl: " + message + "\n");

  std::string db2 = root + "/g2.db";
  r = RunCommand({GrademlBinary(), "--db", db2, "run", "--no-report", "--import", dir, "--", "/bin/sh", "-c", "exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
}

TEST(SparkImportE2E, RunImportGlobAndStepOutsTakeEventLogDirectories) {
  std::string dir = FreshDir("spark_import_run");
  // A rolling event log directory of two parts, as Spark writes it with rolling on.
  std::string log = ReadFile(Fixture("fixture_app.log"));
  size_t half = log.find('\n', log.size() / 2) + 1;
  fs::create_directories(dir + "/src/eventlog_v2_app-fixture-0001");
  std::ofstream(dir + "/src/eventlog_v2_app-fixture-0001/events_1_app-fixture-0001") << log.substr(0, half);
  std::ofstream(dir + "/src/eventlog_v2_app-fixture-0001/events_2_app-fixture-0001") << log.substr(half);
  std::ofstream(dir + "/src/eventlog_v2_app-fixture-0001/appstatus_app-fixture-0001") << "";

  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--import",
                                dir + "/src/eventlog_v2_*", "--", "/bin/sh", "-c", "exit 0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = ReportJson(db);
  EXPECT_EQ(report["run"]["error"], "") << report["run"]["error"];
  ASSERT_TRUE(report["spark"].is_object()) << r.err;
  EXPECT_EQ(report["spark"]["applications"][0]["tasks"], 16);

  // A workflow step whose outs are a directory holding the event log directory, and a
  // single-file log: both imported under the step.
  std::ofstream(dir + "/pipeline.yaml") << "steps:\n"
                                           "  etl:\n"
                                           "    cmd: mkdir -p spark-events && cp -r src/eventlog_v2_app-fixture-0001 spark-events/"
                                           " && cp " + Fixture("fixture_app.log") + " single.log\n"
                                           "    outs: [spark-events/, single.log]\n";
  std::string db2 = dir + "/g2.db";
  CommandResult w = RunCommand({"/bin/sh", "-c", "cd " + dir + " && " + GrademlBinary() + " --db " + db2 +
                                                     " run --no-report pipeline.yaml"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  json wf = ReportJson(db2);
  EXPECT_EQ(wf["run"]["error"], "") << wf["run"]["error"];
  ASSERT_TRUE(wf["spark"].is_object()) << w.err;
  ASSERT_EQ(wf["spark"]["applications"].size(), 2u);
  int64_t step = 0;
  std::map<int64_t, int64_t> parent;
  for (const json& p : wf["phases"]) {
    parent[p["id"]] = p["parent"].is_null() ? 0 : p["parent"].get<int64_t>();
    if (p["name"] == "etl") step = p["id"];
  }
  ASSERT_NE(step, 0);
  for (const json& a : wf["spark"]["applications"]) EXPECT_EQ(parent[a["phase"]], step);
  std::set<std::string> paths;
  for (const json& s : wf["sources"]) paths.insert(fs::path(s["path"].get<std::string>()).filename().string());
  EXPECT_EQ(paths, (std::set<std::string>{"eventlog_v2_app-fixture-0001", "single.log"}));
}

}  // namespace
}  // namespace grademl::testing
