// Several grademl processes recording into one store at once: every one of them opens the
// file (even a fresh one, creating the schema at the same moment), creates its run and ends
// with everything it recorded stored, however long the others hold the write lock.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "store/background_writer.h"
#include "store_test_support.h"

namespace grademl::store {
namespace {

using testing::RawDb;
using testing::SampleInfo;
using testing::TempDir;
using namespace std::chrono_literals;

// Forks `n` children that wait on a pipe until all exist, then run `body(i)` at the same
// moment; returns their exit statuses. A child's exit code is what `body` returns.
template <typename Body>
std::vector<int> RunTogether(int n, Body body) {
  int gate[2];
  GRADEML_CHECK(pipe(gate) == 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    GRADEML_CHECK(pid >= 0);
    if (pid == 0) {
      close(gate[1]);
      char c;
      while (read(gate[0], &c, 1) < 0) {
      }
      _exit(body(i));
    }
    pids.push_back(pid);
  }
  close(gate[0]);
  close(gate[1]);  // every child's read returns 0 now: go
  std::vector<int> statuses;
  for (pid_t pid : pids) {
    int status = 0;
    GRADEML_CHECK(waitpid(pid, &status, 0) == pid);
    statuses.push_back(status);
  }
  return statuses;
}

// One heavy writer: a run of `phases` phases and `samples` samples (of 10 series), recorded
// through a BackgroundWriter flushing every `flush_interval`, into the store at `path`. Exit
// codes: 0 all stored, 10 cannot open, 11 cannot create the run, 12 the writer lost data.
int HeavyWriter(const std::string& path, int index, int phases, int samples,
                DurationNs flush_interval = 20 * kNsPerMs) {
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  if (!db.ok()) {
    std::fprintf(stderr, "writer %d: %s\n", index, db.status().message().c_str());
    return 10;
  }
  model::RunInfo info = SampleInfo();
  info.uuid = "writer-" + std::to_string(index);
  auto run = (*db)->CreateRun(info);
  if (!run.ok()) {
    std::fprintf(stderr, "writer %d: %s\n", index, run.status().message().c_str());
    return 11;
  }
  model::RunBuilder builder(info);
  BackgroundWriter writer(db->get(), &builder, *run, flush_interval);
  std::vector<model::SeriesId> series;
  for (int s = 0; s < 10; ++s) series.push_back(builder.AddSeries({.resource = 1, .name = "s" + std::to_string(s)}));
  model::PhaseId root = builder.BeginPhase({.name = "run", .type = "run", .start_ns = 1});
  for (int i = 1; i < phases; ++i) {
    model::PhaseId p = builder.BeginPhase({.parent = root, .name = "p" + std::to_string(i), .type = "run/x",
                                           .start_ns = i, .host = "node1"});
    builder.EndPhase(p, i + 1);
    if (i < samples) builder.AddSample(series[static_cast<size_t>(i % 10)], i, i);  // never flat: all kept
  }
  for (int i = phases; i < samples; ++i) builder.AddSample(series[static_cast<size_t>(i % 10)], i, i);
  builder.EndPhase(root, phases + 1);
  builder.UpdateRunInfo([](model::RunInfo& i) { i.complete = true; });
  Status st = writer.Stop();
  if (!st.ok()) {
    std::fprintf(stderr, "writer %d: %s\n", index, st.message().c_str());
    return 12;
  }
  return 0;
}

// Checks that the store at `path` holds `writers` complete runs of exactly `phases` phases
// (all ended) and `samples` - 1 samples each (HeavyWriter's first sample index is 1).
void ExpectCompleteRuns(const std::string& path, int writers, int phases, int samples) {
  RawDb raw(path, SQLITE_OPEN_READONLY);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM runs"), writers);
  EXPECT_EQ(raw.Int("SELECT count(*) FROM runs WHERE complete = 1"), writers);
  for (int run = 1; run <= writers; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    EXPECT_EQ(raw.Int("SELECT count(*) FROM phases WHERE run_id = " + std::to_string(run)), phases);
    EXPECT_EQ(raw.Int("SELECT count(*) FROM phases WHERE end_ns IS NULL AND run_id = " + std::to_string(run)), 0);
    EXPECT_EQ(raw.Int("SELECT count(*) FROM samples WHERE run_id = " + std::to_string(run)), samples - 1);
  }
  EXPECT_EQ(raw.Text("PRAGMA quick_check"), "ok");
}

void ExpectAllExitedZero(const std::vector<int>& statuses) {
  for (size_t i = 0; i < statuses.size(); ++i) {
    ASSERT_TRUE(WIFEXITED(statuses[i])) << "writer " << i;
    EXPECT_EQ(WEXITSTATUS(statuses[i]), 0) << "writer " << i << " (10: open, 11: create run, 12: data lost)";
  }
}

// Three writers flushing often (many small transactions) into one fresh store.
TEST(ConcurrencyTest, ThreeHeavyWritersIntoOneFreshStoreAllComplete) {
  TempDir dir;
  const std::string path = dir.File("sub/g.db");  // missing, with its directory: created by the race
  constexpr int kWriters = 3, kPhases = 300'000, kSamples = 600'000;
  ExpectAllExitedZero(RunTogether(kWriters, [&](int i) { return HeavyWriter(path, i, kPhases, kSamples); }));
  ExpectCompleteRuns(path, kWriters, kPhases, kSamples);
}

// The finding: three heavy writers failed with "database is locked", one of them
// keeping 2 of its 3 million phases. Here each writer's run reaches the store in one large
// transaction at the end (several seconds each), so the last one waits for the two others:
// longer than the old 5 s busy timeout, after which its whole run was lost.
TEST(ConcurrencyTest, ThreeWritersWithLargeTransactionsAllComplete) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  constexpr int kWriters = 3, kPhases = 1'000'000, kSamples = 1'000'000;
  ExpectAllExitedZero(RunTogether(
      kWriters, [&](int i) { return HeavyWriter(path, i, kPhases, kSamples, /*flush_interval=*/3600 * kNsPerSec); }));
  ExpectCompleteRuns(path, kWriters, kPhases, kSamples);
}

// A peer holding the write lock longer than a short busy timeout (a large commit, a long
// checkpoint) when the run ends: the last write waits or is retried, and nothing is lost.
TEST(ConcurrencyTest, LastWriteWaitsForAPeerHoldingTheLock) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  auto db = Database::Open(path, Database::Mode::kReadWrite).value();
  model::RunId run = db->CreateRun(SampleInfo()).value();
  model::RunBuilder builder(SampleInfo());
  BackgroundWriter writer(db.get(), &builder, run, 3600 * kNsPerSec);
  model::PhaseId root = builder.BeginPhase({.name = "run", .type = "run", .start_ns = 1});
  builder.EndPhase(root, 2);
  RawDb peer(path);
  peer.Exec("BEGIN IMMEDIATE");
  std::thread release([&] {
    std::this_thread::sleep_for(7s);  // past the 5 s busy timeout grademl had
    peer.Exec("COMMIT");
  });
  Status st = writer.Stop();
  release.join();
  EXPECT_TRUE(st.ok()) << st.message();
  model::Run loaded = db->LoadRun(run).value();
  ASSERT_EQ(loaded.phases.size(), 1u);
  EXPECT_EQ(loaded.phases[0].end_ns, 2);
}

