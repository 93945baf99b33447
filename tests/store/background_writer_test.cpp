#include "store/background_writer.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "store_test_support.h"

namespace grademl::store {
namespace {

using testing::SampleInfo;
using testing::TempDir;
using namespace std::chrono_literals;

// A database with one run and a builder to record into it.
struct Fixture {
  TempDir dir;
  std::string path = dir.File("g.db");
  std::unique_ptr<Database> db = Database::Open(path, Database::Mode::kReadWrite).value();
  model::RunId run = db->CreateRun(SampleInfo()).value();
  model::RunBuilder builder{SampleInfo()};
};

// What another process reading the file now would see of `run`'s first series.
size_t SamplesInFile(const std::string& path, model::RunId run) {
  auto db = Database::Open(path, Database::Mode::kReadOnly);
  if (!db.ok()) return 0;
  auto loaded = (*db)->LoadRun(run);
  if (!loaded.ok() || loaded->series.empty()) return 0;
  return loaded->series[0].samples.size();
}

TEST(BackgroundWriterTest, FlushesPeriodicallyWhileSamplesArrive) {
  Fixture f;
  model::SeriesId s = f.builder.AddSeries({.resource = 1, .name = "x"});
  BackgroundWriter writer(f.db.get(), &f.builder, f.run, 20 * kNsPerMs);
  std::atomic<int> added = 0;
  std::atomic<bool> done = false;
  std::thread producer([&] {
    for (int i = 0; i < 2000 && !done; ++i) {
      f.builder.AddSample(s, i, i);
      added = i + 1;
      std::this_thread::sleep_for(1ms);
    }
  });
  // Without Stop() or FlushNow(), samples reach the file (read by another connection).
  auto deadline = std::chrono::steady_clock::now() + 10s;
  size_t seen = 0;
  while ((seen = SamplesInFile(f.path, f.run)) < 50 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GE(seen, 50u);
  done = true;
  producer.join();
  ASSERT_TRUE(writer.Stop().ok());
  EXPECT_EQ(SamplesInFile(f.path, f.run), static_cast<size_t>(added.load()));
}

TEST(BackgroundWriterTest, StopWritesTheRest) {
  Fixture f;
  BackgroundWriter writer(f.db.get(), &f.builder, f.run, 3600 * kNsPerSec);
  model::SeriesId s = f.builder.AddSeries({.resource = 1, .name = "x"});
  f.builder.AddSample(s, 1, 1);
  ASSERT_TRUE(writer.FlushNow().ok());
  EXPECT_EQ(SamplesInFile(f.path, f.run), 1u);
  for (int i = 2; i <= 100; ++i) f.builder.AddSample(s, i, i);
  f.builder.UpdateRunInfo([](model::RunInfo& info) {
    info.complete = true;
    info.end_ns = info.start_ns + 5;
  });
  EXPECT_EQ(SamplesInFile(f.path, f.run), 1u);
  ASSERT_TRUE(writer.Stop().ok());
  ASSERT_TRUE(writer.Stop().ok());  // idempotent
  model::Run run = f.db->LoadRun(f.run).value();
  EXPECT_EQ(run.series[0].samples.size(), 100u);
  EXPECT_TRUE(run.info.complete);
  EXPECT_EQ(run.info.id, f.run);
}

TEST(BackgroundWriterTest, DestructorStops) {
  Fixture f;
  model::SeriesId s = f.builder.AddSeries({.resource = 1, .name = "x"});
  {
    BackgroundWriter writer(f.db.get(), &f.builder, f.run, 3600 * kNsPerSec);
    f.builder.AddSample(s, 1, 1);
  }
  EXPECT_EQ(SamplesInFile(f.path, f.run), 1u);
}

// A failed write keeps its delta for the next attempt; Stop() reports the first error.
TEST(BackgroundWriterTest, FailedWritesAreRetriedAndReported) {
  TempDir dir;
  auto db = Database::Open(dir.File("g.db"), Database::Mode::kReadWrite).value();
  model::RunBuilder builder(SampleInfo());
  std::vector<BackgroundWriter::Event> events;  // FlushNow and Stop run on this thread
  BackgroundWriter writer(db.get(), &builder, /*run=*/1,
                          BackgroundWriter::Options{.flush_interval = 3600 * kNsPerSec,
                                                    .on_event = [&](const BackgroundWriter::Event& e) {
                                                      events.push_back(e);
                                                    }});
  model::SeriesId s = builder.AddSeries({.resource = 1, .name = "x"});
  builder.BeginPhase({.name = "run", .type = "run", .start_ns = 1});
  builder.AddSample(s, 1, 1);
  Status first = writer.FlushNow();  // run 1 does not exist yet
  EXPECT_EQ(first.code(), StatusCode::kNotFound);
  builder.AddSample(s, 2, 2);
  EXPECT_EQ(writer.FlushNow().code(), StatusCode::kNotFound);
  // Said once when writes start failing, once when they work again.
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, BackgroundWriter::Event::kFailing);
  EXPECT_EQ(events[0].status.message(), first.message());

  ASSERT_EQ(db->CreateRun(SampleInfo()).value(), 1);
  builder.AddSample(s, 3, 3);
  EXPECT_TRUE(writer.FlushNow().ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].kind, BackgroundWriter::Event::kRecovered);
  // Everything reached the store in the end: Stop is OK, and the first error is kept.
  EXPECT_TRUE(writer.Stop().ok());
  EXPECT_EQ(writer.first_error().message(), first.message());

