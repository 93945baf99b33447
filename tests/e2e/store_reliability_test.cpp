// End-to-end tests of the store under trouble, with the real binary: simultaneous runs on
// one fresh store, a disk that fills up under a run, a damaged store, a recorder killed with
// SIGKILL, store paths that are not stores, and `grademl query` that would never end.
// Whatever happens to the store, the workload runs to its own end with its own exit code.
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "core/sanitizers.h"
#include "e2e/command.h"

namespace grademl::testing {
namespace {

using namespace std::chrono_literals;

size_t Lines(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

// One integer from a query on the store, with a raw SQLite connection (-1 on failure).
int64_t SqlInt(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  int64_t v = -1;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
      v = sqlite3_column_int64(s, 0);
    }
    sqlite3_finalize(s);
  }
  sqlite3_close_v2(h);
  return v;
}

std::string SqlText(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  std::string v;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW &&
        sqlite3_column_text(s, 0) != nullptr) {
      v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    }
    sqlite3_finalize(s);
  }
  sqlite3_close_v2(h);
  return v;
}

CommandResult Grademl(const std::string& db, std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/timeout", "120", GrademlBinary(), "--db", db};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

// The one-line refusal of a store that cannot be used: exit 1 before the workload runs.
void ExpectRefused(const CommandResult& r, const std::string& db, const std::string& what) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "") << "the workload ran";
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("grademl: " + db, 0), 0u) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
}

// --- cost: when the store is synced (issue 26) ----------------------------------------------

// A run's store is synced at its end only, once the run is in it, and never before the
// workload starts: the start's WAL switch and first commit used to cost six fdatasyncs
// (journal, directory, journal again, file, WAL header, directory) before the workload was
// launched, and the end five. Counted with strace, on a new store and on one that exists;
// the run is then complete and the file back in rollback mode (no -wal, no -shm): durable.
TEST(StoreReliabilityE2E, TheStoreIsSyncedOnlyAtTheEndOfARun) {
  if (access("/usr/bin/strace", X_OK) != 0) SKIP_OR_FAIL_IN_CI("/usr/bin/strace is missing (apt install strace)");
  std::string dir = FreshDir("store_syncs");
  std::string db = dir + "/grademl.db";
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "a new store" : "a store that exists");
    std::string log = dir + "/strace" + std::to_string(round) + ".txt";
    CommandResult r = RunCommand({"/usr/bin/timeout", "120", "/usr/bin/strace", "-f", "-qq", "-o", log, "-e",
                                  "trace=fsync,fdatasync,execve", GrademlBinary(), "--db", db, "run", "--no-report",
                                  "--", "/bin/sh", "-c", "exit 3"});
    ASSERT_EQ(r.exit_code, 3) << r.err;
    std::istringstream lines(ReadFile(log));
    int syncs = 0, syncs_before_workload = 0;
    bool workload_started = false;
    for (std::string line; std::getline(lines, line);) {
      if (line.find("execve(\"/bin/sh\"") != std::string::npos) workload_started = true;
      if (line.find("fsync(") != std::string::npos || line.find("fdatasync(") != std::string::npos) {
        ++syncs;
        if (!workload_started) ++syncs_before_workload;
      }
    }
    ASSERT_TRUE(workload_started) << ReadFile(log);
    EXPECT_EQ(syncs_before_workload, 0) << ReadFile(log);
    // The checkpoint's WAL, the directory that holds it, the file; none for the switch back
    // to rollback mode (it changes only the header's mode bytes of a file already synced).
    EXPECT_GE(syncs, 1) << ReadFile(log);
    EXPECT_LE(syncs, 3) << ReadFile(log);
    EXPECT_EQ(SqlInt(db, "SELECT count(*) FROM runs WHERE complete = 1 AND exit_code = 3"), round + 1);
    struct stat st {};
    EXPECT_NE(::stat((db + "-wal").c_str(), &st), 0) << "the WAL was left behind";
    EXPECT_NE(::stat((db + "-shm").c_str(), &st), 0) << "the WAL index was left behind";
  }
}

