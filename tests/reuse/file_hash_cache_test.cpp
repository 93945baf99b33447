// The stat cache of file hashes (reuse/file_hash_cache.h) as ContentHasher uses it: a
// new hasher (nothing in memory) over the same cache file reads an unchanged file 0 bytes;
// a file changed lately, or changed behind a restored mtime, is read again.
#include "reuse/file_hash_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "core/sha256.h"
#include "reuse/content_hash.h"
#include "workflow/spec_test_support.h"
#include "sha256sum.h"
#include "skip_or_fail.h"

namespace grademl::reuse {
namespace {

using workflow::testing::SpecDir;

// Sets the file's mtime (and atime) `seconds_ago` seconds before now; its ctime becomes now.
void FileHashCacheTestAge(const std::string& path, int seconds_ago) {
  struct timespec now {};
  clock_gettime(CLOCK_REALTIME, &now);
  struct timespec times[2] = {now, now};
  times[0].tv_sec -= seconds_ago;
  times[1].tv_sec -= seconds_ago;
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

class FileHashCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status available = Sha256Available();
    ASSERT_TRUE(available.ok()) << available.message();
    if (access("/usr/bin/sha256sum", X_OK) != 0) SKIP_OR_FAIL_IN_CI("no /usr/bin/sha256sum (coreutils)");
  }
  SpecDir dir_;
};

TEST_F(FileHashCacheTest, OldFileIsReadOnceChangeBehindRestoredMtimeIsNoticed) {
  const std::string cache_path = dir_.Path("cache/hashes.sqlite");
  const std::string path = dir_.Write("old.bin", std::string(100'000, 'q'));
  const std::string other = dir_.Write("other.bin", "other content\n");
  FileHashCacheTestAge(path, 10);
  FileHashCacheTestAge(other, 10);
  // Setting the mtime is itself a change (ctime is now): the hash is trusted only once the
  // racy margin has passed since then.
  std::this_thread::sleep_for(std::chrono::nanoseconds(kRacyMarginNs) + std::chrono::milliseconds(300));
  const std::string old_hash = grademl::testing::Sha256sumOf(path);
  ASSERT_EQ(old_hash.size(), 64u);

  FileHashCache cache(cache_path);
  ASSERT_TRUE(cache.usable());
  {
    ContentHasher first(&cache);
    int64_t read = 0;
    StatusOr<std::string> h = first.HashFile(path, &read);
    ASSERT_TRUE(h.ok()) << h.status().message();
    EXPECT_EQ(*h, old_hash);
    EXPECT_EQ(read, 100'000);
  }
  {
    ContentHasher second(&cache);  // a new hasher: its memory is empty, the cache is not
    int64_t read = 0;
    StatusOr<std::string> h = second.HashFile(path, &read);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(*h, old_hash);
    EXPECT_EQ(read, 0);
    // Through Hash too, and a file never hashed is read.
    StatusOr<ContentHash> c = second.Hash(path);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->bytes_read, 0);
    EXPECT_EQ(c->size, 100'000);
    StatusOr<ContentHash> o = second.Hash(other);
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->bytes_read, 14);
  }
  {
    // Another process: the cache file opened again.
    FileHashCache reopened(cache_path);
    ASSERT_TRUE(reopened.usable());
    int64_t read = 0;
    StatusOr<std::string> h = ContentHasher(&reopened).HashFile(path, &read);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(*h, old_hash);
    EXPECT_EQ(read, 0);
  }

  // The same size, the same inode, the old mtime put back: only the ctime tells.
  struct stat before {};
  ASSERT_EQ(stat(path.c_str(), &before), 0);
  {
    int fd = open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, "Q", 1, 50'000), 1);
    close(fd);
  }
  struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(stat(path.c_str(), &after), 0);
  ASSERT_EQ(after.st_ino, before.st_ino);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  const std::string new_hash = grademl::testing::Sha256sumOf(path);
  ASSERT_EQ(new_hash.size(), 64u);
  ASSERT_NE(new_hash, old_hash);

  ContentHasher third(&cache);
  int64_t read = 0;
  StatusOr<std::string> h = third.HashFile(path, &read);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, new_hash);
  EXPECT_EQ(read, 100'000);
  // The hasher's own memory is checked the same way.
  ContentHasher remembering(nullptr);
  ASSERT_EQ(*remembering.HashFile(path, nullptr), new_hash);
  {
    int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, "R", 1, 50'000), 1);
    close(fd);
  }
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  read = 0;
  h = remembering.HashFile(path, &read);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, grademl::testing::Sha256sumOf(path));
  EXPECT_NE(*h, new_hash);
  EXPECT_EQ(read, 100'000);
}

TEST_F(FileHashCacheTest, FileJustWrittenIsReadAgain) {
  FileHashCache cache(dir_.Path("hashes.sqlite"));
  ASSERT_TRUE(cache.usable());
  const std::string path = dir_.Write("fresh.txt", "written just now\n");
  const std::string expected = grademl::testing::Sha256sumOf(path);
  for (int i = 0; i < 3; ++i) {
    ContentHasher hasher(&cache);
    int64_t read = 0;
    StatusOr<std::string> h = hasher.HashFile(path, &read);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(*h, expected);
    EXPECT_EQ(read, 17) << "hasher " << i << ": a hash taken within the racy margin was trusted";
  }
  // An old mtime does not help while the ctime is recent.
  FileHashCacheTestAge(path, 10);
  for (int i = 0; i < 2; ++i) {
    int64_t read = 0;
    EXPECT_EQ(*ContentHasher(&cache).HashFile(path, &read), expected);
    EXPECT_EQ(read, 17);
  }
}

TEST_F(FileHashCacheTest, UnwritablePlaceIsNoCacheAndNoError) {
  for (const char* where : {"/proc/x/y", "/proc/grademl-no/such/cache.sqlite", ""}) {
    FileHashCache cache(where);
    EXPECT_FALSE(cache.usable()) << where;
    const std::string path = dir_.Write("f.txt", "abc");
    for (int i = 0; i < 2; ++i) {
      ContentHasher hasher(&cache);
      int64_t read = 0;
      StatusOr<std::string> h = hasher.HashFile(path, &read);
      ASSERT_TRUE(h.ok()) << where << ": " << h.status().message();
      EXPECT_EQ(*h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
      EXPECT_EQ(read, 3);
    }
  }
  // A file that is not an SQLite database: no cache either.
  const std::string junk = dir_.Write("junk.sqlite", std::string(4096, 'j'));
  FileHashCache cache(junk);
  EXPECT_FALSE(cache.usable());
  int64_t read = 0;
  EXPECT_TRUE(ContentHasher(&cache).HashFile(dir_.Write("g.txt", "abc"), &read).ok());
}

// The cache file goes through the store (store/sqlite/file_hash_file.h) but keeps its format: a
// file written as caches were before (the same table, written here with plain SQL) is read as
// it is. Its row for the file carries a hash nobody computed, so a read of 0 bytes returning
// it proves the row was used.
TEST_F(FileHashCacheTest, ACacheFileOfTheEarlierFormatIsReadAsItIs) {
  const std::string cache_path = dir_.Path("before.sqlite");
  const std::string path = dir_.Write("kept.txt", "kept content\n");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  const auto ns = [](const struct timespec& ts) { return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec; };
  const std::string recorded(64, 'a');
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(cache_path.c_str(), &db), SQLITE_OK);
    const std::string sql = fmt::format(
        "PRAGMA journal_mode=WAL; CREATE TABLE file_hashes (path TEXT PRIMARY KEY, dev INTEGER NOT NULL, ino INTEGER "
        "NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL, hash TEXT NOT NULL, "
        "read_start_ns INTEGER NOT NULL) WITHOUT ROWID; INSERT INTO file_hashes VALUES ('{}', {}, {}, {}, {}, {}, "
        "'{}', {});",
        path, static_cast<int64_t>(st.st_dev), static_cast<int64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
        ns(st.st_mtim), ns(st.st_ctim), recorded, std::max(ns(st.st_mtim), ns(st.st_ctim)) + kRacyMarginNs);
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  FileHashCache cache(cache_path);
  ASSERT_TRUE(cache.usable());
  int64_t read = 0;  // HashFile adds the bytes it read
  StatusOr<std::string> h = ContentHasher(&cache).HashFile(path, &read);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(*h, recorded);
  EXPECT_EQ(read, 0);
  // One nanosecond inside the racy margin: not trusted, the file is read.
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(cache_path.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, "UPDATE file_hashes SET read_start_ns = read_start_ns - 1", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  FileHashCache again(cache_path);
  read = 0;
  h = ContentHasher(&again).HashFile(path, &read);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, grademl::testing::Sha256sumOf(path));
  EXPECT_EQ(read, 13);
}

}  // namespace
}  // namespace grademl::reuse
