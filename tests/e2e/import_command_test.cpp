// End-to-end tests of `grademl import`: the real binary on the importer's fixtures
// (tests/data/importer/), read back from the store. A truncated trace gives a partial run
// flagged incomplete, the byte offset in a one-line error and exit 1; random bytes give a
// one-line error and no run; several files make one run; --into/--under add to a stored run
// (stitched when the phase is a process). C++ only: fit for the sanitizer lists.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"
#include "store/database.h"

namespace grademl::testing {
namespace {

std::string Fixture(const std::string& name) { return std::string(GRADEML_TESTDATA_DIR) + "/importer/" + name; }

model::Run Load(const std::string& db_path, model::RunId id) {
  auto db = store::Database::Open(TestStoreLocation(db_path), store::Database::Mode::kReadOnly);
  EXPECT_TRUE(db.ok()) << db.status().message();
  if (!db.ok()) return {};
  auto run = (*db)->LoadRun(id);
  EXPECT_TRUE(run.ok()) << run.status().message();
  return run.ok() ? *run : model::Run{};
}

const model::Phase* Named(const model::Run& run, const std::string& name) {
  for (const auto& p : run.phases)
    if (p.name == name) return &p;
  return nullptr;
}

int64_t CountLeaf(const model::Run& run, std::string_view leaf) {
  return std::count_if(run.phases.begin(), run.phases.end(), [&](const model::Phase& p) { return p.leaf_type() == leaf; });
}

TEST(ImportCommandE2E, KinetoTraceBecomesAStoredRun) {
  std::string db = FreshDir("import_kineto") + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", Fixture("kineto_gpu.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("22 events, 11 phases, 3 edges, 0 dropped (kineto, clock absolute)"), std::string::npos) << r.out;
  model::Run run = Load(db, 1);
  EXPECT_TRUE(run.info.complete);
  EXPECT_EQ(run.info.error, "");
  // The fixture's span: ProfilerStep#7 from 1000 µs to 2000 µs after baseTimeNanoseconds.
  EXPECT_EQ(run.info.start_ns, 1'700'000'000'001'000'000);
  EXPECT_EQ(run.info.end_ns, 1'700'000'000'002'000'000);
  ASSERT_NE(run.Root(), nullptr);
  EXPECT_EQ(run.Root()->type, "run");
  EXPECT_EQ(run.Root()->start_ns, run.info.start_ns);
  EXPECT_EQ(run.Root()->end_ns, run.info.end_ns);
  EXPECT_EQ(run.phases.size(), 12u);  // the root + 11
  EXPECT_EQ(run.edges.size(), 3u);
  EXPECT_EQ(run.tracks.size(), 4u);
  ASSERT_EQ(run.sources.size(), 1u);
  EXPECT_EQ(run.sources[0].format, "kineto");
  const model::Phase* gemm = Named(run, "gemm");
  ASSERT_NE(gemm, nullptr);
  const model::Track* track = run.FindTrack(gemm->track);
  ASSERT_NE(track, nullptr);
  EXPECT_EQ(track->kind, model::TrackKind::kDevice);
  EXPECT_EQ(track->stream, 7);
  EXPECT_EQ(CountLeaf(run, "iteration"), 1);
  // The [memory] series came through the store too.
  EXPECT_EQ(run.series.size(), 2u);
}

TEST(ImportCommandE2E, SeveralFilesMakeOneRun) {
  std::string db = FreshDir("import_several") + "/g.db";
  CommandResult r = RunCommand(
      {GrademlBinary(), "--db", db, "import", Fixture("kineto_gpu.json"), Fixture("chrome_array.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The array's E without a B is dropped; its B without an E is kept, closed at the trace's end.
  EXPECT_NE(r.out.find("1 dropped (chrome_json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  dropped 1: end_without_begin 1; kept adjusted 1: begin_without_end_closed_at_trace_end 1\n"),
            std::string::npos)
      << r.out;
  model::Run run = Load(db, 1);
  EXPECT_EQ(run.sources.size(), 2u);
  EXPECT_EQ(CountLeaf(run, "process"), 2);  // python3 (kineto) and pid 1 (array)
  // The root spans both files: the array's events are in 2023, the Kineto's in 2023 too
  // (1.7e18 ns); it starts at the earliest of them.
  TimeNs earliest = INT64_MAX;
  for (const auto& p : run.phases) earliest = std::min(earliest, p.start_ns);
  EXPECT_EQ(run.Root()->start_ns, earliest);
  // The array's ingest stats (an E without a B, a B without an E) are stored per source.
  int64_t stats = 0;
  for (const auto& s : run.ingest_stats) stats += s.count;
  EXPECT_EQ(stats, 2);
  // Nothing else in the database.
  r = RunCommand({GrademlBinary(), "--db", db, "ls"});
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n') >= 1, true);
}

std::string Squeezed(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// Issue 27: `grademl import` printed "0 dropped" where `grademl report` said "dropped N" for
// the same events (events kept but adjusted). Both now say what was dropped (severity
// data_loss or error) and what was kept adjusted (info), with the same counts and words, and
// `report --json` agrees. The expectations are counted by hand from the trace below.
TEST(ImportCommandE2E, ImportAndReportAgreeOnWhatWasDropped) {
  std::string dir = FreshDir("import_stats_agree");
  std::string trace = dir + "/mixed.json";
  {
    std::ofstream f(trace);
    f << R"([
{"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": 1700000000000000, "dur": 10},
{"name": "b", "ph": "X", "pid": 1, "tid": 1, "ts": 1700000000000002, "dur": 3},
{"name": "p", "ph": "X", "pid": 1, "tid": 4, "ts": 1700000000000100, "dur": 10},
{"name": "q", "ph": "X", "pid": 1, "tid": 4, "ts": 1700000000000105, "dur": 10},
{"name": "c", "ph": "B", "pid": 1, "tid": 2, "ts": 1700000000000001},
{"name": "d", "ph": "E", "pid": 1, "tid": 3, "ts": 1700000000000001},
{"name": "e", "ph": "E", "pid": 1, "tid": 3, "ts": 1700000000000002},
{"name": "s", "ph": "P", "pid": 1, "tid": 1, "ts": 1700000000000003},
{"name": "x", "ph": "X", "pid": 1, "tid": 1, "ts": 1700000000000004}
])";
  }
  // Dropped: 2 end_without_begin (data loss), 1 unsupported_ph_P (data loss), 1 missing_dur
  // (error). Kept adjusted: c closed at the trace's end, q (ends after p) kept as p's child.
  const std::string line =
      "dropped 4: end_without_begin 2, missing_dur 1, unsupported_ph_P 1; kept adjusted 2: "
      "begin_without_end_closed_at_trace_end 1, slice_ends_after_parent_kept_as_child 1";
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", trace});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(": 9 events, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 4 dropped (chrome_json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  " + line + "\n"), std::string::npos) << r.out;

  // The text report: the same line (wrapped to the terminal's width).
  r = RunCommand({GrademlBinary(), "--db", db, "report", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(Squeezed(r.out).find(line), std::string::npos) << r.out;

  // --json: the same totals, and each stat's severity as stored.
  r = RunCommand({GrademlBinary(), "--db", db, "report", "--json", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << r.out;
  ASSERT_EQ(report["sources"].size(), 1u);
  const auto& source = report["sources"][0];
  EXPECT_EQ(source["dropped_total"], 4);
  EXPECT_EQ(source["kept_total"], 2);
  std::map<std::string, std::pair<int64_t, std::string>> stats;
  for (const auto& d : source["dropped"]) {
    stats[d["reason"].get<std::string>()] = {d["count"].get<int64_t>(), d["severity"].get<std::string>()};
    EXPECT_FALSE(d["description"].get<std::string>().empty()) << d.dump();
    EXPECT_EQ(d["dropped"].get<bool>(), d["severity"] != "info") << d.dump();
  }
  EXPECT_EQ(stats, (std::map<std::string, std::pair<int64_t, std::string>>{
                       {"end_without_begin", {2, "data_loss"}},
                       {"missing_dur", {1, "error"}},
                       {"unsupported_ph_P", {1, "data_loss"}},
                       {"begin_without_end_closed_at_trace_end", {1, "info"}},
                       {"slice_ends_after_parent_kept_as_child", {1, "info"}}}));
}

TEST(ImportCommandE2E, TruncatedTraceGivesAPartialRunAndExit1) {
  std::string dir = FreshDir("import_truncated");
  std::string db = dir + "/g.db";
  std::string text = ReadFile(Fixture("kineto_gpu.json"));
  ASSERT_FALSE(text.empty());
  // Cut inside the fifth event (the kernel): four events are whole.
  size_t event_start = text.rfind('{', text.find("\"name\": \"gemm\""));
  size_t cut = text.find("\"name\": \"gemm\"") + 5;
  std::string path = dir + "/cut.json";
  std::ofstream(path, std::ios::binary) << text.substr(0, cut);
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", path});
  EXPECT_EQ(r.exit_code, 1);
  // One line on stderr naming the file and the byte offset of the damage.
  EXPECT_EQ(r.err.rfind("grademl: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("byte ([0-9]+)"))) << r.err;
  uint64_t offset = std::stoull(m[1]);
  EXPECT_GE(offset, event_start);
  EXPECT_LE(offset, cut);
  EXPECT_NE(r.out.find("PARTIAL"), std::string::npos) << r.out;
  // The run is stored, flagged incomplete with the reason, with what was valid.
  model::Run run = Load(db, 1);
  EXPECT_FALSE(run.info.complete);
  EXPECT_NE(run.info.error.find("byte"), std::string::npos) << run.info.error;
  ASSERT_NE(Named(run, "ProfilerStep#7"), nullptr);
  ASSERT_NE(Named(run, "aten::mm"), nullptr);
  ASSERT_NE(Named(run, "cudaLaunchKernel"), nullptr);
  EXPECT_EQ(Named(run, "gemm"), nullptr);
  EXPECT_EQ(run.phases.size(), 5u);  // root, process, step, mm, launch

  // A partial import is not an interrupted recording: the next writer neither marks it so nor
  // checks the store for it; ls and report call it a partial import.
  r = RunCommand({GrademlBinary(), "--db", db, "import", Fixture("kineto_gpu.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  run = Load(db, 1);
  EXPECT_EQ(run.info.error.find("interrupted"), std::string::npos) << run.info.error;
  r = RunCommand({GrademlBinary(), "--db", db, "ls"});
  EXPECT_NE(r.out.find("partial import"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("imported"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("failed to start"), std::string::npos) << r.out;
}

TEST(ImportCommandE2E, GzipTraceAndAPartialImportIntoAStoredRun) {
  std::string dir = FreshDir("import_gzip");
  std::string db = dir + "/g.db";
  // gzip is found by its magic bytes, not by the name.
  std::string gz = dir + "/trace.bin";
  CommandResult r = RunCommand({"/bin/sh", "-c", "gzip -c '" + Fixture("chrome_array.json") + "' > '" + gz + "'"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCommand({GrademlBinary(), "--db", db, "import", gz});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("4 events, 4 phases"), std::string::npos) << r.out;  // a, b, c + the process
  EXPECT_TRUE(Load(db, 1).info.complete);

  // A truncated file imported into that stored run: what was valid is added, the run is
  // now incomplete with the reason, exit 1.
  std::string text = ReadFile(Fixture("chrome_object.json"));
  std::string cut = dir + "/cut.json";
  std::ofstream(cut, std::ios::binary) << text.substr(0, text.find("\"name\": \"later\""));
  r = RunCommand({GrademlBinary(), "--db", db, "import", "--into", "1", cut});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("byte "), std::string::npos) << r.err;
  model::Run run = Load(db, 1);
  EXPECT_FALSE(run.info.complete);
  EXPECT_NE(run.info.error.find(cut), std::string::npos) << run.info.error;
  EXPECT_EQ(run.sources.size(), 2u);
  EXPECT_NE(Named(run, "outer"), nullptr);
  EXPECT_NE(Named(run, "a"), nullptr);
}

// chrome_hostile_text.json and dask_hostile_text.jsonl (tests/data/importer/): names with
// bytes that are not UTF-8 and lone surrogate escapes. Each file imports whole (exit 0, a
// complete run), each such character U+FFFD in the store and on the terminal. Before, the
// first such byte ended the import: 0 events, a partial run, exit 1.
TEST(ImportCommandE2E, InvalidUtf8AndLoneSurrogatesInATraceAreReplacedNotFatal) {
  const std::string fffd = "\xEF\xBF\xBD";
  std::string dir = FreshDir("import_hostile_text");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", Fixture("chrome_hostile_text.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("11 events, 7 phases, 1 edges, 0 dropped (chrome_json, clock aligned)"), std::string::npos) << r.out;
  model::Run run = Load(db, 1);
  EXPECT_TRUE(run.info.complete);
  for (const std::string& name : {"tr" + fffd + "ainer", "ab" + fffd + "cd", "lone" + fffd + "high",
                                  "lone" + fffd + "low" + fffd + fffd, "req" + fffd + fffd, std::string("last")}) {
    EXPECT_NE(Named(run, name), nullptr) << name;
  }
  r = RunCommand({GrademlBinary(), "--db", db, "report", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("lone" + fffd + "low" + fffd + fffd), std::string::npos) << r.out;

  std::string db2 = dir + "/g2.db";
  r = RunCommand({GrademlBinary(), "--db", db2, "import", Fixture("dask_hostile_text.jsonl")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("6 events"), std::string::npos) << r.out;
  run = Load(db2, 1);
  EXPECT_TRUE(run.info.complete);
  EXPECT_NE(Named(run, "load-" + fffd), nullptr);
  EXPECT_NE(Named(run, "inc-" + fffd), nullptr);
  EXPECT_NE(Named(run, "last"), nullptr);
}

TEST(ImportCommandE2E, RelativeTraceInANewRunEndsWhenItsFileWasWritten) {
  std::string dir = FreshDir("import_aligned");
  std::string db = dir + "/g.db";
  std::string path = dir + "/legacy.json";
  std::ofstream(path) << ReadFile(Fixture("torch113_legacy.json"));
  const TimeNs mtime = 1'736'000'000'123'456'789;  // 2025-01-04
  struct timespec times[2] = {{mtime / kNsPerSec, mtime % kNsPerSec}, {mtime / kNsPerSec, mtime % kNsPerSec}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("torch_legacy, clock aligned"), std::string::npos) << r.out;
  model::Run run = Load(db, 1);
  // The last event (relu, 160 + 10 µs) ends at the file's mtime; the first (linear, 100 µs) 70 µs before.
  EXPECT_EQ(run.info.end_ns, mtime);
  EXPECT_EQ(run.info.start_ns, mtime - 70 * kNsPerUs);
  ASSERT_EQ(run.sources.size(), 1u);
  auto tags = run.sources[0].tags;
  EXPECT_NE(std::find(tags.begin(), tags.end(), std::pair<std::string, std::string>("clock", "aligned")), tags.end());
}

TEST(ImportCommandE2E, RandomBytesGiveAOneLineErrorAndNoRun) {
  std::string dir = FreshDir("import_random");
  std::string db = dir + "/g.db";
  std::string junk;
  uint32_t x = 99;
  for (int i = 0; i < 20000; ++i) {
    x = x * 1664525u + 1013904223u;
    junk.push_back(static_cast<char>(x >> 24));
  }
  std::string path = dir + "/junk.bin";
  std::ofstream(path, std::ios::binary) << junk;
  // A JSON document that is not a trace, an empty file and a missing one fail the same way.
  std::ofstream(dir + "/other.json") << "{\"hello\": [1, 2, 3]}";
  std::ofstream(dir + "/empty.json") << "";
  ExpectErrors({GrademlBinary(), "--db", db, "import"}, {
                                                            {{path}, 1},
                                                            {{dir + "/other.json"}, 1},
                                                            {{dir + "/empty.json"}, 1},
                                                            {{dir + "/missing.json"}, 1},
                                                            {{Fixture("kineto_gpu.json"), path}, 1},
                                                            {{}, 2},
                                                            {{"--under", "1", Fixture("kineto_gpu.json")}, 2},
                                                        });
  // Nothing was imported, not even the good file given with the bad one.
  auto opened = store::Database::Open(TestStoreLocation(db), store::Database::Mode::kReadOnly);
  if (opened.ok()) {
    auto runs = (*opened)->ListRuns();
    ASSERT_TRUE(runs.ok());
    EXPECT_TRUE(runs->empty());
  }
}

TEST(ImportCommandE2E, IntoAStoredRunUnderAPhase) {
  std::string db = FreshDir("import_into") + "/g.db";
  ASSERT_EQ(RunCommand({GrademlBinary(), "--db", db, "import", Fixture("kineto_gpu.json")}).exit_code, 0);
  model::Run before = Load(db, 1);
  const model::Phase* proc = Named(before, "python3");
  ASSERT_NE(proc, nullptr);

  // Under the root by name: a second process phase; the legacy trace (relative times) is
  // aligned to the start of the phase it goes under.
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", "--into", "1", "--under", "import",
                                Fixture("torch113_legacy.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("clock aligned"), std::string::npos) << r.out;
  model::Run run = Load(db, 1);
  EXPECT_TRUE(run.info.complete);
  EXPECT_EQ(run.sources.size(), 2u);
  const model::Phase* legacy = Named(run, "CPU functions");
  ASSERT_NE(legacy, nullptr);
  EXPECT_EQ(legacy->parent, run.Root()->id);
  EXPECT_EQ(legacy->start_ns, run.Root()->start_ns);  // ts 100 µs aligned to the root's start
  // Ids of the second writer never collide with the first's.
  std::vector<model::PhaseId> ids;
  for (const auto& p : run.phases) ids.push_back(p.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
  EXPECT_EQ(run.phases.size(), 12u + 5u);

  // Under the recorded process (by id): stitched, no new process phase; aligned to the
  // process's start, linear (100..150 µs) falls inside that process's ProfilerStep#7
  // (the first 1000 µs of it) and goes under it, with the process's pid.
  const model::Phase* step = Named(before, "ProfilerStep#7");
  ASSERT_NE(step, nullptr);
  r = RunCommand({GrademlBinary(), "--db", db, "import", "--into", "1", "--under", std::to_string(proc->id),
                  Fixture("torch113_legacy.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  run = Load(db, 1);
  EXPECT_EQ(CountLeaf(run, "process"), 2);
  int64_t under_step = 0;
  for (const auto& p : run.phases) {
    if (p.name == "aten::linear" && p.parent == step->id) {
      ++under_step;
      EXPECT_EQ(p.pid, 100);
      EXPECT_EQ(p.type, "run/process/iteration/op");
    }
  }
  EXPECT_EQ(under_step, 1);

  // A phase that does not exist, a run that does not exist.
  ExpectErrors({GrademlBinary(), "--db", db, "import"}, {
                                                            {{"--into", "1", "--under", "nosuch", Fixture("chrome_array.json")}, 1},
                                                            {{"--into", "1", "--under", "999999", Fixture("chrome_array.json")}, 1},
                                                            {{"--into", "7", Fixture("chrome_array.json")}, 1},
                                                        });
}

}  // namespace
}  // namespace grademl::testing
