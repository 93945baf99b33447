// End-to-end tests of reuse that cannot be poisoned (issue 28, docs/reuse.md "Whom reuse
// trusts"): a colleague made in the test (a second OS user, useradd/userdel) who rewrites a
// step_executions row of a shared store to point at an artifact of their making, with a
// consistent hash and a record of their own: not restored unless trusted (--trust, reuse.trust);
// an object much larger than recorded refused before a byte is copied; a 600 output kept 600
// in the store and restored 600; a restore killed by SIGKILL leaves no staging copy after the
// next run. The real grademl binary, run as root (the tests make users).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "e2e/command.h"
#include "sha256sum.h"
#include "skip_or_fail.h"

namespace grademl::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kPipeline = R"(steps:
  make:
    cmd: cat src.txt > out.txt
    deps: [src.txt]
    outs: [out.txt]
)";

// A second OS user for the test (a colleague sharing the store), removed with its home when
// the test ends, failed or not. Unique per process: other tests make users at the same time.
class Colleague {
 public:
  Colleague() {
    static int n = 0;
    name_ = "gm_trust_" + std::to_string(getpid()) + "_" + std::to_string(n++);
    if (geteuid() != 0 || access("/usr/sbin/useradd", X_OK) != 0 || access("/usr/sbin/runuser", X_OK) != 0) return;
    CommandResult r = RunCommand({"/usr/sbin/useradd", "-m", "-s", "/bin/sh", name_});
    made_ = r.exit_code == 0;
    error_ = r.err;
  }
  ~Colleague() {
    if (made_) RunCommand({"/usr/sbin/userdel", "-r", name_});
  }
  bool made() const { return made_; }
  const std::string& name() const { return name_; }
  const std::string& error() const { return error_; }
  // Runs a shell script as the colleague.
  CommandResult Sh(const std::string& script) const {
    return RunCommand({"/usr/sbin/runuser", "-u", name_, "--", "/bin/sh", "-c", script});
  }

 private:
  std::string name_, error_;
  bool made_ = false;
};

// Steps that started (ran) and were restored, and the lines saying a record was refused.
struct Seen {
  std::set<std::string> ran, restored;
  std::vector<std::string> refused;
};
Seen SeenIn(const CommandResult& r) {
  Seen s;
  std::istringstream lines(r.err);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("[grademl] start ", 0) == 0) s.ran.insert(line.substr(16));
    if (line.rfind("[grademl] reuse ", 0) == 0 && line.find(" (outputs of run ") != std::string::npos) {
      s.restored.insert(line.substr(16, line.find(" (outputs of run ") - 16));
    }
    if (line.find("outputs not restored") != std::string::npos) s.refused.push_back(line);
  }
  return s;
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

// The bytes a file takes on disk (a sparse file's holes take none).
int64_t DiskBytesUnder(const std::string& dir) {
  int64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    struct stat st {};
    if (lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += static_cast<int64_t>(st.st_blocks) * 512;
  }
  return total;
}

class ReuseTrustE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    // Under /tmp, world-traversable: the colleague reaches the shared store there.
    root_ = "/tmp/gm_trust_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
    fs::permissions(root_, fs::perms::all);
    db_ = root_ + "/shared.db";
    artifacts_ = root_ + "/artifacts";
    setenv("GRADEML_HASH_CACHE", (root_ + "/hashes.sqlite").c_str(), 1);
    setenv("XDG_CONFIG_HOME", (root_ + "/xdg").c_str(), 1);  // no user config unless a test names one
  }
  void TearDown() override {
    unsetenv("GRADEML_HASH_CACHE");
    unsetenv("XDG_CONFIG_HOME");
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  // A checkout with src.txt = `src`.
  std::string Checkout(const std::string& name, const std::string& src) {
    std::string dir = root_ + "/" + name;
    fs::create_directories(dir);
    std::ofstream(dir + "/pipeline.yaml") << kPipeline;
    std::ofstream(dir + "/src.txt") << src;
    return dir;
  }
  // grademl with at most 1 GiB per file written: a grademl that copies a tampered object dies
  // of SIGXFSZ instead of filling the disk.
  CommandResult Run(const std::string& dir, std::vector<std::string> extra = {}, const std::string& config = "") {
    std::vector<std::string> argv = {"/usr/bin/prlimit", "--fsize=1073741824", "--", "/usr/bin/env"};
    if (!config.empty()) argv.push_back("GRADEML_CONFIG=" + config);
    // --db=PATH: these tests edit the SQLite file's rows, whatever GRADEML_TEST_BACKEND says.
    argv.insert(argv.end(), {GrademlBinary(), "--db=" + db_, "run", "--no-report", "--reuse", "--artifacts", artifacts_});
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(dir + "/pipeline.yaml");
    return RunCommand(argv);
  }
  // The single file under artifacts/`sub`.
  std::string OnlyFileUnder(const std::string& sub) {
    std::vector<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(artifacts_ + "/" + sub)) {
      if (e.is_regular_file()) files.push_back(e.path().string());
    }
    EXPECT_EQ(files.size(), 1u);
    return files.empty() ? "" : files[0];
  }
  std::string root_, db_, artifacts_;
};

