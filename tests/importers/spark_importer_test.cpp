// Tests of the Spark event log importer (src/importers/spark/): the line reader; the sniffer
// and the rolling-directory listing; golden tests on the shared logs of Spark 1.2, 2.3, 3.1
// and 4.2 (../shared/traces/spark), whose expected counts and times are read from the logs
// here with nlohmann::json, line by line, independently of the importer (and checked against
// the README's table); the fixture of tests/data/importer/spark (make_fixtures.py) plain,
// zstd-compressed and refused in lz4-java's and snappy-java's framings; damaged and
// truncated logs (what came before is imported, the error names the file and the line).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zstd.h>

#include "importers/importer.h"
#include "importers/spark/line_reader.h"
#include "importers/spark/spark_importer.h"
#include "importers/trace_input.h"
#include "importers/chunked_trace_input.h"
#include "model/run.h"
#include "model/run_builder.h"
#include "skip_or_fail.h"

namespace grademl::importers::spark {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr TimeNs kMs = 1'000'000;

std::string Fixture(const std::string& name) { return std::string(GRADEML_TESTDATA_DIR) + "/importer/spark/" + name; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

fs::path FreshDir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / ("grademl_spark_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// ---- The line reader ----------------------------------------------------------------------

// A line as handed out, with copies of its views (valid until the reader's next call only).
struct LineCopy {
  std::string text, file;
  int64_t number = 0;
  bool newline = true, skipped = false;
  uint64_t bytes = 0;
};

std::vector<LineCopy> AllLines(TraceInput& input, LineReader::Options options, Status* error = nullptr,
                               std::vector<std::string>* texts = nullptr) {
  LineReader reader(input, options);
  std::vector<LineCopy> out;
  while (true) {
    auto line = reader.Next();
    if (!line.ok()) {
      if (error != nullptr) *error = line.status();
      break;
    }
    if (!line->has_value()) break;
    const LineReader::Line& l = **line;
    out.push_back({std::string(l.text), std::string(l.file), l.number, l.newline, l.skipped, l.bytes});
    if (texts != nullptr) texts->emplace_back(l.text);
  }
  return out;
}

TEST(SparkLineReaderTest, SplitsLinesAcrossChunksWithCrLfAndALastLineWithoutNewline) {
  for (size_t chunk : {1, 2, 3, 7, 64, 4096}) {
    testing::ChunkedTraceInput input("ab\r\n\ncd\nlast", chunk, "mem.log");
    std::vector<std::string> texts;
    auto lines = AllLines(input, {}, nullptr, &texts);
    ASSERT_EQ(lines.size(), 4u) << chunk;
    EXPECT_EQ(texts, (std::vector<std::string>{"ab", "", "cd", "last"}));
    EXPECT_EQ(lines[0].number, 1);
    EXPECT_EQ(lines[3].number, 4);
    EXPECT_TRUE(lines[2].newline);
    EXPECT_FALSE(lines[3].newline);
    EXPECT_EQ(lines[3].file, "mem.log");
  }
}

TEST(SparkLineReaderTest, SkipsALineLongerThanTheLimitKeepingItsStartAndCountingIt) {
  std::string big = "{\"Event\":\"Huge\",\"x\":\"" + std::string(5000, 'x') + "\"}";
  testing::ChunkedTraceInput input("short\n" + big + "\nafter\n", 100);
  std::vector<std::string> texts;
  auto lines = AllLines(input, {.max_line_bytes = 1000, .skipped_prefix_bytes = 20}, nullptr, &texts);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_FALSE(lines[0].skipped);
  EXPECT_TRUE(lines[1].skipped);
  EXPECT_EQ(lines[1].bytes, big.size());
  EXPECT_EQ(texts[1], big.substr(0, 20));
  EXPECT_EQ(lines[1].number, 2);
  EXPECT_EQ(texts[2], "after");
  EXPECT_EQ(lines[2].number, 3);
}

TEST(SparkLineReaderTest, NumbersLinesPerFileOfAChainAndEndsAFileWithoutNewlineThere) {
  fs::path dir = FreshDir("chain");
  WriteFile(dir / "a", "a1\na2");  // no newline at its end
  WriteFile(dir / "b", "b1\nb2\n");
  auto input = TraceInput::OpenFiles({(dir / "a").string(), (dir / "b").string()}, dir.string());
  ASSERT_TRUE(input.ok());
  std::vector<std::string> texts;
  auto lines = AllLines(**input, {}, nullptr, &texts);
  ASSERT_EQ(texts, (std::vector<std::string>{"a1", "a2", "b1", "b2"}));
  EXPECT_EQ(lines[1].file, (dir / "a").string());
  EXPECT_FALSE(lines[1].newline);
  EXPECT_EQ(lines[2].file, (dir / "b").string());
  EXPECT_EQ(lines[2].number, 1);
  EXPECT_EQ(lines[3].number, 2);
}

TEST(SparkLineReaderTest, HandsOutTheInputsErrorAfterTheLinesBeforeIt) {
  // A zstd stream cut in the middle: the lines decompressed before the cut come first.
  std::string z = ReadFile(Fixture("fixture_app.log.zstd"));
  std::string cut = z.substr(0, z.size() / 2);
  auto input = TraceInput::FromMemory(cut, "cut.zstd");
  ASSERT_TRUE(input.ok());
  Status error;
  auto lines = AllLines(**input, {}, &error);
  EXPECT_FALSE(error.ok());
  EXPECT_NE(error.message().find("cut.zstd: byte"), std::string::npos) << error.message();
}

// ---- Sniffing and rolling directories -----------------------------------------------------

TEST(SparkFormatTest, SniffsTheFirstListenerEvent) {
  EXPECT_TRUE(LooksLikeSparkEventLog("{\"Event\":\"SparkListenerLogStart\",\"Spark Version\":\"3.5.0\"}\n"));
  EXPECT_TRUE(LooksLikeSparkEventLog("{\"Event\": \"SparkListenerApplicationStart\""));
  EXPECT_TRUE(LooksLikeSparkEventLog("\xEF\xBB\xBF{ \"Event\" : \"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart\""));
  EXPECT_TRUE(LooksLikeSparkEventLog("LZ4Block\x16"));
  EXPECT_TRUE(LooksLikeSparkEventLog(std::string("\x82SNAPPY\0\0\0\0\x01", 12)));
  EXPECT_FALSE(LooksLikeSparkEventLog("{\"Event\":\"Something\"}"));
  EXPECT_FALSE(LooksLikeSparkEventLog("{\"traceEvents\":[]}"));
  EXPECT_FALSE(LooksLikeSparkEventLog("{\"name\":\"x\",\"Event\":\"SparkListenerLogStart\"}"));
  EXPECT_FALSE(LooksLikeSparkEventLog(""));
  const TraceFormat* f = SniffTraceFormat("{\"Event\":\"SparkListenerLogStart\"}");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->name, "spark");
}

TEST(SparkFormatTest, ListsARollingDirectorysEventFilesInNumericOrderFromTheLastCompactOne) {
  fs::path dir = FreshDir("list") / "eventlog_v2_app-1";
  fs::create_directories(dir);
  for (const char* f : {"events_1_app-1", "events_2_app-1.zstd", "events_10_app-1", "appstatus_app-1.inprogress",
                        ".events_1_app-1.crc", "other"}) {
    WriteFile(dir / f, "");
  }
  auto files = EventLogFiles(dir.string());
  ASSERT_TRUE(files.ok()) << files.status().message();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ(fs::path((*files)[0]).filename(), "events_1_app-1");
  EXPECT_EQ(fs::path((*files)[1]).filename(), "events_2_app-1.zstd");
  EXPECT_EQ(fs::path((*files)[2]).filename(), "events_10_app-1");
  WriteFile(dir / "events_2_app-1.zstd.compact", "");  // part 2 compacted: it holds parts 1 and 2
  fs::remove(dir / "events_2_app-1.zstd");
  files = EventLogFiles(dir.string());
  ASSERT_TRUE(files.ok()) << files.status().message();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ(fs::path((*files)[0]).filename(), "events_2_app-1.zstd.compact");
  // Not an eventlog_v2_ directory: nothing.
  files = EventLogFiles(dir.parent_path().string());
  ASSERT_TRUE(files.ok());
  EXPECT_TRUE(files->empty());
  EXPECT_TRUE(IsTraceDirectory(dir.string()));
  EXPECT_FALSE(IsTraceDirectory(dir.parent_path().string()));
}

TEST(SparkFormatTest, RefusesARollingDirectoryWithAFileWhoseIndexCannotBeReadNamingItAndWhy) {
  // Spark reads the index as a number: a file it cannot place is refused by name, not skipped.
  struct Case {
    const char* bad;
    const char* why;
  };
  const Case cases[] = {
      {"events_x_app-1", "its index is not a number"},
      {"events__app-1", "its index is not a number"},
      {"events_99999999999999999999_app-1", "its index is too large"},
      {"events_-3_app-1", "its index is negative"},
      {"events_3", "no '_<appId>' after its index"},
      {"events_3app-1", "no '_<appId>' after its index"},
  };
  for (const Case& c : cases) {
    fs::path dir = FreshDir("badindex") / "eventlog_v2_app-1";
    fs::create_directories(dir);
    WriteFile(dir / "events_1_app-1", "");
    WriteFile(dir / c.bad, "");
    auto files = EventLogFiles(dir.string());
    ASSERT_FALSE(files.ok()) << c.bad;
    const std::string m = files.status().message();
    EXPECT_EQ(m, (dir / c.bad).string() + ": not a file of a rolling event log: " + c.why +
                     " (Spark names them events_<index>_<appId>)");
    EXPECT_EQ(m.find('\n'), std::string::npos);
    // Still a directory of the format (so that `grademl run` and import say why), and the
    // import is refused with that message, even when it is the only file.
    EXPECT_TRUE(IsTraceDirectory(dir.string()));
    fs::remove(dir / "events_1_app-1");
    model::RunBuilder builder(model::RunInfo{});
    ImportTarget target;
    target.builder = &builder;
    target.under = builder.BeginPhase({.parent = 0, .name = "root", .type = "run", .start_ns = 1});
    auto read = ReadTraceFile(dir.string(), target);
    ASSERT_FALSE(read.ok()) << c.bad;
    EXPECT_EQ(read.status().message(), m);
  }
  // Several: the first by name, and how many more; a name with a control byte is escaped.
  fs::path dir = FreshDir("badindexes") / "eventlog_v2_app-1";
  fs::create_directories(dir);
  WriteFile(dir / "events_b\x1b[2J_app-1", "");
  WriteFile(dir / "events_a_app-1", "");
  auto files = EventLogFiles(dir.string());
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().message(), (dir / "events_a_app-1").string() +
                                          ": not a file of a rolling event log: its index is not a number (Spark "
                                          "names them events_<index>_<appId>), and 1 more like it");
  fs::remove(dir / "events_a_app-1");
  files = EventLogFiles(dir.string());
  ASSERT_FALSE(files.ok());
  EXPECT_NE(files.status().message().find("events_b\\x1b[2J_app-1"), std::string::npos) << files.status().message();
}

TEST(SparkFormatTest, FindsTheIndicesMissingFromARollingLogsFiles) {
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  auto missing = [](std::vector<std::string> files) { return MissingEventLogIndices(files); };
  EXPECT_EQ(missing({"d/events_1_a", "d/events_2_a.zstd", "d/events_3_a"}), Ranges{});
  EXPECT_EQ(missing({"d/events_1_a", "d/events_4_a", "d/events_5_a", "d/events_7_a"}), (Ranges{{2, 3}, {6, 6}}));
  // The first ones gone (Spark starts at 1), unless the first is a compacted file.
  EXPECT_EQ(missing({"d/events_3_a", "d/events_4_a"}), (Ranges{{1, 2}}));
  EXPECT_EQ(missing({"d/events_3_a.compact", "d/events_4_a", "d/events_6_a.zstd"}), (Ranges{{5, 5}}));
  // Not event files (a chain of other files): nothing to say.
  EXPECT_EQ(missing({"d/a", "d/b"}), Ranges{});
  EXPECT_EQ(missing({}), Ranges{});
}

// ---- Importing --------------------------------------------------------------------------

struct Imported {
  model::Run run;
  ImportResult result;
  Status status;  // the import's error, when it failed
  model::PhaseId root = 0;
  std::vector<const model::Phase*> Of(std::string_view leaf) const {
    std::vector<const model::Phase*> out;
    for (const auto& p : run.phases)
      if (p.leaf_type() == leaf) out.push_back(&p);
    return out;
  }
  static std::string Tag(const model::Phase& p, const std::string& key) {
    for (const auto& [k, v] : p.tags)
      if (k == key) return v;
    return "<none>";
  }
  int64_t Stat(const std::string& reason) const {
    int64_t n = 0;
    for (const auto& s : run.ingest_stats)
      if (s.reason == reason) n += s.count;
    return n;
  }
  const model::Phase* Stage(int64_t id, int64_t attempt = 0) const {
    for (const model::Phase* p : Of("stage")) {
      if (Tag(*p, "stage_id") == std::to_string(id) && Tag(*p, "attempt") == std::to_string(attempt)) return p;
    }
    return nullptr;
  }
};

void Collect(model::RunDelta delta, model::Run& run) {
  std::map<model::PhaseId, size_t> at;
  for (size_t i = 0; i < run.phases.size(); ++i) at[run.phases[i].id] = i;
  for (auto& p : delta.phases) {
    auto it = at.find(p.id);
    if (it != at.end()) {
      run.phases[it->second] = p;
    } else {
      at[p.id] = run.phases.size();
      run.phases.push_back(p);
    }
  }
  for (auto& e : delta.edges) run.edges.push_back(e);
  for (auto& r : delta.resources) run.resources.push_back(r);
  for (auto& s : delta.series) run.series.push_back({s, {}});
  for (auto& rec : delta.samples) {
    for (auto& s : run.series)
      if (s.info.id == rec.series) s.samples.push_back(rec.sample);
  }
  for (auto& s : delta.sources) run.sources.push_back(s);
  for (auto& t : delta.tracks) run.tracks.push_back(t);
  for (auto& h : delta.hosts) run.hosts.push_back(h);
  for (auto& st : delta.ingest_stats) run.ingest_stats.push_back(st);
}

Imported Import(const std::string& path, const std::function<void(ImportTarget&)>& tweak = {},
                const std::string* bytes = nullptr) {
  Imported out;
  model::RunInfo info;
  info.start_ns = 1;
  model::RunBuilder builder(info);
  out.root = builder.BeginPhase({.parent = 0, .name = "root", .type = "run", .start_ns = 1});
  ImportTarget target;
  target.builder = &builder;
  target.under = out.root;
  int64_t flushes = 0;
  target.flush = [&] {
    ++flushes;
    Collect(builder.TakeDelta(), out.run);
    return Status::Ok();
  };
  if (tweak) tweak(target);
  auto result = bytes != nullptr ? ImportTraceBytes(*bytes, path, target) : ImportTraceFile(path, target);
  if (result.ok()) {
    out.result = *result;
  } else {
    out.status = result.status();
  }
  Collect(builder.TakeDelta(true), out.run);
  out.run.Index();
  return out;
}

// What a log holds, read here line by line with nlohmann::json (not with the importer).
struct LogFacts {
  int64_t lines = 0, jobs = 0, stages_completed = 0, task_ends = 0, failed_or_killed = 0, sql = 0;
  int64_t app_start = 0, app_end = 0;
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> stage_spans;  // (id, attempt) -> (submit, complete)
  std::map<int64_t, std::pair<int64_t, int64_t>> task_spans;                      // task id -> (launch, finish)
  std::set<std::pair<int64_t, int64_t>> stage_edges;                              // (parent stage, stage)
  std::set<std::string> hosts;
  std::string app_name;
};

LogFacts Facts(const std::vector<std::string>& files) {
  LogFacts f;
  std::map<int64_t, std::vector<int64_t>> parents;
  for (const std::string& file : files) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      ++f.lines;
      json e = json::parse(line);
      std::string ev = e["Event"];
      if (ev == "SparkListenerJobEnd") ++f.jobs;
      if (ev == "SparkListenerApplicationStart") {
        f.app_start = e["Timestamp"];
        f.app_name = e["App Name"];
      }
      if (ev == "SparkListenerApplicationEnd") f.app_end = e["Timestamp"];
      if (ev.find("SQLExecutionStart") != std::string::npos) ++f.sql;
      if (ev == "SparkListenerStageCompleted") {
        ++f.stages_completed;
        const json& s = e["Stage Info"];
        f.stage_spans[{s["Stage ID"], s["Stage Attempt ID"]}] = {s["Submission Time"], s["Completion Time"]};
        if (s.contains("Parent IDs")) parents[s["Stage ID"]] = s["Parent IDs"].get<std::vector<int64_t>>();
      }
      if (ev == "SparkListenerTaskEnd") {
        ++f.task_ends;
        if (e["Task End Reason"]["Reason"] != "Success") ++f.failed_or_killed;
        const json& t = e["Task Info"];
        f.task_spans[t["Task ID"]] = {t["Launch Time"], t["Finish Time"]};
        f.hosts.insert(t["Host"].get<std::string>());
      }
      if (ev == "SparkListenerExecutorAdded") f.hosts.insert(e["Executor Info"]["Host"].get<std::string>());
    }
  }
  for (const auto& [stage, ps] : parents) {
    for (int64_t p : ps) f.stage_edges.insert({p, stage});
  }
  return f;
}

