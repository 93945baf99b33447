#include "store/database.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <map>

#include "store/sqlite/schema.h"
#include "store_test_support.h"

namespace grademl::store {
namespace {

using model::ResourceKind;
using model::SeriesKind;
using testing::ExpectedRun;
using testing::ExpectSameInfo;
using testing::ExpectSameRun;
using testing::RawDb;
using testing::SampleInfo;
using testing::TempDir;

std::unique_ptr<Database> OpenOrDie(const std::string& path, Database::Mode mode = Database::Mode::kReadWrite) {
  auto db = Database::Open(path, mode);
  GRADEML_CHECK_MSG(db.ok(), db.status().message());
  return std::move(db).value();
}

// Records a small but complete run through a RunBuilder in three deltas, the way a monitor
// does: phases opened then re-sent with tags and end times, resources and series declared
// along the way, samples of several series interleaved.
class RunRecording {
 public:
  explicit RunRecording(Database* db) : db_(db), builder_(SampleInfo()) {
    id_ = db->CreateRun(SampleInfo()).value();
  }

  void Write() {
    model::RunDelta d = builder_.TakeDelta();
    expected_.Apply(d);
    ASSERT_TRUE(db_->WriteDelta(id_, d).ok());
  }

  void RecordAll() {
    model::RunBuilder& b = builder_;
    const TimeNs t0 = SampleInfo().start_ns;
    root_ = b.BeginPhase({.name = "run", .type = "run", .start_ns = t0, .host = "node1",
                          .tags = {{"cmd", "python train.py"}, {"quote\"key", "va\\lue\n"}}});
    proc_ = b.BeginPhase({.parent = root_, .name = "python train.py", .type = "process", .start_ns = t0 + 10,
                          .host = "node1", .pid = 4242});
    auto host = b.AddResource({.kind = ResourceKind::kHost, .name = "node1", .host = "node1"});
    auto cpu = b.AddResource({.parent = host, .kind = ResourceKind::kCpu, .name = "cpu", .host = "node1"});
    auto core = b.AddResource({.parent = cpu, .kind = ResourceKind::kCore, .name = "cpu0", .host = "node1"});
    auto mem = b.AddResource({.parent = host, .kind = ResourceKind::kMemory, .name = "memory", .host = "node1"});
    proc_res_ = b.AddResource({.parent = host, .kind = ResourceKind::kProcess, .name = "4242", .host = "node1",
                               .pid = 4242, .phase = proc_});
    user_ = b.AddSeries({.resource = proc_res_, .name = "cpu.user", .unit = "s", .kind = SeriesKind::kCounter});
    auto core_user =
        b.AddSeries({.resource = core, .name = "cpu.user", .unit = "s", .kind = SeriesKind::kCounter, .capacity = 1});
    auto used = b.AddSeries(
        {.resource = mem, .name = "memory.used", .unit = "bytes", .kind = SeriesKind::kGauge, .capacity = 64e9});
    for (int i = 0; i < 50; ++i) {
      TimeNs t = t0 + 100 + i * 100'000'000LL;
      b.AddSample(user_, t, i * 0.1);
      b.AddSample(core_user, t, i * 0.09);
      b.AddSample(used, t, i < 25 ? 1e9 : 2.5e9);  // flat stretches, run-length compressed
    }
    Write();

    // Second delta: a child, tags on an existing phase, an edge, a NaN, a new series.
    child_ = b.BeginPhase({.parent = proc_, .name = "child", .type = "process", .start_ns = t0 + 2'000'000'000,
                           .host = "node1", .pid = 4243});
    b.SetPhaseTag(proc_, "epoch", "1");
    b.SetPhaseTag(proc_, "empty", "");
    b.AddEdge({.from = proc_, .to = child_, .kind = "file:/tmp/data.bin"});
    b.AddEdge({.from = proc_, .to = child_, .kind = "data"});
    auto rss = b.AddSeries({.resource = proc_res_, .name = std::string("memory.rss\0x", 12), .unit = "bytes"});
    b.AddSample(rss, t0 + 5'000'000'000, 1234.5);
    b.AddSample(rss, t0 + 5'100'000'000, std::numeric_limits<double>::quiet_NaN());
    b.AddSample(rss, t0 + 5'200'000'000, std::numeric_limits<double>::infinity());
    b.AddSample(rss, t0 + 5'300'000'000, -0.0);
    b.AddSample(user_, t0 + 5'400'000'000, 9.0);
    Write();

    // Third delta: everything ends; the run's info changes.
    b.EndPhase(child_, t0 + 6'000'000'000);
    b.EndPhase(proc_, t0 + 7'000'000'000);
    b.SetPhaseTag(proc_, "epoch", "2");
    b.EndPhase(root_, t0 + 7'500'000'000);
    b.UpdateRunInfo([&](model::RunInfo& info) {
      info.end_ns = t0 + 7'500'000'000;
      info.exit_code = 3;
      info.exit_signal = 9;
      info.complete = true;
      info.error = "killed by \"SIGKILL\"";
      info.monitor_cpu_seconds = 0.125;
    });
    Write();
  }

  model::RunId id() const { return id_; }
  model::Run Expected() const { return expected_.Get(id_); }

  model::PhaseId root_ = 0, proc_ = 0, child_ = 0;
  model::ResourceId proc_res_ = 0;
  model::SeriesId user_ = 0;

 private:
  Database* db_;
  model::RunBuilder builder_;
  model::RunId id_ = 0;
  ExpectedRun expected_;
};

TEST(DatabaseTest, DefaultPathFollowsGrademlDb) {
  ::unsetenv("GRADEML_DB");
  EXPECT_EQ(DefaultDatabasePath(), "./.grademl/grademl.db");
  ::setenv("GRADEML_DB", "", 1);
  EXPECT_EQ(DefaultDatabasePath(), "./.grademl/grademl.db");
  ::setenv("GRADEML_DB", "/data/runs.db", 1);
  EXPECT_EQ(DefaultDatabasePath(), "/data/runs.db");
  ::unsetenv("GRADEML_DB");
}

TEST(DatabaseTest, RoundTripsEveryField) {
  TempDir dir;
  auto db = OpenOrDie(dir.File("g.db"));
  RunRecording rec(db.get());
  ASSERT_NO_FATAL_FAILURE(rec.RecordAll());
  model::Run want = rec.Expected();

  auto got = db->LoadRun(rec.id());
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectSameRun(*got, want);

  // Re-read through a fresh read-only connection, from the file alone.
  db.reset();
  auto ro = OpenOrDie(dir.File("g.db"), Database::Mode::kReadOnly);
  got = ro->LoadRun(rec.id());
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectSameRun(*got, want);

  // Spot checks of what the comparison covers, and that Index() was called.
  const model::Run& run = *got;
  EXPECT_EQ(run.info.exit_code, 3);
  EXPECT_EQ(run.info.command[7], std::string("nul\0byte", 8));
  const model::Phase* proc = run.FindPhase(rec.proc_);
  ASSERT_NE(proc, nullptr);
  EXPECT_EQ(proc->type, "run/process");
  EXPECT_EQ(proc->tags, (model::Tags{{"epoch", "2"}, {"empty", ""}}));
  EXPECT_NE(proc->end_ns, 0);
  ASSERT_NE(run.Root(), nullptr);
  EXPECT_EQ(run.Root()->id, rec.root_);
  EXPECT_EQ(run.ChildrenOf(rec.proc_), std::vector<model::PhaseId>{rec.child_});
  ASSERT_NE(run.ProcessResourceOf(rec.proc_), nullptr);
  EXPECT_EQ(run.ProcessResourceOf(rec.proc_)->id, rec.proc_res_);
  const model::Series* user = run.FindSeries(rec.proc_res_, "cpu.user");
  ASSERT_NE(user, nullptr);
  EXPECT_FALSE(user->info.has_capacity());
  EXPECT_EQ(user->samples.size(), 51u);
  EXPECT_EQ(user->samples.back().v, 9.0);
}

TEST(DatabaseTest, StoresNoneAsNullAndJsonText) {
  TempDir dir;
  auto db = OpenOrDie(dir.File("g.db"));
  RunRecording rec(db.get());
  ASSERT_NO_FATAL_FAILURE(rec.RecordAll());
  RawDb raw(dir.File("g.db"));
  EXPECT_EQ(raw.Text("PRAGMA journal_mode"), "wal");  // while a writer has it open
  EXPECT_EQ(raw.Int("SELECT count(*) FROM phases WHERE parent_id IS NULL"), 1);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM series WHERE capacity IS NULL"), 2);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM samples WHERE value IS NULL"), 1);
  EXPECT_EQ(raw.Text("SELECT kind FROM resources WHERE id = 5"), "process");
  EXPECT_EQ(raw.Text("SELECT kind FROM series WHERE id = 1"), "counter");
  // SQLite's JSON functions read the JSON columns (for queries by hand).
  EXPECT_EQ(raw.Text("SELECT json_extract(command, '$[1]') FROM runs"), "train.py");
  EXPECT_EQ(raw.Text("SELECT json_extract(tags, '$.epoch') FROM phases WHERE id = 2"), "2");
}

TEST(DatabaseTest, PhasesAreUpsertedAndOpenOnesHaveNoEnd) {
  TempDir dir;
  auto db = OpenOrDie(dir.File("g.db"));
  model::RunId id = db->CreateRun(SampleInfo()).value();
  model::RunBuilder b(SampleInfo());
  model::PhaseId p = b.BeginPhase({.name = "run", .type = "run", .start_ns = 5});
  ASSERT_TRUE(db->WriteDelta(id, b.TakeDelta()).ok());
  {
    RawDb raw(dir.File("g.db"));
    EXPECT_EQ(raw.Int("SELECT count(*) FROM phases WHERE end_ns IS NULL"), 1);
  }
  b.EndPhase(p, 50);
  ASSERT_TRUE(db->WriteDelta(id, b.TakeDelta()).ok());
  auto run = db->LoadRun(id);
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->phases.size(), 1u);
  EXPECT_EQ(run->phases[0].end_ns, 50);
}

TEST(DatabaseTest, RunsAreIsolatedAndListedInOrder) {
  TempDir dir;
  auto db = OpenOrDie(dir.File("g.db"));
  auto empty = db->ListRuns();
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());

  RunRecording first(db.get());
  ASSERT_NO_FATAL_FAILURE(first.RecordAll());
  model::RunInfo other = SampleInfo();
  other.uuid = "second";
  other.command = {"sleep", "1"};
  model::RunId second = db->CreateRun(other).value();
  model::RunBuilder b(other);
  b.BeginPhase({.name = "run", .type = "run", .start_ns = 1});
  auto s = b.AddSeries({.resource = 1, .name = "x"});
  b.AddSample(s, 1, 1);
  ASSERT_TRUE(db->WriteDelta(second, b.TakeDelta()).ok());

  ExpectSameRun(db->LoadRun(first.id()).value(), first.Expected());
  model::Run two = db->LoadRun(second).value();
  EXPECT_EQ(two.phases.size(), 1u);
  EXPECT_EQ(two.series.size(), 1u);
  EXPECT_TRUE(two.edges.empty());

  auto runs = db->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  ExpectSameInfo((*runs)[0], first.Expected().info);
  EXPECT_EQ((*runs)[1].id, second);
  EXPECT_EQ((*runs)[1].command, other.command);
  EXPECT_FALSE((*runs)[1].complete);
  EXPECT_EQ((*runs)[1].end_ns, 0);
  EXPECT_EQ((*runs)[1].exit_code, std::nullopt);
}

TEST(DatabaseTest, WriteDeltaIsAllOrNothing) {
  TempDir dir;
  auto db = OpenOrDie(dir.File("g.db"));
  model::RunDelta d;
  d.samples.push_back({.series = 1, .sample = {1, 1}});
  Status st = db->WriteDelta(7, d);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), dir.File("g.db") + ": no run 7");

  model::RunId id = db->CreateRun(SampleInfo()).value();
  {
    // A foreign writer's trigger makes the last insert of a delta fail.
    RawDb raw(dir.File("g.db"));
    raw.Exec("CREATE TRIGGER boom BEFORE INSERT ON samples WHEN NEW.t_ns = 99 BEGIN SELECT RAISE(ABORT, 'boom'); END");
  }
  model::RunDelta bad;
  bad.phases.push_back({.id = 1, .name = "run", .type = "run"});
  bad.samples.push_back({.series = 1, .sample = {1, 1}});
  bad.samples.push_back({.series = 1, .sample = {99, 1}});
  st = db->WriteDelta(id, bad);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("boom"), std::string::npos) << st.message();
  model::Run run = db->LoadRun(id).value();
  EXPECT_TRUE(run.phases.empty());
  EXPECT_TRUE(run.series.empty());
  RawDb raw(dir.File("g.db"));
  EXPECT_EQ(raw.Int("SELECT count(*) FROM samples"), 0);
}

TEST(DatabaseTest, ResolveRunSpecs) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  auto db = OpenOrDie(path);
  auto none = db->ResolveRun("");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(), path + ": no runs recorded yet; record one with `grademl run -- CMD`");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(db->CreateRun(SampleInfo()).ok());