// A call waiting for a peer's lock (the default wait: a minute) ends soon after another
// thread shortens the wait (Database::SetLockWait): what lets a recorder that is told to stop
// give up its last write at once. The peer holds the lock until the end of the test.
TEST(ConcurrencyTest, AShorterLockWaitEndsAWaitUnderWay) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  auto db = Database::Open(path, Database::Mode::kReadWrite).value();
  model::RunId run = db->CreateRun(SampleInfo()).value();
  RawDb peer(path);
  peer.Exec("BEGIN IMMEDIATE");
  std::atomic<bool> returned{false};
  Status st;
  std::thread waiter([&] {
    model::RunDelta delta;
    delta.info = SampleInfo();
    st = db->WriteDelta(run, delta);
    returned = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(returned) << "the write did not wait for the lock: " << st.message();
  db->SetLockWait(50 * kNsPerMs);
  for (int i = 0; i < 3000 && !returned; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(returned) << "the write still waits 30 s after its wait was shortened";
  peer.Exec("COMMIT");  // lets a waiter that did not give up finish
  waiter.join();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.message();
  EXPECT_NE(st.message().find("database is locked"), std::string::npos) << st.message();
}

// The last write of a run to a store another process keeps locked: said once at its first
// failure, retried, and given up when the owner says so, with what was not stored.
TEST(ConcurrencyTest, TheLastWriteToALockedStoreIsSaidAndCanBeGivenUp) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  auto db = Database::Open(path, Database::Mode::kReadWrite).value();
  model::RunId run = db->CreateRun(SampleInfo()).value();
  model::RunBuilder builder(SampleInfo());
  BackgroundWriter writer(db.get(), &builder, run, 3600 * kNsPerSec);
  model::PhaseId root = builder.BeginPhase({.name = "run", .type = "run", .start_ns = 1});
  builder.EndPhase(root, 2);
  RawDb peer(path);
  peer.Exec("BEGIN IMMEDIATE");
  db->SetLockWait(100 * kNsPerMs);
  std::vector<std::string> said;
  std::atomic<bool> give_up{false};
  std::thread owner([&] {
    std::this_thread::sleep_for(700ms);  // several attempts
    give_up = true;
  });
  Status st = writer.Stop({.on_wait = [&](const Status& why) { said.push_back(why.message()); },
                           .give_up = [&] { return give_up.load(); }});
  owner.join();
  peer.Exec("COMMIT");
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0], path + ": database is locked by another process (database is locked)");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "stopped waiting for the store: " + path +
                              ": database is locked by another process (database is locked); not stored: 1 phases, "
                              "0 samples, 0 log lines and the run's end");
}

// Many processes opening one fresh store at the same moment: every one of them gets a
// usable store (the schema is created once), none is refused.
TEST(ConcurrencyTest, SimultaneousOpensOfAFreshStoreAllSucceed) {
  for (int round = 0; round < 5; ++round) {
    TempDir dir;
    const std::string path = dir.File("g.db");
    constexpr int kOpeners = 6;
    std::vector<int> statuses = RunTogether(kOpeners, [&](int i) { return HeavyWriter(path, i, 10, 10); });
    for (int i = 0; i < kOpeners; ++i) {
      ASSERT_TRUE(WIFEXITED(statuses[i]));
      EXPECT_EQ(WEXITSTATUS(statuses[i]), 0) << "round " << round << ", opener " << i;
    }
    RawDb raw(path, SQLITE_OPEN_READONLY);
    EXPECT_EQ(raw.Int("SELECT count(*) FROM runs WHERE complete = 1"), kOpeners);
    EXPECT_EQ(raw.Int("SELECT count(*) FROM phases"), kOpeners * 10);
  }
}

}  // namespace
}  // namespace grademl::store