// The README's table (../shared/traces/spark/README.md): jobs / stages / tasks, and the
// application's start and end.
struct SharedLog {
  const char* path;  // under ../shared/traces/spark
  bool directory;
  int64_t jobs, stages, tasks, failed_tasks;
  int64_t app_start, app_end;
  const char* version;
};
constexpr SharedLog kShared[] = {
    {"local-1422981780767", false, 3, 4, 32, 1, 1422981779720, 1422981788731, ""},
    {"application_1516285256255_0012", false, 1, 2, 24, 4, 1516300235119, 1516300707938, "2.3.0-SNAPSHOT"},
    {"app-20200706201101-0003", false, 3, 3, 48, 0, 1594091460235, 1594091824231, "3.1.0-SNAPSHOT"},
    {"eventlog_v2_local-1766844910796", true, 1, 1, 2, 0, 1766844910215, 1766844912221, "4.2.0-SNAPSHOT"},
};

void PrintTo(const SharedLog& x, std::ostream* os) { *os << x.path; }

class SharedSparkLogTest : public ::testing::TestWithParam<SharedLog> {};

TEST_P(SharedSparkLogTest, CountsAndSpansEqualTheLogs) {
  const SharedLog& x = GetParam();
  REQUIRE_SHARED_TRACES(path, fs::path("spark") / x.path);
  std::vector<std::string> files = x.directory ? EventLogFiles(path.string()).value() : std::vector<std::string>{path.string()};
  ASSERT_FALSE(files.empty());
  LogFacts facts = Facts(files);
  // The README agrees with the line scan.
  EXPECT_EQ(facts.jobs, x.jobs);
  EXPECT_EQ(facts.stages_completed, x.stages);
  EXPECT_EQ(facts.task_ends, x.tasks);
  EXPECT_EQ(facts.failed_or_killed, x.failed_tasks);
  EXPECT_EQ(facts.app_start, x.app_start);
  EXPECT_EQ(facts.app_end, x.app_end);

  Imported im = Import(path.string());
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_FALSE(im.result.partial) << im.result.error.message();
  EXPECT_EQ(im.result.format, "spark");
  EXPECT_EQ(im.result.events, facts.lines);
  EXPECT_EQ(im.result.dropped, 0);

  auto apps = im.Of("application");
  ASSERT_EQ(apps.size(), 1u);
  const model::Phase& app = *apps[0];
  EXPECT_EQ(app.parent, im.root);
  EXPECT_EQ(app.name, facts.app_name);  // as data, the XSS probe of the 4.2 log included
  EXPECT_EQ(app.start_ns, x.app_start * kMs);
  EXPECT_EQ(app.end_ns, x.app_end * kMs);
  EXPECT_EQ(Imported::Tag(app, "spark_version"), x.version[0] ? x.version : "<none>");
  EXPECT_EQ(static_cast<int64_t>(im.Of("job").size()), x.jobs);
  EXPECT_EQ(static_cast<int64_t>(im.Of("stage").size()), x.stages);
  EXPECT_EQ(static_cast<int64_t>(im.Of("task").size()), x.tasks);
  EXPECT_EQ(static_cast<int64_t>(im.Of("sql_execution").size()), facts.sql);
  int64_t failed = 0;
  for (const model::Phase* t : im.Of("task")) failed += Imported::Tag(*t, "status") != "success";
  EXPECT_EQ(failed, x.failed_tasks);

  // Stage spans are StageInfo's Submission Time to Completion Time, to the millisecond.
  for (const auto& [key, span] : facts.stage_spans) {
    const model::Phase* st = im.Stage(key.first, key.second);
    ASSERT_NE(st, nullptr) << "stage " << key.first;
    EXPECT_EQ(st->start_ns, span.first * kMs) << st->name;
    EXPECT_EQ(st->end_ns, span.second * kMs) << st->name;
  }
  // Tasks: Launch Time to Finish Time, under their stage attempt, grouped by it, on their
  // executor's async track.
  for (const model::Phase* t : im.Of("task")) {
    int64_t id = std::stoll(Imported::Tag(*t, "task_id"));
    ASSERT_TRUE(facts.task_spans.count(id));
    EXPECT_EQ(t->start_ns, facts.task_spans[id].first * kMs);
    EXPECT_EQ(t->end_ns, facts.task_spans[id].second * kMs);
    const model::Phase* stage = im.run.FindPhase(t->parent);
    ASSERT_NE(stage, nullptr);
    EXPECT_EQ(stage->leaf_type(), "stage");
    EXPECT_EQ(Imported::Tag(*t, "group"),
              "stage " + Imported::Tag(*stage, "stage_id") + "." + Imported::Tag(*stage, "attempt"));
    const model::Track* track = im.run.FindTrack(t->track);
    ASSERT_NE(track, nullptr);
    EXPECT_EQ(track->kind, model::TrackKind::kAsync);
    EXPECT_NE(Imported::Tag(*t, "executor_run_ms"), "<none>");
  }
  // Stage parents (Spark 2+) as shuffle edges between stage phases.
  std::set<std::pair<int64_t, int64_t>> edges;
  for (const model::Edge& e : im.run.edges) {
    const model::Phase* from = im.run.FindPhase(e.from);
    const model::Phase* to = im.run.FindPhase(e.to);
    ASSERT_NE(from, nullptr);
    ASSERT_NE(to, nullptr);
    EXPECT_EQ(e.kind, "shuffle");
    edges.insert({std::stoll(Imported::Tag(*from, "stage_id")), std::stoll(Imported::Tag(*to, "stage_id"))});
  }
  EXPECT_EQ(edges, facts.stage_edges);
  // Hosts: every executor's (loopback names as "localhost").
  std::set<std::string> hosts;
  for (const model::Host& h : im.run.hosts) hosts.insert(h.name);
  for (const std::string& h : facts.hosts) {
    bool loop = h == "localhost" || h.rfind("127.", 0) == 0;
    EXPECT_TRUE(hosts.count(loop ? "localhost" : h)) << h;
  }
}