  EXPECT_EQ(db->ResolveRun("").value(), 3);
  EXPECT_EQ(db->ResolveRun("latest").value(), 3);
  EXPECT_EQ(db->ResolveRun("1").value(), 1);
  EXPECT_EQ(db->ResolveRun("2").value(), 2);
  EXPECT_EQ(db->ResolveRun("-1").value(), 3);
  EXPECT_EQ(db->ResolveRun("-2").value(), 2);
  EXPECT_EQ(db->ResolveRun("-3").value(), 1);

  auto missing = db->ResolveRun("7");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), path + ": no run 7 (the latest run is 3)");
  auto too_far = db->ResolveRun("-4");
  EXPECT_EQ(too_far.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(too_far.status().message(),
            path + ": no run -4: -N counts back from the latest run, and there are only 3 runs");
  EXPECT_EQ(db->ResolveRun("-9223372036854775808").status().code(), StatusCode::kNotFound);

  for (const char* bad : {"0", "-0", "+1", " 1", "1 ", "1.5", "abc", "lates", "1e3", "99999999999999999999"}) {
    auto r = db->ResolveRun(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(r.status().message(), path + ": bad run '" + bad +
                                        "': expected a run id (1, 2, ...), 'latest', or -N for the N-th latest run");
  }
}

TEST(DatabaseTest, LoadRunOfAMissingRun) {
  TempDir dir;
  auto db = OpenOrDie(dir.File("g.db"));
  auto run = db->LoadRun(1);
  EXPECT_EQ(run.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(run.status().message(), dir.File("g.db") + ": no run 1");
}

TEST(DatabaseTest, ReadOnlyRefusesWrites) {
  TempDir dir;
  OpenOrDie(dir.File("g.db"));
  auto db = OpenOrDie(dir.File("g.db"), Database::Mode::kReadOnly);
  auto id = db->CreateRun(SampleInfo());
  EXPECT_EQ(id.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(id.status().message(), dir.File("g.db") + ": opened read-only");
  EXPECT_EQ(db->WriteDelta(1, model::RunDelta{}).code(), StatusCode::kFailedPrecondition);
}

// A recorder that dies mid-run (here: _exit without closing anything, leaving a hot WAL)
// leaves a run that reads back as incomplete.
TEST(DatabaseTest, RunOfAKilledWriterStaysReadable) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  model::RunInfo info = SampleInfo();
  info.start_ns = 50;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    if (!db.ok()) _exit(2);
    auto id = (*db)->CreateRun(info);
    if (!id.ok()) _exit(3);
    model::RunBuilder b(info);
    auto root = b.BeginPhase({.name = "run", .type = "run", .start_ns = 100});
    b.BeginPhase({.parent = root, .name = "p", .type = "process", .start_ns = 110, .pid = 7});
    auto s = b.AddSeries({.resource = 1, .name = "cpu.user", .kind = SeriesKind::kCounter});
    for (int i = 0; i < 1000; ++i) b.AddSample(s, 200 + i, i);
    if (!(*db)->WriteDelta(*id, b.TakeDelta()).ok()) _exit(4);
    for (int i = 1000; i < 2000; ++i) b.AddSample(s, 200 + i, i);
    if (!(*db)->WriteDelta(*id, b.TakeDelta()).ok()) _exit(5);
    b.AddSample(s, 5000, 1);  // never written
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(std::filesystem::exists(path + "-wal"));

  auto db = OpenOrDie(path, Database::Mode::kReadOnly);
  auto runs = db->ListRuns();
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 1u);
  auto run = db->LoadRun(db->ResolveRun("latest").value());
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_FALSE(run->info.complete);
  EXPECT_EQ(run->info.end_ns, 0);
  ASSERT_EQ(run->phases.size(), 2u);
  EXPECT_EQ(run->phases[1].end_ns, 0);
  ASSERT_EQ(run->series.size(), 1u);
  ASSERT_EQ(run->series[0].samples.size(), 2000u);
  EXPECT_EQ(run->series[0].samples.back(), (model::Sample{2199, 1999}));
  EXPECT_EQ(run->EffectiveEnd(), 2199);
  db.reset();

  // And the next recorder can go on using the file.
  auto rw = OpenOrDie(path);
  EXPECT_EQ(rw->CreateRun(SampleInfo()).value(), 2);
}

TEST(DatabaseTest, LoadsManySamplesInOrder) {
  TempDir dir;
  auto db = OpenOrDie(dir.File("g.db"));
  model::RunId id = db->CreateRun(SampleInfo()).value();
  model::RunBuilder b(SampleInfo());
  constexpr int kSeries = 20, kSamples = 5000;
  for (int s = 0; s < kSeries; ++s) b.AddSeries({.resource = 1, .name = "s" + std::to_string(s)});
  for (int i = 0; i < kSamples; ++i) {
    for (int s = 1; s <= kSeries; ++s) b.AddSample(s, i * 10, i * s);
    if (i % 1000 == 999) {
      ASSERT_TRUE(db->WriteDelta(id, b.TakeDelta()).ok());
    }
  }
  model::Run run = db->LoadRun(id).value();
  ASSERT_EQ(run.series.size(), static_cast<size_t>(kSeries));
  for (int s = 1; s <= kSeries; ++s) {
    const auto& samples = run.series[s - 1].samples;
    ASSERT_EQ(samples.size(), static_cast<size_t>(kSamples));
    for (int i = 0; i < kSamples; i += 997) EXPECT_EQ(samples[i], (model::Sample{i * 10, double(i * s)}));
  }
}


// The bulk inserts write phases, edges and samples several rows per statement (store/sqlite:
// kPhaseRows = 32, kEdgeRows = kSampleRows = 64) and the rest one by one. Whatever the split,
// the stored run is what writing the rows one at a time, in delta order, gives: a phase
// listed twice ends as its later row (inside one batch, across batches and into the one by
// one rest), a later sample of the same series and time replaces the earlier, edges keep
// their order, and tags that need escaping round-trip. The expectations are computed here
// from the delta, row by row.
TEST(DatabaseTest, BulkRowsAreStoredAsOneByOne) {
  TempDir dir;
  auto db = OpenOrDie(dir.File("g.db"));
  model::RunId id = db->CreateRun(SampleInfo()).value();
  model::RunDelta d;
  for (int i = 0; i < 2 * 32 + 5; ++i) {
    model::Phase p{.id = i + 1, .parent = i == 0 ? 0 : 1, .name = "p" + std::to_string(i + 1), .type = "run/op",
                   .start_ns = 1000 + i, .end_ns = 2000 + i, .host = "h", .pid = i % 3};
    if (i % 7 == 0) p.tags = {{"cat", "kernel"}, {"k\"ey", "v\\a\n\x01"}};
    d.phases.push_back(p);
  }
  d.phases[20] = d.phases[9];  // id 10 twice in the first batch
  d.phases[20].name = "ten again";
  d.phases[66] = d.phases[39];  // id 40 in the second batch and again in the rest
  d.phases[66].name = "forty again";
  d.phases[66].tags = {{"x", "y"}};
  for (int i = 0; i < 64 + 3; ++i) d.edges.push_back({.from = 1, .to = 2 + i % 60, .kind = "e" + std::to_string(i)});
  d.resources.push_back({.id = 1, .kind = model::ResourceKind::kHost, .name = "h", .host = "h"});
  d.series.push_back({.id = 1, .resource = 1, .name = "s", .unit = "x"});
  d.series.push_back({.id = 2, .resource = 1, .name = "s2", .unit = "x"});
  // Time-major, as the recorder writes them (each instant's series, then the next instant):
  // the store writes them in key order, and must still keep the later of two equal keys.
  for (int i = 0; i < 2 * 64 + 7; ++i) {
    d.samples.push_back({.series = 2, .sample = {i * 10, double(-i)}});
    d.samples.push_back({.series = 1, .sample = {i * 10, double(i)}});
  }
  d.samples[201].sample.t = 50;  // series 1, t = 50 again (first at index 11), later in the delta
  d.samples[201].sample.v = -1;
  d.samples.push_back({.series = 2, .sample = {30, 0.5}});  // series 2, t = 30 again, last
  ASSERT_TRUE(db->WriteDelta(id, d).ok());

  std::map<model::PhaseId, model::Phase> want_phases;
  for (const model::Phase& p : d.phases) want_phases[p.id] = p;
  std::map<model::SeriesId, std::map<TimeNs, double>> want;
  for (const model::SampleRecord& r : d.samples) want[r.series][r.sample.t] = r.sample.v;
  ASSERT_EQ(want[1].at(50), -1);
  ASSERT_EQ(want[2].at(30), 0.5);

  model::Run run = db->LoadRun(id).value();
  ASSERT_EQ(run.phases.size(), want_phases.size());
  for (const model::Phase& got : run.phases) {
    const model::Phase& want = want_phases.at(got.id);
    EXPECT_EQ(got.name, want.name) << got.id;
    EXPECT_EQ(got.parent, want.parent) << got.id;
    EXPECT_EQ(got.type, want.type) << got.id;
    EXPECT_EQ(got.tags, want.tags) << got.id;
    EXPECT_EQ(got.start_ns, want.start_ns) << got.id;
    EXPECT_EQ(got.end_ns, want.end_ns) << got.id;
    EXPECT_EQ(got.pid, want.pid) << got.id;
  }
  EXPECT_EQ(want_phases.at(10).name, "ten again");
  EXPECT_EQ(want_phases.at(40).name, "forty again");
  ASSERT_EQ(run.edges.size(), d.edges.size());
  for (size_t i = 0; i < d.edges.size(); ++i) {
    EXPECT_EQ(run.edges[i].kind, d.edges[i].kind);
    EXPECT_EQ(run.edges[i].to, d.edges[i].to);
  }
  ASSERT_EQ(run.series.size(), 2u);
  for (const model::Series& series : run.series) {
    const std::map<TimeNs, double>& want_samples = want[series.info.id];
    ASSERT_EQ(series.samples.size(), want_samples.size()) << series.info.id;
    size_t k = 0;
    for (const auto& [t, v] : want_samples) {
      EXPECT_EQ(series.samples[k].t, t) << series.info.id;
      EXPECT_EQ(series.samples[k].v, v) << series.info.id << " " << t;
      ++k;
    }
  }
  // The tags column is the JSON text a reader of the file expects.
  RawDb raw(dir.File("g.db"));
  EXPECT_EQ(raw.Text("SELECT tags FROM phases WHERE id = 8"), R"({"cat":"kernel","k\"ey":"v\\a\n\u0001"})");
  EXPECT_EQ(raw.Text("SELECT tags FROM phases WHERE id = 40"), R"({"x":"y"})");
  EXPECT_EQ(raw.Text("SELECT tags FROM phases WHERE id = 2"), "{}");
}

}  // namespace
}  // namespace grademl::store
