// Database::Open on good, foreign, damaged and missing files, and schema migrations.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "store/database.h"
#include "store/sqlite/schema.h"
#include "store_test_support.h"

namespace grademl::store {
namespace {

using testing::RawDb;
using testing::ReadBytes;
using testing::SampleInfo;
using testing::TempDir;
using testing::WriteBytes;
using Mode = Database::Mode;

constexpr Mode kBothModes[] = {Mode::kReadWrite, Mode::kReadOnly};

std::string ModeName(Mode mode) { return mode == Mode::kReadWrite ? "read-write" : "read-only"; }

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// A closed GradeML database holding one run with `samples` samples.
void MakeDatabase(const std::string& path, int samples = 10) {
  auto db = Database::Open(path, Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  model::RunId id = (*db)->CreateRun(SampleInfo()).value();
  model::RunBuilder b(SampleInfo());
  b.BeginPhase({.name = "run", .type = "run", .start_ns = 1});
  auto s = b.AddSeries({.resource = 1, .name = "x"});
  for (int i = 0; i < samples; ++i) b.AddSample(s, i, i);
  ASSERT_TRUE((*db)->WriteDelta(id, b.TakeDelta()).ok());
}

// Expects Open to fail in `mode` with exactly `message` (one line) and `code`.
void ExpectOpenError(const std::string& path, Mode mode, StatusCode code, const std::string& message) {
  SCOPED_TRACE(ModeName(mode));
  auto db = Database::Open(path, mode);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), code) << db.status().message();
  EXPECT_EQ(db.status().message(), message);
  EXPECT_EQ(db.status().message().find('\n'), std::string::npos);
}

TEST(OpenTest, ReadWriteCreatesFileAndParentDirectories) {
  TempDir dir;
  const std::string path = dir.File("a/b/grademl.db");
  auto db = Database::Open(path, Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ((*db)->path(), path);
  EXPECT_TRUE(std::filesystem::is_regular_file(path));
  RawDb raw(path);
  EXPECT_EQ(raw.Int("PRAGMA application_id"), kApplicationId);
  EXPECT_EQ(raw.Int("PRAGMA user_version"), CurrentSchemaVersion());
  EXPECT_EQ(raw.Text("PRAGMA journal_mode"), "wal");
  for (const char* table : {"runs", "phases", "edges", "resources", "series", "samples"}) {
    EXPECT_EQ(raw.Int(std::string("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = '") + table +
                      "'"),
              1)
        << table;
  }
  EXPECT_EQ(raw.Int("SELECT count(*) FROM sqlite_schema WHERE name = 'phases_by_start'"), 1);
}

// A store file deleted or replaced while open takes writes nobody will read: CheckPresent
// says so (the recorder then writes the run back, docs/store.md).
TEST(OpenTest, CheckPresentSaysWhenTheFileIsDeletedOrReplaced) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  auto db = Database::Open(path, Mode::kReadWrite).value();
  EXPECT_TRUE(db->CheckPresent().ok());
  for (const char* suffix : {"", "-wal", "-shm"}) {
    ASSERT_EQ(std::rename((path + suffix).c_str(), (dir.File("moved.db") + suffix).c_str()), 0);
  }
  Status gone = db->CheckPresent();
  EXPECT_EQ(gone.code(), StatusCode::kNotFound);
  EXPECT_EQ(gone.message(), path + ": the store was deleted while grademl had it open");
  // Another file at the path (a new store made there) is not this one either.
  auto other = Database::Open(path, Mode::kReadWrite).value();
  EXPECT_TRUE(other->CheckPresent().ok());
  EXPECT_EQ(db->CheckPresent().message(), path + ": the store was replaced by another file while grademl had it open");
}

TEST(OpenTest, ReopeningKeepsRuns) {
  TempDir dir;
  MakeDatabase(dir.File("g.db"));
  for (Mode mode : kBothModes) {
    auto db = Database::Open(dir.File("g.db"), mode);
    ASSERT_TRUE(db.ok()) << db.status().message();
    EXPECT_EQ((*db)->ListRuns()->size(), 1u);
  }
}

std::vector<std::string> FilesIn(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// The last writer out leaves a plain file (no -wal, -shm), and readers create nothing.
TEST(OpenTest, ReadersCreateNothing) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  auto writer = Database::Open(path, Mode::kReadWrite);
  ASSERT_TRUE(writer.ok());
  {
    auto reader = Database::Open(path, Mode::kReadOnly);  // alongside a writer
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    ASSERT_TRUE((*writer)->CreateRun(SampleInfo()).ok());
    EXPECT_EQ((*reader)->ListRuns()->size(), 1u);
  }
  writer->reset();
  EXPECT_EQ(FilesIn(dir.path()), std::vector<std::string>{"g.db"});
  EXPECT_EQ(RawDb(path, SQLITE_OPEN_READONLY).Text("PRAGMA journal_mode"), "delete");
  for (int i = 0; i < 2; ++i) {
    auto reader = Database::Open(path, Mode::kReadOnly);
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    EXPECT_EQ((*reader)->ListRuns()->size(), 1u);
    EXPECT_TRUE((*reader)->LoadRun(1).ok());
  }
  EXPECT_EQ(FilesIn(dir.path()), std::vector<std::string>{"g.db"});
}

TEST(OpenTest, MissingFile) {
  TempDir dir;
  const std::string path = dir.File("sub/none.db");
  ExpectOpenError(path, Mode::kReadOnly, StatusCode::kNotFound,
                  path + ": no GradeML database here; record a run with `grademl run -- CMD`");
  EXPECT_FALSE(std::filesystem::exists(dir.File("sub")));  // read-only creates nothing
}

TEST(OpenTest, ParentIsAFile) {
  TempDir dir;
  WriteBytes(dir.File("f"), "x");
  auto db = Database::Open(dir.File("f/g.db"), Mode::kReadWrite);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kIoError);
  EXPECT_EQ(db.status().message().rfind(dir.File("f/g.db") + ": ", 0), 0u) << db.status().message();
}

