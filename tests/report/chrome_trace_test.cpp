#include "report/chrome_trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden.h"
#include "sample_runs.h"
#include "skip_or_fail.h"

namespace grademl::report {
namespace {

using nlohmann::json;
using testing::At;
using testing::BasicRun;
using testing::ExpectMatchesGolden;
using testing::IncompleteRun;
using testing::RunFixture;

json Parse(const model::Run& run) { return json::parse(RenderChromeTrace(run)); }

// Microseconds with three decimals back to integer nanoseconds.
int64_t Ns(const json& us) { return std::llround(us.get<double>() * 1000.0); }

std::vector<json> EventsOf(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == ph) out.push_back(e);
  }
  return out;
}

// Structural checks every trace must pass: slices on a thread nest, flows pair up and sit
// inside a slice of their thread, counters are finite numbers, metadata names every track.
void ExpectWellFormed(const json& trace) {
  ASSERT_TRUE(trace["traceEvents"].is_array());
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> slices;
  std::set<int64_t> named_pids;
  std::set<std::pair<int64_t, int64_t>> named_threads;
  for (const json& e : EventsOf(trace, "M")) {
    if (e["name"] == "process_name") named_pids.insert(e["pid"].get<int64_t>());
    if (e["name"] == "thread_name") named_threads.insert({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()});
  }
  for (const json& e : EventsOf(trace, "X")) {
    int64_t ts = Ns(e["ts"]), dur = Ns(e["dur"]);
    EXPECT_GE(dur, 0) << e;
    auto key = std::make_pair(e["pid"].get<int64_t>(), e["tid"].get<int64_t>());
    slices[key].push_back({ts, ts + dur});
    EXPECT_TRUE(named_threads.count(key)) << e;
  }
  for (auto& [key, list] : slices) {
    std::sort(list.begin(), list.end(), [](auto a, auto b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<int64_t> open;  // ends of the enclosing slices
    for (auto [s, e] : list) {
      while (!open.empty() && open.back() <= s) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(e, open.back()) << "slice [" << s << ", " << e << "] overlaps on pid " << key.first << " tid "
                                  << key.second;
      }
      open.push_back(e);
    }
  }
  std::map<int64_t, int> starts, finishes;
  for (const std::string ph : {"s", "f"}) {
    for (const json& e : EventsOf(trace, ph)) {
      int64_t id = e["id"].get<int64_t>();
      (ph == "s" ? starts : finishes)[id]++;
      if (ph == "f") {
        EXPECT_EQ(e["bp"], "e");
      }
      auto key = std::make_pair(e["pid"].get<int64_t>(), e["tid"].get<int64_t>());
      int64_t t = Ns(e["ts"]);
      bool inside = false;
      for (auto [s, end] : slices[key]) inside = inside || (s <= t && t <= end);
      EXPECT_TRUE(inside) << e;
    }
  }
  EXPECT_EQ(starts, finishes);
  for (auto [id, n] : starts) EXPECT_EQ(n, 1) << "flow " << id;
  for (const json& e : EventsOf(trace, "C")) {
    EXPECT_TRUE(named_pids.count(e["pid"].get<int64_t>())) << e;
    ASSERT_EQ(e["args"].size(), 1u) << e;
    for (const json& v : e["args"]) {
      ASSERT_TRUE(v.is_number()) << e;
      EXPECT_TRUE(std::isfinite(v.get<double>())) << e;
      EXPECT_GE(v.get<double>(), 0) << e;
    }
  }
}

// The counter events of one track, as (µs, value).
std::vector<std::pair<double, double>> Counter(const json& trace, int64_t pid, const std::string& name) {
  std::vector<std::pair<double, double>> out;
  for (const json& e : EventsOf(trace, "C")) {
    if (e["pid"] == pid && e["name"] == name) out.push_back({e["ts"].get<double>(), e["args"].begin()->get<double>()});
  }
  return out;
}

const json* SliceOf(const json& trace, int64_t phase_id) {
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["args"]["id"] == phase_id) return &e;
  }
  return nullptr;
}

TEST(ChromeTraceTest, BasicRunGolden) { ExpectMatchesGolden(RenderChromeTrace(BasicRun()), "basic_run.trace.json"); }

TEST(ChromeTraceTest, BasicRunIsWellFormed) { ExpectWellFormed(Parse(BasicRun())); }

TEST(ChromeTraceTest, IncompleteRunIsWellFormedAndOpenPhasesEndAtTheRunEnd) {
  model::Run run = IncompleteRun();
  json trace = Parse(run);
  ExpectWellFormed(trace);
  const json* root = SliceOf(trace, 1);
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(Ns((*root)["ts"]), 0);
  EXPECT_EQ(Ns((*root)["dur"]), run.EffectiveEnd() - run.info.start_ns);
  EXPECT_EQ((*root)["args"]["open"], true);
}

