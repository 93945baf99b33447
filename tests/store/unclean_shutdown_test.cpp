// The check after an unclean shutdown (docs/store.md): a run left incomplete with no writer
// alive makes the next writer run PRAGMA quick_check once and mark the run interrupted; a
// live peer's incomplete run does neither, and a clean store costs no check.
#include <gtest/gtest.h>

#include <random>

#include "store/database.h"
#include "store_test_support.h"

namespace grademl::store {
namespace {

using Mode = Database::Mode;
using testing::RawDb;
using testing::SampleInfo;
using testing::TempDir;

std::string ErrorOf(const std::string& path, int run) {
  return RawDb(path, SQLITE_OPEN_READONLY).Text("SELECT error FROM runs WHERE id = " + std::to_string(run));
}

// Overwrites the root page of the samples table, which opening a store does not read.
void DamageSamples(const std::string& path) {
  int64_t page, page_size;
  {
    RawDb raw(path);
    raw.Exec("PRAGMA wal_checkpoint(TRUNCATE)");
    page = raw.Int("SELECT rootpage FROM sqlite_schema WHERE name = 'samples'");
    page_size = raw.Int("PRAGMA page_size");
  }
  std::string bytes = testing::ReadBytes(path);
  std::mt19937 rng(3);
  for (int64_t i = 0; i < page_size; ++i) bytes[static_cast<size_t>((page - 1) * page_size + i)] = static_cast<char>(rng());
  testing::WriteBytes(path, bytes);
}

TEST(UncleanShutdownTest, AnInterruptedRunIsCheckedAndMarkedOnce) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  {
    auto db = Database::Open(path, Mode::kReadWrite).value();
    ASSERT_EQ(db->CreateRun(SampleInfo()).value(), 1);  // never completed: its grademl "died"
  }
  EXPECT_EQ(ErrorOf(path, 1), "");
  {
    auto db = Database::Open(path, Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status().message();
  }
  EXPECT_EQ(ErrorOf(path, 1), "recording interrupted (grademl was killed or the machine stopped)");
  // Checked once: damage now is not looked for at the next start (no unclean shutdown since).
  DamageSamples(path);
  auto db = Database::Open(path, Mode::kReadWrite);
  EXPECT_TRUE(db.ok()) << db.status().message();
}

TEST(UncleanShutdownTest, DamageFoundAfterAnUncleanShutdownIsOneLine) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  {
    auto db = Database::Open(path, Mode::kReadWrite).value();
    ASSERT_EQ(db->CreateRun(SampleInfo()).value(), 1);
  }
  DamageSamples(path);
  auto db = Database::Open(path, Mode::kReadWrite);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(db.status().message().rfind(path + ": database file is corrupt (found by the check after an unclean "
                                                "shutdown: ",
                                        0),
            0u)
      << db.status().message();
  EXPECT_EQ(db.status().message().find('\n'), std::string::npos);
}

TEST(UncleanShutdownTest, ALivePeersRunIsLeftAlone) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  auto peer = Database::Open(path, Mode::kReadWrite).value();
  ASSERT_EQ(peer->CreateRun(SampleInfo()).value(), 1);  // recording, not finished
  {
    auto db = Database::Open(path, Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status().message();
    ASSERT_EQ((*db)->CreateRun(SampleInfo()).value(), 2);
  }
  EXPECT_EQ(ErrorOf(path, 1), "");
  EXPECT_EQ(ErrorOf(path, 2), "");  // closed while the peer lives: not judged either
  peer.reset();
  // The lock file goes with the last writer.
  EXPECT_FALSE(std::filesystem::exists(path + "-lock"));
}

}  // namespace
}  // namespace grademl::store
