// The content-addressed artifact store (reuse/artifact_store.h): materialise and restore
// files and directories, refuse what was tampered with (leaving the destination as it was),
// evict what no kept artifact needs; sizes parsed for --reuse-budget.
#include "reuse/artifact_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "workflow/spec_test_support.h"
#include "sha256sum.h"
#include "skip_or_fail.h"

namespace grademl::reuse {
namespace {

namespace fs = std::filesystem;
using workflow::testing::SpecDir;

std::string ArtifactStoreTestRead(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ArtifactStoreTestRandom(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

bool ArtifactStoreTestExecutable(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && (st.st_mode & S_IXUSR) != 0;
}

// Everything under `root` (or `root` itself, a file): relative path -> kind, owner-execute
// bit and content. Two equal snapshots are byte-identical trees.
std::map<std::string, std::string> ArtifactStoreTestSnapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  auto describe = [](const fs::path& p) -> std::string {
    struct stat st {};
    if (lstat(p.c_str(), &st) != 0) return "?";
    if (S_ISDIR(st.st_mode)) return "dir";
    if (S_ISLNK(st.st_mode)) return "link " + fs::read_symlink(p).string();
    if (!S_ISREG(st.st_mode)) return "special";
    return std::string((st.st_mode & S_IXUSR) ? "exec " : "file ") + ArtifactStoreTestRead(p.string());
  };
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(root, ec))) return out;
  out["."] = describe(root);
  if (!fs::is_directory(fs::symlink_status(root, ec))) return out;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    out[fs::relative(it->path(), root).string()] = describe(it->path());
  }
  return out;
}

// The names in directory `dir`.
std::vector<std::string> ArtifactStoreTestNames(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

int64_t ArtifactStoreTestSize(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

class ArtifactStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status available = Sha256Available();
    ASSERT_TRUE(available.ok()) << available.message();
    if (access("/usr/bin/sha256sum", X_OK) != 0) SKIP_OR_FAIL_IN_CI("no /usr/bin/sha256sum (coreutils)");
    StatusOr<std::unique_ptr<ArtifactStore>> s = ArtifactStore::Open(dir_.Path("store"));
    ASSERT_TRUE(s.ok()) << s.status().message();
    store_ = std::move(s).value();
    // The store refuses to fill a file system past 1 GiB (or 5%) free. These tests write a
    // few MB: they see a roomy disk whatever the free space of the one they run on (they used
    // to skip on a disk with less than 1 GiB free); RefusesToFillTheDisk tests the refusal.
    SetDiskSpace(int64_t{1} << 40, int64_t{1} << 39);
  }

  void SetDiskSpace(int64_t total, int64_t available) {
    store_->SetDiskSpaceForTesting([=] { return std::optional<ArtifactStore::DiskSpace>({total, available}); });
  }

  // The artifact `rel` of the step directory "work", hashed.
  model::StepArtifact Hashed(const std::string& rel, ContentHash* content = nullptr) {
    StatusOr<ContentHash> h = ContentHasher(nullptr).Hash(dir_.Path("work/" + rel));
    EXPECT_TRUE(h.ok()) << h.status().message();
    if (!h.ok()) return {};
    if (content != nullptr) *content = *h;
    return model::StepArtifact{.path = rel, .hash = h->hash, .size = h->size, .directory = h->directory};
  }
  std::string Object(const std::string& hash) const { return store_->dir() + "/objects/" + hash.substr(0, 2) + "/" + hash; }
  std::string Tree(const std::string& hash) const { return store_->dir() + "/trees/" + hash.substr(0, 2) + "/" + hash; }
  std::string Ref(const std::string& hash) const { return store_->dir() + "/refs/" + hash.substr(0, 2) + "/" + hash; }

  // work/model: nested directories, an empty one, an executable file, files of every size.
  void MakeModelDir() {
    dir_.Write("work/model/weights/layer1.bin", ArtifactStoreTestRandom(50'000, 1));
    dir_.Write("work/model/weights/layer2.bin", ArtifactStoreTestRandom((1 << 20) + 3, 2));
    dir_.Write("work/model/config.txt", "layers: 2\n");
    dir_.Write("work/model/zero", "");
    dir_.Write("work/model/bin/run.sh", "#!/bin/sh\nexec python predict.py\n");
    ASSERT_EQ(chmod(dir_.Path("work/model/bin/run.sh").c_str(), 0755), 0);
    fs::create_directories(dir_.Path("work/model/empty"));
    fs::create_directories(dir_.Path("work/model/nested/a/b"));
  }

  SpecDir dir_;
  std::unique_ptr<ArtifactStore> store_;
};

TEST_F(ArtifactStoreTest, FileMaterialisedAndRestored) {
  const std::string content = ArtifactStoreTestRandom(200'001, 3);
  dir_.Write("work/model.bin", content);
  ASSERT_EQ(chmod(dir_.Path("work/model.bin").c_str(), 0755), 0);
  dir_.Write("work/metrics.json", "{\"acc\": 0.9}\n");
  const model::StepArtifact a = Hashed("model.bin");
  const model::StepArtifact m = Hashed("metrics.json");
  ASSERT_EQ(a.hash, grademl::testing::Sha256sumOf(dir_.Path("work/model.bin")));

  EXPECT_FALSE(store_->Has(a));
  StatusOr<int64_t> written = store_->Materialize(dir_.Path("work/model.bin"), a, nullptr);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(*written, 200'001);
  EXPECT_TRUE(store_->Has(a));
  EXPECT_EQ(grademl::testing::Sha256sumOf(Object(a.hash)), a.hash);
  // Again: already there, nothing written.
  EXPECT_EQ(*store_->Materialize(dir_.Path("work/model.bin"), a, nullptr), 0);
  ASSERT_TRUE(store_->Materialize(dir_.Path("work/metrics.json"), m, nullptr).ok());

  // To a new place, its directories created.
  const std::string dest = dir_.Path("elsewhere/deep/model.bin");
  ContentHasher told(nullptr);
  StatusOr<int64_t> restored = store_->Restore(a, dest, &told);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  EXPECT_EQ(*restored, 200'001);
  EXPECT_EQ(ArtifactStoreTestRead(dest), content);
  EXPECT_TRUE(ArtifactStoreTestExecutable(dest));
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("elsewhere/deep")), std::vector<std::string>{"model.bin"});
  // The hasher was told: it does not read the file again.
  StatusOr<ContentHash> again = told.Hash(dest);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->hash, a.hash);
  EXPECT_EQ(again->bytes_read, 0);

  const std::string mdest = dir_.Path("elsewhere/metrics.json");
  ASSERT_TRUE(store_->Restore(m, mdest, nullptr).ok());
  EXPECT_EQ(ArtifactStoreTestRead(mdest), "{\"acc\": 0.9}\n");
  EXPECT_FALSE(ArtifactStoreTestExecutable(mdest));

  // Over an existing file, and over a directory.
  dir_.Write("over/file.bin", "old content");
  ASSERT_TRUE(store_->Restore(a, dir_.Path("over/file.bin"), nullptr).ok());
  EXPECT_EQ(ArtifactStoreTestRead(dir_.Path("over/file.bin")), content);
  dir_.Write("over/dir.bin/inside.txt", "x");
  ASSERT_TRUE(store_->Restore(a, dir_.Path("over/dir.bin"), nullptr).ok());
  EXPECT_EQ(ArtifactStoreTestRead(dir_.Path("over/dir.bin")), content);
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("over")), (std::vector<std::string>{"dir.bin", "file.bin"}));

  // Not materialised.
  model::StepArtifact other{.path = "x", .hash = std::string(64, 'a'), .size = 1};
  StatusOr<int64_t> none = store_->Restore(other, dir_.Path("x"), nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(dir_.Path("x")));
  EXPECT_FALSE(store_->Has(model::StepArtifact{.hash = "not a hash"}));
  EXPECT_FALSE(store_->Materialize(dir_.Path("work/model.bin"), model::StepArtifact{.path = "model.bin"}, nullptr).ok());
}