// A run longer than the writer's flush interval (500 ms) syncs beside the workload what its
// end would otherwise sync: the background writer's first periodic write is followed by a
// PASSIVE checkpoint (the WAL, the directory that holds it, the file), and the end syncs two
// files (the WAL, the file) instead of three (plus the directory) (issue 26). Counted with
// strace: none before the workload's exec, at most two after it exited.
TEST(StartupCostE2E, ALongerRunSyncsTheWalsDirectoryBesideTheWorkload) {
  if (access("/usr/bin/strace", X_OK) != 0) SKIP_OR_FAIL_IN_CI("/usr/bin/strace is missing (apt install strace)");
  std::string dir = FreshDir("startup_sync_ahead");
  std::string db = dir + "/grademl.db";
  std::string log = dir + "/strace.txt";
  CommandResult r = RunCommand({"/usr/bin/timeout", "120", "/usr/bin/strace", "-f", "-qq", "-o", log, "-e",
                                "trace=fsync,fdatasync,execve,exit_group", GrademlBinary(), "--db", db, "run",
                                "--no-report", "--", "/bin/sh", "-c", "sleep 2; exit 3"});
  ASSERT_EQ(r.exit_code, 3) << r.err;
  std::istringstream lines(ReadFile(log));
  int before_exec = 0, during = 0, after_exit = 0;
  bool started = false, ended = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("execve(\"/bin/sh\"") != std::string::npos) started = true;
    if (started && line.find("exit_group(3") != std::string::npos) ended = true;  // the workload's, first
    if (line.find("fsync(") == std::string::npos && line.find("fdatasync(") == std::string::npos) continue;
    (ended ? after_exit : started ? during : before_exec)++;
  }
  ASSERT_TRUE(ended) << ReadFile(log);
  EXPECT_EQ(before_exec, 0) << ReadFile(log);
  EXPECT_GE(during, 1) << ReadFile(log);
  EXPECT_GE(after_exit, 1) << ReadFile(log);
  EXPECT_LE(after_exit, 2) << ReadFile(log);
  EXPECT_EQ(SqlInt(db, "SELECT count(*) FROM runs WHERE complete = 1 AND exit_code = 3"), 1);
}

// The GPU monitor is opened by the sampling thread once the workload has exec'd: loading
// NVML (and nvmlInit on a GPU host) used to run before the fork, delaying every command's
// start. The order is read from strace (the workload's execve before the library's open),
// and the GPUs of the fake NVML (two) are still recorded, with samples.
TEST(StartupCostE2E, NvmlIsLoadedBesideTheWorkloadAndItsGpusAreRecorded) {
  if (access("/usr/bin/strace", X_OK) != 0) SKIP_OR_FAIL_IN_CI("/usr/bin/strace is missing (apt install strace)");
  const std::string nvml = std::string(GRADEML_BINARY_DIR) + "/tests/libfake_nvml.so";
  ASSERT_EQ(access(nvml.c_str(), R_OK), 0) << nvml;
  std::string dir = FreshDir("startup_nvml");
  std::string db = dir + "/grademl.db";
  std::string log = dir + "/strace.txt";
  CommandResult r = RunCommand({"/usr/bin/timeout", "120", "/usr/bin/strace", "-f", "-qq", "-o", log, "-e",
                                "trace=execve,openat", "/usr/bin/env", "GRADEML_NVML_LIBRARY=" + nvml, GrademlBinary(),
                                "--db", db, "run", "--no-report", "--", "/bin/sh", "-c", "sleep 0.3; exit 4"});
  ASSERT_EQ(r.exit_code, 4) << r.err;
  std::string trace = ReadFile(log);
  size_t exec = trace.find("execve(\"/bin/sh\"");
  size_t loaded = trace.find("libfake_nvml.so");
  ASSERT_NE(exec, std::string::npos) << trace;
  ASSERT_NE(loaded, std::string::npos) << trace;
  EXPECT_LT(exec, loaded) << "NVML was loaded before the workload started";
  EXPECT_EQ(SqlInt(db, "SELECT count(*) FROM resources WHERE kind = 'gpu'"), 2);
  EXPECT_GT(SqlInt(db, "SELECT count(*) FROM samples x JOIN series s ON s.id = x.series_id JOIN resources r ON "
                       "r.id = s.resource_id WHERE r.kind = 'gpu' AND s.name = 'gpu.utilization'"),
            0);
}