TEST(OpenTest, Directory) {
  TempDir dir;
  for (Mode mode : kBothModes) {
    ExpectOpenError(dir.path().string(), mode, StatusCode::kInvalidArgument,
                    dir.path().string() + ": is a directory, not a GradeML database");
  }
}

TEST(OpenTest, FilesThatAreNotSqlite) {
  TempDir dir;
  const std::string path = dir.File("x.db");
  for (const std::string& content : {RandomBytes(8192, 1), RandomBytes(7, 2), std::string("hello\n"),
                                     std::string("SQLite format 2\0", 16) + RandomBytes(4080, 3)}) {
    WriteBytes(path, content);
    for (Mode mode : kBothModes) {
      ExpectOpenError(path, mode, StatusCode::kCorrupt,
                      path + ": not a SQLite database (file is corrupt or of another kind)");
      EXPECT_EQ(ReadBytes(path), content);  // never touched
    }
  }
}

TEST(OpenTest, OverwrittenHeader) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  ASSERT_NO_FATAL_FAILURE(MakeDatabase(path));
  const std::string good = ReadBytes(path);
  // The magic string, then the page size, then everything after the magic.
  const std::vector<std::pair<size_t, std::string>> damages = {
      {0, "Not SQLite at al"}, {16, std::string("\x00\x03", 2)}, {16, RandomBytes(84, 4)}};
  for (const auto& [offset, bytes] : damages) {
    std::string bad = good;
    bad.replace(offset, bytes.size(), bytes);
    WriteBytes(path, bad);
    for (Mode mode : kBothModes) {
      SCOPED_TRACE(offset);
      auto db = Database::Open(path, mode);
      bool failed = !db.ok();
      if (db.ok()) {  // SQLite may only notice when reading pages
        auto runs = (*db)->ListRuns();
        failed = !runs.ok();
        if (failed) db = runs.status();
      }
      ASSERT_TRUE(failed);
      EXPECT_EQ(db.status().code(), StatusCode::kCorrupt) << db.status().message();
      EXPECT_EQ(db.status().message().rfind(path + ": ", 0), 0u) << db.status().message();
      EXPECT_EQ(db.status().message().find('\n'), std::string::npos);
    }
  }
}