// An artifact that would leave less than 1 GiB, or 5% of the file system, free is refused
// with one line naming the store, and nothing of it is stored; one that leaves enough is
// stored. The file system's figures are the test's (the hook); the thresholds by hand.
TEST_F(ArtifactStoreTest, RefusesToFillTheDisk) {
  dir_.Write("work/big.bin", std::string(200, 'b'));
  dir_.Write("work/small.bin", std::string(50, 's'));
  const model::StepArtifact big = Hashed("big.bin");
  const model::StepArtifact small = Hashed("small.bin");
  constexpr int64_t kGiB = int64_t{1} << 30;
  // 10 GiB: 5% is 0.5 GiB, so 1 GiB must stay free; 1 GiB + 100 bytes are.
  SetDiskSpace(10 * kGiB, kGiB + 100);
  StatusOr<int64_t> refused = store_->Materialize(dir_.Path("work/big.bin"), big, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(store_->dir()), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("would leave less than 1024 MiB free"), std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(store_->Has(big));
  StatusOr<int64_t> stored = store_->Materialize(dir_.Path("work/small.bin"), small, nullptr);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_EQ(*stored, 50);
  // 100 GiB: 5% (5 GiB) is more than 1 GiB and is what must stay free.
  SetDiskSpace(100 * kGiB, 5 * kGiB + 100);
  refused = store_->Materialize(dir_.Path("work/big.bin"), big, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("would leave less than 5120 MiB free"), std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(store_->Has(big));
  // Unknown figures (statvfs failed): not refused, the writes will tell.
  store_->SetDiskSpaceForTesting([] { return std::optional<ArtifactStore::DiskSpace>(); });
  stored = store_->Materialize(dir_.Path("work/big.bin"), big, nullptr);
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_TRUE(store_->Has(big));
}

TEST_F(ArtifactStoreTest, DirectoryMaterialisedAndRestored) {
  MakeModelDir();
  ContentHash c;
  const model::StepArtifact a = Hashed("model", &c);
  ASSERT_TRUE(a.directory);
  const int64_t files = 50'000 + (1 << 20) + 3 + 10 + 0 + 33;
  ASSERT_EQ(a.size, files);
  EXPECT_FALSE(store_->Has(a));
  StatusOr<int64_t> written = store_->Materialize(dir_.Path("work/model"), a, &c);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_TRUE(store_->Has(a));
  EXPECT_EQ(*written, files + ArtifactStoreTestSize(Tree(a.hash)));
  EXPECT_EQ(grademl::testing::Sha256sumOf(Tree(a.hash)), a.hash);
  EXPECT_EQ(ArtifactStoreTestRead(Ref(a.hash)), "tree " + std::to_string(files) + "\n");

  const auto original = ArtifactStoreTestSnapshot(dir_.Path("work/model"));
  ASSERT_EQ(original.count("empty"), 1u);
  ASSERT_EQ(original.at("bin/run.sh").substr(0, 5), "exec ");
  const std::string dest = dir_.Path("restored/model");
  StatusOr<int64_t> restored = store_->Restore(a, dest, nullptr);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  EXPECT_EQ(*restored, files);
  EXPECT_EQ(ArtifactStoreTestSnapshot(dest), original);
  EXPECT_TRUE(fs::is_directory(dest + "/empty"));
  EXPECT_TRUE(fs::is_empty(dest + "/empty"));
  EXPECT_TRUE(fs::is_directory(dest + "/nested/a/b"));
  EXPECT_TRUE(ArtifactStoreTestExecutable(dest + "/bin/run.sh"));
  EXPECT_FALSE(ArtifactStoreTestExecutable(dest + "/config.txt"));
  EXPECT_EQ(ContentHasher(nullptr).Hash(dest)->hash, a.hash);
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("restored")), std::vector<std::string>{"model"});

  // Over an existing directory with other things in it, and over a file.
  dir_.Write("again/model/stale.txt", "stale");
  dir_.Write("again/model/weights/layer3.bin", "stale too");
  ASSERT_TRUE(store_->Restore(a, dir_.Path("again/model"), nullptr).ok());
  EXPECT_EQ(ArtifactStoreTestSnapshot(dir_.Path("again/model")), original);
  dir_.Write("again/file", "a file where the directory goes");
  ASSERT_TRUE(store_->Restore(a, dir_.Path("again/file"), nullptr).ok());
  EXPECT_EQ(ArtifactStoreTestSnapshot(dir_.Path("again/file")), original);
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("again")), (std::vector<std::string>{"file", "model"}));

  // A directory needs its manifest.
  model::StepArtifact fresh = a;
  fresh.hash = grademl::testing::Sha256sumOf(dir_.Path("work/model/config.txt"));  // not materialised
  EXPECT_FALSE(store_->Materialize(dir_.Path("work/model"), fresh, nullptr).ok());
  EXPECT_FALSE(store_->Materialize(dir_.Path("work/model"), fresh, &c).ok());  // another's manifest
  EXPECT_FALSE(store_->Has(fresh));
}