  model::Run run = db->LoadRun(1).value();
  EXPECT_EQ(run.phases.size(), 1u);
  ASSERT_EQ(run.series.size(), 1u);
  EXPECT_EQ(run.series[0].samples, (std::vector<model::Sample>{{1, 1}, {2, 2}, {3, 3}}));
  // The run keeps why its recording had trouble.
  EXPECT_EQ(run.info.error, "store: writes failed for a while (" + first.message() + ")");
}

// A store that keeps failing: what is held stays bounded (samples go, phases stay), it is
// said once, and Stop says what did not reach the store.
TEST(BackgroundWriterTest, HeldDataIsBoundedWhileTheStoreFails) {
  TempDir dir;
  auto db = Database::Open(dir.File("g.db"), Database::Mode::kReadWrite).value();
  model::RunBuilder builder(SampleInfo());
  std::vector<BackgroundWriter::Event> events;
  BackgroundWriter writer(db.get(), &builder, /*run=*/1,
                          BackgroundWriter::Options{.flush_interval = 3600 * kNsPerSec,
                                                    .max_pending_bytes = 100'000,
                                                    .final_retries = 0,
                                                    .on_event = [&](const BackgroundWriter::Event& e) {
                                                      events.push_back(e);
                                                    }});
  model::SeriesId s = builder.AddSeries({.resource = 1, .name = "x"});
  builder.BeginPhase({.name = "run", .type = "run", .start_ns = 1});
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 10'000; ++i) builder.AddSample(s, round * 10'000 + i, i);  // never flat
    EXPECT_FALSE(writer.FlushNow().ok());
  }
  EXPECT_EQ(writer.dropped_samples(), 100'000u);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, BackgroundWriter::Event::kFailing);
  EXPECT_EQ(events[1].kind, BackgroundWriter::Event::kDropping);

  ASSERT_EQ(db->CreateRun(SampleInfo()).value(), 1);
  Status st = writer.Stop();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("100000 samples and log lines were dropped"), std::string::npos) << st.message();
  model::Run run = db->LoadRun(1).value();
  EXPECT_EQ(run.phases.size(), 1u);  // kept
  ASSERT_EQ(run.series.size(), 1u);
  EXPECT_EQ(run.series[0].samples.size(), 0u);
  EXPECT_NE(run.info.error.find("100000 samples and log lines dropped"), std::string::npos) << run.info.error;
}

