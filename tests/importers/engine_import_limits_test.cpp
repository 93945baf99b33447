// The Spark and Dask importers' bounds against hostile logs (docs/import.md, "Limits"): past
// the bound on events (records), task attempts, stage ids, executors, workers, task keys,
// dependencies, or the links examined for edges, the import stops (or stops adding edges)
// with one line naming the file and the line, and what came before is imported (partial).
// Every log is generated here with the bound set low through ImportTarget::max_events and
// max_records; what is expected is counted from how the log was made.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "importers/dask/dask_importer.h"
#include "importers/importer.h"
#include "importers/spark/spark_importer.h"
#include "model/run.h"
#include "model/run_builder.h"

namespace grademl::importers {
namespace engine_import_limits {

struct Imported {
  StatusOr<ImportResult> result = Internal("not run");
  model::RunDelta delta;
  // Phases whose type ends in `leaf`.
  int64_t Count(std::string_view leaf) const {
    int64_t n = 0;
    for (const model::Phase& p : delta.phases) n += p.leaf_is(leaf) ? 1 : 0;
    return n;
  }
  bool Named(std::string_view name) const {
    for (const model::Phase& p : delta.phases) {
      if (p.name == name) return true;
    }
    return false;
  }
  std::string Error() const { return result.ok() ? result->error.message() : result.status().message(); }
};

Imported Import(const std::string& bytes, const std::string& name, int64_t max_events, int64_t max_records) {
  Imported out;
  model::RunBuilder builder(model::RunInfo{});
  ImportTarget target;
  target.builder = &builder;
  target.under = builder.BeginPhase({.parent = 0, .name = "root", .type = "run", .start_ns = 1});
  target.max_events = max_events;
  target.max_records = max_records;
  out.result = ImportTraceBytes(bytes, name, target);
  out.delta = builder.TakeDelta(true);
  return out;
}

// ---- Spark -------------------------------------------------------------------------------

constexpr int64_t kT0 = 1'700'000'000'000;  // ms since the epoch

std::string AppStart() {
  return "{\"Event\":\"SparkListenerApplicationStart\",\"App Name\":\"a\",\"App ID\":\"app-1\",\"Timestamp\":" +
         std::to_string(kT0) + ",\"User\":\"u\"}\n";
}

// A task that ran from t0+at to t0+at+10 ms (TaskEnd alone: the importer makes the attempt).
std::string TaskEnd(int64_t task_id, int64_t stage, int64_t stage_attempt, int64_t at, const std::string& executor = "1") {
  return "{\"Event\":\"SparkListenerTaskEnd\",\"Stage ID\":" + std::to_string(stage) +
         ",\"Stage Attempt ID\":" + std::to_string(stage_attempt) +
         ",\"Task End Reason\":{\"Reason\":\"Success\"},\"Task Info\":{\"Task ID\":" + std::to_string(task_id) +
         ",\"Index\":0,\"Attempt\":0,\"Launch Time\":" + std::to_string(kT0 + at) + ",\"Executor ID\":\"" + executor +
         "\",\"Host\":\"h\",\"Finish Time\":" + std::to_string(kT0 + at + 10) + "}}\n";
}

std::string JobStartWithIds(int64_t job, const std::vector<int64_t>& stage_ids) {
  std::string ids;
  for (int64_t id : stage_ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  return "{\"Event\":\"SparkListenerJobStart\",\"Job ID\":" + std::to_string(job) +
         ",\"Submission Time\":" + std::to_string(kT0) + ",\"Stage IDs\":[" + ids + "]}\n";
}

std::string StageSubmitted(int64_t stage, const std::vector<int64_t>& parents) {
  std::string ids;
  for (int64_t id : parents) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  return "{\"Event\":\"SparkListenerStageSubmitted\",\"Stage Info\":{\"Stage ID\":" + std::to_string(stage) +
         ",\"Stage Attempt ID\":0,\"Stage Name\":\"s\",\"Number of Tasks\":1,\"Parent IDs\":[" + ids + "]}}\n";
}

TEST(SparkImportLimitsTest, MoreEventsThanTheBoundStopWithOneLineNamingTheLine) {
  std::string log = AppStart();
  for (int i = 0; i < 29; ++i) log += TaskEnd(100 + i, 0, 0, 10 * i);  // lines 2..30
  Imported im = Import(log, "app.log", 10, 0);
  ASSERT_TRUE(im.result.ok()) << im.Error();
  EXPECT_TRUE(im.result->partial);
  EXPECT_EQ(im.result->events, 10);
  EXPECT_EQ(im.Count("task"), 9);  // the application start and 9 tasks are the 10 events
  EXPECT_EQ(im.Error(),
            "app.log: line 11: more than 10 events in one event log (GradeML's bound); the rest is not imported");
  // Without a bound given, the importer's own applies, far above this log.
  Imported whole = Import(log, "app.log", 0, 0);
  ASSERT_TRUE(whole.result.ok()) << whole.Error();
  EXPECT_FALSE(whole.result->partial) << whole.Error();
  EXPECT_EQ(whole.result->events, 30);
  EXPECT_EQ(whole.Count("task"), 29);
  static_assert(spark::SparkLogImporter::kMaxEventsPerFile >= 10'000'000);
}

TEST(SparkImportLimitsTest, MoreTaskAttemptsThanTheBoundStopAtTheFirstOnePast) {
  std::string log = AppStart();
  for (int i = 0; i < 5; ++i) log += TaskEnd(100 + i, 0, 0, 10 * i);  // lines 2..6
  log += TaskEnd(100, 0, 0, 0);       // line 7: a second end of a task held: no new attempt
  log += TaskEnd(200, 0, 0, 100);     // line 8: the sixth attempt
  log += TaskEnd(201, 0, 0, 110);     // line 9
  Imported im = Import(log, "app.log", 0, 5);
  ASSERT_TRUE(im.result.ok()) << im.Error();
  EXPECT_TRUE(im.result->partial);
  EXPECT_EQ(im.Error(),
            "app.log: line 8: more than 5 task attempts in one event log (GradeML's bound); the rest is not imported");
  EXPECT_EQ(im.Count("task"), 5);
  Imported six = Import(log, "app.log", 0, 6);  // 7 attempts, bound 6: stops at line 9
  ASSERT_TRUE(six.result.ok()) << six.Error();
  EXPECT_TRUE(six.result->partial);
  EXPECT_EQ(six.Error().rfind("app.log: line 9: more than 6 task attempts", 0), 0u) << six.Error();
  EXPECT_EQ(six.Count("task"), 6);
  Imported whole = Import(log, "app.log", 0, 7);
  ASSERT_TRUE(whole.result.ok()) << whole.Error();
  EXPECT_FALSE(whole.result->partial) << whole.Error();
  EXPECT_EQ(whole.Count("task"), 7);
}

TEST(SparkImportLimitsTest, MoreStageIdsThanTheBoundStopAtTheLineListingThem) {
  // Job 0 lists 3 stages; job 1 lists 3 more: 6 stage ids, bound 5.
  std::string log = AppStart() + JobStartWithIds(0, {0, 1, 2}) + JobStartWithIds(1, {3, 4, 5});
  Imported im = Import(log, "app.log", 0, 5);
  ASSERT_TRUE(im.result.ok()) << im.Error();
  EXPECT_TRUE(im.result->partial);
  EXPECT_EQ(im.Error(),
            "app.log: line 3: more than 5 stage ids in one event log (GradeML's bound); the rest is not imported");
  EXPECT_EQ(im.Count("job"), 1);  // job 0 only: the line past the bound is not used
  // Parent ids count too: a stage with 5 parents holds 6 ids.
  Imported parents = Import(AppStart() + StageSubmitted(9, {1, 2, 3, 4, 5}), "app.log", 0, 5);
  ASSERT_TRUE(parents.result.ok()) << parents.Error();
  EXPECT_EQ(parents.Error().rfind("app.log: line 2: more than 5 stage ids", 0), 0u) << parents.Error();
  Imported fits = Import(AppStart() + StageSubmitted(9, {1, 2, 3, 4}), "app.log", 0, 5);
  ASSERT_TRUE(fits.result.ok()) << fits.Error();
  EXPECT_FALSE(fits.result->partial) << fits.Error();
}

TEST(SparkImportLimitsTest, MoreExecutorsThanTheBoundStopAtTheFirstOnePast) {
  auto added = [](const std::string& id) {
    return "{\"Event\":\"SparkListenerExecutorAdded\",\"Timestamp\":" + std::to_string(kT0 + 1) +
           ",\"Executor ID\":\"" + id + "\",\"Executor Info\":{\"Host\":\"h\",\"Total Cores\":1}}\n";
  };
  std::string log = AppStart();
  for (int i = 0; i < 4; ++i) log += added("e" + std::to_string(i));  // lines 2..5
  log += added("e0");                                                 // line 6: an executor held
  log += TaskEnd(100, 0, 0, 10, "e3");                                // line 7: on one held
  log += TaskEnd(101, 0, 0, 20, "e4");                                // line 8: the fifth
  Imported im = Import(log, "app.log", 0, 4);
  ASSERT_TRUE(im.result.ok()) << im.Error();
  EXPECT_TRUE(im.result->partial);
  EXPECT_EQ(im.Error(),
            "app.log: line 8: more than 4 executors in one event log (GradeML's bound); the rest is not imported");
  EXPECT_EQ(im.Count("task"), 1);  // line 8's task is not imported: the line past the bound changes nothing
  Imported whole = Import(log, "app.log", 0, 5);
  ASSERT_TRUE(whole.result.ok()) << whole.Error();
  EXPECT_FALSE(whole.result->partial) << whole.Error();
  EXPECT_EQ(whole.Count("task"), 2);
}

TEST(SparkImportLimitsTest, StageLinksPastTheBoundAddNoMoreEdges) {
  // Stage 1 has parent 0; each has 3 attempts (made by their tasks, stage 0's all before stage
  // 1's): each of stage 1's attempts examines stage 0's 3 attempts, 9 links, and gets one
  // shuffle edge (from the parent attempt that ended last before it started).
  std::string log = AppStart();
  log += "{\"Event\":\"SparkListenerJobStart\",\"Job ID\":0,\"Submission Time\":" + std::to_string(kT0) +
         ",\"Stage Infos\":[{\"Stage ID\":0,\"Stage Name\":\"a\",\"Number of Tasks\":1,\"Parent IDs\":[]},"
         "{\"Stage ID\":1,\"Stage Name\":\"b\",\"Number of Tasks\":1,\"Parent IDs\":[0]}]}\n";  // 3 stage ids
  for (int a = 0; a < 3; ++a) log += TaskEnd(10 + a, 0, a, 100 * a);
  for (int a = 0; a < 3; ++a) log += TaskEnd(20 + a, 1, a, 1000 + 100 * a);
  Imported whole = Import(log, "app.log", 0, 9);  // 6 tasks, 3 stage ids, 1 executor, 9 links
  ASSERT_TRUE(whole.result.ok()) << whole.Error();
  EXPECT_FALSE(whole.result->partial) << whole.Error();
  EXPECT_EQ(whole.result->edges, 3);
  Imported im = Import(log, "app.log", 0, 8);
  ASSERT_TRUE(im.result.ok()) << im.Error();
  EXPECT_TRUE(im.result->partial);
  EXPECT_EQ(im.Error(),
            "app.log: more than 8 links from stage attempts to their parents' attempts in one event log (GradeML's "
            "bound); the shuffle edges past it are not imported");
  EXPECT_EQ(im.result->edges, 2);  // two children's 3 links each fit in 8, the third's do not
  EXPECT_EQ(im.Count("task"), 6);  // everything else is imported
  static_assert(spark::SparkLogImporter::kMaxStageLinksPerFile >= 10'000'000);
}

// ---- Dask --------------------------------------------------------------------------------

const char kHeader[] =
    "{\"format\":\"grademl-dask\",\"version\":2,\"scheduler\":\"tcp://127.0.0.1:8786\",\"hostname\":\"node1\"}\n";
const char kEnd[] = "[\"e\",1100.0]\n";

std::string Worker(int port) {
  return "[\"w\",\"tcp://127.0.0.1:" + std::to_string(port) + "\",\"127.0.0.1\"," + std::to_string(port) +
         ",\"w\",1,0.0,1000.0]\n";
}

std::string Task(const std::string& key, double at) {
  const std::string t = std::to_string(at);
  const std::string end = std::to_string(at + 0.5);
  return "[\"t\",\"" + key + "\",\"p\",\"memory\",\"tcp://127.0.0.1:9001\",8,\"int\",1," + t + "," + end +
         ",[[\"compute\"," + t + "," + end + ",null]],null]\n";
}

std::string Deps(const std::string& key, const std::vector<std::string>& deps) {
  std::string list;
  for (const std::string& d : deps) list += (list.empty() ? "\"" : ",\"") + d + "\"";
  return "[\"d\",\"" + key + "\",[" + list + "]]\n";
}

TEST(DaskImportLimitsTest, MoreRecordsThanTheBoundStopWithOneLineNamingTheLine) {
  std::string log = std::string(kHeader) + Worker(9001);  // lines 1, 2
  for (int i = 0; i < 6; ++i) log += Task("k" + std::to_string(i), 1001 + i);  // lines 3..8
  log += kEnd;
  Imported im = Import(log, "dask.jsonl", 5, 0);
  ASSERT_TRUE(im.result.ok()) << im.Error();
  EXPECT_TRUE(im.result->partial);
  EXPECT_EQ(im.Error(),
            "dask.jsonl: line 6: more than 5 records in one Dask task log (GradeML's bound); the rest is not imported");
  EXPECT_EQ(im.result->events, 5);
  EXPECT_EQ(im.Count("task"), 3);  // header, worker and 3 tasks are the 5 records
  Imported whole = Import(log, "dask.jsonl", 0, 0);
  ASSERT_TRUE(whole.result.ok()) << whole.Error();
  EXPECT_FALSE(whole.result->partial) << whole.Error();
  EXPECT_EQ(whole.Count("task"), 6);
  static_assert(dask::DaskLogImporter::kMaxRecordsPerFile >= 10'000'000);
}

TEST(DaskImportLimitsTest, MoreWorkersThanTheBoundStopAtTheFirstOnePast) {
  std::string log = std::string(kHeader) + Worker(9001) + Worker(9002) + Worker(9001) + Worker(9003) + kEnd;
  Imported im = Import(log, "dask.jsonl", 0, 2);
  ASSERT_TRUE(im.result.ok()) << im.Error();
  EXPECT_TRUE(im.result->partial);
  EXPECT_EQ(im.Error(),
            "dask.jsonl: line 5: more than 2 workers in one Dask task log (GradeML's bound); the rest is not imported");
}

TEST(DaskImportLimitsTest, MoreTaskKeysThanTheBoundStopAtTheLineNamingThem) {
  // Keys: a (line 3), then k, a again, b, c on line 4: c is the fourth.
  std::string log = std::string(kHeader) + Worker(9001) + Task("a", 1001) + Deps("k", {"a", "b", "c"}) +
                    Task("k", 1003) + kEnd;
  Imported im = Import(log, "dask.jsonl", 0, 3);
  ASSERT_TRUE(im.result.ok()) << im.Error();
  EXPECT_TRUE(im.result->partial);
  EXPECT_EQ(im.Error(), "dask.jsonl: line 4: more than 3 task keys in one Dask task log (GradeML's bound); the rest is "
                        "not imported");
  EXPECT_TRUE(im.Named("a"));
  EXPECT_FALSE(im.Named("k"));
  Imported whole = Import(log, "dask.jsonl", 0, 4);
  ASSERT_TRUE(whole.result.ok()) << whole.Error();
  EXPECT_FALSE(whole.result->partial) << whole.Error();
  EXPECT_TRUE(whole.Named("k"));
}

TEST(DaskImportLimitsTest, MoreDependenciesThanTheBoundStopAtTheLineListingThem) {
  std::string log = std::string(kHeader) + Worker(9001) + Deps("k", {"a", "b"}) + Deps("m", {"a", "b"}) + kEnd;
  Imported im = Import(log, "dask.jsonl", 0, 3);
  ASSERT_TRUE(im.result.ok()) << im.Error();
  EXPECT_TRUE(im.result->partial);
  EXPECT_EQ(im.Error(), "dask.jsonl: line 4: more than 3 dependencies in one Dask task log (GradeML's bound); the rest "
                        "is not imported");
}

TEST(DaskImportLimitsTest, AKeyRunAgainAndAgainAddsEdgesOnlyUpToTheBound) {
  // t depends on a and b; each of t's 3 runs examines both (2 links) and adds 2 edges.
  std::string log = std::string(kHeader) + Worker(9001) + Deps("t", {"a", "b"}) + Task("a", 1001) + Task("b", 1002) +
                    Task("t", 1003) + Task("t", 1004) + Task("t", 1005) + kEnd;  // t's runs: lines 6, 7, 8
  Imported whole = Import(log, "dask.jsonl", 0, 6);
  ASSERT_TRUE(whole.result.ok()) << whole.Error();
  EXPECT_FALSE(whole.result->partial) << whole.Error();
  EXPECT_EQ(whole.result->edges, 6);
  Imported im = Import(log, "dask.jsonl", 0, 5);
  ASSERT_TRUE(im.result.ok()) << im.Error();
  EXPECT_TRUE(im.result->partial);
  EXPECT_EQ(im.Error().rfind("dask.jsonl: line 8: more than 5 dependency links", 0), 0u) << im.Error();
  EXPECT_EQ(im.result->edges, 4);
  EXPECT_EQ(im.Count("task"), 4);  // a, b and t twice
  static_assert(dask::DaskLogImporter::kMaxDependencyLinksPerFile >= 10'000'000);
}

}  // namespace engine_import_limits
}  // namespace grademl::importers
