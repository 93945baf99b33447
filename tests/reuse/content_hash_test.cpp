// Content hashes (reuse/content_hash.h): a file's against sha256sum's, a directory's
// against the SHA-256 of a manifest written out here by hand from the format the header
// documents; the manifest parser against hostile input.
#include "reuse/content_hash.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "run_with_deadline.h"
#include "workflow/spec_test_support.h"
#include "sha256sum.h"
#include "skip_or_fail.h"

namespace grademl::reuse {
namespace {

using workflow::testing::SpecDir;

// sha256sum's digest of `text` (written to a file of `dir` first).
std::string ContentHashTestSha256sumOfText(const SpecDir& dir, const std::string& text) {
  return grademl::testing::Sha256sumOf(dir.Write("manifest-for-sha256sum.txt", text));
}

// Digests of the contents used below, by `printf ... | sha256sum`.
constexpr const char* kContentHashHello = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";  // "hello\n"
constexpr const char* kContentHashScript = "299001868fb8c02fd431c336c6d058f5558c5dff5b5af5e6fe04b870a6a9cbba";  // "#!/bin/sh\necho hi\n"
constexpr const char* kContentHashXyz = "3608bca1e44ea6c4d268eb6db02260269892c0b42b86bbf1e77a6fa16c3c9282";  // "xyz"
constexpr const char* kContentHashEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";  // ""

class ContentHashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status available = Sha256Available();
    ASSERT_TRUE(available.ok()) << available.message();
    if (access("/usr/bin/sha256sum", X_OK) != 0) SKIP_OR_FAIL_IN_CI("no /usr/bin/sha256sum (coreutils)");
  }

  // tree/ with a file of every kind, names that sort differently by byte and by component
  // ("sub-x" before "sub/c.bin"), a name with a space and one with a newline.
  std::string MakeTree() {
    const std::string root = dir_.Path("tree");
    dir_.Write("tree/b.txt", "hello\n");
    dir_.Write("tree/a b", "xyz");
    dir_.Write("tree/n\nl", "");
    dir_.Write("tree/run.sh", "#!/bin/sh\necho hi\n");
    dir_.Write("tree/sub/c.bin", "xyz");
    dir_.Write("tree/sub-x", "");
    std::filesystem::create_directories(root + "/empty");
    EXPECT_EQ(chmod((root + "/run.sh").c_str(), 0755), 0);
    EXPECT_EQ(chmod((root + "/b.txt").c_str(), 0644), 0);
    EXPECT_EQ(symlink("b.txt", (root + "/link").c_str()), 0);
    return root;
  }

  // The manifest of MakeTree()'s directory, by hand: entries in byte order of path.
  static std::string HandManifest(const std::string& c_bin_name = "c.bin") {
    std::string m = "grademl-tree 1\n";
    m += std::string("F - 3 ") + kContentHashXyz + " 3:a b\n";
    m += std::string("F - 6 ") + kContentHashHello + " 5:b.txt\n";
    m += "D 5:empty\n";
    m += "L 5:b.txt 4:link\n";
    m += std::string("F - 0 ") + kContentHashEmpty + " 3:n\nl\n";
    m += std::string("F x 18 ") + kContentHashScript + " 6:run.sh\n";
    m += "D 3:sub\n";
    m += std::string("F - 0 ") + kContentHashEmpty + " 5:sub-x\n";
    std::string p = "sub/" + c_bin_name;
    m += std::string("F - 3 ") + kContentHashXyz + " " + std::to_string(p.size()) + ":" + p + "\n";
    return m;
  }

  SpecDir dir_;
};

