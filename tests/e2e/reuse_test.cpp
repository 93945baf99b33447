// End-to-end tests of reuse across runs (docs/reuse.md): fresh checkouts of one workflow
// sharing one store — the first run, an unchanged re-run, a parameter changed, a plain re-run —
// with the exact sets of steps run and restored, outputs compared byte for byte with the
// first checkout's; DVC's format alike; a tampered artifact store; the budget.
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// gen -> clean/ (a directory with an executable script) -> featurize -> train (+ params.yaml
// train.lr) -> model.txt; `publish` has no outs (always runs), `stamp` opts out (reuse: false).
// Deterministic steps: their outputs depend on their inputs only.
constexpr const char* kReusePipeline = R"(steps:
  gen:
    cmd: seq 1 300000 > raw.txt
    deps: [gen.sh]
    outs: [raw.txt]
  clean:
    cmd: mkdir -p clean && grep -v 7 raw.txt > clean/rows.txt && printf '#!/bin/sh\necho hi\n' > clean/run.sh && chmod +x clean/run.sh
    deps: [raw.txt]
    outs: [clean/]  # a trailing slash, as docs/workflows.md writes directory outs
  featurize:
    cmd: wc -l clean/rows.txt > feat.txt && sleep 0.2
    deps: [clean/rows.txt]
    outs: [feat.txt]
  train:
    cmd: cat feat.txt params.yaml > model.txt
    deps: [feat.txt]
    params: [train.lr]
    outs: [model.txt]
  publish:
    cmd: cat model.txt > /dev/null
    deps: [model.txt]
  stamp:
    cmd: date +%s%N > stamp.txt
    deps: [model.txt]
    outs: [stamp.txt]
    reuse: false
)";

// A fresh checkout: the sources only, no outputs.
std::string Checkout(const std::string& root, const std::string& name, const std::string& lr) {
  std::string dir = root + "/" + name;
  fs::create_directories(dir);
  std::ofstream(dir + "/pipeline.yaml") << kReusePipeline;
  std::ofstream(dir + "/gen.sh") << "# the generator's source\n";
  std::ofstream(dir + "/params.yaml") << "train:\n  lr: " << lr << "\n  epochs: 3\nother: 1\n";
  return dir;
}

// Steps that started (ran) and were restored, from the runner's lines on stderr.
struct StepSets {
  std::set<std::string> ran, restored;
};
StepSets StepsOf(const CommandResult& r) {
  StepSets s;
  std::istringstream lines(r.err);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("[grademl] start ", 0) == 0) s.ran.insert(line.substr(16));
    if (line.rfind("[grademl] reuse ", 0) == 0 && line.find(" (outputs of run ") != std::string::npos) {
      s.restored.insert(line.substr(16, line.find(" (outputs of run ") - 16));
    }
  }
  return s;
}

CommandResult RunIn(const std::string& db, const std::string& dir, std::vector<std::string> extra) {
  std::vector<std::string> argv = {GrademlBinary(), "--db", db, "run", "--no-report"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(dir + "/pipeline.yaml");
  return RunCommand(argv);
}

bool Executable(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && (st.st_mode & S_IXUSR) != 0;
}

json Query(const std::string& db, const std::string& run, const std::string& sql) {
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "query", run, sql, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json();
}

class ReuseE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = FreshDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    db_ = root_ + "/shared.db";
    // The stat cache of this test alone.
    setenv("GRADEML_HASH_CACHE", (root_ + "/hashes.sqlite").c_str(), 1);
  }
  void TearDown() override { unsetenv("GRADEML_HASH_CACHE"); }
  std::string root_, db_;
};

