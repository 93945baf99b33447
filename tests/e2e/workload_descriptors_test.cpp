// End-to-end tests of the promise that grademl never writes through a descriptor it does
// not own (issue 24): instrumented programs, C++ and Python, close, reuse and dup2 over
// every descriptor number (a daemon's closerange, careless clean-ups) while they record
// phases. Their files must be byte-identical to a run without grademl; with the usual
// reservation (through the mapping) no event is lost; with the fallback reservation (a
// checked descriptor) the events after the loss are dropped and the report says so.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Every file under `dir` (relative name -> bytes).
std::map<std::string, std::string> FilesUnder(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = ReadFile(e.path().string());
  }
  return out;
}

// One number from `grademl query` (CSV, header line then the value).
int64_t QueryNumber(const std::string& db, const std::string& sql) {
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "query", sql, "--format", "csv"});
  EXPECT_EQ(r.exit_code, 0) << sql << ": " << r.err;
  size_t nl = r.out.find('\n');
  if (nl == std::string::npos) return -1;
  return std::strtoll(r.out.c_str() + nl + 1, nullptr, 10);
}

// The value of the latest run's root-phase tag `key` ("" when it has none).
std::string RootTag(const std::string& db, const std::string& key) {
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "query",
                                "SELECT json_extract(tags, '$.\"" + key + "\"') FROM main.phases WHERE parent_id "
                                "IS NULL AND run_id = (SELECT max(id) FROM main.runs)",
                                "--format", "csv"});
  size_t nl = r.out.find('\n');
  if (r.exit_code != 0 || nl == std::string::npos) return "";
  std::string v = r.out.substr(nl + 1);
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  return v;
}

// Property: for random sequences of opens, writes, closes, dup2's over random numbers and
// closeranges in a program that records phases on two threads, the program's files are
// byte for byte those it writes without grademl, under both reservations.
TEST(WorkloadDescriptorsE2E, RandomDescriptorChaosLeavesTheProgramsFilesAsWithoutGrademl) {
  const std::string dir = FreshDir("descriptor_chaos");
  constexpr int kSeeds = 8;
  int descriptor_losses = 0;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::string s = std::to_string(seed);
    const std::string plain = dir + "/plain" + s, mapped = dir + "/mapping" + s, kept = dir + "/descriptor" + s;
    for (const std::string& d : {plain, mapped, kept}) fs::create_directories(d);
    CommandResult p = RunCommand({HelperBinary("instrumented_fd_chaos"), s, plain});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    const std::map<std::string, std::string> expected = FilesUnder(plain);
    ASSERT_GT(expected.size(), 5u);
    const int64_t truth = std::strtoll(expected.at("truth").c_str() + 7, nullptr, 10);  // "phases=N"

    // The usual reservation: nothing of the program's touched, nothing of its events lost.
    const std::string db1 = dir + "/mapping" + s + ".db";
    CommandResult m = RunCommand({GrademlBinary(), "--db", db1, "run", "--no-report", "--",
                                  HelperBinary("instrumented_fd_chaos"), s, mapped});
    ASSERT_EQ(m.exit_code, 0) << m.err;
    EXPECT_EQ(FilesUnder(mapped), expected);
    EXPECT_EQ(QueryNumber(db1, "SELECT count(*) FROM phases WHERE name IN ('start', 'chaos', 'other')"), truth);
    EXPECT_EQ(RootTag(db1, "grademl.events_dropped"), "");

    // The fallback: the program may close or replace grademl's descriptor; its files are
    // still its own, and what it cost in events is said.
    const std::string db2 = dir + "/descriptor" + s + ".db";
    CommandResult k = RunCommand({"/usr/bin/env", "GRADEML_WRITER_RESERVE=descriptor", GrademlBinary(), "--db", db2,
                                  "run", "--no-report", "--", HelperBinary("instrumented_fd_chaos"), s, kept});
    ASSERT_EQ(k.exit_code, 0) << k.err;
    EXPECT_EQ(FilesUnder(kept), expected);
    int64_t stored = QueryNumber(db2, "SELECT count(*) FROM phases WHERE name IN ('start', 'chaos', 'other')");
    EXPECT_LE(stored, truth);
    if (!RootTag(db2, "grademl.events_descriptor_lost").empty()) {
      ++descriptor_losses;
      EXPECT_NE(k.err.find("closed or replaced grademl's event descriptor"), std::string::npos) << k.err;
      EXPECT_EQ(QueryNumber(db2, "SELECT count(*) FROM phases WHERE type LIKE '%process' AND "
                                 "json_extract(tags, '$.\"grademl.events_stopped\"') IS NOT NULL"),
                1);
    } else {
      EXPECT_EQ(stored, truth) << "events lost without a lost descriptor";
    }
  }
  // The sequences do reach the fallback's descriptor (a closerange in each, mostly).
  EXPECT_GE(descriptor_losses, kSeeds / 2);
}