TEST_F(ContentHashTest, FileHashIsSha256sums) {
  std::mt19937_64 rng(7);
  std::string data((1 << 20) + 12345, '\0');  // more than one 1 MiB read
  for (char& c : data) c = static_cast<char>(rng());
  const std::string path = dir_.Write("data.bin", data);
  const std::string expected = grademl::testing::Sha256sumOf(path);
  ASSERT_EQ(expected.size(), 64u);

  ContentHasher hasher(nullptr);
  StatusOr<ContentHash> h = hasher.Hash(path);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->hash, expected);
  EXPECT_EQ(h->size, static_cast<int64_t>(data.size()));
  EXPECT_FALSE(h->directory);
  EXPECT_FALSE(h->has_symlinks);
  EXPECT_EQ(h->bytes_read, static_cast<int64_t>(data.size()));
  EXPECT_TRUE(h->manifest.empty());

  // The same hasher again: known in memory, not read.
  StatusOr<ContentHash> again = hasher.Hash(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->hash, expected);
  EXPECT_EQ(again->bytes_read, 0);

  int64_t read = 0;
  StatusOr<std::string> direct = ContentHasher(nullptr).HashFile(path, &read);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(*direct, expected);
  EXPECT_EQ(read, static_cast<int64_t>(data.size()));

  // An empty file.
  StatusOr<ContentHash> empty = hasher.Hash(dir_.Write("empty.txt", ""));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->hash, kContentHashEmpty);
  EXPECT_EQ(empty->size, 0);

  // A link given as the path itself is followed.
  ASSERT_EQ(symlink(path.c_str(), dir_.Path("to-data").c_str()), 0);
  StatusOr<ContentHash> via_link = ContentHasher(nullptr).Hash(dir_.Path("to-data"));
  ASSERT_TRUE(via_link.ok());
  EXPECT_EQ(via_link->hash, expected);
}

TEST_F(ContentHashTest, DirectoryHashIsTheHandWrittenManifests) {
  const std::string root = MakeTree();
  const std::string manifest = HandManifest();
  ContentHasher hasher(nullptr);
  StatusOr<ContentHash> h = hasher.Hash(root);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_TRUE(h->directory);
  EXPECT_TRUE(h->has_symlinks);
  EXPECT_EQ(h->manifest, manifest);
  EXPECT_EQ(h->hash, ContentHashTestSha256sumOfText(dir_, manifest));
  EXPECT_EQ(h->size, 3 + 6 + 0 + 18 + 0 + 3);  // files only
  EXPECT_EQ(h->bytes_read, 30);
  ASSERT_EQ(h->entries.size(), 9u);
  EXPECT_EQ(h->entries[1].path, "b.txt");
  EXPECT_EQ(h->entries[3].kind, TreeEntry::Kind::kSymlink);
  EXPECT_EQ(h->entries[3].target, "b.txt");
  EXPECT_TRUE(h->entries[5].executable);
  EXPECT_EQ(h->entries[5].size, 18);

  // The parsed hand manifest is what the hasher saw; encoding it again (in any order) gives it back.
  StatusOr<std::vector<TreeEntry>> parsed = ParseTree(manifest);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, h->entries);
  std::vector<TreeEntry> shuffled(parsed->rbegin(), parsed->rend());
  EXPECT_EQ(EncodeTree(shuffled), manifest);
}