TEST_F(ArtifactStoreTest, TamperedObjectIsRefusedAndTheDestinationKept) {
  dir_.Write("work/model.bin", "the model's true bytes\n");
  const model::StepArtifact a = Hashed("model.bin");
  ASSERT_TRUE(store_->Materialize(dir_.Path("work/model.bin"), a, nullptr).ok());
  const std::string object = Object(a.hash);
  ASSERT_EQ(chmod(object.c_str(), 0644), 0);
  {
    std::ofstream out(object, std::ios::binary | std::ios::trunc);
    out << "the model's fake bytes\n";  // the same size (another size is refused before copying)
  }
  EXPECT_TRUE(store_->Has(a));  // the ref says nothing of the content

  dir_.Write("dest/model.bin", "previous\n");
  StatusOr<int64_t> r = store_->Restore(a, dir_.Path("dest/model.bin"), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not match its hash"), std::string::npos) << r.status().message();
  EXPECT_EQ(ArtifactStoreTestRead(dir_.Path("dest/model.bin")), "previous\n");
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("dest")), std::vector<std::string>{"model.bin"});

  r = store_->Restore(a, dir_.Path("dest/absent.bin"), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not match its hash"), std::string::npos);
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("dest")), std::vector<std::string>{"model.bin"});

  // An object gone.
  ASSERT_EQ(unlink(object.c_str()), 0);
  EXPECT_FALSE(store_->Restore(a, dir_.Path("dest/model.bin"), nullptr).ok());
  EXPECT_EQ(ArtifactStoreTestRead(dir_.Path("dest/model.bin")), "previous\n");
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("dest")), std::vector<std::string>{"model.bin"});
}