INSTANTIATE_TEST_SUITE_P(Logs, SharedSparkLogTest, ::testing::ValuesIn(kShared),
                         [](const auto& info) {
                           std::string n = info.param.path;
                           std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
                           return n;
                         });

TEST(SparkImporterTest, SharedLogsFineDetails) {
  REQUIRE_SHARED_TRACES(sql_log, "spark/app-20200706201101-0003");
  const fs::path dir = sql_log.parent_path();
  // Spark 3.1: the three jobs of SQL execution 0 under it.
  Imported sql = Import((dir / "app-20200706201101-0003").string());
  auto execs = sql.Of("sql_execution");
  ASSERT_EQ(execs.size(), 1u);
  EXPECT_EQ(execs[0]->name, "foreach at <console>:26");
  for (const model::Phase* j : sql.Of("job")) EXPECT_EQ(j->parent, execs[0]->id) << j->name;
  // Spark 2.3 (YARN, 5 executors on two hosts, the driver on a third): the 4 failed attempts
  // carry their reason; the blacklisting events are not modelled.
  Imported yarn = Import((dir / "application_1516285256255_0012").string());
  int64_t failed = 0;
  for (const model::Phase* t : yarn.Of("task")) {
    if (Imported::Tag(*t, "status") == "failed") {
      ++failed;
      EXPECT_EQ(Imported::Tag(*t, "reason"), "ExceptionFailure: java.lang.RuntimeException: Bad executor");
    }
  }
  EXPECT_EQ(failed, 4);
  EXPECT_EQ(Imported::Tag(*yarn.Of("application")[0], "executors"), "5");
  std::set<std::string> hosts;
  for (const auto& h : yarn.run.hosts) hosts.insert(h.name);
  EXPECT_EQ(hosts, (std::set<std::string>{"apiros-1.gce.test.com", "apiros-2.gce.test.com", "apiros-3.gce.test.com"}));
  EXPECT_EQ(yarn.Of("application")[0]->host, "apiros-1.gce.test.com");
  // Spark 1.2: no job times in the log; a job spans its stages; job 1 failed.
  Imported old = Import((dir / "local-1422981780767").string());
  for (const model::Phase* j : old.Of("job")) {
    if (Imported::Tag(*j, "job_id") != "1") continue;
    EXPECT_EQ(Imported::Tag(*j, "status"), "failed");
    EXPECT_EQ(j->start_ns, 1422981785829 * kMs);  // stage 1's submission
    EXPECT_EQ(j->end_ns, 1422981786347 * kMs);    // stage 2's completion
  }
  EXPECT_EQ(Imported::Tag(*old.Stage(2), "status"), "failed");
}