TEST_F(ContentHashTest, DirectoryWithoutLinksAndEmptyDirectory) {
  dir_.Write("plain/x", "xyz");
  std::filesystem::create_directories(dir_.Path("plain/e/f"));
  StatusOr<ContentHash> h = ContentHasher(nullptr).Hash(dir_.Path("plain"));
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_FALSE(h->has_symlinks);
  const std::string manifest = std::string("grademl-tree 1\nD 1:e\nD 3:e/f\nF - 3 ") + kContentHashXyz + " 1:x\n";
  EXPECT_EQ(h->manifest, manifest);
  EXPECT_EQ(h->hash, ContentHashTestSha256sumOfText(dir_, manifest));
  EXPECT_EQ(h->size, 3);

  std::filesystem::create_directories(dir_.Path("nothing"));
  StatusOr<ContentHash> none = ContentHasher(nullptr).Hash(dir_.Path("nothing"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->manifest, "grademl-tree 1\n");
  EXPECT_EQ(none->hash, ContentHashTestSha256sumOfText(dir_, "grademl-tree 1\n"));
  EXPECT_EQ(none->size, 0);
  EXPECT_TRUE(none->entries.empty());
}

TEST_F(ContentHashTest, RenameChangesTheHashTouchingDoesNot) {
  const std::string root = MakeTree();
  const std::string original = ContentHasher(nullptr).Hash(root)->hash;
  EXPECT_EQ(original, ContentHashTestSha256sumOfText(dir_, HandManifest()));

  // mtime alone (a new hasher each time: nothing remembered).
  struct timespec times[2] = {{1'000'000'000, 0}, {1'000'000'000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (root + "/b.txt").c_str(), times, 0), 0);
  ASSERT_EQ(utimensat(AT_FDCWD, (root + "/sub").c_str(), times, 0), 0);
  EXPECT_EQ(ContentHasher(nullptr).Hash(root)->hash, original);

  ASSERT_EQ(rename((root + "/sub/c.bin").c_str(), (root + "/sub/d.bin").c_str()), 0);
  StatusOr<ContentHash> renamed = ContentHasher(nullptr).Hash(root);
  ASSERT_TRUE(renamed.ok());
  EXPECT_NE(renamed->hash, original);
  EXPECT_EQ(renamed->hash, ContentHashTestSha256sumOfText(dir_, HandManifest("d.bin")));
  ASSERT_EQ(rename((root + "/sub/d.bin").c_str(), (root + "/sub/c.bin").c_str()), 0);
  EXPECT_EQ(ContentHasher(nullptr).Hash(root)->hash, original);

  // The owner's execute bit is part of it.
  ASSERT_EQ(chmod((root + "/b.txt").c_str(), 0744), 0);
  EXPECT_NE(ContentHasher(nullptr).Hash(root)->hash, original);
  ASSERT_EQ(chmod((root + "/b.txt").c_str(), 0644), 0);
  // Group and other bits are not.
  ASSERT_EQ(chmod((root + "/run.sh").c_str(), 0700), 0);
  EXPECT_EQ(ContentHasher(nullptr).Hash(root)->hash, original);

  // A link's target is.
  ASSERT_EQ(unlink((root + "/link").c_str()), 0);
  ASSERT_EQ(symlink("sub", (root + "/link").c_str()), 0);
  EXPECT_NE(ContentHasher(nullptr).Hash(root)->hash, original);
}

TEST_F(ContentHashTest, SpecialFilesAreErrorsAndDoNotBlock) {
  const std::string fifo = dir_.Path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  dir_.Write("withfifo/a", "xyz");
  ASSERT_EQ(mkfifo(dir_.Path("withfifo/pipe").c_str(), 0644), 0);
  // No writer ever opens these FIFOs: a hasher that opened one to read would wait forever.
  int rc = grademl::testing::RunWithDeadline(10, [&] {
    ContentHasher hasher(nullptr);
    int64_t read = 0;
    bool ok = !hasher.Hash(fifo).ok() && !hasher.HashFile(fifo, &read).ok() &&
              !hasher.Hash(dir_.Path("withfifo")).ok();
    _exit(ok ? 0 : 1);
  });
  ASSERT_EQ(rc, 0) << "hashing a FIFO blocked or succeeded";
  ContentHasher hasher(nullptr);
  StatusOr<ContentHash> h = hasher.Hash(fifo);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find(fifo), std::string::npos) << h.status().message();
  int64_t read = 0;
  EXPECT_FALSE(hasher.HashFile(fifo, &read).ok());
  EXPECT_EQ(read, 0);
  StatusOr<ContentHash> d = hasher.Hash(dir_.Path("withfifo"));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("pipe"), std::string::npos) << d.status().message();
}

TEST_F(ContentHashTest, MissingPathIsNotFound) {
  StatusOr<ContentHash> h = ContentHasher(nullptr).Hash(dir_.Path("no-such-file"));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kNotFound);
  EXPECT_NE(h.status().message().find("no-such-file"), std::string::npos);
  // A dangling link given as the path.
  ASSERT_EQ(symlink("nowhere", dir_.Path("dangling").c_str()), 0);
  EXPECT_EQ(ContentHasher(nullptr).Hash(dir_.Path("dangling")).status().code(), StatusCode::kNotFound);
}