// A restore told to stop (grademl was asked to) ends with an error after its first block,
// and, as for any error, the destination is as it was.
TEST_F(ArtifactStoreTest, AStoppedRestoreKeepsTheDestination) {
  MakeModelDir();
  ContentHash content;
  const model::StepArtifact a = Hashed("model", &content);
  ASSERT_TRUE(store_->Materialize(dir_.Path("work/model"), a, &content).ok());
  dir_.Write("dest/model/old.txt", "previous\n");
  int asked = 0;
  store_->SetStop([&] { return ++asked > 1; });  // the first block goes, then stop
  StatusOr<int64_t> r = store_->Restore(a, dir_.Path("dest/model"), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("stopped (grademl was asked to stop)"), std::string::npos) << r.status().message();
  EXPECT_EQ(ArtifactStoreTestRead(dir_.Path("dest/model/old.txt")), "previous\n");
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("dest")), std::vector<std::string>{"model"});
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("dest/model")), std::vector<std::string>{"old.txt"});
  store_->SetStop(nullptr);
  EXPECT_TRUE(store_->Restore(a, dir_.Path("dest/model"), nullptr).ok());
}

// Hashing told to stop ends with an error naming the file, between 1 MiB blocks.
TEST_F(ArtifactStoreTest, AStoppedHashIsAnError) {
  dir_.Write("work/big.bin", ArtifactStoreTestRandom(3 << 20, 9));
  ContentHasher hasher(nullptr);
  int asked = 0;
  hasher.SetStop([&] { return ++asked > 2; });
  StatusOr<ContentHash> h = hasher.Hash(dir_.Path("work/big.bin"));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().message(), dir_.Path("work/big.bin") + ": hashing stopped (grademl was asked to stop)");
  EXPECT_EQ(asked, 3);
}

TEST_F(ArtifactStoreTest, TamperedObjectOfADirectoryKeepsTheDestination) {
  MakeModelDir();
  ContentHash c;
  const model::StepArtifact a = Hashed("model", &c);
  ASSERT_TRUE(store_->Materialize(dir_.Path("work/model"), a, &c).ok());
  // The last file restored is the one tampered with: everything before it was written.
  const std::string victim = Object(grademl::testing::Sha256sumOf(dir_.Path("work/model/zero")));
  ASSERT_EQ(chmod(victim.c_str(), 0644), 0);
  {
    std::ofstream out(victim, std::ios::binary | std::ios::trunc);
    out << "!";
  }
  dir_.Write("dest/model/mine.txt", "my own work\n");
  const auto before = ArtifactStoreTestSnapshot(dir_.Path("dest"));
  StatusOr<int64_t> r = store_->Restore(a, dir_.Path("dest/model"), nullptr);
  ASSERT_FALSE(r.ok());
  // Its size differs from the manifest's: refused before a byte of it is copied.
  EXPECT_NE(r.status().message().find("is 1 bytes, recorded"), std::string::npos) << r.status().message();
  EXPECT_EQ(ArtifactStoreTestSnapshot(dir_.Path("dest")), before);
  r = store_->Restore(a, dir_.Path("dest/other"), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ArtifactStoreTestSnapshot(dir_.Path("dest")), before);
}

TEST_F(ArtifactStoreTest, TamperedManifestIsRefused) {
  MakeModelDir();
  ContentHash c;
  const model::StepArtifact a = Hashed("model", &c);
  ASSERT_TRUE(store_->Materialize(dir_.Path("work/model"), a, &c).ok());
  const std::string tree = Tree(a.hash);
  const std::string manifest = ArtifactStoreTestRead(tree);
  ASSERT_EQ(chmod(tree.c_str(), 0644), 0);
  dir_.Write("dest/model/mine.txt", "my own work\n");
  const auto before = ArtifactStoreTestSnapshot(dir_.Path("dest"));
  // An entry added that would write outside the destination; an entry dropped.
  for (const std::string& forged : {manifest + "D 5:zzz/x\n", std::string("grademl-tree 1\nD 7:../../x\n"),
                                    manifest.substr(0, manifest.rfind("F "))}) {
    {
      std::ofstream out(tree, std::ios::binary | std::ios::trunc);
      out << forged;
    }
    StatusOr<int64_t> r = store_->Restore(a, dir_.Path("dest/model"), nullptr);
    ASSERT_FALSE(r.ok()) << forged;
    EXPECT_NE(r.status().message().find("does not match its hash"), std::string::npos) << r.status().message();
    EXPECT_EQ(ArtifactStoreTestSnapshot(dir_.Path("dest")), before);
    EXPECT_FALSE(fs::exists(dir_.Path("x")));
  }
  // Put back: restored.
  {
    std::ofstream out(tree, std::ios::binary | std::ios::trunc);
    out << manifest;
  }
  EXPECT_TRUE(store_->Restore(a, dir_.Path("dest/model"), nullptr).ok());
}