TEST(SparkImporterTest, FixtureTreeTagsSeriesAndSkippedStages) {
  Imported im = Import(Fixture("fixture_app.log"));
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_FALSE(im.result.partial);
  EXPECT_EQ(im.result.dropped, 0);
  const model::Phase& app = *im.Of("application").at(0);
  EXPECT_EQ(app.name, "<script>alert('XSS')</script>");
  EXPECT_EQ(app.type, "run/application");
  EXPECT_EQ(app.host, "driver-host");
  EXPECT_EQ(Imported::Tag(app, "skipped_stages"), "1");  // stage 0 in job 1's plan
  EXPECT_EQ(Imported::Tag(app, "executors"), "2");
  EXPECT_EQ(im.Of("job").size(), 2u);
  EXPECT_EQ(im.Of("stage").size(), 4u);
  EXPECT_EQ(im.Of("task").size(), 16u);
  const model::Phase& sql = *im.Of("sql_execution").at(0);
  EXPECT_EQ(sql.type, "run/application/sql_execution");
  EXPECT_EQ(im.Stage(1)->type, "run/application/sql_execution/job/stage");
  EXPECT_EQ(im.Stage(2)->type, "run/application/job/stage");
  // Stage 3's attempts: failed, retried, a speculative copy killed.
  std::map<std::string, std::string> status;
  for (const model::Phase* t : im.Of("task")) {
    if (t->parent != im.Stage(3)->id) continue;
    status[Imported::Tag(*t, "task_id")] = Imported::Tag(*t, "status") + "/" + Imported::Tag(*t, "speculative");
    if (Imported::Tag(*t, "task_id") == "12") {
      EXPECT_EQ(Imported::Tag(*t, "reason"), "ExceptionFailure: java.lang.IllegalStateException: boom");
      EXPECT_EQ(t->name, "task 0.0");
      EXPECT_EQ(Imported::Tag(*t, "attempt"), "0");
      // Scheduler delay: 200 ms - run 40 - deserialize 10.
      EXPECT_EQ(Imported::Tag(*t, "scheduler_delay_ms"), "150");
      EXPECT_EQ(t->host, "node-a");
    }
  }
  EXPECT_EQ(status, (std::map<std::string, std::string>{{"12", "failed/<none>"},
                                                        {"13", "success/<none>"},
                                                        {"14", "success/<none>"},
                                                        {"15", "killed/true"}}));
  // Stage 1's tasks: the shuffle read metrics (remote + local).
  for (const model::Phase* t : im.Of("task")) {
    if (t->parent != im.Stage(1)->id) continue;
    EXPECT_EQ(Imported::Tag(*t, "shuffle_fetch_wait_ms"), "1200");
    EXPECT_EQ(Imported::Tag(*t, "shuffle_read_bytes"), "4000");
    EXPECT_EQ(Imported::Tag(*t, "executor_cpu_ns"), "500000000");
  }
  // Edges 0->1, 0->2, 2->3.
  EXPECT_EQ(im.run.edges.size(), 3u);
  // Executors: tracks on their hosts; counters from the task ends.
  std::set<std::string> tracks;
  for (const model::Track& t : im.run.tracks) tracks.insert(t.name + "@" + t.host);
  EXPECT_EQ(tracks, (std::set<std::string>{"executor 1@node-a", "executor 2@node-b"}));
  std::set<std::string> resources;
  for (const model::Resource& r : im.run.resources) resources.insert(r.name + "@" + r.host);
  EXPECT_EQ(resources, (std::set<std::string>{"driver@driver-host", "executor 1@node-a", "executor 2@node-b"}));
  double gc_total = 0;
  int64_t task_total = 0;
  for (const model::Series& s : im.run.series) {
    const model::Resource* r = im.run.FindResource(s.info.resource);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->kind, model::ResourceKind::kProcess);
    if (s.info.name == "spark.gc_time") gc_total += s.samples.back().v;
    if (s.info.name == "spark.tasks") task_total += static_cast<int64_t>(s.samples.back().v);
    for (size_t k = 1; k < s.samples.size(); ++k) EXPECT_GT(s.samples[k].t, s.samples[k - 1].t) << s.info.name;
  }
  EXPECT_DOUBLE_EQ(gc_total, 4 * 0.5 + 4 * 0.05);
  EXPECT_EQ(task_total, 16);
}

