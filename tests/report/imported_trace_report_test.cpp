// The reports of a run with imported traces (testing::ImportedGpuRun): device and thread
// tracks on the HTML timeline and in the Perfetto export, the imported sources with their
// clock note and ingest stats in the terminal, JSON and HTML reports, the GPU section of the
// terminal report, and hostile trace names escaped everywhere. Expected rows and tracks are
// derived by hand from the fixture's comment in sample_runs.h.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/attribution.h"
#include "analysis/gpu_breakdown.h"
#include "analysis/run_analysis.h"
#include "golden.h"
#include "html_page.h"
#include "report/chrome_trace.h"
#include "report/html_report.h"
#include "report/json_report.h"
#include "report/terminal_report.h"
#include "report/text_format.h"
#include "sample_runs.h"

namespace grademl::report {
namespace {

using nlohmann::json;
using testing::ExpectMatchesGolden;
using testing::ImportedGpuRun;

const std::string kEvilKernel = "<img src=x onerror=alert(1)>\x1b[31m";

// A GPU analysis written by hand, so that these tests check the rendering alone (the figures
// themselves are tested in tests/analysis/).
analysis::GpuAnalysis HandGpu() {
  analysis::GpuAnalysis g;
  g.temporal = {{.rank = 0, .idle_us = 150000, .compute_us = 250000, .non_compute_us = 50000, .kernel_us = 450000,
                 .idle_pct = 100.0 / 3, .compute_pct = 500.0 / 9, .non_compute_pct = 100.0 / 9},
                {.rank = 1, .idle_us = 0, .compute_us = 100000, .non_compute_us = 0, .kernel_us = 100000,
                 .idle_pct = 0, .compute_pct = 100, .non_compute_pct = 0}};
  g.overlap = {{.rank = 0, .comm_comp_overlap_pct = 200.0 / 3}, {.rank = 1, .comm_comp_overlap_pct = std::nan("")}};
  g.kernel_types = {{.type = "COMPUTATION", .us = 150000, .pct = 37.5},
                    {.type = "COMPUTATION overlapping COMMUNICATION", .us = 100000, .pct = 25},
                    {.type = "MEMORY", .us = 100000, .pct = 25},
                    {.type = "COMMUNICATION", .us = 50000, .pct = 12.5},
                    {.type = "OTHER", .us = 0, .pct = 0}};
  g.idle = {{.rank = 0, .stream = 7, .category = "host_wait", .us = 100000, .ratio = 0.8},
            {.rank = 0, .stream = 7, .category = "kernel_wait", .us = 25000, .ratio = 0.2},
            {.rank = 0, .stream = 20, .category = "other", .us = 10, .ratio = 1}};
  g.launch = {{.rank = 0, .kernels = 3, .launched = 1, .delay_mean_us = 50000, .delay_p50_us = 50000,
               .delay_p95_us = 50000, .delay_max_us = 50000, .short_kernels = 0}};
  return g;
}

analysis::RunAnalysis AnalysisWithHandGpu(const model::Run& run) {
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  a.gpu = HandGpu();
  return a;
}

json HtmlData(const model::Run& run) {
  analysis::AttributionOptions aopts;
  aopts.slices = 40;
  return RenderHtmlReportData(run, analysis::AnalyzeRun(run), analysis::AttributeResources(run, aopts));
}

// --- HTML timeline -----------------------------------------------------------------------

TEST(ImportedTraceReportTest, HtmlTimelinePutsEachTrackInABandOfItsOwn) {
  json t = HtmlData(ImportedGpuRun())["timeline"];
  std::map<std::string, int> row;
  std::map<std::string, int> track;
  for (size_t i = 0; i < t["id"].size(); ++i) {
    std::string name = t["strings"][t["name"][i].get<int>()];
    row[name] = t["row"][i];
    track[name] = t["track"][i];
  }
  // By hand: the run on row 0, rank 0's process on row 1 with its bands below it, in the
  // order their first phase starts: thread 4242 (3 nested rows), the async track (2 rows: its
  // slices overlap), GPU 0 stream 7 (gemm and memcpy share a row), stream 20, thread 4300.
  EXPECT_EQ(row["run"], 0);
  EXPECT_EQ(row["python3 train.py"], 1);
  EXPECT_EQ(row["ProfilerStep#1"], 2);
  EXPECT_EQ(row["aten::mm"], 3);
  EXPECT_EQ(row["cudaLaunchKernel"], 4);
  EXPECT_EQ(row["forward"], 5);
  EXPECT_EQ(row["backward"], 6);
  EXPECT_EQ(row["sm80_gemm"], 7);
  EXPECT_EQ(row["Memcpy HtoD"], 7);
  EXPECT_EQ(row["ncclKernel_AllReduce"], 8);
  EXPECT_EQ(row["autograd::engine"], 9);
  // Rank 1's process overlaps rank 0's 9-row block: below it.
  EXPECT_EQ(row["python3 train.py --rank 1"], 10);
  EXPECT_EQ(row["step"], 11);
  EXPECT_EQ(row[kEvilKernel], 12);
  EXPECT_EQ(t["rows"], 13);

  // Tracks in order of first use; phases not on a track have -1.
  EXPECT_EQ(track["run"], -1);
  EXPECT_EQ(track["python3 train.py"], -1);
  ASSERT_EQ(t["tracks"].size(), 7u);
  std::vector<std::string> labels;
  for (const json& k : t["tracks"]) labels.push_back(k["label"]);
  EXPECT_EQ(labels, (std::vector<std::string>{"thread 4242 (python)", "async gpu_user_annotation", "GPU 0 stream 7",
                                              "GPU 0 stream 20", "thread 4300 (pt_autograd_0)", "thread 5151",
                                              "GPU 0 stream 7"}));
  EXPECT_EQ(t["tracks"][2]["kind"], "device");
  EXPECT_EQ(t["tracks"][2]["device"], 0);
  EXPECT_EQ(t["tracks"][2]["stream"], 7);
  EXPECT_EQ(t["tracks"][2]["rank"], "0");
  EXPECT_EQ(t["tracks"][6]["rank"], "1");
  EXPECT_EQ(track["sm80_gemm"], 2);
  EXPECT_EQ(track["ncclKernel_AllReduce"], 3);
  // One band per (parent, track): [track, first row, rows].
  std::vector<std::tuple<int, int, int>> bands;
  for (const json& b : t["bands"]) bands.emplace_back(b["track"], b["row"], b["rows"]);
  EXPECT_EQ(bands, (std::vector<std::tuple<int, int, int>>{
                       {0, 2, 3}, {1, 5, 2}, {2, 7, 1}, {3, 8, 1}, {4, 9, 1}, {5, 11, 1}, {6, 12, 1}}));
  // The flows: both edges are drawn.
  EXPECT_EQ(t["edges"].size(), 2u);
}

TEST(ImportedTraceReportTest, HtmlTimelineGolden) {
  json d = HtmlData(ImportedGpuRun());
  json part = {{"timeline", d["timeline"]}, {"sources", d["run"]["sources"]}};
  ExpectMatchesGolden(part.dump(1) + "\n", "imported_gpu_run.html.json");
}

TEST(ImportedTraceReportTest, HtmlPageKeepsHostileTraceNamesAsData) {
  model::Run run = ImportedGpuRun();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  std::string page = RenderHtmlReport(run, a, analysis::AttributeResources(run));
  EXPECT_EQ(page.find("<img src=x"), std::string::npos);
  EXPECT_EQ(page.find("<b>"), std::string::npos);
  json data = testing::HtmlPageData(page);
  bool found = false;
  for (const json& s : data["timeline"]["strings"]) found = found || s == kEvilKernel;
  EXPECT_TRUE(found) << "the kernel's name reads back exactly, as text for the page";
  EXPECT_EQ(data["run"]["sources"][1]["path"], "traces/rank1 <b>\x1b[2J.json");
}

// The sources with the clock note and what was dropped, largest count first.
TEST(ImportedTraceReportTest, HtmlAndJsonListTheSources) {
  model::Run run = ImportedGpuRun();
  json sources = RenderJsonReport(run, analysis::AnalyzeRun(run))["sources"];
  EXPECT_EQ(sources, HtmlData(run)["run"]["sources"]);
  ASSERT_EQ(sources.size(), 2u);
  EXPECT_EQ(sources[0]["path"], "traces/rank0.pt.trace.json.gz");
  EXPECT_EQ(sources[0]["format"], "kineto");
  EXPECT_EQ(sources[0]["rank"], "0");
  EXPECT_EQ(sources[0]["clock"], "absolute");
  EXPECT_TRUE(sources[0]["clock_note"].is_null());
  EXPECT_EQ(sources[0]["dropped_total"], 7);
  EXPECT_EQ(sources[0]["kept_total"], 0);
  // The severity and description stored with each stat (sample_runs.h), whether it counts as dropped.
  EXPECT_EQ(sources[0]["dropped"],
            (json::array({{{"reason", "unknown phase 'Z'"}, {"count", 3}, {"severity", "data_loss"}, {"dropped", true},
                           {"description", ""}},
                          {{"reason", "unmatched E"}, {"count", 3}, {"severity", "data_loss"}, {"dropped", true},
                           {"description", ""}},
                          {{"reason", "bad ts"}, {"count", 1}, {"severity", "error"}, {"dropped", true},
                           {"description", "a ts that is not a number"}}})));
  EXPECT_EQ(sources[1]["clock"], "aligned");
  EXPECT_EQ(sources[1]["clock_note"], "aligned to the process lifetime, not absolute");
  EXPECT_EQ(sources[1]["dropped_total"], 0);
}

TEST(ImportedTraceReportTest, JsonHasTracksAndEachPhasesTrack) {
  model::Run run = ImportedGpuRun();
  json j = RenderJsonReport(run, analysis::AnalyzeRun(run));
  ASSERT_EQ(j["tracks"].size(), 7u);
  EXPECT_EQ(j["tracks"][2], (json{{"id", 3}, {"kind", "device"}, {"label", "GPU 0 stream 7"}, {"source", 1},
                                  {"host", "node1"}, {"pid", 4242}, {"device", 0}, {"stream", 7},
                                  {"name", "stream 7"}}));
  EXPECT_EQ(j["tracks"][0]["tid"], 4242);
  EXPECT_EQ(j["tracks"][4]["kind"], "async");
  for (const json& p : j["phases"]) {
    if (p["name"] == "sm80_gemm") {
      EXPECT_EQ(p["track"], 3);
    }
    if (p["name"] == "run") {
      EXPECT_TRUE(p["track"].is_null());
    }
  }
}

// --- terminal ----------------------------------------------------------------------------

TEST(ImportedTraceReportTest, TerminalGolden) {
  testing::UseUtc();
  model::Run run = ImportedGpuRun();
  ExpectMatchesGolden(RenderTerminalReport(run, AnalysisWithHandGpu(run)), "imported_gpu_run.txt");
}

TEST(ImportedTraceReportTest, TerminalShowsSourcesGpuAndNoRawControlCharacters) {
  testing::UseUtc();
  model::Run run = ImportedGpuRun();
  std::string text = RenderTerminalReport(run, AnalysisWithHandGpu(run));
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << "no escape sequence from a trace reaches the terminal";
  EXPECT_NE(text.find("Imported traces"), std::string::npos);
  EXPECT_NE(text.find("traces/rank0.pt.trace.json.gz  kineto, rank 0 of 2"), std::string::npos);
  EXPECT_NE(text.find("dropped 7: unknown phase 'Z' 3, unmatched E 3, bad ts 1"), std::string::npos);
  EXPECT_NE(text.find("clock: aligned to the process lifetime, not absolute"), std::string::npos);
  // The GPU section: rank 0's span 450 ms, idle 1/3, compute 5/9, non-compute 1/9, overlap 2/3.
  EXPECT_NE(text.find("33.3%"), std::string::npos);
  EXPECT_NE(text.find("55.6%"), std::string::npos);
  EXPECT_NE(text.find("11.1%"), std::string::npos);
  EXPECT_NE(text.find("66.7%"), std::string::npos);
  EXPECT_NE(text.find("COMPUTATION overlapping COMMUNICATION  25.0%  100 ms"), std::string::npos);
  EXPECT_EQ(text.find("OTHER"), std::string::npos) << "kernel types with no time are left out";
  EXPECT_NE(text.find("rank 0 stream 7"), std::string::npos);
}

TEST(ImportedTraceReportTest, TerminalHasNoGpuSectionWithoutGpuWork) {
  testing::UseUtc();
  model::Run run = testing::BasicRun();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  a.gpu = {};
  std::string text = RenderTerminalReport(run, a);
  EXPECT_EQ(text.find("\nGPU"), std::string::npos);
  EXPECT_EQ(text.find("Imported traces"), std::string::npos);
}

// --- Perfetto export -----------------------------------------------------------------------

TEST(ImportedTraceReportTest, PerfettoGolden) {
  ExpectMatchesGolden(RenderChromeTrace(ImportedGpuRun()), "imported_gpu_run.trace.json");
}

TEST(ImportedTraceReportTest, PerfettoHasAThreadPerTrackInItsProcess) {
  model::Run run = ImportedGpuRun();
  json trace = json::parse(RenderChromeTrace(run));
  std::map<std::pair<int64_t, int64_t>, std::string> threads;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  auto slice = [&](const std::string& name) -> json {
    for (const json& e : trace["traceEvents"])
      if (e["ph"] == "X" && e["name"] == name) return e;
    return json();
  };
  auto thread_of = [&](const std::string& name) {
    json e = slice(name);
    return e.is_null() ? std::string("<none>") : threads[{e["pid"], e["tid"]}];
  };
  // Every imported phase in its process (pid 4242 or 5151), on the thread of its track.
  for (const char* name : {"ProfilerStep#1", "aten::mm", "cudaLaunchKernel", "sm80_gemm", "autograd::engine"}) {
    EXPECT_EQ(slice(name)["pid"], 4242) << name;
  }
  EXPECT_EQ(slice(kEvilKernel)["pid"], 5151);
  EXPECT_EQ(thread_of("python3 train.py"), "main");
  EXPECT_EQ(thread_of("ProfilerStep#1"), "thread 4242 (python)");
  EXPECT_EQ(thread_of("cudaLaunchKernel"), "thread 4242 (python)");
  EXPECT_EQ(thread_of("autograd::engine"), "thread 4300 (pt_autograd_0)");
  EXPECT_EQ(slice("autograd::engine")["tid"], 4300) << "a thread keeps its own tid when free";
  EXPECT_EQ(thread_of("sm80_gemm"), "GPU 0 stream 7");
  EXPECT_EQ(thread_of("Memcpy HtoD"), "GPU 0 stream 7");
  EXPECT_EQ(thread_of("ncclKernel_AllReduce"), "GPU 0 stream 20");
  EXPECT_EQ(thread_of(kEvilKernel), "GPU 0 stream 7");
  EXPECT_NE(slice(kEvilKernel)["tid"], slice("sm80_gemm")["tid"]) << "rank 1's stream 7 is not rank 0's";
  // Overlapping async slices need two lanes of their track.
  EXPECT_EQ(thread_of("forward"), "async gpu_user_annotation");
  EXPECT_EQ(thread_of("backward"), "async gpu_user_annotation (lane 2)");
  EXPECT_EQ(slice("sm80_gemm")["args"]["tags"]["correlation"], "77");
  // The launch edge is a flow from the runtime call to the kernel, in category "launch".
  int launches = 0;
  for (const json& e : trace["traceEvents"]) {
    if ((e["ph"] == "s" || e["ph"] == "f") && e["cat"] == "launch") {
      ++launches;
      EXPECT_EQ(e["tid"], slice(e["ph"] == "s" ? "cudaLaunchKernel" : "sm80_gemm")["tid"]);
    }
  }
  EXPECT_EQ(launches, 2);
  // The sources in otherData.
  const json& sources = trace["otherData"]["sources"];
  ASSERT_EQ(sources.size(), 2u);
  EXPECT_EQ(sources[0]["dropped"], (json{{"unknown phase 'Z'", 3}, {"unmatched E", 3}, {"bad ts", 1}}));
  EXPECT_FALSE(sources[0].contains("kept"));  // nothing of severity info
  EXPECT_EQ(sources[1]["clock_note"], "aligned to the process lifetime, not absolute");
}

// Kept-adjusted stats (severity info) are not "dropped" in the export either: they are "kept".
TEST(ImportedTraceReportTest, PerfettoSaysKeptApartFromDropped) {
  model::Run run = ImportedGpuRun();
  run.ingest_stats.push_back({.source = 2,
                              .reason = "begin_without_end_closed_at_trace_end",
                              .count = 2,
                              .severity = model::StatSeverity::kInfo});
  run.ingest_stats.push_back({.source = 2, .reason = "end_without_begin", .count = 1,
                              .severity = model::StatSeverity::kDataLoss});
  json sources = json::parse(RenderChromeTrace(run))["otherData"]["sources"];
  ASSERT_EQ(sources.size(), 2u);
  EXPECT_EQ(sources[1]["dropped"], (json{{"end_without_begin", 1}}));
  EXPECT_EQ(sources[1]["kept"], (json{{"begin_without_end_closed_at_trace_end", 2}}));
  // The JSON report and the text report agree: 1 dropped, 2 kept.
  json report_source = RenderJsonReport(run, analysis::AnalyzeRun(run))["sources"][1];
  EXPECT_EQ(report_source["dropped_total"], 1);
  EXPECT_EQ(report_source["kept_total"], 2);
  std::string text;  // the report's lines joined (the line may wrap)
  for (char c : RenderTerminalReport(run, analysis::AnalyzeRun(run))) {
    if (c == '\n' || c == ' ') {
      if (!text.empty() && text.back() != ' ') text += ' ';
    } else {
      text += c;
    }
  }
  EXPECT_NE(text.find("dropped 1: end_without_begin 1; kept adjusted 2: begin_without_end_closed_at_trace_end 2"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace grademl::report