// A step key's record binds it to its outputs, trusted only when its OS owner is a trusted
// user and it names the row's hashes, sizes and kinds (the uid in its name proves nothing).
TEST_F(ArtifactStoreTest, ARecordIsTrustedByItsOwnerAndContent) {
  dir_.Write("work/model.bin", "the model\n");
  const model::StepArtifact a = Hashed("model.bin");
  ASSERT_TRUE(store_->Materialize(dir_.Path("work/model.bin"), a, nullptr).ok());
  const std::string key(64, 'a');
  const uint32_t me = static_cast<uint32_t>(geteuid());
  EXPECT_FALSE(store_->CheckRecord(key, {a}, {me}).trusted);
  EXPECT_EQ(store_->CheckRecord(key, {a}, {me}).why, "no trusted record of its outputs in the artifact store");
  ASSERT_TRUE(store_->WriteRecord(key, {a}).ok());
  const std::string record = store_->dir() + "/keys/aa/" + key + "." + std::to_string(me);
  EXPECT_EQ(ArtifactStoreTestRead(record), "grademl-record 1\nkey " + key + "\nfile 10 " + a.hash + "\n");
  EXPECT_TRUE(store_->CheckRecord(key, {a}, {me}).trusted);
  // Another user's trust alone: not trusted, and the line names who recorded it.
  ArtifactStore::RecordCheck other = store_->CheckRecord(key, {a}, {me + 1});
  EXPECT_FALSE(other.trusted);
  EXPECT_NE(other.why.find("recorded by "), std::string::npos) << other.why;
  // The row changed (another hash, another size): my record disagrees.
  model::StepArtifact changed = a;
  changed.hash = std::string(64, 'b');
  EXPECT_FALSE(store_->CheckRecord(key, {changed}, {me}).trusted);
  EXPECT_NE(store_->CheckRecord(key, {changed}, {me}).why.find("disagrees"), std::string::npos);
  changed = a;
  changed.size = 11;
  EXPECT_FALSE(store_->CheckRecord(key, {changed}, {me}).trusted);
  EXPECT_FALSE(store_->CheckRecord(key, {a, a}, {me}).trusted);
  // A link named as my record is not my record.
  ASSERT_EQ(unlink(record.c_str()), 0);
  ASSERT_TRUE(store_->WriteRecord(std::string(64, 'c'), {a}).ok());
  ASSERT_EQ(symlink((store_->dir() + "/keys/cc/" + std::string(64, 'c') + "." + std::to_string(me)).c_str(), record.c_str()), 0);
  EXPECT_FALSE(store_->CheckRecord(key, {a}, {me}).trusted);
  // The keys folders are sticky: nobody replaces another's record.
  struct stat st {};
  ASSERT_EQ(stat((store_->dir() + "/keys/aa").c_str(), &st), 0);
  EXPECT_NE(st.st_mode & S_ISVTX, 0u);
}