TEST(OpenTest, TruncatedFile) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  ASSERT_NO_FATAL_FAILURE(MakeDatabase(path, 20000));
  const std::string good = ReadBytes(path);
  ASSERT_GT(good.size(), 8 * 4096u);
  ASSERT_FALSE(std::filesystem::exists(path + "-wal"));  // a clean close checkpoints the WAL away

  WriteBytes(path, good.substr(0, good.size() / 2));
  for (Mode mode : kBothModes) {
    ExpectOpenError(path, mode, StatusCode::kCorrupt,
                    fmt::format("{}: database file is truncated ({} bytes, its header says {})", path,
                                good.size() / 2, good.size()));
  }
  WriteBytes(path, good.substr(0, 50));
  for (Mode mode : kBothModes) {
    ExpectOpenError(path, mode, StatusCode::kCorrupt,
                    path + ": database file is truncated (50 bytes, less than its header)");
  }
  WriteBytes(path, good.substr(0, 10));
  for (Mode mode : kBothModes) {
    ExpectOpenError(path, mode, StatusCode::kCorrupt,
                    path + ": not a SQLite database (file is corrupt or of another kind)");
  }
}

TEST(OpenTest, CorruptedPages) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  ASSERT_NO_FATAL_FAILURE(MakeDatabase(path, 20000));
  const std::string good = ReadBytes(path);
  for (unsigned seed = 0; seed < 4; ++seed) {
    SCOPED_TRACE(seed);
    std::string bad = good;
    // Everything past page 1 (the schema) becomes noise.
    bad.replace(4096, bad.size() - 4096, RandomBytes(bad.size() - 4096, 10 + seed));
    WriteBytes(path, bad);
    for (Mode mode : kBothModes) {
      SCOPED_TRACE(ModeName(mode));
      Status st;
      if (auto db = Database::Open(path, mode); !db.ok()) {
        st = db.status();
      } else if (auto runs = (*db)->ListRuns(); !runs.ok()) {
        st = runs.status();
      } else {
        st = (*db)->LoadRun(1).status();
      }
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.message();
      EXPECT_EQ(st.message().rfind(path + ": ", 0), 0u) << st.message();
      EXPECT_EQ(st.message().find('\n'), std::string::npos);
    }
  }
}

TEST(OpenTest, SqliteDatabaseOfAnotherApplication) {
  TempDir dir;
  const std::string path = dir.File("other.db");
  {
    RawDb raw(path);
    raw.Exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers VALUES (1, 'a')");
  }
  const std::string before = ReadBytes(path);
  for (Mode mode : kBothModes) {
    ExpectOpenError(path, mode, StatusCode::kCorrupt, path + ": not a GradeML database");
  }
  EXPECT_EQ(ReadBytes(path), before);
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));

  // Marked as another application's, even with no tables.
  const std::string marked = dir.File("marked.db");
  RawDb(marked).Exec("PRAGMA application_id = 1234");
  for (Mode mode : kBothModes) {
    ExpectOpenError(marked, mode, StatusCode::kCorrupt, marked + ": not a GradeML database");
  }
}

TEST(OpenTest, NewerSchema) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  ASSERT_NO_FATAL_FAILURE(MakeDatabase(path));
  const int newer = CurrentSchemaVersion() + 1;
  RawDb(path).Exec(fmt::format("PRAGMA user_version = {}", newer));
  for (Mode mode : kBothModes) {
    ExpectOpenError(path, mode, StatusCode::kFailedPrecondition,
                    fmt::format("{}: written by a newer grademl (schema {}, this one reads up to {})", path, newer,
                                CurrentSchemaVersion()));
  }
}