#define NEED_COLLEAGUE(c)                                                                      \
  if (!(c).made()) {                                                                           \
    SKIP_OR_FAIL_IN_CI("cannot make a second OS user (needs root and useradd): " << (c).error()); \
  }

// (a), (b): a colleague with write access to the shared store points my step's row at an
// artifact of their making (bytes, object, ref, row and a record, all consistent): restored
// only when I trust them (--trust, reuse.trust); otherwise the step runs, one line names them.
TEST_F(ReuseTrustE2E, APoisonedRowIsRestoredOnlyWhenItsWriterIsTrusted) {
  Colleague mallory;
  NEED_COLLEAGUE(mallory);
  const std::string honest = "the honest output\n", evil = "#!/bin/sh\necho pwned\n";
  std::string a = Checkout("a", honest);
  CommandResult first = Run(a);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(SeenIn(first).ran, std::set<std::string>{"make"}) << first.err;
  const std::string record = OnlyFileUnder("keys");
  const std::string key = fs::path(record).stem().string();
  ASSERT_EQ(key.size(), 64u) << record;
  EXPECT_EQ(fs::path(record).extension().string(), ".0");  // mine (root's)
  // The team's folder: everyone may write it (as a group-shared one would let the group).
  ASSERT_EQ(RunCommand({"/bin/chmod", "-R", "a+rwX", root_}).exit_code, 0);

  // The attack, as the colleague, with nothing but write access: the object (executable),
  // its ref, the row rewritten with its hash and size, and a record that agrees.
  const std::string good_hash = Sha256sumOf(a + "/out.txt");
  std::ofstream(root_ + "/evil") << evil;
  const std::string evil_hash = Sha256sumOf(root_ + "/evil");
  const std::string size = std::to_string(evil.size());
  const std::string obj = artifacts_ + "/objects/" + evil_hash.substr(0, 2);
  const std::string ref = artifacts_ + "/refs/" + evil_hash.substr(0, 2);
  const std::string rec = artifacts_ + "/keys/" + key.substr(0, 2) + "/" + key;
  std::string script =
      "set -e; umask 022; mkdir -p " + obj + " " + ref + "; printf '#!/bin/sh\\necho pwned\\n' > " + obj + "/" + evil_hash +
      "; chmod 755 " + obj + "/" + evil_hash + "; printf 'file " + size + "\\n' > " + ref + "/" + evil_hash +
      "; printf 'grademl-record 1\\nkey " + key + "\\nfile " + size + " " + evil_hash + "\\n' > " + rec + ".$(id -u)" +
      "; printf 'grademl-record 1\\nkey " + key + "\\nfile " + size + " " + evil_hash + "\\n' > " + root_ + "/forged" +
      "; mv -f " + root_ + "/forged " + rec + ".0 || true" +  // replacing my record: the sticky folder refuses
      "; sqlite3 " + db_ + " \"UPDATE step_executions SET outputs = replace(replace(outputs, '" + good_hash + "', '" +
      evil_hash + "'), '\\\"size\\\":" + std::to_string(honest.size()) + "', '\\\"size\\\":" + size + "')\"";
  CommandResult attack = mallory.Sh(script);
  ASSERT_EQ(attack.exit_code, 0) << attack.err << "\n" << script;
  ASSERT_EQ(ReadFile(record), "grademl-record 1\nkey " + key + "\nfile " + std::to_string(honest.size()) + " " + good_hash + "\n")
      << "the sticky keys folder let the colleague replace my record";

  // (b) Trusted with --trust: the colleague's artifact is restored (that is what trust means).
  std::string b = Checkout("b", honest);
  CommandResult trusted = Run(b, {"--trust", mallory.name()});
  ASSERT_EQ(trusted.exit_code, 0) << trusted.err;
  EXPECT_EQ(SeenIn(trusted).restored, std::set<std::string>{"make"}) << trusted.err;
  EXPECT_EQ(ReadFile(b + "/out.txt"), evil);
  // ... and with reuse.trust in the user's config file.
  std::string config = root_ + "/config.yaml";
  std::ofstream(config) << "reuse:\n  trust: [" << mallory.name() << "]\n";
  ASSERT_EQ(chmod(config.c_str(), 0600), 0);
  std::string c = Checkout("c", honest);
  CommandResult configured = Run(c, {}, config);
  ASSERT_EQ(configured.exit_code, 0) << configured.err;
  EXPECT_EQ(SeenIn(configured).restored, std::set<std::string>{"make"}) << configured.err;
  EXPECT_EQ(ReadFile(c + "/out.txt"), evil);

  // (a) Not trusted: the step runs, computes the honest output; one line names the colleague.
  std::string d = Checkout("d", honest);
  CommandResult untrusted = Run(d);
  ASSERT_EQ(untrusted.exit_code, 0) << untrusted.err;
  Seen seen = SeenIn(untrusted);
  EXPECT_EQ(seen.ran, std::set<std::string>{"make"}) << untrusted.err;
  EXPECT_TRUE(seen.restored.empty()) << untrusted.err;
  ASSERT_EQ(seen.refused.size(), 1u) << untrusted.err;
  EXPECT_NE(seen.refused[0].find("recorded by " + mallory.name() + ", not trusted"), std::string::npos) << seen.refused[0];
  EXPECT_EQ(ReadFile(d + "/out.txt"), honest);
  EXPECT_EQ(ModeOf(d + "/out.txt") & 0111, 0u) << "the colleague's execute bit reached my checkout";

  // A name that is no user is a one-line usage error.
  CommandResult bad = Run(d, {"--trust", "gm_no_such_user_" + std::to_string(getpid())});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--trust: no user 'gm_no_such_user_"), std::string::npos) << bad.err;
}