// An object whose size differs from the recorded one is refused before a byte is copied: a
// sparse 1 TiB object costs nothing.
TEST_F(ArtifactStoreTest, AnObjectLargerThanRecordedIsNotCopied) {
  dir_.Write("work/model.bin", "the model\n");
  const model::StepArtifact a = Hashed("model.bin");
  ASSERT_TRUE(store_->Materialize(dir_.Path("work/model.bin"), a, nullptr).ok());
  const std::string object = Object(a.hash);
  ASSERT_EQ(chmod(object.c_str(), 0644), 0);
  ASSERT_EQ(truncate(object.c_str(), off_t{1} << 40), 0);
  int asked = 0;
  store_->SetStop([&] { return ++asked > 2; });  // counts the blocks copied; a store that copies stops soon
  fs::create_directories(dir_.Path("dest"));
  StatusOr<int64_t> r = store_->Restore(a, dir_.Path("dest/model.bin"), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is 1099511627776 bytes, recorded 10: not copied"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(asked, 0);
  EXPECT_TRUE(ArtifactStoreTestNames(dir_.Path("dest")).empty());
}

// Objects get their output's permissions less group and other write; restores keep them.
TEST_F(ArtifactStoreTest, PermissionsOfTheOutputAreKept) {
  const mode_t old = umask(022);
  for (mode_t mode : {0600, 0644, 0755, 0664, 0400}) {
    std::string content = "content " + std::to_string(mode) + "\n";
    std::string name = "f" + std::to_string(mode);
    dir_.Write("work/" + name, content);
    ASSERT_EQ(chmod(dir_.Path("work/" + name).c_str(), mode), 0);
    const model::StepArtifact a = Hashed(name);
    ASSERT_TRUE(store_->Materialize(dir_.Path("work/" + name), a, nullptr).ok());
    struct stat st {};
    ASSERT_EQ(stat(Object(a.hash).c_str(), &st), 0);
    const mode_t stored = mode & 0755;
    EXPECT_EQ(st.st_mode & 07777, stored) << std::oct << mode;
    ASSERT_TRUE(store_->Restore(a, dir_.Path("dest/" + name), nullptr).ok());
    ASSERT_EQ(stat(dir_.Path("dest/" + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, stored | 0600) << std::oct << mode;  // restored writable by the user
  }
  umask(old);
}

// What a killed restore left beside an output is removed once its process is gone; a live
// one's is kept; an output moved aside and not replaced is moved back.
TEST_F(ArtifactStoreTest, StaleStagingIsRemovedLiveIsKept) {
  std::string stat_line = ArtifactStoreTestRead("/proc/self/stat");
  std::istringstream fields(stat_line.substr(stat_line.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) fields >> field;  // field 22: the start time
  const std::string live = std::to_string(getpid()) + "-" + field;
  dir_.Write("dest/.out.bin.grademl-restore-" + live + "-0123", "live");
  dir_.Write("dest/.out.bin.grademl-restore-" + std::to_string(getpid()) + "-1-0123", "pid reused");
  dir_.Write("dest/.out.bin.grademl-restore-999999999-5-0123/x", "dead");
  dir_.Write("dest/.out.bin.grademl-restore-0123456789abcdef", "an older grademl's: not ours to judge");
  dir_.Write("dest/.other.grademl-restore-999999999-5-0123", "another output's");
  dir_.Write("dest/.out.bin.grademl-old-999999999-5-0123", "the old output");
  ArtifactStore::RemoveStaleStaging(dir_.Path("dest/out.bin"));
  std::vector<std::string> expected = {".other.grademl-restore-999999999-5-0123", ".out.bin.grademl-restore-" + live + "-0123",
                                       ".out.bin.grademl-restore-0123456789abcdef", "out.bin"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("dest")), expected);
  EXPECT_EQ(ArtifactStoreTestRead(dir_.Path("dest/out.bin")), "the old output");
}

// A restore killed midway is found through the store's restores/ folder (not by listing the
// outputs' folders): the next run removes its staging copy once its process is gone; a file
// there that is not this user's names nothing to remove.
TEST_F(ArtifactStoreTest, TheNextRunRemovesAKilledRestoresStaging) {
  dir_.Write("dest/.out.bin.grademl-restore-999999999-5-0123", "staged");
  dir_.Write("dest/.keep.grademl-restore-999999999-5-0123", "another output's, not registered");
  dir_.Write("store/restores/999999999-5-0123", dir_.Path("dest/out.bin"));
  dir_.Write("store/restores/999999998-5-0123", dir_.Path("dest/keep"));
  ASSERT_EQ(chown(dir_.Path("store/restores/999999998-5-0123").c_str(), geteuid() + 1, static_cast<gid_t>(-1)), 0);
  store_->RemoveStaleRestores();
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("dest")), std::vector<std::string>{".keep.grademl-restore-999999999-5-0123"});
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("store/restores")), std::vector<std::string>{"999999998-5-0123"});
  // A restore that ends leaves nothing there.
  dir_.Write("work/model.bin", "the model\n");
  const model::StepArtifact a = Hashed("model.bin");
  ASSERT_TRUE(store_->Materialize(dir_.Path("work/model.bin"), a, nullptr).ok());
  ASSERT_TRUE(store_->Restore(a, dir_.Path("dest/model.bin"), nullptr).ok());
  EXPECT_EQ(ArtifactStoreTestNames(dir_.Path("store/restores")), std::vector<std::string>{"999999998-5-0123"});
}