// --- contention ---------------------------------------------------------------------------

// The finding: of two runs started at once on a fresh store, one was refused and its
// workload never ran. Both must run and both must be stored, complete.
TEST(StoreReliabilityE2E, TwoSimultaneousRunsOnAFreshStoreBothRunAndAreStored) {
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    std::string dir = FreshDir("store_two_runs_" + std::to_string(round));
    std::string db = dir + "/sub/g.db";
    std::vector<pid_t> pids;
    for (int i = 0; i < 2; ++i) {
      pids.push_back(StartCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "sh", "-c",
                                   "echo ran > " + dir + "/ran" + std::to_string(i) + "; sleep 0.3; exit 3"}));
    }
    for (pid_t pid : pids) EXPECT_EQ(WaitCommand(pid), 3);
    for (int i = 0; i < 2; ++i) EXPECT_EQ(ReadFile(dir + "/ran" + std::to_string(i)), "ran\n") << "workload " << i;
    EXPECT_EQ(SqlInt(db, "SELECT count(*) FROM runs WHERE complete = 1 AND exit_code = 3"), 2);
  }
}

// --- a damaged store, a killed recorder ------------------------------------------------------

// Overwrites page `page` (1-based) of the file with noise.
void CorruptPage(const std::string& db, int64_t page, int64_t page_size) {
  std::string noise(static_cast<size_t>(page_size), '\0');
  std::mt19937 rng(7);
  for (char& c : noise) c = static_cast<char>(rng());
  int fd = ::open(db.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, noise.data(), noise.size(), (page - 1) * page_size), static_cast<ssize_t>(noise.size()));
  ::close(fd);
}

// Starts `grademl run -- sleep 30`, waits until its run is in the store, and kills grademl
// (and then its command) with SIGKILL: an unclean shutdown.
void KillRecorderMidRun(const std::string& db, const std::string& dir) {
  std::string pidfile = dir + "/sleep.pid";
  pid_t grademl = StartCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "sh", "-c",
                                "echo $$ > " + pidfile + "; exec sleep 30"});
  for (int i = 0; i < 200 && (SqlInt(db, "SELECT count(*) FROM samples") <= 0 || ReadFile(pidfile).empty()); ++i) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_GT(SqlInt(db, "SELECT count(*) FROM samples"), 0) << "the run never reached the store";
  ::kill(grademl, SIGKILL);
  WaitCommand(grademl);
  ::kill(std::stoi(ReadFile(pidfile)), SIGKILL);
}