// reuse.trust naming no user of the host: a one-line error naming the file, exit code 2,
// before anything runs.
TEST_F(ReuseTrustE2E, AConfigTrustingNoUserIsAnError) {
  std::string a = Checkout("a", "x\n");
  std::string config = root_ + "/config.yaml";
  std::ofstream(config) << "reuse:\n  trust: [gm_nobody_" << getpid() << "]\n";
  ASSERT_EQ(chmod(config.c_str(), 0600), 0);
  CommandResult r = Run(a, {}, config);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "grademl: " + config + ": reuse.trust: no user 'gm_nobody_" + std::to_string(getpid()) + "' on this host\n");
  EXPECT_FALSE(fs::exists(a + "/out.txt"));
}

// (c) An object made much larger than recorded (a sparse 1 TiB file) is refused before a byte
// is copied: the step runs, the checkout takes no more than its own output.
TEST_F(ReuseTrustE2E, AnObjectLargerThanRecordedIsNotCopied) {
  std::string a = Checkout("a", "the output\n");
  ASSERT_EQ(Run(a).exit_code, 0);
  const std::string object = OnlyFileUnder("objects");
  ASSERT_EQ(chmod(object.c_str(), 0644), 0);
  ASSERT_EQ(truncate(object.c_str(), off_t{1} << 40), 0) << "the file system holds no 1 TiB sparse file";
  std::string b = Checkout("b", "the output\n");
  CommandResult r = Run(b);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Seen seen = SeenIn(r);
  EXPECT_EQ(seen.ran, std::set<std::string>{"make"}) << r.err;
  EXPECT_TRUE(seen.restored.empty()) << r.err;
  EXPECT_NE(r.err.find("is 1099511627776 bytes, recorded 11: not copied"), std::string::npos) << r.err;
  EXPECT_EQ(ReadFile(b + "/out.txt"), "the output\n");
  EXPECT_LT(DiskBytesUnder(b), 1 << 20) << "the checkout grew by the object's bytes";
}