// A setgid store folder is a team's (docs/reuse.md): the folders grademl makes in it are
// group-writable and setgid whatever the umask; keys/ (records) is sticky besides.
TEST_F(ArtifactStoreTest, ASetgidStoreFolderIsGroupShared) {
  const mode_t old = umask(022);
  fs::create_directories(dir_.Path("team"));
  ASSERT_EQ(chmod(dir_.Path("team").c_str(), 02775), 0);
  StatusOr<std::unique_ptr<ArtifactStore>> team = ArtifactStore::Open(dir_.Path("team"));
  ASSERT_TRUE(team.ok()) << team.status().message();
  dir_.Write("work/model.bin", "the model\n");
  const model::StepArtifact a = Hashed("model.bin");
  ASSERT_TRUE((*team)->Materialize(dir_.Path("work/model.bin"), a, nullptr).ok());
  ASSERT_TRUE((*team)->WriteRecord(std::string(64, 'a'), {a}).ok());
  umask(old);
  auto mode = [&](const std::string& rel) {
    struct stat st {};
    return stat(dir_.Path("team/" + rel).c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
  };
  EXPECT_EQ(mode("objects"), 02775u);
  EXPECT_EQ(mode("objects/" + a.hash.substr(0, 2)), 02775u);
  EXPECT_EQ(mode("keys"), 03775u);
  EXPECT_EQ(mode("keys/aa"), 03775u);
  EXPECT_EQ(mode("objects/" + a.hash.substr(0, 2) + "/" + a.hash), 0644u);  // the output's, 644
  // Without the setgid bit, the umask decides (a private store).
  struct stat st {};
  ASSERT_EQ(stat((store_->dir() + "/objects").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & S_ISGID, 0u);
}

TEST_F(ArtifactStoreTest, DirectoryWithALinkIsNotMaterialised) {
  dir_.Write("work/linked/data.txt", "data\n");
  ASSERT_EQ(symlink("data.txt", dir_.Path("work/linked/alias").c_str()), 0);
  ContentHash c;
  const model::StepArtifact a = Hashed("linked", &c);
  ASSERT_TRUE(c.has_symlinks);
  StatusOr<int64_t> w = store_->Materialize(dir_.Path("work/linked"), a, &c);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("link"), std::string::npos) << w.status().message();
  EXPECT_FALSE(store_->Has(a));
  StatusOr<std::vector<ArtifactStore::Stored>> listed = store_->List();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  // Without its manifest, or with another's, a directory is not materialised either.
  EXPECT_FALSE(store_->Materialize(dir_.Path("work/linked"), a, nullptr).ok());
  EXPECT_FALSE(store_->Has(a));
}

TEST_F(ArtifactStoreTest, ExecutableBitFollowsTheManifestNotTheSharedObject) {
  // The same bytes, executable in one directory and not in the other: one object.
  dir_.Write("work/p/tool", "#!/bin/sh\necho same\n");
  ASSERT_EQ(chmod(dir_.Path("work/p/tool").c_str(), 0755), 0);
  dir_.Write("work/q/data", "#!/bin/sh\necho same\n");
  ASSERT_EQ(chmod(dir_.Path("work/q/data").c_str(), 0644), 0);
  ContentHash pc, qc;
  const model::StepArtifact p = Hashed("p", &pc);
  const model::StepArtifact q = Hashed("q", &qc);
  ASSERT_TRUE(store_->Materialize(dir_.Path("work/p"), p, &pc).ok());
  ASSERT_TRUE(store_->Materialize(dir_.Path("work/q"), q, &qc).ok());
  ASSERT_TRUE(store_->Restore(q, dir_.Path("out/q"), nullptr).ok());
  ASSERT_TRUE(store_->Restore(p, dir_.Path("out/p"), nullptr).ok());
  EXPECT_FALSE(ArtifactStoreTestExecutable(dir_.Path("out/q/data")));
  EXPECT_TRUE(ArtifactStoreTestExecutable(dir_.Path("out/p/tool")));
  EXPECT_EQ(ContentHasher(nullptr).Hash(dir_.Path("out/q"))->hash, q.hash);
  EXPECT_EQ(ContentHasher(nullptr).Hash(dir_.Path("out/p"))->hash, p.hash);
}

TEST_F(ArtifactStoreTest, ListAndEvictKeepWhatKeptArtifactsNeed) {
  const std::string x = ArtifactStoreTestRandom(1000, 11);
  const std::string y = ArtifactStoreTestRandom(2000, 12);
  const std::string z = ArtifactStoreTestRandom(3000, 13);
  const std::string w = ArtifactStoreTestRandom(4000, 14);
  dir_.Write("work/a/x.bin", x);
  dir_.Write("work/a/y.bin", y);
  dir_.Write("work/b/copy-of-x.bin", x);  // the same content in two artifacts
  dir_.Write("work/b/z.bin", z);
  dir_.Write("work/f.bin", w);
  ContentHash ac, bc;
  const model::StepArtifact a = Hashed("a", &ac);
  const model::StepArtifact b = Hashed("b", &bc);
  const model::StepArtifact f = Hashed("f.bin");
  const std::string hx = grademl::testing::Sha256sumOf(dir_.Path("work/a/x.bin"));
  const std::string hy = grademl::testing::Sha256sumOf(dir_.Path("work/a/y.bin"));
  const std::string hz = grademl::testing::Sha256sumOf(dir_.Path("work/b/z.bin"));
  ASSERT_EQ(f.hash, grademl::testing::Sha256sumOf(dir_.Path("work/f.bin")));

  StatusOr<int64_t> wa = store_->Materialize(dir_.Path("work/a"), a, &ac);
  ASSERT_TRUE(wa.ok()) << wa.status().message();
  EXPECT_EQ(*wa, 3000 + ArtifactStoreTestSize(Tree(a.hash)));
  StatusOr<int64_t> wb = store_->Materialize(dir_.Path("work/b"), b, &bc);
  ASSERT_TRUE(wb.ok());
  EXPECT_EQ(*wb, 3000 + ArtifactStoreTestSize(Tree(b.hash)));  // x was there already
  ASSERT_TRUE(store_->Materialize(dir_.Path("work/f.bin"), f, nullptr).ok());

  StatusOr<std::vector<ArtifactStore::Stored>> listed = store_->List();
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  ASSERT_EQ(listed->size(), 3u);
  std::map<std::string, ArtifactStore::Stored> by_hash;
  for (const ArtifactStore::Stored& s : *listed) by_hash[s.hash] = s;
  ASSERT_EQ(by_hash.size(), 3u);
  EXPECT_TRUE(by_hash[a.hash].directory);
  EXPECT_EQ(by_hash[a.hash].size, 3000);
  EXPECT_TRUE(by_hash[b.hash].directory);
  EXPECT_EQ(by_hash[b.hash].size, 4000);
  EXPECT_FALSE(by_hash[f.hash].directory);
  EXPECT_EQ(by_hash[f.hash].size, 4000);
  for (size_t i = 1; i < listed->size(); ++i) EXPECT_LT((*listed)[i - 1].hash, (*listed)[i].hash);

  const int64_t expected_freed = ArtifactStoreTestSize(Object(hz)) + ArtifactStoreTestSize(Object(f.hash)) +
                                 ArtifactStoreTestSize(Tree(b.hash)) + ArtifactStoreTestSize(Ref(b.hash)) +
                                 ArtifactStoreTestSize(Ref(f.hash));
  const int64_t disk_before = store_->DiskBytes();
  // A writer's leftover in tmp/ goes too.
  std::ofstream(store_->dir() + "/tmp/leftover.123") << "partial";
  StatusOr<int64_t> freed = store_->Evict({a.hash});
  ASSERT_TRUE(freed.ok()) << freed.status().message();
  EXPECT_EQ(*freed, expected_freed);
  EXPECT_EQ(store_->DiskBytes(), disk_before - expected_freed);
  EXPECT_TRUE(fs::is_empty(store_->dir() + "/tmp"));

  EXPECT_TRUE(store_->Has(a));
  EXPECT_FALSE(store_->Has(b));
  EXPECT_FALSE(store_->Has(f));
  EXPECT_TRUE(fs::exists(Object(hx)));  // shared with the kept tree
  EXPECT_TRUE(fs::exists(Object(hy)));
  EXPECT_FALSE(fs::exists(Object(hz)));
  EXPECT_FALSE(fs::exists(Object(f.hash)));
  EXPECT_TRUE(fs::exists(Tree(a.hash)));
  EXPECT_FALSE(fs::exists(Tree(b.hash)));
  listed = store_->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].hash, a.hash);

  ASSERT_TRUE(store_->Restore(a, dir_.Path("out/a"), nullptr).ok());
  EXPECT_EQ(ArtifactStoreTestSnapshot(dir_.Path("out/a")), ArtifactStoreTestSnapshot(dir_.Path("work/a")));
  EXPECT_EQ(store_->Restore(b, dir_.Path("out/b"), nullptr).status().code(), StatusCode::kNotFound);

  // Keeping a file artifact keeps its object; keeping nothing empties the store.
  ASSERT_TRUE(store_->Materialize(dir_.Path("work/f.bin"), f, nullptr).ok());
  ASSERT_TRUE(store_->Evict({f.hash}).ok());
  EXPECT_FALSE(store_->Has(a));
  EXPECT_TRUE(store_->Has(f));
  EXPECT_FALSE(fs::exists(Object(hx)));
  ASSERT_TRUE(store_->Restore(f, dir_.Path("out/f.bin"), nullptr).ok());
  EXPECT_EQ(ArtifactStoreTestRead(dir_.Path("out/f.bin")), w);
  ASSERT_TRUE(store_->Evict({}).ok());
  EXPECT_TRUE(store_->List()->empty());
  EXPECT_FALSE(fs::exists(Object(f.hash)));
}

