// Tests of the Dask task log importer (src/importers/dask/) on a hand-written fixture
// (tests/data/dask/small.jsonl) and small inline logs. Every expected value was worked out
// from the fixture's text (seconds there, ns here), not taken from the importer's output.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "importers/dask/dask_importer.h"
#include "importers/dask/dask_log_reader.h"
#include "importers/importer.h"
#include "model/run.h"
#include "model/run_builder.h"

namespace grademl::importers::dask {
namespace {

constexpr TimeNs kMs = 1'000'000;
constexpr TimeNs S(int64_t seconds, int64_t ms = 0) { return seconds * kNsPerSec + ms * kMs; }

std::string Fixture(const std::string& name) { return std::string(GRADEML_TESTDATA_DIR) + "/dask/" + name; }

struct Imported {
  model::Run run;
  ImportResult result;
  Status status;  // the import's own error (nothing imported)
  model::PhaseId root = 0;
  std::map<int32_t, model::PhaseId> process;  // recorded process phases by pid

  const model::Phase* Find(const std::string& name) const {
    for (const auto& p : run.phases)
      if (p.name == name) return &p;
    return nullptr;
  }
  const model::Phase& Named(const std::string& name) const {
    const model::Phase* p = Find(name);
    if (p == nullptr) {
      ADD_FAILURE() << "no phase named " << name;
      static const model::Phase none;
      return none;
    }
    return *p;
  }
  // The child of `parent` of this leaf type.
  const model::Phase* Child(const model::Phase& parent, const std::string& type) const {
    for (const auto& p : run.phases)
      if (p.parent == parent.id && p.leaf_type() == type) return &p;
    return nullptr;
  }
  std::string Tag(const model::Phase& p, const std::string& key) const {
    for (const auto& [k, v] : p.tags)
      if (k == key) return v;
    return "<none>";
  }
  std::string SourceTag(const std::string& key) const {
    if (run.sources.empty()) return "<no source>";
    for (const auto& [k, v] : run.sources[0].tags)
      if (k == key) return v;
    return "<none>";
  }
  int64_t Stat(const std::string& reason) const {
    int64_t n = 0;
    for (const auto& s : run.ingest_stats)
      if (s.reason == reason) n += s.count;
    return n;
  }
  bool HasEdge(model::PhaseId from, model::PhaseId to, const std::string& kind) const {
    return std::any_of(run.edges.begin(), run.edges.end(),
                       [&](const model::Edge& e) { return e.from == from && e.to == to && e.kind == kind; });
  }
  int64_t Edges(const std::string& kind) const {
    return std::count_if(run.edges.begin(), run.edges.end(), [&](const model::Edge& e) { return e.kind == kind; });
  }
};

void Collect(model::RunDelta delta, model::Run& run) {
  std::map<model::PhaseId, size_t> at;
  for (size_t i = 0; i < run.phases.size(); ++i) at[run.phases[i].id] = i;
  for (auto& p : delta.phases) {
    auto it = at.find(p.id);
    if (it != at.end()) {
      run.phases[it->second] = p;
    } else {
      at[p.id] = run.phases.size();
      run.phases.push_back(p);
    }
  }
  for (auto& e : delta.edges) run.edges.push_back(e);
  for (auto& s : delta.sources) run.sources.push_back(s);
  for (auto& st : delta.ingest_stats) run.ingest_stats.push_back(st);
}

struct Process {
  int32_t pid;
  TimeNs start, end;
  std::string host = "node1";
};

// Imports a log (a file, or bytes when `bytes` is set) under the root of a fresh run that
// recorded these processes on host node1.
Imported Import(const std::string& file, const std::vector<Process>& processes, const std::string* bytes = nullptr) {
  Imported out;
  model::RunInfo info;
  info.start_ns = S(990);
  model::RunBuilder builder(info);
  out.root = builder.BeginPhase({.parent = 0, .name = "root", .type = "run", .start_ns = S(990), .host = "node1"});
  ImportTarget target;
  target.builder = &builder;
  target.under = out.root;
  target.host = "node1";
  for (const Process& p : processes) {
    model::PhaseId id = builder.BeginPhase({.parent = out.root,
                                            .name = "python worker " + std::to_string(p.pid),
                                            .type = "process",
                                            .start_ns = p.start,
                                            .host = p.host,
                                            .pid = p.pid});
    builder.EndPhase(id, p.end);
    out.process[p.pid] = id;
  }
  target.processes = builder.PhasesWhere([](const model::Phase& p) { return p.leaf_type() == "process"; });
  auto result = bytes != nullptr ? ImportTraceBytes(*bytes, file, target) : ImportTraceFile(file, target);
  if (result.ok()) {
    out.result = *result;
  } else {
    out.status = result.status();
  }
  Collect(builder.TakeDelta(true), out.run);
  out.run.Index();
  return out;
}

Imported ImportBytes(const std::string& bytes, const std::vector<Process>& processes = {}) {
  return Import("test.jsonl", processes, &bytes);
}

const std::vector<Process> kProcesses = {{100, S(998), S(1020)}, {201, S(999), S(1010)}, {202, S(999, 500), S(1003, 400)}};

TEST(DaskImporterTest, TasksGoUnderTheirWorkersProcesses) {
  Imported im = Import(Fixture("small.jsonl"), kProcesses);
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_EQ(im.result.format, "dask");
  EXPECT_EQ(im.result.clock, "absolute");
  EXPECT_FALSE(im.result.partial);
  EXPECT_EQ(im.result.events, 15);  // every non-blank line: header, 2 w, 3 d, 6 t, n, x, future
  // 5 tasks that ran, 8 startstops.
  EXPECT_EQ(im.result.phases, 13);
  // 4 dependencies, 3 transfers (inc-c's from load-d; total's from inc-b and inc-c).
  EXPECT_EQ(im.result.edges, 7);
  EXPECT_EQ(im.Edges("dask"), 4);
  EXPECT_EQ(im.Edges("transfer"), 3);

  const model::Phase& load_a = im.Named("load-a");
  const model::Phase& load_d = im.Named("load-d");
  const model::Phase& inc_b = im.Named("inc-b");
  const model::Phase& inc_c = im.Named("inc-c");
  const model::Phase& total = im.Named("total");
  EXPECT_EQ(im.Find("after"), nullptr);  // erred without running: no phase
  for (const model::Phase* p : {&load_a, &inc_b, &inc_c}) {
    EXPECT_EQ(p->parent, im.process.at(201)) << p->name;
    EXPECT_EQ(p->pid, 201);
    EXPECT_EQ(p->host, "node1");  // 127.0.0.1 is the scheduler's host
    EXPECT_EQ(p->type, "run/process/task");
    EXPECT_EQ(im.Tag(*p, "worker"), "tcp://127.0.0.1:9001");
  }
  EXPECT_EQ(load_d.parent, im.process.at(202));
  EXPECT_EQ(total.parent, im.process.at(202));

  // Tags.
  EXPECT_EQ(im.Tag(load_a, "key"), "load-a");
  EXPECT_EQ(im.Tag(load_a, "prefix"), "load");
  EXPECT_EQ(im.Tag(load_a, "group"), "load");
  EXPECT_EQ(im.Tag(load_a, "nbytes"), "100");
  EXPECT_EQ(im.Tag(load_a, "type"), "list");
  EXPECT_EQ(im.Tag(load_a, "thread"), "11");
  EXPECT_EQ(im.Tag(load_a, "state"), "memory");
  EXPECT_EQ(im.Tag(load_a, "engine"), "dask");
  EXPECT_EQ(im.Tag(total, "state"), "erred");
  EXPECT_EQ(im.Tag(total, "error"), "ZeroDivisionError('x')");
  EXPECT_EQ(im.Tag(total, "nbytes"), "<none>");

  // Times: load-a's compute sits between sent and done: kept.
  EXPECT_EQ(load_a.start_ns, S(1001, 100));
  EXPECT_EQ(load_a.end_ns, S(1001, 300));
  // load-d's compute [1002.0, 1002.1] was reported after the scheduler heard it finished
  // (1001.2): moved back by 0.9 s to end there.
  EXPECT_EQ(load_d.start_ns, S(1001, 100));
  EXPECT_EQ(load_d.end_ns, S(1001, 200));
  // Kept, adjusted: counted in the source's tags and (issue 27, as the Chrome and Spark
  // importers do) as an info ingest stat, not as dropped.
  EXPECT_EQ(im.SourceTag("times_shifted_into_the_scheduler_window"), "1");
  EXPECT_EQ(im.SourceTag("max_shift_ns"), "900000000");
  EXPECT_EQ(im.Stat("times_shifted_into_the_scheduler_window"), 1);
  for (const auto& s : im.run.ingest_stats) {
    if (s.reason == "times_shifted_into_the_scheduler_window") {
      EXPECT_EQ(s.severity, model::StatSeverity::kInfo);
    }
  }
  // inc-c: transfer, deserialize, compute as children; the task spans them.
  EXPECT_EQ(inc_c.start_ns, S(1002, 0));
  EXPECT_EQ(inc_c.end_ns, S(1002, 900));
  const model::Phase* transfer = im.Child(inc_c, "transfer");
  const model::Phase* deserialize = im.Child(inc_c, "deserialize");
  const model::Phase* compute = im.Child(inc_c, "compute");
  ASSERT_NE(transfer, nullptr);
  ASSERT_NE(deserialize, nullptr);
  ASSERT_NE(compute, nullptr);
  EXPECT_EQ(transfer->type, "run/process/task/transfer");
  EXPECT_EQ(transfer->start_ns, S(1002, 0));
  EXPECT_EQ(transfer->end_ns, S(1002, 200));
  EXPECT_EQ(deserialize->start_ns, S(1002, 250));
  EXPECT_EQ(deserialize->end_ns, S(1002, 300));
  EXPECT_EQ(compute->start_ns, S(1002, 300));
  EXPECT_EQ(compute->end_ns, S(1002, 900));
  EXPECT_EQ(im.Tag(*transfer, "source"), "tcp://127.0.0.1:9002");
  EXPECT_EQ(im.Tag(*transfer, "bytes"), "300");  // load-d's nbytes
  EXPECT_EQ(im.Tag(*transfer, "keys"), "1");
  // total ran on worker 2, whose process ended at 1003.4: its compute [1003.3, 1003.5] is cut there.
  EXPECT_EQ(total.start_ns, S(1003, 100));
  EXPECT_EQ(total.end_ns, S(1003, 400));
  EXPECT_EQ(im.SourceTag("clamped_into_the_worker_process"), "1");
  const model::Phase* total_transfer = im.Child(total, "transfer");
  ASSERT_NE(total_transfer, nullptr);
  EXPECT_EQ(im.Tag(*total_transfer, "bytes"), "450");  // inc-b 120 + inc-c 330
  EXPECT_EQ(im.Tag(*total_transfer, "keys"), "2");

  // Edges.
  EXPECT_TRUE(im.HasEdge(load_a.id, inc_b.id, "dask"));
  EXPECT_TRUE(im.HasEdge(load_d.id, inc_c.id, "dask"));
  EXPECT_TRUE(im.HasEdge(inc_b.id, total.id, "dask"));
  EXPECT_TRUE(im.HasEdge(inc_c.id, total.id, "dask"));
  EXPECT_TRUE(im.HasEdge(load_d.id, transfer->id, "transfer"));
  EXPECT_TRUE(im.HasEdge(inc_b.id, total_transfer->id, "transfer"));
  EXPECT_TRUE(im.HasEdge(inc_c.id, total_transfer->id, "transfer"));

  // What was not imported, and why.
  EXPECT_EQ(im.Stat("task_erred_without_running"), 1);
  EXPECT_EQ(im.Stat("records_dropped_by_the_plugin"), 3);
  EXPECT_EQ(im.Stat("unknown_record"), 1);
  EXPECT_EQ(im.result.dropped, 5);

  // The workers' and the scheduler's processes are tagged.
  const model::Phase* w1 = im.run.FindPhase(im.process.at(201));
  const model::Phase* sched = im.run.FindPhase(im.process.at(100));
  ASSERT_NE(w1, nullptr);
  ASSERT_NE(sched, nullptr);
  EXPECT_EQ(im.Tag(*w1, "dask.worker"), "tcp://127.0.0.1:9001");
  EXPECT_EQ(im.Tag(*sched, "dask.scheduler"), "tcp://127.0.0.1:8786");
  // Source.
  ASSERT_EQ(im.run.sources.size(), 1u);
  EXPECT_EQ(im.run.sources[0].format, "dask");
}

TEST(DaskImporterTest, WorkersNotRecordedGetPhasesOfTheirOwn) {
  // Imported on its own (grademl import LOG): no recorded process.
  Imported im = Import(Fixture("small.jsonl"), {});
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  const model::Phase& w1 = im.Named("dask worker tcp://127.0.0.1:9001");
  const model::Phase& w2 = im.Named("dask worker tcp://127.0.0.1:9002");
  EXPECT_EQ(w1.type, "run/dask_worker");
  EXPECT_EQ(w1.parent, im.root);
  EXPECT_EQ(w1.pid, 201);
  // From when it joined (1000.5) to its last task (inc-c, 1002.9).
  EXPECT_EQ(w1.start_ns, S(1000, 500));
  EXPECT_EQ(w1.end_ns, S(1002, 900));
  // Worker 2: joined 1000.6, left 1004.0.
  EXPECT_EQ(w2.start_ns, S(1000, 600));
  EXPECT_EQ(w2.end_ns, S(1004, 0));
  EXPECT_EQ(im.Named("load-a").parent, w1.id);
  EXPECT_EQ(im.Named("load-a").type, "run/dask_worker/task");
  EXPECT_EQ(im.Named("total").parent, w2.id);
  // Nothing to clamp into: total keeps its compute to 1003.5.
  EXPECT_EQ(im.Named("total").end_ns, S(1003, 500));
  EXPECT_EQ(im.SourceTag("worker_process_not_recorded"), "2");
  EXPECT_EQ(im.result.phases, 15);
  // The span a new run gets: the first task start (load-a and load-d at 1001.1) is after
  // the first worker joined (1000.5); the last worker left at 1004.0.
  EXPECT_EQ(im.result.start_ns, S(1000, 500));
  EXPECT_EQ(im.result.end_ns, S(1004, 0));
}

TEST(DaskImporterTest, ADamagedLineEndsTheImportThere) {
  std::string log =
      "{\"format\":\"grademl-dask\",\"version\":1,\"scheduler\":\"tcp://127.0.0.1:8786\",\"hostname\":\"node1\"}\n"
      "[\"w\",\"tcp://127.0.0.1:9001\",\"127.0.0.1\",201,\"0\",1,0.0,1000.5]\n"
      "[\"t\",\"a\",\"a\",\"memory\",\"tcp://127.0.0.1:9001\",1,\"int\",1,1001.0,1001.5,[[\"compute\",1001.1,1001.2,null]],null]\n"
      "[\"t\",\"b\",\"b\",\"memory\",\"tcp://127.0.0.1:9001\",1,\"int\",1,1001.0,1001.5,[[\"compute\",1001.3,1001.4,null]],null]\n"
      "[\"t\",\"c\",\"c\",\"memory\",\"tcp://127.0.0.1:9001\",1,\"in";  // cut short
  Imported im = ImportBytes(log, kProcesses);
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_TRUE(im.result.partial);
  EXPECT_EQ(im.result.error.message().rfind("test.jsonl: line 5: not JSON", 0), 0u) << im.result.error.message();
  EXPECT_EQ(im.result.phases, 4);  // a and b with their computes
  EXPECT_NE(im.Find("a"), nullptr);
  EXPECT_NE(im.Find("b"), nullptr);
  EXPECT_EQ(im.Find("c"), nullptr);
}

// tests/data/importer/dask_hostile_text.jsonl (6 lines, written by hand): the worker's name
// holds a lone surrogate escape (as Python's json.dumps writes a name decoded with
// surrogateescape), the task "load-" a byte that is not UTF-8 (FF), the task "inc-" a lone
// \udc80, in its dependency record too, and inc-'s error both. Every record is imported,
// each such character U+FFFD; the dependency joins the two repaired keys. Before, line 2
// ended the import.
TEST(DaskImporterTest, InvalidUtf8AndLoneSurrogatesAreReplacedAndEveryRecordImported) {
  const std::string r = "\xEF\xBF\xBD";
  Imported im = Import(std::string(GRADEML_TESTDATA_DIR) + "/importer/dask_hostile_text.jsonl", kProcesses);
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_FALSE(im.result.partial) << im.result.error.message();
  EXPECT_EQ(im.result.events, 6);
  const model::Phase& load = im.Named("load-" + r);
  const model::Phase& inc = im.Named("inc-" + r);
  const model::Phase& last = im.Named("last");
  for (const model::Phase* p : {&load, &inc, &last}) EXPECT_EQ(p->parent, im.process.at(201)) << p->name;
  EXPECT_EQ(load.start_ns, S(1001, 100));
  EXPECT_EQ(inc.start_ns, S(1001, 600));
  EXPECT_EQ(last.end_ns, S(1002, 200));
  EXPECT_EQ(im.Tag(inc, "key"), "inc-" + r);
  EXPECT_EQ(im.Tag(inc, "error"), "ValueError('caf" + r + " " + r + "')");
  EXPECT_TRUE(im.HasEdge(load.id, inc.id, "dask"));
  EXPECT_EQ(im.Edges("dask"), 1);
  // 3 tasks and their 3 computes.
  EXPECT_EQ(im.result.phases, 6);
}

TEST(DaskImporterTest, AFieldOfTheWrongTypeIsDamage) {
  std::string log =
      "{\"format\":\"grademl-dask\",\"version\":1}\n"
      "[\"t\",\"a\",\"a\",\"memory\",\"tcp://127.0.0.1:9001\",1,\"int\",1,1001.0,1001.5,[[\"compute\",1001.1,1001.2,null]],null]\n"
      "[\"d\",\"b\",\"a\"]\n"
      "[\"t\",\"b\",\"b\",\"memory\",\"tcp://127.0.0.1:9001\",1,\"int\",1,1001.0,1001.5,[],null]\n";
  Imported im = ImportBytes(log);
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_TRUE(im.result.partial);
  EXPECT_EQ(im.result.error.message(), "test.jsonl: line 3: \"d\" record: deps is not an array");
  EXPECT_NE(im.Find("a"), nullptr);
  EXPECT_EQ(im.Find("b"), nullptr);

  std::string bad_time =
      "{\"format\":\"grademl-dask\",\"version\":1}\n"
      "[\"t\",\"a\",\"a\",\"memory\",\"w\",1,\"int\",1,1001.0,\"soon\",[],null]\n";
  Imported im2 = ImportBytes(bad_time);
  ASSERT_TRUE(im2.status.ok());
  EXPECT_EQ(im2.result.error.message(), "test.jsonl: line 2: \"t\" record: done is not a number");
}

TEST(DaskImporterTest, NotADaskLogIsAnErrorAndNothingIsImported) {
  // A header of another version: refused as a whole.
  Imported im = ImportBytes("{\"format\":\"grademl-dask\",\"version\":7}\n[\"n\",1]\n");
  EXPECT_FALSE(im.status.ok());
  EXPECT_EQ(im.status.message(),
            "test.jsonl: line 1: version 7 of the Dask task log (this grademl reads versions 1 to 2)");
  EXPECT_TRUE(im.run.sources.empty());
  // The header cut short.
  Imported cut = ImportBytes("{\"format\":\"grademl-dask\",\"vers");
  EXPECT_FALSE(cut.status.ok());
  EXPECT_EQ(cut.status.message().rfind("test.jsonl: line 1: not JSON", 0), 0u) << cut.status.message();
}

// Version 2: a task cancelled while its worker had it (state "cancelled", no startstops)
// spans from when the scheduler gave it to the worker (1001.0) until it released it (1003.5),
// tagged state=cancelled and without the imbalance analysis's group; the log ends with its
// end record, so it is whole.
const char kCancelledLog[] =
    "{\"format\":\"grademl-dask\",\"version\":2,\"scheduler\":\"tcp://127.0.0.1:8786\",\"hostname\":\"node1\"}\n"
    "[\"w\",\"tcp://127.0.0.1:9001\",\"127.0.0.1\",201,\"0\",1,0.0,1000.5]\n"
    "[\"t\",\"slow-1\",\"slow\",\"cancelled\",\"tcp://127.0.0.1:9001\",null,null,null,1001.0,1003.5,[],null]\n"
    "[\"t\",\"slow-2\",\"slow\",\"memory\",\"tcp://127.0.0.1:9001\",8,\"int\",1,1001.0,1002.0,"
    "[[\"compute\",1001.2,1001.9,null]],null]\n";

TEST(DaskImporterTest, ACancelledTaskSpansFromItsStartToItsRelease) {
  Imported im = ImportBytes(std::string(kCancelledLog) + "[\"e\",1004.0]\n", kProcesses);
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_FALSE(im.result.partial) << im.result.error.message();
  EXPECT_EQ(im.SourceTag("cut_short"), "<none>");
  const model::Phase& cancelled = im.Named("slow-1");
  EXPECT_EQ(cancelled.parent, im.process.at(201));
  EXPECT_EQ(cancelled.start_ns, S(1001));
  EXPECT_EQ(cancelled.end_ns, S(1003, 500));
  EXPECT_EQ(im.Tag(cancelled, "state"), "cancelled");
  EXPECT_EQ(im.Tag(cancelled, "prefix"), "slow");
  EXPECT_EQ(im.Tag(cancelled, "group"), "<none>");
  EXPECT_EQ(im.Child(cancelled, "compute"), nullptr);
  EXPECT_EQ(im.Tag(im.Named("slow-2"), "group"), "slow");
  EXPECT_EQ(im.result.phases, 3);  // slow-1, slow-2 and its compute
}

TEST(DaskImporterTest, AVersion2LogWithoutItsEndWasCutShort) {
  // The plugin lost its file (or the scheduler was killed): everything logged is imported,
  // and the result says where the log stops.
  Imported im = ImportBytes(kCancelledLog, kProcesses);
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_TRUE(im.result.partial);
  EXPECT_EQ(im.result.error.message().rfind("test.jsonl: line 5: the log ends before its end record: cut short", 0),
            0u)
      << im.result.error.message();
  EXPECT_EQ(im.SourceTag("cut_short"), "1");
  EXPECT_EQ(im.SourceTag("partial"), "1");
  EXPECT_NE(im.Find("slow-1"), nullptr);
  EXPECT_NE(im.Find("slow-2"), nullptr);
  // Version 1 had no end record: never cut short for want of one.
  std::string v1 = kCancelledLog;
  v1.replace(v1.find("\"version\":2"), 11, "\"version\":1");
  Imported old = ImportBytes(v1, kProcesses);
  ASSERT_TRUE(old.status.ok()) << old.status.message();
  EXPECT_FALSE(old.result.partial) << old.result.error.message();
  // A damaged line is said as such, not as a log cut short.
  Imported damaged = ImportBytes(std::string(kCancelledLog) + "[\"t\",\"x", kProcesses);
  EXPECT_EQ(damaged.result.error.message().rfind("test.jsonl: line 5: not JSON", 0), 0u)
      << damaged.result.error.message();
}

// The header and the two workers of the cancelled-task logs below (127.0.0.1: the
// scheduler's host, so no clock offset), and the end record that makes a log whole.
const char kV2Workers[] =
    "{\"format\":\"grademl-dask\",\"version\":2,\"scheduler\":\"tcp://127.0.0.1:8786\",\"hostname\":\"node1\"}\n"
    "[\"w\",\"tcp://127.0.0.1:9001\",\"127.0.0.1\",201,\"0\",1,0.0,1000.5]\n"
    "[\"w\",\"tcp://127.0.0.1:9002\",\"127.0.0.1\",202,\"1\",1,0.0,1000.6]\n";
const char kV2End[] = "[\"e\",1005.0]\n";

// The task phases named `key`, in the order of the log.
std::vector<const model::Phase*> TasksNamed(const Imported& im, const std::string& key) {
  std::vector<const model::Phase*> out;
  for (const model::Phase& p : im.run.phases)
    if (p.name == key && p.leaf_type() == "task") out.push_back(&p);
  return out;
}

TEST(DaskImporterTest, ACancelledTaskIsClampedIntoItsWorkersProcessLikeAnyTask) {
  // Cancelled on worker 2 (pid 202, whose process ran 999.5 .. 1003.4): given to it at
  // 1002.0, released by the scheduler at 1004.0, after the process had ended: cut at 1003.4.
  Imported im = ImportBytes(std::string(kV2Workers) +
                                "[\"t\",\"slow-1\",\"slow\",\"cancelled\",\"tcp://127.0.0.1:9002\",null,null,null,"
                                "1002.0,1004.0,[],null]\n" +
                                kV2End,
                            kProcesses);
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_FALSE(im.result.partial) << im.result.error.message();
  const model::Phase& t = im.Named("slow-1");
  EXPECT_EQ(t.parent, im.process.at(202));
  EXPECT_EQ(t.pid, 202);
  EXPECT_EQ(t.start_ns, S(1002));
  EXPECT_EQ(t.end_ns, S(1003, 400));
  EXPECT_EQ(im.SourceTag("clamped_into_the_worker_process"), "1");
  EXPECT_EQ(im.Tag(t, "state"), "cancelled");
  EXPECT_EQ(im.Tag(t, "nbytes"), "<none>");
  EXPECT_EQ(im.result.phases, 1);
  EXPECT_EQ(im.result.dropped, 0);
}

TEST(DaskImporterTest, ACancelledTaskWithoutAUsableStartIsAnInstantAtItsRelease) {
  // slow-1: no time it was given to the worker (null); slow-2: one after its release (1003.5
  // > 1003.0). Neither can say when it started: each is the instant of its release, 1003.0.
  Imported im = ImportBytes(std::string(kV2Workers) +
                                "[\"t\",\"slow-1\",\"slow\",\"cancelled\",\"tcp://127.0.0.1:9001\",null,null,null,"
                                "null,1003.0,[],null]\n"
                                "[\"t\",\"slow-2\",\"slow\",\"cancelled\",\"tcp://127.0.0.1:9001\",null,null,null,"
                                "1003.5,1003.0,[],null]\n" +
                                kV2End,
                            kProcesses);
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_FALSE(im.result.partial) << im.result.error.message();
  for (const std::string key : {"slow-1", "slow-2"}) {
    const model::Phase& t = im.Named(key);
    EXPECT_EQ(t.parent, im.process.at(201)) << key;
    EXPECT_EQ(t.start_ns, S(1003)) << key;
    EXPECT_EQ(t.end_ns, S(1003)) << key;
    EXPECT_EQ(im.Tag(t, "state"), "cancelled") << key;
  }
  EXPECT_EQ(im.result.phases, 2);
}

TEST(DaskImporterTest, AKeyCancelledThenComputedAgainIsTwoTasksAndItsDependentsUseTheComputedOne) {
  // load-a (worker 1) feeds slow-1, which total needs. slow-1 is cancelled on worker 1
  // (1001.0 .. 1001.5), submitted again and computed on worker 2 (compute 1001.7 .. 1001.9,
  // 8 bytes); total (worker 1) fetches it from worker 2 and computes. By hand: two slow-1
  // phases; edges load-a -> each slow-1 (both waited for it), the computed slow-1 -> total
  // and -> total's transfer (1 key, 8 bytes); none from the cancelled one, which produced
  // nothing. Phases: load-a + compute, cancelled slow-1, slow-1 + compute, total + transfer
  // + compute = 8.
  Imported im = ImportBytes(
      std::string(kV2Workers) +
          "[\"d\",\"slow-1\",[\"load-a\"]]\n"
          "[\"d\",\"total\",[\"slow-1\"]]\n"
          "[\"t\",\"load-a\",\"load\",\"memory\",\"tcp://127.0.0.1:9001\",100,\"list\",11,1000.8,1001.0,"
          "[[\"compute\",1000.85,1000.95,null]],null]\n"
          "[\"t\",\"slow-1\",\"slow\",\"cancelled\",\"tcp://127.0.0.1:9001\",null,null,null,1001.0,1001.5,[],null]\n"
          "[\"t\",\"slow-1\",\"slow\",\"memory\",\"tcp://127.0.0.1:9002\",8,\"int\",12,1001.6,1002.0,"
          "[[\"compute\",1001.7,1001.9,null]],null]\n"
          "[\"t\",\"total\",\"total\",\"memory\",\"tcp://127.0.0.1:9001\",8,\"int\",11,1002.1,1002.6,"
          "[[\"transfer\",1002.1,1002.2,\"tcp://127.0.0.1:9002\"],[\"compute\",1002.3,1002.5,null]],null]\n" +
          kV2End,
      kProcesses);
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_FALSE(im.result.partial) << im.result.error.message();
  std::vector<const model::Phase*> slow = TasksNamed(im, "slow-1");
  ASSERT_EQ(slow.size(), 2u);
  const model::Phase& cancelled = *slow[0];
  const model::Phase& computed = *slow[1];
  EXPECT_EQ(im.Tag(cancelled, "state"), "cancelled");
  EXPECT_EQ(cancelled.parent, im.process.at(201));
  EXPECT_EQ(cancelled.start_ns, S(1001));
  EXPECT_EQ(cancelled.end_ns, S(1001, 500));
  EXPECT_EQ(im.Tag(cancelled, "group"), "<none>");
  EXPECT_EQ(im.Tag(computed, "state"), "memory");
  EXPECT_EQ(computed.parent, im.process.at(202));
  EXPECT_EQ(computed.start_ns, S(1001, 700));
  EXPECT_EQ(computed.end_ns, S(1001, 900));
  EXPECT_EQ(im.Tag(computed, "group"), "slow");

  const model::Phase& load = im.Named("load-a");
  const model::Phase& total = im.Named("total");
  const model::Phase* transfer = im.Child(total, "transfer");
  ASSERT_NE(transfer, nullptr);
  EXPECT_TRUE(im.HasEdge(load.id, cancelled.id, "dask"));
  EXPECT_TRUE(im.HasEdge(load.id, computed.id, "dask"));
  EXPECT_TRUE(im.HasEdge(computed.id, total.id, "dask"));
  EXPECT_FALSE(im.HasEdge(cancelled.id, total.id, "dask"));
  EXPECT_TRUE(im.HasEdge(computed.id, transfer->id, "transfer"));
  EXPECT_EQ(im.Tag(*transfer, "keys"), "1");
  EXPECT_EQ(im.Tag(*transfer, "bytes"), "8");
  EXPECT_EQ(im.Edges("dask"), 3);
  EXPECT_EQ(im.Edges("transfer"), 1);
  EXPECT_EQ(im.result.phases, 8);
  EXPECT_EQ(im.result.edges, 4);
}

TEST(DaskImporterTest, ACancelledTaskOfAWorkerNotRecordedStretchesTheWorkersPhase) {
  // Imported on its own: worker 1 (joined 1000.5, never left) ran nothing but slow-1,
  // cancelled, given to it at 1001.0 and released at 1003.5. Its dask_worker phase spans
  // 1000.5 .. 1003.5, and so does the import.
  Imported im = ImportBytes(std::string(kV2Workers) +
                                "[\"t\",\"slow-1\",\"slow\",\"cancelled\",\"tcp://127.0.0.1:9001\",null,null,null,"
                                "1001.0,1003.5,[],null]\n" +
                                kV2End,
                            {});
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  const model::Phase& w1 = im.Named("dask worker tcp://127.0.0.1:9001");
  EXPECT_EQ(w1.start_ns, S(1000, 500));
  EXPECT_EQ(w1.end_ns, S(1003, 500));
  EXPECT_EQ(im.Find("dask worker tcp://127.0.0.1:9002"), nullptr);  // it ran nothing
  const model::Phase& t = im.Named("slow-1");
  EXPECT_EQ(t.parent, w1.id);
  EXPECT_EQ(t.start_ns, S(1001));
  EXPECT_EQ(t.end_ns, S(1003, 500));
  EXPECT_EQ(im.result.start_ns, S(1000, 500));
  EXPECT_EQ(im.result.end_ns, S(1003, 500));
  EXPECT_EQ(im.result.phases, 2);
}

TEST(DaskImporterTest, AWorkerOnAnotherHostKeepsItsAddressAsHost) {
  // Worker 10.0.0.7: not the scheduler's host. Its deserialize (in its own clock) gets its
  // time_delay (0.5 s) added; compute (Dask's clock) is within sent..done, kept.
  std::string log =
      "{\"format\":\"grademl-dask\",\"version\":1,\"scheduler\":\"tcp://10.0.0.1:8786\",\"hostname\":\"node1\"}\n"
      "[\"w\",\"tcp://10.0.0.7:9001\",\"10.0.0.7\",201,\"0\",1,0.5,1000.5]\n"
      "[\"t\",\"a\",\"a\",\"memory\",\"tcp://10.0.0.7:9001\",1,\"int\",1,1001.0,1002.0,"
      "[[\"deserialize\",1000.6,1000.7,null],[\"compute\",1001.2,1001.8,null]],null]\n";
  Imported im = ImportBytes(log, kProcesses);
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  const model::Phase& a = im.Named("a");
  EXPECT_EQ(a.host, "10.0.0.7");
  EXPECT_EQ(a.parent, im.Named("dask worker tcp://10.0.0.7:9001").id);  // pid 201 on node1 is not it
  const model::Phase* deserialize = im.Child(a, "deserialize");
  ASSERT_NE(deserialize, nullptr);
  EXPECT_EQ(deserialize->start_ns, S(1001, 100));
  EXPECT_EQ(deserialize->end_ns, S(1001, 200));
  EXPECT_EQ(a.start_ns, S(1001, 100));
  EXPECT_EQ(a.end_ns, S(1001, 800));
}

TEST(DaskImporterTest, ComputeReportedBeforeTheTaskWasSentMovesForward) {
  DaskTaskRecord t;
  t.key = "x";
  t.worker = "w";
  t.sent = 1001.0;
  t.done = 1002.0;
  t.startstops = {{.action = "transfer", .start = 1000.5, .stop = 1000.6},
                  {.action = "compute", .start = 1000.7, .stop = 1000.9},
                  {.action = "disk-read", .start = 1001.15, .stop = 1001.2}};
  TaskTimes times = CorrectTaskTimes(t, /*local=*/true, 0);
  // compute starts 0.3 s before sent: compute and transfer move 0.3 s later; disk-read (the
  // worker's own clock) stays.
  EXPECT_EQ(times.shifted_ns, -S(0, 300));
  ASSERT_EQ(times.intervals.size(), 3u);
  EXPECT_EQ(times.intervals[0].start, S(1000, 800));
  EXPECT_EQ(times.intervals[1].start, S(1001, 0));
  EXPECT_EQ(times.intervals[1].stop, S(1001, 200));
  EXPECT_EQ(times.intervals[2].start, S(1001, 150));
  EXPECT_EQ(times.start, S(1000, 800));
  EXPECT_EQ(times.end, S(1001, 200));
}

TEST(DaskImporterTest, SniffsItsHeaderOnly) {
  EXPECT_TRUE(LooksLikeDaskLog("{\"format\":\"grademl-dask\",\"version\":1}\n[\"n\",1]"));
  EXPECT_TRUE(LooksLikeDaskLog("  {\"version\": 1, \"format\": \"grademl-dask\"}"));
  EXPECT_FALSE(LooksLikeDaskLog("{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"grademl-dask\"}]}"));
  EXPECT_FALSE(LooksLikeDaskLog("[\"w\",\"tcp://x\"]"));
  EXPECT_FALSE(LooksLikeDaskLog(""));
  // The format registry picks it before Chrome JSON.
  const TraceFormat* f = SniffTraceFormat("{\"format\":\"grademl-dask\",\"version\":1}\n");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->name, "dask");
}

TEST(DaskImporterTest, SecondsToTimeNsKeepsTheDoublesPrecision) {
  // The double nearest 1795770939.126539 is 1795770939.1265389919281005859375 (Python's
  // Decimal): to the nearest ns.
  EXPECT_EQ(SecondsToTimeNs(1795770939.126539), std::optional<TimeNs>(1795770939'126538992));
  EXPECT_EQ(SecondsToTimeNs(1000.25), std::optional<TimeNs>(1000'250000000));
  EXPECT_EQ(SecondsToTimeNs(-1), std::nullopt);
  EXPECT_EQ(SecondsToTimeNs(1e300), std::nullopt);
}

}  // namespace
}  // namespace grademl::importers::dask