TEST(SparkImporterTest, ZstdLogImportsLikeThePlainOne) {
  Imported plain = Import(Fixture("fixture_app.log"));
  Imported z = Import(Fixture("fixture_app.log.zstd"));
  ASSERT_TRUE(z.status.ok()) << z.status.message();
  EXPECT_FALSE(z.result.partial);
  EXPECT_EQ(z.result.events, plain.result.events);
  EXPECT_EQ(z.result.phases, plain.result.phases);
  EXPECT_EQ(z.result.edges, plain.result.edges);
  EXPECT_EQ(z.Of("task").size(), 16u);
}

TEST(SparkImporterTest, RefusesLz4SnappyAndLzfLogsWithOneLineNamingTheFileAndTheCodecs) {
  for (const char* name : {"fixture_app.lz4", "fixture_app.snappy", "fixture_app.lzf"}) {
    Imported im = Import(Fixture(name));
    ASSERT_FALSE(im.status.ok()) << name;
    const std::string& msg = im.status.message();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find(Fixture(name)), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string("compressed with ") + (std::strrchr(name, '.') + 1)), std::string::npos) << msg;
    EXPECT_NE(msg.find("zstd"), std::string::npos) << msg;
    EXPECT_TRUE(im.run.phases.size() == 1 && im.run.sources.empty()) << "nothing added";  // the root only
  }
}