TEST(ArtifactStoreDefaultsTest, DefaultDirFor) {
  EXPECT_EQ(ArtifactStore::DefaultDirFor(".grademl/grademl.db"), ".grademl/grademl-artifacts");
  EXPECT_EQ(ArtifactStore::DefaultDirFor("/data/runs/store.sqlite"), "/data/runs/store-artifacts");
  EXPECT_EQ(ArtifactStore::DefaultDirFor("postgresql://x"), "");
  EXPECT_EQ(ArtifactStore::DefaultDirFor("postgres://user@host/db"), "");
}

TEST(ArtifactStoreDefaultsTest, ParseByteSize) {
  struct Case {
    const char* text;
    int64_t bytes;
  };
  const Case good[] = {
      {"10G", 10LL * 1024 * 1024 * 1024},
      {"500M", 500LL * 1024 * 1024},
      {"1.5K", 1536},
      {"4096", 4096},
      {"0", 0},
      {"2GiB", 2LL * 1024 * 1024 * 1024},
      {"3MB", 3LL * 1024 * 1024},
      {"1.5T", 1536LL * 1024 * 1024 * 1024},
      {"1k", 1024},
      {"7B", 7},
  };
  for (const Case& c : good) {
    StatusOr<int64_t> v = ParseByteSize(c.text);
    ASSERT_TRUE(v.ok()) << c.text << ": " << v.status().message();
    EXPECT_EQ(*v, c.bytes) << c.text;
  }
  for (const char* bad : {"", "-1", "1X", "G", "nan", "1e30", "inf", "B", "iB", "GiB", "-0.5G", "10 parsecs", "1e30G", "0x10", " 1G", "1e3", "."}) {
    StatusOr<int64_t> v = ParseByteSize(bad);
    EXPECT_FALSE(v.ok()) << "'" << bad << "' gave " << (v.ok() ? *v : 0);
    if (!v.ok() && *bad != '\0') {
      EXPECT_NE(v.status().message().find(bad), std::string::npos) << v.status().message();
    }
  }
}

}  // namespace
}  // namespace grademl::reuse