// Issue 24: the event collector bounds what it accepts by what is not stored yet, so the
// writer says how much it holds while the store fails (and 0 once it is stored), and the
// builder how much its next delta holds.
TEST(BackgroundWriterTest, HeldBytesSayWhatIsNotStoredYet) {
  TempDir dir;
  auto db = Database::Open(dir.File("g.db"), Database::Mode::kReadWrite).value();
  model::RunBuilder builder(SampleInfo());
  BackgroundWriter writer(db.get(), &builder, /*run=*/1,
                          BackgroundWriter::Options{.flush_interval = 3600 * kNsPerSec, .final_retries = 0});
  model::PhaseId run = builder.BeginPhase({.name = "run", .type = "run", .start_ns = 1});
  for (int i = 0; i < 1000; ++i) {
    model::PhaseId p = builder.BeginPhase({.parent = run, .name = "p", .type = "p", .start_ns = 2 + i});
    builder.EndPhase(p, 3 + i, model::RunBuilder::Keep::kUntilHandedOut);
  }
  EXPECT_EQ(writer.held_bytes(), 0u);
  const size_t unsent = builder.unsent_bytes();
  EXPECT_GE(unsent, 1001 * sizeof(model::Phase));
  EXPECT_FALSE(writer.FlushNow().ok());  // run 1 does not exist yet: everything is held
  EXPECT_EQ(builder.unsent_bytes(), 0u);
  EXPECT_EQ(writer.held_bytes(), unsent);  // the same rows, the same estimate
  ASSERT_EQ(db->CreateRun(SampleInfo()).value(), 1);
  EXPECT_TRUE(writer.FlushNow().ok());
  EXPECT_EQ(writer.held_bytes(), 0u);
  EXPECT_TRUE(writer.Stop().ok());
  EXPECT_EQ(db->LoadRun(1).value().phases.size(), 1001u);
}

// FlushSoon writes at once (a flood of events), not at the next interval (an hour here).
TEST(BackgroundWriterTest, FlushSoonWritesWithoutWaitingForTheInterval) {
  Fixture f;
  model::SeriesId s = f.builder.AddSeries({.resource = 1, .name = "x"});
  BackgroundWriter writer(f.db.get(), &f.builder, f.run, 3600 * kNsPerSec);
  for (int round = 1; round <= 3; ++round) {
    f.builder.AddSample(s, round, round);
    writer.FlushSoon();
    auto deadline = std::chrono::steady_clock::now() + 60s;  // an hour without FlushSoon
    while (SamplesInFile(f.path, f.run) < static_cast<size_t>(round) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(SamplesInFile(f.path, f.run), static_cast<size_t>(round));
  }
  ASSERT_TRUE(writer.Stop().ok());
}

// The point of the writer: a grademl killed with SIGKILL leaves what it saw up to about one
// flush interval before the kill in the file.
TEST(BackgroundWriterTest, SurvivesSigkill) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  constexpr int kSamples = 200;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    if (!db.ok()) _exit(2);
    auto run = (*db)->CreateRun(SampleInfo());
    if (!run.ok()) _exit(3);
    model::RunBuilder builder(SampleInfo());
    builder.BeginPhase({.name = "run", .type = "run", .start_ns = 1});
    model::SeriesId s = builder.AddSeries({.resource = 1, .name = "x"});
    BackgroundWriter writer(db->get(), &builder, *run, 50 * kNsPerMs);
    for (int i = 0; i < kSamples; ++i) {
      builder.AddSample(s, i, i);
      std::this_thread::sleep_for(1ms);
    }
    std::this_thread::sleep_for(300ms);  // several flush intervals
    ::raise(SIGKILL);
    _exit(4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  ASSERT_EQ(WTERMSIG(status), SIGKILL);

  auto db = Database::Open(path, Database::Mode::kReadOnly);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto run = (*db)->LoadRun(1);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_FALSE(run->info.complete);
  ASSERT_EQ(run->phases.size(), 1u);
  EXPECT_EQ(run->phases[0].end_ns, 0);
  ASSERT_EQ(run->series.size(), 1u);
  ASSERT_EQ(run->series[0].samples.size(), static_cast<size_t>(kSamples));
  EXPECT_EQ(run->series[0].samples.back(), (model::Sample{kSamples - 1, kSamples - 1}));
}

}  // namespace
}  // namespace grademl::store