TEST(OpenTest, EmptyFileIsInitialisedOnlyWhenWritable) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  WriteBytes(path, "");
  ExpectOpenError(path, Mode::kReadOnly, StatusCode::kCorrupt, path + ": not a GradeML database (empty file)");
  EXPECT_EQ(std::filesystem::file_size(path), 0u);
  auto db = Database::Open(path, Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_TRUE((*db)->CreateRun(SampleInfo()).ok());
  db->reset();
  EXPECT_EQ(RawDb(path).Int("PRAGMA user_version"), CurrentSchemaVersion());
}

// A GradeML file at schema 0 (marked, no tables yet) is migrated by a writer, and a reader
// asks for that.
TEST(OpenTest, OlderSchemaIsMigratedWhenWritable) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  RawDb(path).Exec(fmt::format("PRAGMA application_id = {}", kApplicationId));
  ExpectOpenError(path, Mode::kReadOnly, StatusCode::kFailedPrecondition,
                  fmt::format("{}: schema 0 is older than this grademl's {}; open it for writing once to upgrade it",
                              path, CurrentSchemaVersion()));
  auto db = Database::Open(path, Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ((*db)->CreateRun(SampleInfo()).value(), 1);
  db->reset();
  EXPECT_EQ(RawDb(path).Int("PRAGMA user_version"), CurrentSchemaVersion());
  EXPECT_TRUE(Database::Open(path, Mode::kReadOnly).ok());
}

// The migration mechanism with a made-up next version: steps run in order from the file's
// version, all in one transaction.
TEST(OpenTest, MigrationStepsApplyInOrderAndAtomically) {
  TempDir dir;
  const std::string path = dir.File("g.db");
  ASSERT_NO_FATAL_FAILURE(MakeDatabase(path));
  std::vector<std::string_view> steps(SchemaSteps().begin(), SchemaSteps().end());
  const int next = static_cast<int>(steps.size()) + 1;

  // A failing step 2 leaves the file as it was.
  steps.push_back("CREATE TABLE step2_first (x); CREATE TABLE runs (x);");
  {
    RawDb raw(path);
    Status st = MigrateSchema(raw.get(), path, steps);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.message().rfind(path + ": ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find(fmt::format("from version {} to {}", next - 1, next)), std::string::npos)
        << st.message();
    EXPECT_EQ(raw.Int("PRAGMA user_version"), next - 1);
    EXPECT_EQ(raw.Int("SELECT count(*) FROM sqlite_schema WHERE name = 'step2_first'"), 0);
  }
  // A good step 2 is applied on top of version 1 only.
  steps.back() = "CREATE TABLE step2 (x); ALTER TABLE runs ADD COLUMN note TEXT;";
  {
    RawDb raw(path);
    ASSERT_TRUE(MigrateSchema(raw.get(), path, steps).ok());
    EXPECT_EQ(raw.Int("PRAGMA user_version"), next);
    EXPECT_EQ(raw.Int("PRAGMA application_id"), kApplicationId);
    EXPECT_EQ(raw.Int("SELECT count(*) FROM sqlite_schema WHERE name = 'step2'"), 1);
    EXPECT_EQ(raw.Int("SELECT count(*) FROM runs"), 1);
    ASSERT_TRUE(MigrateSchema(raw.get(), path, steps).ok());  // already there: nothing to do
  }
  // From version 0, every step runs.
  const std::string fresh = dir.File("fresh.db");
  {
    RawDb raw(fresh);
    ASSERT_TRUE(MigrateSchema(raw.get(), fresh, steps).ok());
    EXPECT_EQ(raw.Int("PRAGMA user_version"), next);
    EXPECT_EQ(raw.Int("SELECT count(*) FROM sqlite_schema WHERE name IN ('runs', 'step2')"), 2);
  }
  // This grademl only knows the real steps: the file is now too new for it.
  ExpectOpenError(path, Mode::kReadWrite, StatusCode::kFailedPrecondition,
                  fmt::format("{}: written by a newer grademl (schema {}, this one reads up to {})", path, next,
                              CurrentSchemaVersion()));
}

}  // namespace
}  // namespace grademl::store