TEST(SparkImporterTest, RollingDirectoryOfSeveralFilesImportsLikeOneFile) {
  std::string log = ReadFile(Fixture("fixture_app.log"));
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  fs::path dir = FreshDir("rolling") / "eventlog_v2_app-fixture-0001";
  fs::create_directories(dir);
  // Parts 1 to 10 (read in numeric order, not text order: 1, 2, ..., 10); part 2 compressed
  // with zstd.
  std::string parts[10];
  for (size_t i = 0; i < lines.size(); ++i) parts[i * 10 / lines.size()] += lines[i] + "\n";
  for (int k = 1; k <= 10; ++k) {
    if (k == 2) continue;
    WriteFile(dir / fmt::format("events_{}_app-fixture-0001", k), parts[k - 1]);
  }
  {
    std::string z(ZSTD_compressBound(parts[1].size()), '\0');
    size_t n = ZSTD_compress(z.data(), z.size(), parts[1].data(), parts[1].size(), 3);
    ASSERT_FALSE(ZSTD_isError(n));
    z.resize(n);
    WriteFile(dir / "events_2_app-fixture-0001.zstd", z);
  }
  WriteFile(dir / "appstatus_app-fixture-0001", "");
  Imported whole = Import(Fixture("fixture_app.log"));
  Imported rolled = Import(dir.string());
  ASSERT_TRUE(rolled.status.ok()) << rolled.status.message();
  EXPECT_FALSE(rolled.result.partial) << rolled.result.error.message();
  EXPECT_EQ(rolled.result.events, whole.result.events);
  EXPECT_EQ(rolled.result.phases, whole.result.phases);
  EXPECT_EQ(rolled.result.edges, whole.result.edges);
  EXPECT_EQ(rolled.run.sources.at(0).path, dir.string());

  // Damage in part 10, line 2: the error names that file and line; the rest came in.
  std::string damaged = parts[9];
  size_t second = damaged.find('\n') + 1;
  damaged.insert(second, "#");
  WriteFile(dir / "events_10_app-fixture-0001", damaged);
  Imported bad = Import(dir.string());
  ASSERT_TRUE(bad.status.ok()) << bad.status.message();
  EXPECT_TRUE(bad.result.partial);
  EXPECT_EQ(bad.result.error.message().find((dir / "events_10_app-fixture-0001").string() + ": line 2: not valid JSON"), 0u)
      << bad.result.error.message();
  // Parts 1 to 9 whole, and part 10's first line.
  int64_t before = 0;
  for (int k = 0; k < 9; ++k) before += std::count(parts[k].begin(), parts[k].end(), '\n');
  EXPECT_EQ(bad.result.events, before + 1);
}