// The issue's own case: a Python program that closes its descriptors daemon-style
// (os.closerange(3, 65536)) and then opens its own output files, recording phases all along.
// Finding: the writer went on reserving chunks through the number it had, now one of the
// program's files: one of eight 10-byte files grew to 1.6 MB of zeros.
constexpr char kDaemonLikePython[] = R"(
import os, sys
import grademl
out = sys.argv[1]
for i in range(3000):
    with grademl.phase("before"):
        pass
os.closerange(3, 65536)
files = [open(os.path.join(out, "out%d" % k), "w") for k in range(8)]
for k, f in enumerate(files):
    f.write("0123456789")
    f.flush()
for i in range(20000):
    with grademl.phase("after", i=i):
        pass
for f in files:
    f.close()
print("daemon-like done")
)";

TEST(WorkloadDescriptorsE2E, APythonDaemonClosingEveryDescriptorKeepsItsFiles) {
  const std::string dir = FreshDir("descriptor_python_daemon");
  const std::string script = dir + "/daemon_like.py";
  {
    FILE* f = fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(kDaemonLikePython, f);
    fclose(f);
  }
  for (const std::string reservation : {"mapping", "descriptor"}) {
    SCOPED_TRACE(reservation);
    const std::string out = dir + "/" + reservation, db = dir + "/" + reservation + ".db";
    fs::create_directories(out);
    CommandResult r = RunCommand({"/usr/bin/env", "GRADEML_WRITER_RESERVE=" + reservation, GrademlBinary(), "--db",
                                  db, "run", "--no-report", "--", "/usr/bin/python3", script, out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("daemon-like done"), std::string::npos) << r.out;
    for (int k = 0; k < 8; ++k) {
      std::string path = out + "/out" + std::to_string(k);
      struct stat st {};
      ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
      EXPECT_EQ(st.st_size, 10) << path;
      EXPECT_EQ(ReadFile(path), "0123456789") << path;
    }
    const int64_t before = QueryNumber(db, "SELECT count(*) FROM phases WHERE name = 'before'");
    const int64_t after = QueryNumber(db, "SELECT count(*) FROM phases WHERE name = 'after'");
    EXPECT_EQ(before, 3000);
    if (reservation == "mapping") {
      EXPECT_EQ(after, 20000);  // nothing to close: nothing lost
      EXPECT_EQ(RootTag(db, "grademl.events_dropped"), "");
    } else {
      // The closerange took grademl's descriptor: the phases after it that did not fit the
      // chunk the writer held are dropped, and said at the end and in the report.
      EXPECT_LT(after, 20000);
      EXPECT_EQ(RootTag(db, "grademl.events_descriptor_lost"), "1");
      EXPECT_NE(r.err.find("1 process closed or replaced grademl's event descriptor"), std::string::npos) << r.err;
      CommandResult report = RunCommand({GrademlBinary(), "--db", db, "report"});
      EXPECT_NE(report.out.find("closed grademl's event descriptor: later events are missing"), std::string::npos)
          << report.out;
    }
  }
}

// Finding: a grademl installed without its libgrademl.so ran Python programs with their
// grademl phases silently unrecorded. It now says so at once, and the report does.
TEST(WorkloadDescriptorsE2E, AGrademlWithoutItsLibrarySaysSo) {
  const std::string dir = FreshDir("descriptor_no_library");
  const std::string bin = dir + "/bin/grademl", db = dir + "/g.db";
  fs::create_directories(dir + "/bin");
  fs::copy_file(GrademlBinary(), bin);  // alone: no libgrademl.so beside it, none in ../lib
  CommandResult r = RunCommand({bin, "--db", db, "run", "--no-report", "--", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("libgrademl.so not found"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("in-process events of Python programs are not recorded"), std::string::npos) << r.err;
  EXPECT_EQ(RootTag(db, "grademl.events_library"), "not found");
  CommandResult report = RunCommand({GrademlBinary(), "--db", db, "report"});
  EXPECT_NE(report.out.find("libgrademl.so was not found"), std::string::npos) << report.out;
  // A library that is not one (emptied by a broken install) counts as missing too.
  { FILE* f = fopen((dir + "/bin/libgrademl.so").c_str(), "w"); ASSERT_NE(f, nullptr); fclose(f); }
  r = RunCommand({bin, "--db", db, "run", "--no-report", "--", "/bin/true"});
  EXPECT_NE(r.err.find("libgrademl.so not found"), std::string::npos) << r.err;
  // The real installation says nothing of the kind.
  r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/bin/true"});
  EXPECT_EQ(r.err.find("libgrademl.so"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace grademl::testing