TEST(ContentHashTreeTest, EncodeParseRoundTrip) {
  std::vector<TreeEntry> entries;
  entries.push_back({.kind = TreeEntry::Kind::kFile, .path = "z", .executable = true, .size = 123456789012,
                     .hash = std::string(64, 'a')});
  entries.push_back({.kind = TreeEntry::Kind::kDirectory, .path = "d"});
  entries.push_back({.kind = TreeEntry::Kind::kSymlink, .path = "d/l", .target = "../../x y\nz"});
  entries.push_back({.kind = TreeEntry::Kind::kFile, .path = "d/f:1 2", .size = 0, .hash = std::string(64, '0')});
  entries.push_back({.kind = TreeEntry::Kind::kSymlink, .path = "e", .target = ""});
  const std::string text = EncodeTree(entries);
  EXPECT_EQ(text,
            "grademl-tree 1\n"
            "D 1:d\n"
            "F - 0 " + std::string(64, '0') + " 7:d/f:1 2\n"
            "L 11:../../x y\nz 3:d/l\n"
            "L 0: 1:e\n"
            "F x 123456789012 " + std::string(64, 'a') + " 1:z\n");
  StatusOr<std::vector<TreeEntry>> parsed = ParseTree(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->size(), 5u);
  EXPECT_EQ((*parsed)[0], entries[1]);
  EXPECT_EQ((*parsed)[1], entries[3]);
  EXPECT_EQ((*parsed)[2], entries[2]);
  EXPECT_EQ((*parsed)[3], entries[4]);
  EXPECT_EQ((*parsed)[4], entries[0]);
  EXPECT_EQ(EncodeTree(*parsed), text);
  StatusOr<std::vector<TreeEntry>> empty = ParseTree("grademl-tree 1\n");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(ContentHashTreeTest, RejectsHostileManifestsNamingTheLine) {
  const std::string h = std::string(64, 'c');
  const std::string hdr = "grademl-tree 1\n";
  struct Case {
    std::string text;
    int line;
  };
  const Case cases[] = {
      {hdr + "D 4:../x\n", 2},
      {hdr + "D 2:..\n", 2},
      {hdr + "D 4:/abs\n", 2},
      {hdr + "D 1:a\nD 4:a//b\n", 3},
      {hdr + "D 1:a\nD 5:a/./b\n", 3},
      {hdr + "D 1:a\nD 2:a/\n", 3},
      {hdr + "D 1:.\n", 2},
      {hdr + "D 0:\n", 2},
      {hdr + "D 1:a\nD 1:c\nD 1:b\n", 4},                            // unsorted
      {hdr + "D 1:a\nD 1:a\n", 3},                                   // duplicate
      {hdr + "D 1:a\nF - 1 " + h + " 1:a\n", 3},                     // duplicate, other kind
      {hdr + "D 3:a/b\n", 2},                                        // parent not listed
      {hdr + "D 1:a\nD 5:a/b/c\n", 3},                               // grandparent only
      {hdr + "L 1:x 1:a\nD 3:a/b\n", 3},                             // parent is a link
      {hdr + "F - 0 " + h + " 1:a\nF - 0 " + h + " 3:a/b\n", 3},     // parent is a file
      {hdr + "F - 1 " + std::string(64, 'C') + " 1:a\n", 2},         // uppercase hash
      {hdr + "F - 1 " + std::string(63, 'c') + " 1:a\n", 2},         // short hash
      {hdr + "F - 1 " + std::string(63, 'c') + "g 1:a\n", 2},        // not hex
      {hdr + "F - 1a " + h + " 1:a\n", 2},                           // size with letters
      {hdr + "F - -1 " + h + " 1:a\n", 2},                           // negative size
      {hdr + "F - 1234567890123456789012 " + h + " 1:a\n", 2},       // size overflows
      {hdr + "F - " + h + " 1:a\n", 2},                              // no size
      {hdr + "F y 1 " + h + " 1:a\n", 2},                            // neither x nor -
      {hdr + "D 1:a\nX 1:b\n", 3},                                   // unknown kind
      {hdr + "D 1:a\nD 1:b", 3},                                     // truncated last line
      {hdr + "D 1:a\nD 5:b\n", 3},                                   // length past the end
      {hdr + "D 1:a\nD 1:bc\n", 3},                                  // length short of the line
      {hdr + "D x:a\n", 2},
      {hdr + "D :a\n", 2},
      {hdr + "L 1:x\n", 2},                                          // link without a path
      {hdr + std::string("D 3:a\0b\n", 8), 2},                        // NUL in a name
      {hdr + "D\n", 2},
      {hdr + "\n", 2},
      {"D 1:a\n", 1},                                                // no header
      {"grademl-tree 2\nD 1:a\n", 1},
      {"", 1},
  };
  for (const Case& c : cases) {
    StatusOr<std::vector<TreeEntry>> parsed = ParseTree(c.text);
    ASSERT_FALSE(parsed.ok()) << "accepted: " << c.text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kCorrupt) << c.text;
    EXPECT_NE(parsed.status().message().find("line " + std::to_string(c.line)), std::string::npos)
        << c.text << " -> " << parsed.status().message();
  }
}

}  // namespace
}  // namespace grademl::reuse
