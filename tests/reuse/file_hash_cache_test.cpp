// The stat cache of file hashes (reuse/file_hash_cache.h) as ContentHasher uses it: a
// new hasher (nothing in memory) over the same cache file reads an unchanged file 0 bytes;
// a file changed lately, or changed behind a restored mtime, is read again.
#include "reuse/file_hash_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

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

}  // namespace
}  // namespace grademl::reuse