// hostile_text.log (12 lines, written by hand): the application's name holds a byte that is
// not UTF-8 (FF) and a lone surrogate escape (\ud800), the stage's name a lone \udc00, the
// executor's host an FF, each task end's locality a \ud800. Every line is imported, each
// such character U+FFFD. Before, line 2 ended the import (simdjson refuses the whole line).
TEST(SparkImporterTest, InvalidUtf8AndLoneSurrogatesAreReplacedAndEveryLineImported) {
  const std::string r = "\xEF\xBF\xBD";
  Imported im = Import(Fixture("hostile_text.log"));
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_FALSE(im.result.partial) << im.result.error.message();
  EXPECT_EQ(im.result.events, 12);
  EXPECT_EQ(im.result.dropped, 0);
  auto apps = im.Of("application");
  ASSERT_EQ(apps.size(), 1u);
  EXPECT_EQ(apps[0]->name, "caf" + r + " " + r + " app");
  EXPECT_EQ(apps[0]->start_ns, 1700000000000 * kMs);
  EXPECT_EQ(apps[0]->end_ns, 1700000003000 * kMs);
  ASSERT_NE(im.Stage(0), nullptr);
  EXPECT_EQ(im.Stage(0)->name, "stage 0: map " + r + " at x.py:1");
  auto tasks = im.Of("task");
  ASSERT_EQ(tasks.size(), 2u);
  for (const model::Phase* t : tasks) {
    EXPECT_EQ(t->host, "node-" + r + "a");
    EXPECT_EQ(Imported::Tag(*t, "status"), "success");
  }
  EXPECT_EQ(tasks[0]->end_ns, 1700000002010 * kMs);
  EXPECT_EQ(tasks[1]->end_ns, 1700000002020 * kMs);
}

// eventlog_v2_app-gap-0001 (written by hand): files 1, 2, 3, 5 and 8 of a rolling log, 4, 6
// and 7 gone. File 1 starts the application, job 0 and stage 0 (4 tasks); 2, 3 and 5 hold
// the start and end of tasks 0, 1 and 3 (task 2 was in file 4); 8 completes the stage, the
// job and the application. What is there is imported (13 lines, 3 tasks); the result is
// partial, its error one line naming the missing files, and the source says which.
TEST(SparkImporterTest, RollingLogWithMissingFilesImportsTheRestAndNamesWhatIsMissing) {
  fs::path dir = Fixture("eventlog_v2_app-gap-0001");
  Imported im = Import(dir.string());
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_TRUE(im.result.partial);
  EXPECT_EQ(im.result.error.message(),
            dir.string() + ": the rolling event log is incomplete: events_4_*, events_6_* to events_7_* are missing; "
                           "the other files were imported");
  EXPECT_EQ(im.result.events, 13);
  auto tasks = im.Of("task");
  std::set<std::string> names;
  for (const model::Phase* t : tasks) names.insert(t->name);
  EXPECT_EQ(names, (std::set<std::string>{"task 0.0", "task 1.0", "task 3.0"}));
  ASSERT_EQ(im.Of("application").size(), 1u);
  EXPECT_EQ(im.Of("application")[0]->end_ns, 1700000006000 * kMs);  // from file 8
  ASSERT_NE(im.Stage(0), nullptr);
  EXPECT_EQ(im.Stage(0)->end_ns, 1700000005050 * kMs);
  ASSERT_EQ(im.run.sources.size(), 1u);
  std::map<std::string, std::string> tags(im.run.sources[0].tags.begin(), im.run.sources[0].tags.end());
  EXPECT_EQ(tags["partial"], "1");
  EXPECT_EQ(tags["missing_files"], "4,6-7");

  // The same files with the first two gone too: 1-2 are missing as well. And a damaged line
  // in the last file: both in the one line, the missing files first.
  fs::path copy = FreshDir("gap") / "eventlog_v2_app-gap-0001";
  fs::create_directories(copy);
  for (const char* f : {"events_3_app-gap-0001", "events_5_app-gap-0001"}) fs::copy_file(dir / f, copy / f);
  WriteFile(copy / "events_8_app-gap-0001", ReadFile(dir / "events_8_app-gap-0001") + "{\"Event\":");
  Imported cut = Import(copy.string());
  ASSERT_TRUE(cut.status.ok()) << cut.status.message();
  EXPECT_TRUE(cut.result.partial);
  EXPECT_EQ(cut.result.error.message(),
            copy.string() + ": the rolling event log is incomplete: events_1_* to events_2_*, events_4_*, events_6_* to "
                            "events_7_* are missing; the other files were imported; " +
                (copy / "events_8_app-gap-0001").string() + ": line 4: truncated event (the file ends inside it)");
  EXPECT_EQ(cut.result.events, 7);  // 2 + 2 + 3
  std::map<std::string, std::string> cut_tags(cut.run.sources.at(0).tags.begin(), cut.run.sources.at(0).tags.end());
  EXPECT_EQ(cut_tags["missing_files"], "1-2,4,6-7");

  // A single missing file: "is".
  fs::path one = FreshDir("gap1") / "eventlog_v2_app-gap-0001";
  fs::create_directories(one);
  for (const char* f : {"events_1_app-gap-0001", "events_3_app-gap-0001"}) fs::copy_file(dir / f, one / f);
  Imported single = Import(one.string());
  EXPECT_EQ(single.result.error.message(),
            one.string() + ": the rolling event log is incomplete: events_2_* is missing; the other files were imported");
}

TEST(SparkImporterTest, TruncatedLogImportsWhatCameBeforeAndNamesTheLine) {
  std::string log = ReadFile(Fixture("fixture_app.log"));
  // Cut inside line 30 (the file then ends inside that event).
  size_t at = 0;
  for (int i = 0; i < 29; ++i) at = log.find('\n', at) + 1;
  std::string cut = log.substr(0, at + 25);
  Imported im = Import("cut.log", {}, &cut);
  ASSERT_TRUE(im.status.ok()) << im.status.message();
  EXPECT_TRUE(im.result.partial);
  EXPECT_EQ(im.result.error.message(), "cut.log: line 30: truncated event (the file ends inside it)");
  EXPECT_EQ(im.result.events, 29);
  EXPECT_FALSE(im.Of("application").empty());
  // Everything open when the log ended is closed at the last time seen, and counted.
  EXPECT_GT(im.Stat("application_without_end_closed_at_log_end"), 0);
  for (const auto& p : im.run.phases) {
    if (p.id != im.root) {
      EXPECT_GE(p.end_ns, p.start_ns) << p.name;
    }
  }
}

