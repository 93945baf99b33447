// Step logs: written through deltas, read back in order; a version-1 file gains the table.
#include <sqlite3.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "model/run_builder.h"
#include "store/database.h"
#include "store/sqlite/schema.h"

namespace grademl::store {
namespace {

std::string LogsTestDb(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("grademl_logs_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir / name);
  return (dir / name).string();
}

TEST(LogsTest, RoundTripInOrder) {
  std::string path = LogsTestDb("logs.db");
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  model::RunBuilder b(model::RunInfo{.command = {"x"}});
  model::PhaseId step = b.BeginPhase({.parent = 0, .name = "train", .type = "step", .start_ns = 1});
  auto id = (*db)->CreateRun(b.run_info());
  ASSERT_TRUE(id.ok());
  b.AddLogLine({.phase = step, .t = 5, .stream = 1, .text = "Epoch 1/2"});
  b.AddLogLine({.phase = step, .t = 6, .stream = 2, .text = std::string("warn\0ing", 8)});
  ASSERT_TRUE((*db)->WriteDelta(*id, b.TakeDelta(true)).ok());
  b.AddLogLine({.phase = step, .t = 7, .stream = 1, .text = "Epoch 2/2"});
  ASSERT_TRUE((*db)->WriteDelta(*id, b.TakeDelta(true)).ok());
  auto run = (*db)->LoadRun(*id);
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_EQ(run->logs.size(), 3u);
  EXPECT_EQ(run->logs[0], (model::LogLine{.phase = step, .t = 5, .stream = 1, .text = "Epoch 1/2"}));
  EXPECT_EQ(run->logs[1].stream, 2);
  EXPECT_EQ(run->logs[1].text, std::string("warn\0ing", 8));
  EXPECT_EQ(run->logs[2].text, "Epoch 2/2");
}

TEST(LogsTest, VersionOneFileIsMigrated) {
  std::string path = LogsTestDb("v1.db");
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  ASSERT_TRUE(MigrateSchema(raw, path, SchemaSteps().subspan(0, 1)).ok());
  sqlite3_close(raw);
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  model::RunBuilder b(model::RunInfo{.command = {"x"}});
  auto id = (*db)->CreateRun(b.run_info());
  ASSERT_TRUE(id.ok());
  b.AddLogLine({.phase = 1, .t = 5, .stream = 1, .text = "hello"});
  ASSERT_TRUE((*db)->WriteDelta(*id, b.TakeDelta(true)).ok());
  auto run = (*db)->LoadRun(*id);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->logs.size(), 1u);
  EXPECT_EQ(CurrentSchemaVersion(), 8);
}

}  // namespace
}  // namespace grademl::store
