// The store's behaviour on both backends: the same scenarios against an SQLite file and a
// database on a real PostgreSQL server (tests/pg_test_server.h), compared with what the
// deltas written say the run must be (ExpectedRun), not with the other backend's output.
#include <gtest/gtest.h>
#include "store/postgres/libpq.h"

#include <cmath>
#include <limits>
#include <thread>

#include "model/clock_conversion.h"
#include "pg_test_server.h"
#include "store/database.h"
#include "store/query_session.h"
#include "store_test_support.h"

namespace grademl::store {
namespace {

using model::ResourceKind;
using model::SeriesKind;
using testing::ExpectedRun;
using testing::ExpectSameRun;
using testing::TempDir;

constexpr TimeNs kBackendT0 = 1'700'000'000'000'000'000;
constexpr TimeNs kDay = 86'400'000'000'000;

model::RunInfo BackendInfo(const std::string& uuid = "9b1f0c7e-0000-4000-8000-00000000000a") {
  return model::RunInfo{.uuid = uuid,
                        .command = {"python", "train.py", "--name=\"x y\"", "ünïcødé", ""},
                        .cwd = "/home/me/project",
                        .host = "node1",
                        .start_ns = kBackendT0,
                        .grademl_version = "0.1.0",
                        .interval_ns = 100'000'000};
}

class StoreBackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      GRADEML_PG_DATABASE_OR_SKIP(url);
      location_ = url;
    } else {
      location_ = dir_.File("g.db");
    }
  }
  std::unique_ptr<Database> Open(Database::Mode mode = Database::Mode::kReadWrite) {
    auto db = Database::Open(location_, mode);
    EXPECT_TRUE(db.ok()) << db.status().message();
    return db.ok() ? std::move(db).value() : nullptr;
  }

  TempDir dir_;
  std::string location_;
};