TEST(SparkImporterTest, DamagedLinesAndForeignEvents) {
  std::string head = "{\"Event\":\"SparkListenerLogStart\",\"Spark Version\":\"3.5.0\"}\n";
  // Bad JSON in the middle stops the import there.
  std::string bad = head + "{\"Event\":\"SparkListenerApplicationStart\",\"App Name\":\"a\",\"Timestamp\":1700000000000}\n" +
                    "{\"Event\": nope}\n" + "{\"Event\":\"SparkListenerApplicationEnd\",\"Timestamp\":1700000001000}\n";
  Imported im = Import("bad.log", {}, &bad);
  EXPECT_TRUE(im.result.partial);
  EXPECT_EQ(im.result.error.message().rfind("bad.log: line 3: not valid JSON", 0), 0u) << im.result.error.message();
  EXPECT_EQ(im.result.events, 2);
  // A JSON line that is not an event: damage too.
  std::string not_event = head + "[1,2]\n";
  im = Import("arr.log", {}, &not_event);
  EXPECT_EQ(im.result.error.message(), "arr.log: line 2: not a JSON object, not a Spark listener event");
  std::string no_name = head + "{\"x\":1}\n";
  im = Import("noname.log", {}, &no_name);
  EXPECT_EQ(im.result.error.message(), "noname.log: line 2: no \"Event\" name, not a Spark listener event");
  // Unknown events (a user's listener) are counted, not errors; known ones not modelled are skipped.
  std::string foreign = head + "{\"Event\":\"com.example.MyListenerEvent\",\"x\":1}\n" +
                        "{\"Event\":\"com.example.MyListenerEvent\"}\n" +
                        "{\"Event\":\"org.apache.spark.sql.execution.ui.SparkListenerDriverAccumUpdates\"}\n" +
                        "{\"Event\":\"SparkListenerApplicationStart\",\"App Name\":\"a\",\"Timestamp\":1700000000000}\n" +
                        "{\"Event\":\"SparkListenerApplicationEnd\",\"Timestamp\":1700000001000}\n";
  im = Import("foreign.log", {}, &foreign);
  EXPECT_FALSE(im.result.partial) << im.result.error.message();
  EXPECT_EQ(im.Stat("unknown_event:MyListenerEvent"), 2);
  EXPECT_EQ(im.result.dropped, 2);
  EXPECT_EQ(im.result.events, 6);
  ASSERT_EQ(im.Of("application").size(), 1u);
  EXPECT_EQ(im.Of("application")[0]->end_ns - im.Of("application")[0]->start_ns, 1000 * kMs);
  // Names from the log in reasons: 50 distinct at most per kind, the rest as KIND:other.
  std::string many = head;
  for (int i = 0; i < 60; ++i) many += "{\"Event\":\"com.example.E" + std::to_string(i) + "\"}\n";
  im = Import("many.log", {}, &many);
  EXPECT_EQ(im.Stat("unknown_event:E0"), 1);
  EXPECT_EQ(im.Stat("unknown_event:other"), 10);
  EXPECT_EQ(im.result.dropped, 60);
  // Wrong types and absurd times never crash: they read as absent.
  std::string odd = head + "{\"Event\":\"SparkListenerApplicationStart\",\"App Name\":7,\"Timestamp\":-5}\n" +
                    "{\"Event\":\"SparkListenerTaskEnd\",\"Stage ID\":\"x\",\"Task Info\":{\"Task ID\":1,\"Launch Time\":18446744073709551615,\"Finish Time\":1e300}}\n" +
                    "{\"Event\":\"SparkListenerJobStart\",\"Job ID\":1,\"Stage Infos\":{}}\n";
  im = Import("odd.log", {}, &odd);
  EXPECT_FALSE(im.result.partial) << im.result.error.message();
}

TEST(SparkImporterTest, TheDriversClockIsTheReferenceUnlessTheRunKnowsItsHost) {
  Imported plain = Import(Fixture("fixture_app.log"));
  const DurationNs offset = 7 * kMs;
  Imported known = Import(Fixture("fixture_app.log"), [&](ImportTarget& t) {
    t.hosts.push_back({.name = "driver-host", .clock_offset_ns = offset});
  });
  const model::Phase* a = plain.Of("application").at(0);
  const model::Phase* b = known.Of("application").at(0);
  EXPECT_EQ(b->start_ns, a->start_ns + offset);
  // The run's own host is not declared again; the executors' hosts are.
  std::set<std::string> hosts;
  for (const auto& h : known.run.hosts) hosts.insert(h.name);
  EXPECT_EQ(hosts, (std::set<std::string>{"node-a", "node-b"}));
  for (const auto& h : plain.run.hosts) EXPECT_EQ(h.clock_offset_ns, 0);
  // Loopback names are the run's host when there is one.
  std::string local = "{\"Event\":\"SparkListenerLogStart\",\"Spark Version\":\"3.5.0\"}\n"
                      "{\"Event\":\"SparkListenerExecutorAdded\",\"Timestamp\":1700000000000,\"Executor ID\":\"driver\","
                      "\"Executor Info\":{\"Host\":\"127.0.0.1\"}}\n";
  Imported here = Import("local.log", [](ImportTarget& t) { t.host = "myhost"; }, &local);
  EXPECT_EQ(here.Of("application").at(0)->host, "myhost");
  EXPECT_TRUE(here.run.hosts.empty());
}

}  // namespace
}  // namespace grademl::importers::spark
