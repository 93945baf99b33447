// The ingestion foundation in the store: hosts and their clocks, imported sources, tracks,
// ingest stats and process start times round-trip; a version-2 file gains them; writers that
// reopen a run get distinct writer numbers, so their ids never collide with the recorder's.
#include <sqlite3.h>

#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "model/run_builder.h"
#include "store/database.h"
#include "store/sqlite/schema.h"

namespace grademl::store {
namespace {

std::string TracksTestDb(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("grademl_tracks_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir / name);
  return (dir / name).string();
}

std::unique_ptr<Database> OpenRw(const std::string& path) {
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  EXPECT_TRUE(db.ok()) << db.status().message();
  return db.ok() ? std::move(*db) : nullptr;
}

TEST(TracksTest, HostsSourcesTracksAndStatsRoundTrip) {
  std::string path = TracksTestDb("round.db");
  auto db = OpenRw(path);
  ASSERT_TRUE(db);
  model::RunBuilder b(model::RunInfo{.command = {"x"}, .host = "node1"});
  auto id = db->CreateRun(b.run_info());
  ASSERT_TRUE(id.ok());
  b.AddHost({.name = "node1", .machine_id = "abc"});
  b.AddHost({.name = "node2", .machine_id = "def", .clock_offset_ns = -1500, .clock_uncertainty_ns = 200});
  model::SourceId src = b.AddSource({.path = "t.json", .format = "kineto", .tags = {{"rank", "3"}, {"ts_float", "1"}}});
  model::TrackId thread = b.AddTrack({.kind = model::TrackKind::kThread, .source = src, .host = "node1", .pid = 42,
                                      .process_start_ns = 1000, .tid = 43, .name = "main"});
  model::TrackId stream = b.AddTrack({.kind = model::TrackKind::kDevice, .source = src, .host = "node1", .pid = 42,
                                      .device = 0, .stream = 7, .name = "stream 7"});
  model::PhaseId root = b.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 1000});
  model::PhaseId op = b.AddPhase({.parent = root, .name = "aten::mm", .type = "op", .start_ns = 1100, .host = "node1",
                                  .pid = 42, .tags = {{"cat", "cpu_op"}}, .track = thread},
                                 1200);
  model::PhaseId k = b.AddPhase(
      {.parent = op, .name = "sgemm", .type = "kernel", .start_ns = 1150, .host = "node1", .pid = 42, .track = stream},
      1300);
  b.AddResource({.kind = model::ResourceKind::kProcess, .name = "42", .host = "node1", .pid = 42, .start_ns = 990});
  b.AddIngestStat(src, "unknown phase 'Z'");
  b.AddIngestStat(src, "unknown phase 'Z'", 2);
  ASSERT_TRUE(db->WriteDelta(*id, b.TakeDelta(true)).ok());
  b.AddIngestStat(src, "unknown phase 'Z'", 4);  // a later delta adds to the stored count
  b.AddHost({.name = "node2", .machine_id = "def", .clock_offset_ns = -1400, .clock_uncertainty_ns = 100});
  ASSERT_TRUE(db->WriteDelta(*id, b.TakeDelta(true)).ok());

  auto run = db->LoadRun(*id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->hosts.size(), 2u);
  EXPECT_EQ(*run->FindHost("node1"), (model::Host{.name = "node1", .machine_id = "abc"}));
  EXPECT_EQ(run->FindHost("node2")->clock_offset_ns, -1400);  // replaced by name
  EXPECT_EQ(run->FindHost("node2")->clock_uncertainty_ns, 100);
  ASSERT_EQ(run->sources.size(), 1u);
  EXPECT_EQ(run->sources[0].path, "t.json");
  EXPECT_EQ(run->sources[0].tags, (model::Tags{{"rank", "3"}, {"ts_float", "1"}}));
  ASSERT_EQ(run->tracks.size(), 2u);
  const model::Track* t = run->FindTrack(stream);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kind, model::TrackKind::kDevice);
  EXPECT_EQ(t->device, 0);
  EXPECT_EQ(t->stream, 7);
  EXPECT_EQ(t->source, src);
  EXPECT_EQ(run->FindTrack(thread)->tid, 43);
  EXPECT_EQ(run->FindTrack(thread)->process_start_ns, 1000);
  ASSERT_NE(run->FindPhase(k), nullptr);
  EXPECT_EQ(run->FindPhase(k)->track, stream);
  EXPECT_EQ(run->FindPhase(k)->type, "run/op/kernel");
  EXPECT_EQ(run->FindPhase(k)->end_ns, 1300);
  EXPECT_EQ(run->FindPhase(op)->track, thread);
  EXPECT_EQ(run->FindPhase(root)->track, 0);
  ASSERT_EQ(run->ingest_stats.size(), 1u);
  EXPECT_EQ(run->ingest_stats[0].count, 7);
  ASSERT_EQ(run->resources.size(), 1u);
  EXPECT_EQ(run->resources[0].start_ns, 990);
}