// A run written in three deltas as a recorder does, touching every table.
model::RunId WriteBackendRun(Database& db, ExpectedRun& expected, model::RunBuilder& b) {
  model::RunId id = db.CreateRun(b.run_info()).value();
  auto write = [&] {
    model::RunDelta d = b.TakeDelta();
    expected.Apply(d);
    Status st = db.WriteDelta(id, d);
    EXPECT_TRUE(st.ok()) << st.message();
  };
  const TimeNs t0 = kBackendT0;
  auto root = b.BeginPhase({.name = "run", .type = "run", .start_ns = t0, .host = "node1",
                            .tags = {{"cmd", "python train.py"}, {"quote\"key", "va\\lue\n"}}});
  auto proc = b.BeginPhase({.parent = root, .name = "python train.py", .type = "process", .start_ns = t0 + 10,
                            .host = "node1", .pid = 4242});
  auto host = b.AddResource({.kind = ResourceKind::kHost, .name = "node1", .host = "node1"});
  auto proc_res = b.AddResource({.parent = host, .kind = ResourceKind::kProcess, .name = "4242", .host = "node1",
                                 .pid = 4242, .phase = proc, .start_ns = t0 + 5});
  auto user = b.AddSeries({.resource = proc_res, .name = "cpu.user", .unit = "s", .kind = SeriesKind::kCounter});
  auto used = b.AddSeries({.resource = host, .name = "memory.used", .unit = "bytes", .capacity = 64e9});
  for (int i = 0; i < 40; ++i) {
    b.AddSample(user, t0 + 100 + i * 100'000'000LL, i * 0.1);
    b.AddSample(used, t0 + 100 + i * 100'000'000LL, i < 20 ? 1e9 : 2.5e9);
  }
  b.AddHost({.name = "node1", .machine_id = "abc", .clock_offset_ns = 0, .clock_uncertainty_ns = 0});
  auto src = b.AddSource({.path = "/tmp/trace.json", .format = "chrome_json", .tags = {{"rank", "0"}}});
  b.AddTrack({.kind = model::TrackKind::kDevice, .source = src, .host = "node1", .pid = 4242, .tid = 0, .device = 0,
              .stream = 7, .name = "stream 7"});
  b.AddIngestStat(src, "no end", 2);
  b.AddLogLine({.phase = proc, .t = t0 + 50, .stream = 2, .text = "warning: ïñ"});
  write();
  auto child = b.BeginPhase({.parent = proc, .name = "child", .type = "process", .start_ns = t0 + 2'000'000'000,
                             .host = "node1", .pid = 4243});
  b.SetPhaseTag(proc, "epoch", "1");
  b.AddEdge({.from = proc, .to = child, .kind = "file:/tmp/data.bin"});
  b.AddEdge({.from = proc, .to = child, .kind = "data"});
  auto odd = b.AddSeries({.resource = proc_res, .name = "odd", .unit = "x"});
  b.AddSample(odd, t0 + 5'000'000'000, std::numeric_limits<double>::quiet_NaN());
  b.AddSample(odd, t0 + 5'100'000'000, std::numeric_limits<double>::infinity());
  b.AddSample(odd, t0 + 5'200'000'000, -0.0);
  b.AddSample(odd, t0 + 2 * kDay, 7.0);  // another day: another partition on PostgreSQL
  auto early = b.AddSeries({.resource = proc_res, .name = "early", .unit = "x"});
  b.AddSample(early, -5, 1.0);  // before the epoch (a hostile trace's times)
  b.AddIngestStat(src, "no end", 3);
  write();
  b.EndPhase(child, t0 + 6'000'000'000);
  b.EndPhase(proc, t0 + 7'000'000'000);
  b.SetPhaseTag(proc, "epoch", "2");
  b.EndPhase(root, t0 + 7'500'000'000);
  b.UpdateRunInfo([&](model::RunInfo& info) {
    info.end_ns = t0 + 7'500'000'000;
    info.exit_code = 3;
    info.complete = true;
    info.error = "killed by \"SIGKILL\"";
    info.monitor_cpu_seconds = 0.125;
  });
  write();
  return id;
}

TEST_P(StoreBackendTest, RoundTripsEveryTable) {
  auto db = Open();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(db->backend(), GetParam());
  ExpectedRun expected;
  model::RunBuilder b(BackendInfo());
  model::RunId id = WriteBackendRun(*db, expected, b);
  auto ro = Open(Database::Mode::kReadOnly);
  ASSERT_NE(ro, nullptr);
  auto run = ro->LoadRun(id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  model::Run want = expected.Get(id);
  ExpectSameRun(*run, want);
  // The samples of the odd series come back sorted by time, across partitions.
  const model::Series* odd = run->FindSeries(run->resources[1].id, "odd");
  ASSERT_NE(odd, nullptr);
  ASSERT_EQ(odd->samples.size(), 4u);
  EXPECT_EQ(odd->samples.back().t, kBackendT0 + 2 * kDay);
  EXPECT_TRUE(std::isinf(odd->samples[1].v));
  ASSERT_NE(run->FindSeries(run->resources[1].id, "early"), nullptr);
  EXPECT_EQ(run->FindSeries(run->resources[1].id, "early")->samples.at(0).t, -5);
  // What ExpectSameRun does not cover.
  ASSERT_EQ(run->logs.size(), 1u);
  EXPECT_EQ(run->logs[0].text, "warning: ïñ");
  EXPECT_EQ(run->logs[0].stream, 2);
  ASSERT_EQ(run->hosts.size(), 1u);
  EXPECT_EQ(run->hosts[0].machine_id, "abc");
  ASSERT_EQ(run->sources.size(), 1u);
  EXPECT_EQ(run->sources[0].tags, (model::Tags{{"rank", "0"}}));
  ASSERT_EQ(run->tracks.size(), 1u);
  EXPECT_EQ(run->tracks[0].stream, 7);
  EXPECT_EQ(run->tracks[0].kind, model::TrackKind::kDevice);
  ASSERT_EQ(run->ingest_stats.size(), 1u);
  EXPECT_EQ(run->ingest_stats[0].count, 5);  // 2 + 3: counts add up
  EXPECT_EQ(run->resources[1].start_ns, kBackendT0 + 5);
}

TEST_P(StoreBackendTest, RunsListResolveFindAndReopen) {
  auto db = Open();
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(db->ResolveRun("").status().code(), StatusCode::kNotFound);
  model::RunId a = db->CreateRun(BackendInfo("uuid-a")).value();
  model::RunId b = db->CreateRun(BackendInfo("uuid-b")).value();
  EXPECT_LT(a, b);
  EXPECT_EQ(db->ResolveRun("latest").value(), b);
  EXPECT_EQ(db->ResolveRun("-2").value(), a);
  EXPECT_EQ(db->ResolveRun(std::to_string(a)).value(), a);
  EXPECT_EQ(db->ResolveRun("-3").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(db->ResolveRun("x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(db->FindRunByUuid("uuid-b").value(), std::optional<model::RunId>(b));
  EXPECT_EQ(db->FindRunByUuid("nope").value(), std::nullopt);
  auto runs = db->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[1].uuid, "uuid-b");
  EXPECT_EQ((*runs)[1].command, BackendInfo().command);
  auto w1 = db->ReopenRun(a);
  auto w2 = db->ReopenRun(a);
  ASSERT_TRUE(w1.ok() && w2.ok());
  EXPECT_EQ(w1->writer, 1);
  EXPECT_EQ(w2->writer, 2);
  EXPECT_EQ(w1->info.uuid, "uuid-a");
  EXPECT_EQ(db->ReopenRun(b + 100).status().code(), StatusCode::kNotFound);
}

TEST_P(StoreBackendTest, WriteDeltaOnceAppliesEachSequenceNumberOnce) {
  auto db = Open();
  ASSERT_NE(db, nullptr);
  model::RunBuilder b(BackendInfo());
  model::RunId id = db->CreateRun(b.run_info()).value();
  auto host = b.AddResource({.kind = ResourceKind::kHost, .name = "h2", .host = "h2"});
  auto s = b.AddSeries({.resource = host, .name = "cpu.user", .unit = "s", .kind = SeriesKind::kCounter});
  for (int i = 0; i < 10; ++i) b.AddSample(s, kBackendT0 + i, i);
  b.AddEdge({.from = 1, .to = 2, .kind = "data"});
  model::RunDelta d = b.TakeDelta(true);
  EXPECT_EQ(db->WriteDeltaOnce(id, "h2/1", 1, d).value(), true);
  EXPECT_EQ(db->WriteDeltaOnce(id, "h2/1", 1, d).value(), false);  // a retry: nothing more
  EXPECT_EQ(db->WriteDeltaOnce(id, "h3/1", 1, model::RunDelta{.edges = {{1, 3, "data"}}}).value(), true);
  auto run = db->LoadRun(id);
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->series.size(), 1u);
  EXPECT_EQ(run->series[0].samples.size(), 10u);
  EXPECT_EQ(run->edges.size(), 2u);
  // A failed delta (no such run) leaves no mark: the same number applies later.
  EXPECT_FALSE(db->WriteDeltaOnce(id + 100, "h2/1", 2, d).ok());
}

TEST_P(StoreBackendTest, ReadOnlyRefusesWritesAndMissingStores) {
  {
    auto ro = Database::Open(location_, Database::Mode::kReadOnly);
    ASSERT_FALSE(ro.ok());
    EXPECT_EQ(ro.status().code(), StatusCode::kNotFound) << ro.status().message();
  }
  auto db = Open();
  ASSERT_NE(db, nullptr);
  model::RunId id = db->CreateRun(BackendInfo()).value();
  auto ro = Open(Database::Mode::kReadOnly);
  ASSERT_NE(ro, nullptr);
  EXPECT_EQ(ro->CreateRun(BackendInfo()).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ro->WriteDelta(id, model::RunDelta{.edges = {{1, 2, "x"}}}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ro->LoadRun(id).status().code(), StatusCode::kOk);
  EXPECT_EQ(ro->LoadRun(id + 1).status().code(), StatusCode::kNotFound);
}

// A host whose clock runs 250 ms ahead of the store's: its timestamps come back on the
// store's clock, the others' unchanged.
TEST_P(StoreBackendTest, HostClocksAreConvertedAtLoad) {
  auto db = Open();
  ASSERT_NE(db, nullptr);
  model::RunBuilder b(BackendInfo());
  model::RunId id = db->CreateRun(b.run_info()).value();
  const DurationNs ahead = 250'000'000;
  auto root = b.AddPhase({.name = "run", .type = "run", .start_ns = kBackendT0, .host = "node1"}, kBackendT0 + 10 * kNsPerSec);
  b.AddPhase({.parent = root, .name = "rank1", .type = "process", .start_ns = kBackendT0 + kNsPerSec + ahead,
              .host = "node2", .pid = 7},
             kBackendT0 + 3 * kNsPerSec + ahead);
  auto res = b.AddResource({.kind = ResourceKind::kHost, .name = "node2", .host = "node2"});
  auto s = b.AddSeries({.resource = res, .name = "cpu.user", .unit = "s", .kind = SeriesKind::kCounter});
  b.AddSample(s, kBackendT0 + 2 * kNsPerSec + ahead, 1.0);
  b.AddHost({.name = "node2"});
  // Two measurements, 1 µs apart in offset: the conversion interpolates between them.
  b.AddClockEstimate({.host = "node2", .t = kBackendT0 + ahead, .offset_ns = -ahead, .uncertainty_ns = 40'000});
  b.AddClockEstimate({.host = "node2", .t = kBackendT0 + 4 * kNsPerSec + ahead, .offset_ns = -ahead - 1000,
                      .uncertainty_ns = 60'000});
  ASSERT_TRUE(db->WriteDelta(id, b.TakeDelta(true)).ok());
  auto run = db->LoadRun(id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->phases.size(), 2u);
  EXPECT_EQ(run->phases[0].start_ns, kBackendT0);
  EXPECT_EQ(run->phases[1].start_ns, kBackendT0 + kNsPerSec - 250);   // offset -ahead - 1000 * 1/4
  EXPECT_EQ(run->phases[1].end_ns, kBackendT0 + 3 * kNsPerSec - 750);
  EXPECT_EQ(run->series[0].samples[0].t, kBackendT0 + 2 * kNsPerSec - 500);
  ASSERT_EQ(run->hosts.size(), 1u);
  EXPECT_EQ(run->hosts[0].clock_offset_ns, 0);  // applied
  EXPECT_EQ(run->hosts[0].clock_uncertainty_ns, 60'000);
  ASSERT_EQ(run->clock_estimates.size(), 2u);
}

TEST_P(StoreBackendTest, QuerySessionSeesTheRun) {
  auto db = Open();
  ASSERT_NE(db, nullptr);
  ExpectedRun expected;
  model::RunBuilder b(BackendInfo());
  model::RunId id = WriteBackendRun(*db, expected, b);
  db.reset();
  auto session = QuerySession::Open(location_, std::to_string(id));
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_EQ((*session)->run_id(), id);
  auto r = (*session)->Query("SELECT count(*), sum(open) FROM phases");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(std::get<int64_t>(r->rows[0][0]), 3);
  EXPECT_EQ(std::get<int64_t>(r->rows[0][1]), 0);
  auto samples = (*session)->Query("SELECT count(*) FROM samples WHERE metric = 'odd'");
  ASSERT_TRUE(samples.ok());
  EXPECT_EQ(std::get<int64_t>(samples->rows[0][0]), 4);
  EXPECT_EQ((*session)->Query("DELETE FROM phases").status().code(), StatusCode::kInvalidArgument);
  auto loaded = (*session)->database().LoadRun(id);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->phases.size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreBackendTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

// PostgreSQL text holds no NUL and, in a UTF8 database, only valid UTF-8: such bytes come
// back as U+FFFD instead of failing the write (and losing the delta).
TEST(PgStoreTest, TextThePostgresServerRefusesIsReplacedNotLost) {
  GRADEML_PG_DATABASE_OR_SKIP(url);
  auto db = Database::Open(url, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  model::RunInfo info = BackendInfo();
  info.command = {"bad\xff utf8", std::string("nul\0byte", 8)};
  model::RunBuilder b(info);
  model::RunId id = (*db)->CreateRun(info).value();
  b.AddPhase({.name = std::string("ph\0ase\xc3", 7), .type = "run", .start_ns = 1, .host = "h"}, 2);
  ASSERT_TRUE((*db)->WriteDelta(id, b.TakeDelta(true)).ok());
  auto run = (*db)->LoadRun(id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->info.command, (std::vector<std::string>{"bad\xef\xbf\xbd utf8", std::string("nul\0byte", 8)}));
  ASSERT_EQ(run->phases.size(), 1u);
  EXPECT_EQ(run->phases[0].name, "ph\xef\xbf\xbd" "ase\xef\xbf\xbd");
}

// A server that restarts or a connection cut mid-run: the next call reconnects.
TEST(PgStoreTest, ALostConnectionIsReestablished) {
  GRADEML_PG_DATABASE_OR_SKIP(url);
  auto db = Database::Open(url, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  model::RunId id = (*db)->CreateRun(BackendInfo()).value();
  // Another session ends every other connection to this database.
  PGconn* admin = PQconnectdb(url.c_str());
  ASSERT_EQ(PQstatus(admin), CONNECTION_OK);
  PGresult* r = PQexec(admin,
                       "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND "
                       "pid <> pg_backend_pid()");
  EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK);
  PQclear(r);
  PQfinish(admin);
  model::RunDelta d{.edges = {{1, 2, "data"}}};
  Status first = (*db)->WriteDelta(id, d);
  if (!first.ok()) {
    EXPECT_EQ(first.code(), StatusCode::kUnavailable) << first.message();
    EXPECT_EQ(first.message().find('\n'), std::string::npos);
    ASSERT_TRUE((*db)->WriteDelta(id, d).ok());
  }
  auto run = (*db)->LoadRun(id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->edges.size(), 1u);
}

TEST(PgStoreTest, AForeignDatabaseIsRefusedAndPasswordsAreNotShown) {
  GRADEML_PG_DATABASE_OR_SKIP(url);
  PGconn* admin = PQconnectdb(url.c_str());
  ASSERT_EQ(PQstatus(admin), CONNECTION_OK);
  PQclear(PQexec(admin, "CREATE TABLE runs (x int)"));
  PQfinish(admin);
  auto db = Database::Open(url, Database::Mode::kReadWrite);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kCorrupt) << db.status().message();
  auto bad = Database::Open("postgresql://me:s3cret@127.0.0.1:1/x?connect_timeout=2", Database::Mode::kReadOnly);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("s3cret"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("postgresql://me@127.0.0.1:1/x"), std::string::npos) << bad.status().message();
  EXPECT_EQ(bad.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace grademl::store
