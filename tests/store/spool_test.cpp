#include "store/spool.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_test_support.h"

namespace grademl::store {
namespace {

TEST(SpoolTest, KeepsDeltasInOrderUntilRemovedAndCountsWhatWasSpooled) {
  testing::TempDir dir;
  model::RunDelta a;
  a.phases.push_back({.id = 5, .name = "p", .type = "run/host", .start_ns = 1});
  a.samples.push_back({.series = 1, .sample = {.t = 10, .v = 1.5}});
  a.samples.push_back({.series = 1, .sample = {.t = 20, .v = 2.5}});
  model::RunDelta b;
  b.phases.push_back({.id = 5, .name = "p", .type = "run/host", .start_ns = 1, .end_ns = 9});  // same phase, ended
  b.phases.push_back({.id = 6, .name = "q", .type = "run/host/process", .start_ns = 2});
  {
    auto spool = Spool::Open(dir.path().string());
    ASSERT_TRUE(spool.ok()) << spool.status().message();
    ASSERT_TRUE((*spool)->Append("uuid-1", "h1/1", a).ok());
    ASSERT_TRUE((*spool)->Append("uuid-1", "h1/1", b).ok());
    ASSERT_TRUE((*spool)->Put("writer:uuid-1", "1").ok());
  }
  // Reopened (an agent restarted): everything is still there.
  auto spool = Spool::Open(dir.path().string());
  ASSERT_TRUE(spool.ok());
  auto entries = (*spool)->Oldest(10);
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_LT((*entries)[0].seq, (*entries)[1].seq);
  EXPECT_EQ((*entries)[0].run_uuid, "uuid-1");
  EXPECT_EQ((*entries)[0].writer, "h1/1");
  ASSERT_EQ((*entries)[0].delta.samples.size(), 2u);
  EXPECT_EQ((*entries)[0].delta.samples[1].sample.v, 2.5);
  EXPECT_EQ((*entries)[1].delta.phases[0].end_ns, 9);
  auto totals = (*spool)->Spooled();
  ASSERT_TRUE(totals.ok());
  EXPECT_EQ(totals->phases, 2);   // distinct (run, phase id)
  EXPECT_EQ(totals->samples, 2);
  EXPECT_EQ(totals->deltas, 2);
  ASSERT_TRUE((*spool)->Remove((*entries)[0].seq).ok());
  EXPECT_EQ((*spool)->Pending().value(), 1);
  EXPECT_EQ((*spool)->Get("writer:uuid-1").value(), std::optional<std::string>("1"));
  EXPECT_EQ((*spool)->Get("nope").value(), std::nullopt);
  EXPECT_EQ((*spool)->Spooled()->deltas, 2);  // removing keeps the totals
}

TEST(SpoolTest, ADamagedEntryIsACorruptErrorNotACrash) {
  testing::TempDir dir;
  {
    auto spool = Spool::Open(dir.path().string());
    ASSERT_TRUE(spool.ok());
    ASSERT_TRUE((*spool)->Append("u", "w", model::RunDelta{.edges = {{1, 2, "data"}}}).ok());
  }
  testing::RawDb raw(dir.File("spool.db"));
  raw.Exec("UPDATE pending SET delta = substr(delta, 1, 6)");
  auto spool = Spool::Open(dir.path().string());
  ASSERT_TRUE(spool.ok());
  auto entries = (*spool)->Oldest(10);
  ASSERT_FALSE(entries.ok());
  EXPECT_EQ(entries.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(entries.status().message().find("spooled delta 1"), std::string::npos) << entries.status().message();
}

// An agent starting while `grademl agent --stats` polls the same spool: both open it at once,
// and each may be refused the switch to WAL or the schema's first write with SQLITE_BUSY
// without SQLite's busy handler. Neither open may fail (the agent used to exit with "database
// is locked by another process", and MultiHostE2E.AgentOnASecondHost... with it).
TEST(SpoolTest, SpoolsOpenedAtOnceByTwoProcessesBothOpen) {
  testing::TempDir dir;
  int failures = 0;
  std::string last_error;
  for (int round = 0; round < 40; ++round) {
    const std::string spool_dir = (dir.path() / ("spool" + std::to_string(round))).string();
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      int bad = 0;
      for (int i = 0; i < 5; ++i) {
        auto s = Spool::Open(spool_dir);
        if (!s.ok() || !(*s)->Spooled().ok()) ++bad;
      }
      _exit(bad == 0 ? 0 : 1);
    }
    for (int i = 0; i < 5; ++i) {
      auto s = Spool::Open(spool_dir);
      if (!s.ok()) {
        ++failures;
        last_error = s.status().message();
      } else if (!(*s)->Spooled().ok()) {
        ++failures;
      }
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  EXPECT_EQ(failures, 0) << last_error;
}

}  // namespace
}  // namespace grademl::store