TEST(TracksTest, VersionTwoFileIsMigratedAndKeepsItsRuns) {
  std::string path = TracksTestDb("v2.db");
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  ASSERT_TRUE(MigrateSchema(raw, path, SchemaSteps().subspan(0, 2)).ok());
  ASSERT_EQ(sqlite3_exec(raw,
                         "INSERT INTO runs (uuid, command, cwd, host, start_ns, complete, error, grademl_version, "
                         "interval_ns) VALUES ('u', '[\"old\"]', '/', 'h', 5, 1, '', '0', 1);"
                         "INSERT INTO phases (run_id, id, name, type, tags, start_ns, end_ns, host) "
                         "VALUES (1, 1, 'old', 'run', '{}', 5, 9, 'h');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  auto db = OpenRw(path);
  ASSERT_TRUE(db);
  auto run = db->LoadRun(1);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->phases.size(), 1u);
  EXPECT_EQ(run->phases[0].track, 0);
  EXPECT_TRUE(run->tracks.empty());
  auto reopened = db->ReopenRun(1);
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  EXPECT_EQ(reopened->writer, 1);
  EXPECT_EQ(reopened->info.command, std::vector<std::string>{"old"});
}

TEST(TracksTest, ReopenedRunsGetDistinctWritersAndIds) {
  std::string path = TracksTestDb("reopen.db");
  auto db = OpenRw(path);
  ASSERT_TRUE(db);
  model::RunBuilder recorder(model::RunInfo{.command = {"x"}, .complete = true});
  auto id = db->CreateRun(recorder.run_info());
  ASSERT_TRUE(id.ok());
  model::PhaseId root = recorder.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 10});
  recorder.EndPhase(root, 100);
  model::SeriesId s0 = recorder.AddSeries({.resource = 1, .name = "m", .unit = "s"});
  recorder.AddSample(s0, 10, 1);
  ASSERT_TRUE(db->WriteDelta(*id, recorder.TakeDelta(true)).ok());

  // Two importers reopen the run; a second connection stands for another process.
  auto db2 = OpenRw(path);
  ASSERT_TRUE(db2);
  auto a = db->ReopenRun(*id);
  auto b = db2->ReopenRun(*id);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->writer, b->writer);
  EXPECT_GE(std::min(a->writer, b->writer), 1);
  EXPECT_TRUE(a->info.complete);
  std::set<model::PhaseId> ids{root};
  for (auto [conn, w] : {std::pair{db.get(), a->writer}, std::pair{db2.get(), b->writer}}) {
    model::RunBuilder writer(a->info, w);
    auto stored = db->LoadRun(*id);
    ASSERT_TRUE(stored.ok());
    writer.AdoptPhase(*stored->FindPhase(root));
    model::PhaseId p = writer.BeginPhase({.parent = root, .name = "imported", .type = "process", .start_ns = 20});
    writer.EndPhase(p, 30);
    model::PhaseId q = writer.AddPhase({.parent = p, .name = "op", .type = "op", .start_ns = 21}, 22);
    model::SeriesId s = writer.AddSeries({.resource = 1, .name = "counter", .unit = "count"});
    writer.AddSample(s, 21, 5);
    EXPECT_TRUE(ids.insert(p).second);
    EXPECT_TRUE(ids.insert(q).second);
    EXPECT_NE(s, s0);
    model::RunDelta delta = writer.TakeDelta(true);
    EXPECT_FALSE(delta.info.has_value());  // an appending writer leaves the run's info alone
    ASSERT_EQ(delta.phases.size(), 2u);    // the adopted root is not written back
    ASSERT_TRUE(conn->WriteDelta(*id, delta).ok());
  }
  auto run = db->LoadRun(*id);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->phases.size(), 5u);
  EXPECT_EQ(run->series.size(), 3u);
  EXPECT_TRUE(run->info.complete);
  for (const model::Phase& p : run->phases) {
    if (p.name == "op") {
      EXPECT_EQ(p.type, "run/process/op");
    }
  }
}

}  // namespace
}  // namespace grademl::store