// A recorder killed with SIGKILL leaves an incomplete run: the next grademl checks the file
// once (quick_check), marks that run as interrupted, and records normally.
TEST(StoreReliabilityE2E, KilledRecorderIsNoticedAndTheNextRunRecords) {
  std::string dir = FreshDir("store_killed_recorder");
  std::string db = dir + "/g.db";
  ASSERT_NO_FATAL_FAILURE(KillRecorderMidRun(db, dir));
  EXPECT_EQ(SqlInt(db, "SELECT complete FROM runs WHERE id = 1"), 0);

  CommandResult r = Grademl(db, {"run", "--no-report", "--", "sh", "-c", "echo ran; exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.out, "ran\n");
  EXPECT_EQ(SqlInt(db, "SELECT complete FROM runs WHERE id = 2"), 1);
  EXPECT_NE(SqlText(db, "SELECT error FROM runs WHERE id = 1").find("recording interrupted"), std::string::npos)
      << SqlText(db, "SELECT error FROM runs WHERE id = 1");
  CommandResult ls = Grademl(db, {"ls"});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
}

// Damage found by the check after an unclean shutdown: refused at start, one line naming
// the file, the workload not run (the store is grademl's input; nothing would be kept).
TEST(StoreReliabilityE2E, DamageAfterAnUncleanShutdownIsFoundAtStart) {
  std::string dir = FreshDir("store_damaged_after_kill");
  std::string db = dir + "/g.db";
  ASSERT_NO_FATAL_FAILURE(KillRecorderMidRun(db, dir));
  {
    // Move what the killed writer left in the WAL into the file (the last connection out
    // checkpoints), then damage the samples table, which starting a run does not touch.
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    sqlite3_exec(h, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
    sqlite3_close(h);
  }
  int64_t page = SqlInt(db, "SELECT rootpage FROM sqlite_schema WHERE name = 'samples'");
  int64_t page_size = SqlInt(db, "PRAGMA page_size");
  ASSERT_GT(page, 1);
  ASSERT_NO_FATAL_FAILURE(CorruptPage(db, page, page_size));

  CommandResult r = Grademl(db, {"run", "--no-report", "--", "sh", "-c", "echo ran; exit 3"});
  ExpectRefused(r, db, "corrupt");
}

// Damage to the pages every start reads: refused at start with one line.
TEST(StoreReliabilityE2E, DamagedStoreIsRefusedAtStart) {
  std::string dir = FreshDir("store_damaged");
  std::string db = dir + "/g.db";
  ASSERT_EQ(Grademl(db, {"run", "--no-report", "--", "true"}).exit_code, 0);
  std::string bytes = ReadFile(db);
  int64_t page_size = SqlInt(db, "PRAGMA page_size");
  for (int64_t page = 2; page * page_size <= static_cast<int64_t>(bytes.size()); ++page) {
    ASSERT_NO_FATAL_FAILURE(CorruptPage(db, page, page_size));
  }
  CommandResult r = Grademl(db, {"run", "--no-report", "--", "sh", "-c", "echo ran; exit 3"});
  ExpectRefused(r, db, "corrupt");
}

// Store paths that are not stores: one line naming the file, before anything runs.
TEST(StoreReliabilityE2E, StorePathsThatAreNotStoresAreRefusedAtStart) {
  std::string dir = FreshDir("store_not_stores");
  ::mkfifo((dir + "/fifo").c_str(), 0644);
  std::ofstream(dir + "/text.db") << "hello, I am not a database\n";
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open((dir + "/newer.db").c_str(), &h), SQLITE_OK);
    sqlite3_exec(h, "PRAGMA application_id = 1198673228; PRAGMA user_version = 99; CREATE TABLE runs (id INTEGER)",
                 nullptr, nullptr, nullptr);
    sqlite3_close(h);
  }
  struct Case {
    std::string db, what;
  };
  for (const Case& c : std::vector<Case>{{dir, "is a directory"},
                                         {dir + "/fifo", "not a regular file"},
                                         {"/dev/full", "not a regular file"},
                                         {dir + "/text.db", "not a SQLite database"},
                                         {dir + "/newer.db", "written by a newer grademl"}}) {
    SCOPED_TRACE(c.db);
    CommandResult r = Grademl(c.db, {"run", "--no-report", "--", "sh", "-c", "echo ran; exit 3"});
    ExpectRefused(r, c.db, c.what);
  }
}

// --- a full disk ---------------------------------------------------------------------------

// Runs `script` with sh in a private mount namespace where DIR is a fresh tmpfs of `size`
// (as root, or in a user namespace: PrivateMountNamespace()); "SKIP" in the output when that
// cannot be set up, and the test then skips (fails under CI=true).
CommandResult InTinyTmpfs(const std::string& dir, const std::string& size, const std::string& script) {
  std::vector<std::string> argv = PrivateMountNamespace();
  if (argv.empty()) return CommandResult{.exit_code = 0, .out = "SKIP", .err = ""};
  std::string setup = "mount --make-rprivate / 2>/dev/null; mount -t tmpfs -o size=" + size + " tmpfs " + dir +
                      " || { echo SKIP; exit 0; }\n";
  argv.insert(argv.begin(), {"/usr/bin/timeout", "300"});
  argv.insert(argv.end(), {"sh", "-c", setup + script});
  return RunCommand(argv);
}

constexpr const char* kNoTmpfs = "cannot mount a tmpfs here (needs root, or unprivileged user namespaces, and unshare)";

// The acceptance test: the disk under the store fills up while a run records. The workload
// prints its output and ends with its own exit code; grademl says at once, and at the end,
// that the disk is full; the store stays readable, the runs already in it intact.
TEST(StoreReliabilityE2E, FullDiskUnderTheStore) {
  std::string dir = FreshDir("store_full_disk");
  std::string g = GrademlBinary();
  std::string db = dir + "/g.db";
  std::string script =
      // A run stored before the disk fills.
      g + " --db " + db + " run --no-report -- sh -c 'echo first' >/dev/null 2>&1 || echo FIRST_FAILED\n" +
      // The workload fills the disk, prints and ends with 3; samples arrive every 10 ms.
      g + " --db " + db + " run --interval 10ms --no-report -- sh -c 'cat /dev/zero > " + dir +
      "/fill 2>/dev/null; echo workload-output; sleep 1.5; exit 3' 2>" + dir + "/../full_disk_err\n" +
      "echo exit=$?\n" + g + " --db " + db + " ls >/dev/null 2>" + dir + "/../ls_err && echo LS_OK\n" + g +
      " --db " + db + " report 1 >/dev/null 2>&1 && echo REPORT1_OK\n" + g + " --db " + db +
      " report >/dev/null 2>&1 && echo REPORT_OK\n";
  CommandResult r = InTinyTmpfs(dir, "4m", script);
  if (r.out.find("SKIP") != std::string::npos) SKIP_OR_FAIL_IN_CI(kNoTmpfs);
  std::string err = ReadFile(dir + "/../full_disk_err");
  EXPECT_EQ(r.out.find("FIRST_FAILED"), std::string::npos);
  EXPECT_NE(r.out.find("workload-output\nexit=3\n"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("LS_OK"), std::string::npos) << ReadFile(dir + "/../ls_err");
  EXPECT_NE(r.out.find("REPORT1_OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("REPORT_OK"), std::string::npos) << r.out;
  EXPECT_NE(err.find("disk or quota full"), std::string::npos) << err;
  // Said once while the workload ran (before its output's end), not only at the end.
  EXPECT_NE(err.find("the command goes on"), std::string::npos) << err;
  for (const std::string& line : {std::string("grademl:")}) EXPECT_EQ(err.rfind(line, 0), 0u) << err;
}

// The disk fills up and is freed again while the run goes on: nothing is lost, and the run
// keeps the cause in its error.
TEST(StoreReliabilityE2E, DiskFullForAWhileLosesNothing) {
  std::string dir = FreshDir("store_full_then_free");
  std::string g = GrademlBinary();
  std::string db = dir + "/g.db";
  std::string script = g + " --db " + db + " run --interval 10ms --no-report -- sh -c 'cat /dev/zero > " + dir +
                       "/fill 2>/dev/null; sleep 1.5; rm " + dir + "/fill; sleep 1.5; exit 3' 2>" + dir +
                       "/../free_err\necho exit=$?\n" + "sqlite3 " + db +
                       " 'SELECT complete, exit_code, error FROM runs'\n";
  CommandResult r = InTinyTmpfs(dir, "4m", script);
  if (r.out.find("SKIP") != std::string::npos) SKIP_OR_FAIL_IN_CI(kNoTmpfs);
  std::string err = ReadFile(dir + "/../free_err");
  EXPECT_NE(r.out.find("exit=3\n1|3|store: writes failed for a while ("), std::string::npos) << r.out << err;
  EXPECT_NE(err.find("works again"), std::string::npos) << err;
}

// A read-only file system (a read-only directory, for root too): a missing store cannot be
// created and an existing one cannot be written: one line, nothing run; readers still work.
// (The remount names the type and size: in a user namespace a bare `remount,ro` fails.)
TEST(StoreReliabilityE2E, ReadOnlyStoreIsRefusedAtStartAndStaysReadable) {
  std::string dir = FreshDir("store_read_only");
  std::string g = GrademlBinary();
  std::string script = g + " --db " + dir + "/g.db run --no-report -- true || echo FIRST_FAILED\n" +
                       "mount -o remount,ro,size=16m -t tmpfs tmpfs " + dir + " || { echo SKIP; exit 0; }\n" + g + " --db " + dir +
                       "/g.db run --no-report -- sh -c 'echo ran; exit 3' 2>" + dir + "/../ro_err1; echo exit1=$?\n" +
                       g + " --db " + dir + "/new/g.db run --no-report -- sh -c 'echo ran; exit 3' 2>" + dir +
                       "/../ro_err2; echo exit2=$?\n" + g + " --db " + dir + "/g.db ls >/dev/null && echo LS_OK\n";
  CommandResult r = InTinyTmpfs(dir, "16m", script);
  if (r.out.find("SKIP") != std::string::npos) SKIP_OR_FAIL_IN_CI(kNoTmpfs);
  EXPECT_EQ(r.out, "exit1=1\nexit2=1\nLS_OK\n") << r.err;
  for (const char* name : {"/../ro_err1", "/../ro_err2"}) {
    std::string err = ReadFile(dir + name);
    EXPECT_EQ(Lines(err), 1u) << err;
    EXPECT_EQ(err.rfind("grademl: " + dir + "/", 0), 0u) << err;
  }
}

// Two grademls recording at once, one killed with SIGKILL mid-run: the other completes
// with everything, and the next grademl marks the killed one's run as interrupted.
TEST(StoreReliabilityE2E, OneOfTwoRecordersKilledTheOtherCompletes) {
  std::string dir = FreshDir("store_one_killed");
  std::string db = dir + "/g.db";
  pid_t survivor = StartCommand({GrademlBinary(), "--db", db, "run", "--interval", "10ms", "--no-report", "--", "sh",
                                 "-c", "sleep 2; exit 3"});
  ASSERT_NO_FATAL_FAILURE(KillRecorderMidRun(db, dir));
  EXPECT_EQ(WaitCommand(survivor), 3);
  EXPECT_EQ(SqlInt(db, "SELECT count(*) FROM runs WHERE complete = 1 AND exit_code = 3"), 1);
  CommandResult r = Grademl(db, {"run", "--no-report", "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(SqlInt(db, "SELECT count(*) FROM runs WHERE complete = 0 AND error LIKE 'recording interrupted%'"), 1);
  EXPECT_EQ(SqlText(db, "PRAGMA quick_check"), "ok");
}

// --- query ---------------------------------------------------------------------------------

class QueryLimitsE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    db_ = FreshDir("query_limits_" + std::to_string(getpid())) + "/g.db";
    ASSERT_EQ(Grademl(db_, {"run", "--no-report", "--", "true"}).exit_code, 0);
  }
  static inline std::string db_;
};

constexpr const char* kEndless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c";

// The finding: a never-ending recursive CTE ran forever, buffering every row.
TEST_F(QueryLimitsE2E, NeverEndingQueryStopsAtTheTimeout) {
  for (const char* format : {"table", "csv", "json"}) {
    SCOPED_TRACE(format);
    CommandResult r = Grademl(db_, {"query", kEndless, "--timeout", "1", "--format", format});
    EXPECT_EQ(r.exit_code, 1) << r.err;  // 124 from timeout(1): it hung
    EXPECT_EQ(r.err, "grademl: query: stopped after the 1 s timeout (--timeout SECONDS sets it, 0 for none)\n");
    // Rows were written as they came, not held to the end.
    EXPECT_GT(Lines(r.out), 1000u) << format;
  }
}

// A huge result with no LIMIT streams in bounded memory (the table aligns on its first rows).
TEST_F(QueryLimitsE2E, HugeResultStreamsInBoundedMemory) {
#if GRADEML_ADDRESS_SANITIZER || GRADEML_THREAD_SANITIZER
  GTEST_SKIP() << "an address-space limit cannot be combined with a sanitizer's shadow memory";
#else
  // 4 million rows: held as strings they would need several hundred MB.
  std::string sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 4000000) "
                    "SELECT x, 'row ' || x AS label FROM c";
  CommandResult r = RunCommand({"/usr/bin/timeout", "300", "sh", "-c",
                                "ulimit -v 250000; exec " + GrademlBinary() + " --db " + db_ + " query \"" + sql +
                                    "\" --timeout 0 | tail -n 2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "4000000  row 4000000\n(4000000 rows)\n") << r.err;
#endif
}

TEST_F(QueryLimitsE2E, TimeoutMustBeANumberOfSeconds) {
  for (const char* bad : {"-1", "abc", "nan"}) {
    CommandResult r = Grademl(db_, {"query", "SELECT 1", "--timeout", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_EQ(r.out, "");
  }
}

}  // namespace
}  // namespace grademl::testing