// (d) A 600 output (a token, a private model) stays 600 in the store and when restored; a 644
// one stays 644.
TEST_F(ReuseTrustE2E, PermissionsOfTheOutputAreKept) {
  const mode_t old_umask = umask(022);
  std::string a = Checkout("a", "a private token\n");
  std::ofstream(a + "/pipeline.yaml") << "steps:\n  make:\n    cmd: cat src.txt > out.txt && chmod 600 out.txt\n"
                                         "    deps: [src.txt]\n    outs: [out.txt]\n";
  CommandResult first = Run(a);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(ModeOf(a + "/out.txt"), 0600u);
  EXPECT_EQ(ModeOf(OnlyFileUnder("objects")), 0600u);
  std::string b = Checkout("b", "a private token\n");
  std::ofstream(b + "/pipeline.yaml") << ReadFile(a + "/pipeline.yaml");
  CommandResult second = Run(b);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(SeenIn(second).restored, std::set<std::string>{"make"}) << second.err;
  EXPECT_EQ(ModeOf(b + "/out.txt"), 0600u);

  // A plain 644 output: 644 in the store (less group/other write) and restored.
  std::ofstream(root_ + "/public") << "public\n";
  const std::string public_hash = Sha256sumOf(root_ + "/public");
  std::string c = Checkout("c", "public\n");
  ASSERT_EQ(Run(c).exit_code, 0);
  std::string d = Checkout("d", "public\n");
  CommandResult again = Run(d);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(SeenIn(again).restored, std::set<std::string>{"make"}) << again.err;
  EXPECT_EQ(ModeOf(d + "/out.txt"), 0644u);
  EXPECT_EQ(ModeOf(artifacts_ + "/objects/" + public_hash.substr(0, 2) + "/" + public_hash), 0644u);
  umask(old_umask);
}

// (e) grademl killed (SIGKILL) while it restores a big output: its staging copy beside the
// output is removed by the next run, once the killed one is gone.
TEST_F(ReuseTrustE2E, AStagingCopyOfAKilledRestoreIsRemovedByTheNextRun) {
  std::string a = Checkout("a", "x");
  std::ofstream(a + "/pipeline.yaml") << "steps:\n  make:\n    cmd: head -c 1048576 /dev/zero > out.txt\n"
                                         "    deps: [src.txt]\n    outs: [out.txt]\n";
  ASSERT_EQ(Run(a).exit_code, 0);
  // A long restore: the object, its row and my record all say 64 GiB (sparse zeros); the
  // hash check at the end would refuse it, the test kills grademl long before.
  const std::string object = OnlyFileUnder("objects"), record = OnlyFileUnder("keys");
  const std::string big = std::to_string(int64_t{64} << 30);
  ASSERT_EQ(chmod(object.c_str(), 0644), 0);
  ASSERT_EQ(truncate(object.c_str(), off_t{64} << 30), 0);
  std::string text = ReadFile(record);
  text.replace(text.find(" 1048576 "), 9, " " + big + " ");
  ASSERT_EQ(chmod(record.c_str(), 0644), 0);
  std::ofstream(record, std::ios::trunc) << text;
  CommandResult edit = RunCommand({"/usr/bin/sqlite3", db_,
                                   "UPDATE step_executions SET outputs = replace(outputs, '\"size\":1048576', '\"size\":" + big + "')"});
  ASSERT_EQ(edit.exit_code, 0) << edit.err;
  fs::remove(a + "/out.txt");

  auto staged = [&] {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(a)) {
      if (e.path().filename().string().starts_with(".out.txt.grademl-")) found.push_back(e.path().string());
    }
    return found;
  };
  // At most 4 GiB written by a grademl not killed in time (SIGXFSZ ends it).
  pid_t g = StartCommand({"/usr/bin/prlimit", "--fsize=4294967296", "--", GrademlBinary(), "--db=" + db_, "run", "--no-report",
                          "--reuse", "--artifacts", artifacts_, a + "/pipeline.yaml"});
  ASSERT_GT(g, 0);
  bool copying = false;
  for (auto until = std::chrono::steady_clock::now() + 60s; !copying && std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(5ms)) {
    for (const std::string& s : staged()) {
      struct stat st {};
      if (stat(s.c_str(), &st) == 0 && st.st_size > 0) copying = true;
    }
  }
  kill(g, SIGKILL);
  WaitCommand(g);
  ASSERT_TRUE(copying) << "no restore was seen under way";
  ASSERT_FALSE(staged().empty()) << "the killed restore left nothing to clean (the test proves nothing)";

  // The next run: the object, back to 1 MiB, is refused (its size), the step runs, the staging
  // copy is gone.
  ASSERT_EQ(truncate(object.c_str(), off_t{1} << 20), 0);
  CommandResult next = Run(a);
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(SeenIn(next).ran, std::set<std::string>{"make"}) << next.err;
  EXPECT_TRUE(staged().empty()) << staged().front();
  EXPECT_EQ(fs::file_size(a + "/out.txt"), 1u << 20);
}

}  // namespace
}  // namespace grademl::testing