TEST(ChromeTraceTest, PhasesTracksAndArgs) {
  model::Run run = BasicRun();
  json trace = Parse(run);
  EXPECT_EQ(EventsOf(trace, "X").size(), run.phases.size());
  // Every phase once, on its process's pid; the root on the workflow track.
  for (const model::Phase& p : run.phases) {
    const json* e = SliceOf(trace, p.id);
    ASSERT_NE(e, nullptr) << p.id;
    EXPECT_EQ((*e)["name"], p.name);
    EXPECT_EQ((*e)["args"]["type"], p.type.str());
    if (p.pid != 0) {
      EXPECT_EQ((*e)["pid"], p.pid);
    }
  }
  const json* epoch = SliceOf(trace, 4);
  EXPECT_EQ((*epoch)["args"]["tags"], (json{{"epoch", "1"}}));
  EXPECT_EQ((*epoch)["cat"], "epoch");
  EXPECT_EQ(Ns((*epoch)["ts"]), 1'000'000'000);
  EXPECT_EQ(Ns((*epoch)["dur"]), 1'000'000'000);
  // The epochs run inside the trainer process: same thread as its process slice.
  EXPECT_EQ((*epoch)["tid"], (*SliceOf(trace, 3))["tid"]);
  std::map<int64_t, std::string> names;
  for (const json& e : EventsOf(trace, "M")) {
    if (e["name"] == "process_name") names[e["pid"].get<int64_t>()] = e["args"]["name"].get<std::string>();
  }
  EXPECT_EQ(names[101], "python3 train.py --epochs 3");
  int workflow = 0, hosts = 0;
  for (auto& [pid, name] : names) {
    workflow += name == "workflow";
    hosts += name == "host node1";
  }
  EXPECT_EQ(workflow, 1);
  EXPECT_EQ(hosts, 1);
  // Something is on the critical path, marked.
  int critical = 0;
  for (const json& e : EventsOf(trace, "X")) critical += e["args"].value("critical", false) ? 1 : 0;
  EXPECT_GT(critical, 0);
  // The dataflow edge: from the worker's end to gzip's start.
  auto s = EventsOf(trace, "s");
  auto f = EventsOf(trace, "f");
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(s[0]["pid"], 102);
  EXPECT_EQ(f[0]["pid"], 103);
  EXPECT_EQ(s[0]["name"], "file:checkpoint.pt");
  EXPECT_EQ(Ns(s[0]["ts"]), 3'500'000'000 - 1);
  EXPECT_EQ(Ns(f[0]["ts"]), 3'600'000'000 + 1);
}

TEST(ChromeTraceTest, CountersAreRatesBetweenSamples) {
  json trace = Parse(BasicRun());
  // Trainer: started at 0.05 s, where its counters are 0 (docs/metrics.md, Rates from
  // counters); user+system 0.375 s at 0.5 s, 1.9375 at 2 s, 3.75 at 3.5 s.
  auto cpu = Counter(trace, 101, "CPU");
  ASSERT_EQ(cpu.size(), 4u);
  EXPECT_NEAR(cpu[0].first, 50000, 1e-6);
  EXPECT_NEAR(cpu[0].second, 0.375 / 0.45, 1e-5);
  EXPECT_NEAR(cpu[1].first, 500000, 1e-6);
  EXPECT_NEAR(cpu[1].second, 1.5625 / 1.5, 1e-5);
  EXPECT_NEAR(cpu[2].second, 1.8125 / 1.5, 1e-5);
  EXPECT_EQ(cpu[3].second, 0);
  // gzip: started at 3.6 s, 200 MiB written by its only sample at 3.75 s.
  auto written = Counter(trace, 103, "disk write");
  ASSERT_FALSE(written.empty());
  EXPECT_NEAR(written[0].first, 3600000, 1e-6);
  EXPECT_NEAR(written[0].second, 200.0 * (1 << 20) / 0.15, 1e-5 * 1.4e9);  // six significant digits
  // RSS: a gauge, repeats skipped.
  auto rss = Counter(trace, 101, "RSS");
  ASSERT_EQ(rss.size(), 3u);
  EXPECT_EQ(rss[1].second, 1536.0 * (1 << 20));
  // Host: two cores, busy (user+system) 1.5+0.5 then 1.5+1 core-seconds per 2 s.
  int64_t host_pid = 0;
  for (const json& e : EventsOf(trace, "M")) {
    if (e["name"] == "process_name" && e["args"]["name"] == "host node1") host_pid = e["pid"].get<int64_t>();
  }
  auto busy = Counter(trace, host_pid, "CPU busy");
  ASSERT_EQ(busy.size(), 3u);
  EXPECT_NEAR(busy[0].second, (1.0 + 0.5 + 0.5 + 0) / 2 / 2, 1e-6);
  EXPECT_NEAR(busy[1].second, (1.5 + 0 + 1.0 + 0) / 2 / 2, 1e-6);
  EXPECT_FALSE(Counter(trace, host_pid, "memory used").empty());
  EXPECT_FALSE(Counter(trace, host_pid, "disk nvme0n1 read").empty());
  EXPECT_FALSE(Counter(trace, host_pid, "net eth0 rx").empty());
  EXPECT_FALSE(Counter(trace, host_pid, "GPU gpu0 utilization").empty());
}

// Threads' phases that overlap without nesting, and a child that outlives its parent, get
// lanes of their own; a later phase reuses the first lane.
TEST(ChromeTraceTest, OverlappingPhasesGetLanes) {
  RunFixture f;
  f.run.info.start_ns = At(0);
  f.run.info.end_ns = At(10);
  auto root = f.AddPhase(0, "run", "run", At(0), At(10));
  auto proc = f.AddProcess(root, "python", At(0), At(10), 500);
  auto a = f.AddPhase(proc, "thread a", "run/process/work", At(1), At(5), 500);
  auto b = f.AddPhase(proc, "thread b", "run/process/work", At(2), At(6), 500);
  auto c = f.AddPhase(a, "child past parent", "run/process/work/x", At(4), At(7), 500);
  auto d = f.AddPhase(proc, "later", "run/process/work", At(8), At(9), 500);
  auto s1 = f.AddPhase(root, "step 1", "run/step", At(1), At(4));
  auto s2 = f.AddPhase(root, "step 2", "run/step", At(2), At(5));
  model::Run run = f.Build();
  json trace = Parse(run);
  ExpectWellFormed(trace);
  auto tid = [&](model::PhaseId id) { return (*SliceOf(trace, id))["tid"].get<int64_t>(); };
  EXPECT_EQ(tid(proc), 500);
  EXPECT_EQ(tid(a), 500);
  EXPECT_NE(tid(b), 500);
  EXPECT_NE(tid(c), 500);
  EXPECT_NE(tid(c), tid(b));
  EXPECT_EQ(tid(d), 500);
  EXPECT_NE(tid(s1), tid(s2));
  std::set<std::string> thread_names;
  for (const json& e : EventsOf(trace, "M")) {
    if (e["name"] == "thread_name" && e["pid"] == 500) thread_names.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_EQ(thread_names, (std::set<std::string>{"main", "lane 2", "lane 3"}));
}

TEST(ChromeTraceTest, InvalidUtf8AndControlCharactersStayValidJson) {
  model::Run run = BasicRun();
  run.phases[1].name = "bad\xff\"quote\"\n\x01";
  run.phases[3].tags = {{"k\\", "\xc3"}};
  run.Index();
  json trace;
  ASSERT_NO_THROW(trace = Parse(run));
  EXPECT_EQ((*SliceOf(trace, 2))["name"], "bad\xEF\xBF\xBD\"quote\"\n\x01");
  EXPECT_EQ((*SliceOf(trace, 4))["args"]["tags"]["k\\"], "\xEF\xBF\xBD");
}

TEST(ChromeTraceTest, FileOutputMatchesAndWriteErrorsAreStatuses) {
  model::Run run = BasicRun();
  std::FILE* tmp = std::tmpfile();
  ASSERT_NE(tmp, nullptr);
  ASSERT_TRUE(WriteChromeTrace(run, tmp).ok());
  std::string text(static_cast<size_t>(std::ftell(tmp)), '\0');
  std::rewind(tmp);
  ASSERT_EQ(std::fread(text.data(), 1, text.size(), tmp), text.size());
  std::fclose(tmp);
  EXPECT_EQ(text, RenderChromeTrace(run));

  std::FILE* full = std::fopen("/dev/full", "wb");
  if (full == nullptr) SKIP_OR_FAIL_IN_CI("no /dev/full");
  Status st = WriteChromeTrace(run, full);
  std::fclose(full);
  EXPECT_EQ(st.code(), StatusCode::kIoError);
}

TEST(ChromeTraceTest, EmptyRun) {
  model::Run run;
  run.Index();
  json trace = Parse(run);
  ExpectWellFormed(trace);
  EXPECT_TRUE(EventsOf(trace, "X").empty());
}

}  // namespace
}  // namespace grademl::report