TEST_F(ReuseE2E, FreshCheckoutsShareOneStore) {
  const std::set<std::string> kAll = {"gen", "clean", "featurize", "train", "publish", "stamp"};
  // 1. The first run, checkout A: everything runs; outputs are materialised.
  std::string a = Checkout(root_, "a", "0.1");
  CommandResult first = RunIn(db_, a, {"--reuse"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  StepSets s1 = StepsOf(first);
  EXPECT_EQ(s1.ran, kAll) << first.err;
  EXPECT_TRUE(s1.restored.empty()) << first.err;
  EXPECT_NE(first.err.find("reuse: publish always runs (no outs: nothing to restore)"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("reuse: stamp always runs (reuse: false)"), std::string::npos) << first.err;

  // 2. An unchanged re-run in a fresh checkout B: the four reusable steps are restored,
  // byte for byte (the directory and its executable bit too); the other two run.
  std::string b = Checkout(root_, "b", "0.1");
  CommandResult second = RunIn(db_, b, {"--reuse"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  StepSets s2 = StepsOf(second);
  EXPECT_EQ(s2.restored, (std::set<std::string>{"gen", "clean", "featurize", "train"})) << second.err;
  EXPECT_EQ(s2.ran, (std::set<std::string>{"publish", "stamp"})) << second.err;
  for (const char* out : {"raw.txt", "clean/rows.txt", "clean/run.sh", "feat.txt", "model.txt"}) {
    std::string want = ReadFile(a + "/" + out);
    ASSERT_FALSE(want.empty()) << out;
    EXPECT_EQ(ReadFile(b + "/" + out), want) << out;
  }
  EXPECT_TRUE(Executable(b + "/clean/run.sh"));
  EXPECT_FALSE(Executable(b + "/clean/rows.txt"));
  // The restored steps' phases say so, with the run they came from.
  json restored = Query(db_, "2", "SELECT name, tags FROM phases WHERE type = 'run/step' ORDER BY name");
  int tagged = 0;
  for (const json& row : restored) {
    std::string tags = row["tags"].is_string() ? row["tags"].get<std::string>() : row["tags"].dump();
    if (tags.find("reused") != std::string::npos) ++tagged;
  }
  EXPECT_EQ(tagged, 4) << restored.dump();
  json outcomes = Query(db_, "2", "SELECT step, outcome FROM step_executions ORDER BY step");
  std::set<std::string> reused_rows;
  for (const json& row : outcomes) {
    if (row["outcome"] == "reused") reused_rows.insert(row["step"].get<std::string>());
  }
  EXPECT_EQ(reused_rows, (std::set<std::string>{"gen", "clean", "featurize", "train"})) << outcomes.dump();

  // 3. One training parameter changed, checkout C: only train and what follows it run.
  std::string c = Checkout(root_, "c", "0.2");
  CommandResult third = RunIn(db_, c, {"--reuse"});
  ASSERT_EQ(third.exit_code, 0) << third.err;
  StepSets s3 = StepsOf(third);
  EXPECT_EQ(s3.restored, (std::set<std::string>{"gen", "clean", "featurize"})) << third.err;
  EXPECT_EQ(s3.ran, (std::set<std::string>{"train", "publish", "stamp"})) << third.err;
  EXPECT_EQ(ReadFile(c + "/feat.txt"), ReadFile(a + "/feat.txt"));
  EXPECT_NE(ReadFile(c + "/model.txt").find("lr: 0.2"), std::string::npos);

  // 4. A plain re-run (no --reuse) in checkout D: everything runs, and the report names the
  // redundant steps: the four that an earlier run had executed identically.
  std::string d = Checkout(root_, "d", "0.1");
  CommandResult plain = RunIn(db_, d, {});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(StepsOf(plain).ran, kAll) << plain.err;
  json redundant = Query(db_, "4", "SELECT step, earlier_run_id, outputs_identical FROM redundant_steps ORDER BY step");
  std::set<std::string> redundant_steps;
  for (const json& row : redundant) {
    redundant_steps.insert(row["step"].get<std::string>());
    EXPECT_TRUE(row["outputs_identical"] == 1 || row["outputs_identical"] == true) << row.dump();
  }
  EXPECT_EQ(redundant_steps, (std::set<std::string>{"clean", "featurize", "gen", "train"})) << redundant.dump();
  json report = ReportJson(db_);
  // The report's reuse section: the same four, each with the latest earlier run that had it:
  // run 3 (checkout C) restored gen, clean and featurize; train's key was last run 2's.
  std::set<std::string> reported;
  for (const json& step : report["reuse"]["steps"]) {
    if (step["redundant"] == true) {
      std::string name = step["step"].get<std::string>();
      reported.insert(name);
      EXPECT_EQ(step["earlier_run"], name == "train" ? 2 : 3) << step.dump();
    }
  }
  EXPECT_EQ(reported, redundant_steps) << report["reuse"].dump(2);
  // The query's issues are the report's: the run loaded and analysed the same way, with the
  // store's experiment graph (reuse/stored_run.h); before, the query analysed it without and
  // listed no redundant_step. The same kinds and phases in the same order.
  std::vector<std::pair<std::string, json>> report_issues, query_issues;
  for (const json& issue : report["issues"]) report_issues.push_back({issue["kind"], issue["phase"]});
  for (const json& row : Query(db_, "4", "SELECT kind, phase_id FROM issues ORDER BY rank")) {
    query_issues.push_back({row["kind"], row["phase_id"]});
  }
  EXPECT_EQ(query_issues, report_issues) << report["issues"].dump(2);
  std::set<std::string> redundant_issues;
  for (const json& row : Query(db_, "4",
                               "SELECT p.name FROM issues i JOIN phases p ON p.id = i.phase_id "
                               "WHERE i.kind = 'redundant_step'")) {
    redundant_issues.insert(row["name"].get<std::string>());
  }
  // Those whose saving passes the issues' threshold: featurize at least (its 0.2 s sleep).
  EXPECT_TRUE(redundant_issues.contains("featurize")) << report["issues"].dump(2);
  EXPECT_TRUE(std::includes(redundant_steps.begin(), redundant_steps.end(), redundant_issues.begin(),
                            redundant_issues.end()));
}

TEST_F(ReuseE2E, DvcStagesAlikeWithTheirOptOuts) {
  // DVC's format: `always_changed: true` and `persist: true` outs are never skipped.
  auto checkout = [&](const std::string& name) {
    std::string dir = root_ + "/" + name;
    fs::create_directories(dir);
    std::ofstream(dir + "/dvc.yaml") << R"(stages:
  prepare:
    cmd: seq 1 1000 > prepared.txt
    deps: [input.txt]
    outs: [prepared.txt]
  poll:
    cmd: cat prepared.txt > polled.txt
    deps: [prepared.txt]
    outs: [polled.txt]
    always_changed: true
  append:
    cmd: cat prepared.txt >> log.txt
    deps: [prepared.txt]
    outs:
      - log.txt:
          persist: true
)";
    std::ofstream(dir + "/input.txt") << "x\n";
    return dir;
  };
  auto run = [&](const std::string& dir) {
    return RunCommand({GrademlBinary(), "--db", db_, "run", "--no-report", "--reuse", dir + "/dvc.yaml"});
  };
  CommandResult first = run(checkout("a"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::string b = checkout("b");
  CommandResult second = run(b);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  StepSets s = StepsOf(second);
  EXPECT_EQ(s.restored, (std::set<std::string>{"prepare"})) << second.err;
  EXPECT_EQ(s.ran, (std::set<std::string>{"poll", "append"})) << second.err;
  EXPECT_NE(second.err.find("poll always runs (always_changed: true)"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("append always runs (persist: true on out 'log.txt')"), std::string::npos) << second.err;
  EXPECT_EQ(ReadFile(b + "/prepared.txt"), ReadFile(root_ + "/a/prepared.txt"));
}

TEST_F(ReuseE2E, ATamperedArtifactIsNeverRestored) {
  std::string a = Checkout(root_, "a", "0.1");
  ASSERT_EQ(RunIn(db_, a, {"--reuse"}).exit_code, 0);
  // Someone with write access to the shared store changes an object (the bytes of raw.txt).
  std::string raw = ReadFile(a + "/raw.txt");
  bool changed = false;
  for (const auto& e : fs::recursive_directory_iterator(root_ + "/shared-artifacts/objects")) {
    if (!e.is_regular_file() || static_cast<size_t>(e.file_size()) != raw.size()) continue;
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
    std::ofstream(e.path(), std::ios::binary) << std::string(raw.size(), 'x');
    changed = true;
  }
  ASSERT_TRUE(changed);
  std::string b = Checkout(root_, "b", "0.1");
  CommandResult second = RunIn(db_, b, {"--reuse"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  StepSets s = StepsOf(second);
  EXPECT_EQ(s.restored.count("gen"), 0u) << second.err;
  EXPECT_EQ(s.ran.count("gen"), 1u) << second.err;
  EXPECT_NE(second.err.find("does not match its hash"), std::string::npos) << second.err;
  EXPECT_EQ(ReadFile(b + "/raw.txt"), raw);  // computed again, right
}

TEST_F(ReuseE2E, TheBudgetKeepsTheMostUsefulPerByte) {
  std::string a = Checkout(root_, "a", "0.1");
  // raw.txt is about 2 MB, clean/ about 1.8 MB, feat.txt and model.txt tens of bytes: a
  // 100 KiB budget keeps only the small ones.
  CommandResult r = RunIn(db_, a, {"--reuse", "--reuse-budget", "100K"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("artifact(s) evicted to stay within --reuse-budget 100K"), std::string::npos) << r.err;
  CommandResult list = RunCommand({GrademlBinary(), "--db", db_, "reuse", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  json j = json::parse(list.out);
  EXPECT_EQ(j["schema"], "grademl.artifacts/1");
  std::set<std::string> kept;
  int64_t total = 0;
  for (const json& art : j["artifacts"]) {
    kept.insert(art["path"].get<std::string>());
    total += art["size"].get<int64_t>();
  }
  EXPECT_EQ(kept, (std::set<std::string>{"feat.txt", "model.txt"})) << j.dump(2);
  EXPECT_LE(total, 100 * 1024);
  // A re-run restores what was kept and recomputes the rest.
  std::string b = Checkout(root_, "b", "0.1");
  CommandResult second = RunIn(db_, b, {"--reuse", "--reuse-budget", "100K"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  StepSets s = StepsOf(second);
  EXPECT_EQ(s.ran.count("gen"), 1u) << second.err;
  // --clear empties the store.
  CommandResult cleared = RunCommand({GrademlBinary(), "--db", db_, "reuse", "--clear"});
  ASSERT_EQ(cleared.exit_code, 0) << cleared.err;
  CommandResult empty = RunCommand({GrademlBinary(), "--db", db_, "reuse"});
  EXPECT_NE(empty.out.find("No artifacts materialised"), std::string::npos) << empty.out;
}

// Files under `dir`, recursively, with their sizes.
std::map<std::string, uintmax_t> ArtifactFilesUnder(const std::string& dir) {
  std::map<std::string, uintmax_t> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file()) files[it->path().string()] = it->file_size();
  }
  return files;
}

// `grademl reuse --budget` (or --clear, or the listing) on a store it cannot open: one line
// naming the store, exit code 1, and every artifact still there. Before, an unreadable store
// was taken for an empty graph: every artifact had utility 0 and the budget evicted them.
//   a corrupt store file (bytes that are not SQLite): "file is not a database";
//   a store path where nothing is: "no GradeML database here";
//   a directory where the store should be: "is a directory";
//   a PostgreSQL store that cannot be reached.
TEST_F(ReuseE2E, AStoreItCannotOpenEvictsNothing) {
  const std::string artifacts = root_ + "/artifacts";
  std::string a = Checkout(root_, "a", "0.1");
  CommandResult r = RunIn(db_, a, {"--reuse", "--artifacts", artifacts});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::map<std::string, uintmax_t> before = ArtifactFilesUnder(artifacts);
  ASSERT_GE(before.size(), 4u);  // gen, clean/ (two files), featurize, train at least

  const std::string corrupt = root_ + "/corrupt.db";
  std::ofstream(corrupt) << std::string(8192, 'x');
  const std::string missing = root_ + "/nothing/here.db";
  const std::string directory = root_ + "/a_directory.db";
  fs::create_directories(directory);
  struct Case {
    std::string db;  // a path, or a PostgreSQL URI
    std::string says;
  };
  std::vector<Case> cases = {{corrupt, "not a"}, {missing, "no GradeML database here"}, {directory, "is a directory"},
                             {"postgresql:///grademl_no_such_store?host=/nonexistent-socket-dir&connect_timeout=2", ""}};
  for (const Case& c : cases) {
    // Under GRADEML_TEST_BACKEND=postgresql a file path becomes a database that opens: the
    // file cases are SQLite's.
    if (TestStoreLocation(c.db) != c.db) continue;
    for (std::vector<std::string> args : {std::vector<std::string>{"--budget", "0"},
                                          std::vector<std::string>{"--clear"}, std::vector<std::string>{}}) {
      std::vector<std::string> argv = {GrademlBinary(), "--db", c.db, "reuse", "--artifacts", artifacts};
      argv.insert(argv.end(), args.begin(), args.end());
      CommandResult e = RunCommand(argv);
      EXPECT_EQ(e.exit_code, 1) << c.db << " " << e.out << e.err;
      EXPECT_EQ(e.out, "") << c.db;
      EXPECT_EQ(e.err.rfind("grademl: ", 0), 0u) << e.err;
      EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
      EXPECT_NE(e.err.find("nothing evicted"), std::string::npos) << e.err;
      EXPECT_NE(e.err.find(c.says), std::string::npos) << e.err;
      EXPECT_EQ(ArtifactFilesUnder(artifacts), before) << c.db << " " << e.err;
    }
  }
  // The store itself still applies the budget.
  CommandResult ok = RunCommand({GrademlBinary(), "--db", db_, "reuse", "--artifacts", artifacts, "--budget", "0"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_LT(ArtifactFilesUnder(artifacts).size(), before.size());
}

TEST(ReuseCliE2E, ErrorsAreOneLine) {
  std::string dir = FreshDir("reuse_cli_errors");
  std::ofstream(dir + "/w.yaml") << "steps:\n  a:\n    cmd: 'true'\n";
  std::string db = dir + "/g.db";
  ExpectErrors({GrademlBinary(), "--db", db},
               {{{"run", "--reuse", "--", "true"}, 2},
                {{"run", "--reuse", "--no-hash", dir + "/w.yaml"}, 2},
                {{"run", "--reuse", "--reuse-budget", "lots", dir + "/w.yaml"}, 2},
                {{"run", "--reuse", "--reuse-budget", "-5G", dir + "/w.yaml"}, 2},
                {{"reuse", "--budget", "1X"}, 2},
                {{"reuse", "--budget", "1G", "--clear"}, 2},
                {{"run", "--trust", "root", dir + "/w.yaml"}, 2},  // --trust is for --reuse
                {{"run", "--reuse", "--trust", "gm_nobody_here_x", dir + "/w.yaml"}, 2}});
}

}  // namespace
}  // namespace grademl::testing
