#include "report/html_report.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "golden.h"
#include "html_page.h"
#include "sample_runs.h"

namespace grademl::report {
namespace {

using nlohmann::json;
using testing::At;
using testing::BasicRun;
using testing::ExpectMatchesGolden;
using testing::HtmlPageData;
using testing::RunFixture;
using testing::Sec;

json Data(const model::Run& run, const HtmlReportOptions& options = {}) {
  analysis::AttributionOptions aopts;
  aopts.slices = 40;
  return RenderHtmlReportData(run, analysis::AnalyzeRun(run), analysis::AttributeResources(run, aopts), options);
}

// Checks the timeline's rows: every phase below its parent, and no two phases of one row
// overlapping in time.
void ExpectValidLayout(const json& t) {
  size_t n = t["id"].size();
  ASSERT_EQ(t["row"].size(), n);
  std::map<int, std::vector<std::pair<double, double>>> rows;
  for (size_t i = 0; i < n; ++i) {
    int row = t["row"][i];
    int64_t parent = t["parent"][i];
    if (parent >= 0) {
      EXPECT_GT(row, t["row"][parent].get<int>()) << "phase " << t["id"][i];
    }
    EXPECT_LT(row, t["rows"].get<int>());
    rows[row].push_back({t["start"][i], t["end"][i]});
  }
  for (auto& [row, spans] : rows) {
    std::sort(spans.begin(), spans.end());
    for (size_t k = 1; k < spans.size(); ++k) {
      EXPECT_LE(spans[k - 1].second, spans[k].first + 1e-9) << "overlap in row " << row;
    }
  }
}

TEST(HtmlReportTest, BasicRunDataGolden) { ExpectMatchesGolden(Data(BasicRun()).dump(1) + "\n", "basic_run.html.json"); }

TEST(HtmlReportTest, BasicRunLayoutAndSections) {
  json d = Data(BasicRun());
  EXPECT_EQ(d["schema"], kHtmlDataSchema);
  const json& t = d["timeline"];
  EXPECT_EQ(t["shown_phases"], t["total_phases"]);
  EXPECT_TRUE(t["depth_limit"].is_null());
  ExpectValidLayout(t);
  // run / sh / python; below python the worker (first to start) and, overlapping it, the two
  // epochs one row lower; gzip overlaps python's end, so it goes below python's 3-row block.
  EXPECT_EQ(t["rows"], 6);
  ASSERT_FALSE(d["plots"]["groups"].empty());
  EXPECT_EQ(d["plots"]["groups"][0]["title"], "Host node1");
  EXPECT_EQ(d["plots"]["t"].size(), 40u);
  std::vector<std::string> charts;
  for (const json& c : d["plots"]["groups"][0]["charts"]) charts.push_back(c["title"]);
  EXPECT_EQ(charts, (std::vector<std::string>{"CPU", "Memory", "Disk", "Network", "GPU utilisation", "GPU memory"}));
  EXPECT_FALSE(d["stacked"].empty());
  EXPECT_FALSE(d["attribution"]["rows"].empty());
}

// Steps that overlap get their own blocks of rows; sequential ones share rows.
TEST(HtmlReportTest, ParallelStepsGetSeparateRows) {
  RunFixture f;
  f.run.info.start_ns = 0;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "wf", "run", 0, Sec(10));
  auto a = f.AddPhase(root, "a", "run/step", Sec(0), Sec(4));
  f.AddPhase(a, "a1", "run/step/process", Sec(0), Sec(4));
  auto b = f.AddPhase(root, "b", "run/step", Sec(1), Sec(5));
  f.AddPhase(b, "b1", "run/step/process", Sec(1), Sec(5));
  auto c = f.AddPhase(root, "c", "run/step", Sec(6), Sec(9));
  f.AddPhase(c, "c1", "run/step/process", Sec(6), Sec(9));
  json t = Data(f.Build())["timeline"];
  ExpectValidLayout(t);
  auto row_of = [&](const std::string& name) {
    for (size_t i = 0; i < t["id"].size(); ++i) {
      if (t["strings"][t["name"][i].get<int>()] == name) return t["row"][i].get<int>();
    }
    return -1;
  };
  EXPECT_EQ(row_of("wf"), 0);
  EXPECT_EQ(row_of("a"), 1);
  EXPECT_EQ(row_of("a1"), 2);
  EXPECT_EQ(row_of("b"), 3);  // below a's whole block
  EXPECT_EQ(row_of("b1"), 4);
  EXPECT_EQ(row_of("c"), 1);  // after a ended
  EXPECT_EQ(row_of("c1"), 2);
  EXPECT_EQ(t["rows"], 5);
}

TEST(HtmlReportTest, RandomTreesLayOutWithoutOverlap) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    RunFixture f;
    f.run.info.start_ns = 0;
    f.run.info.end_ns = Sec(100);
    std::vector<std::pair<model::PhaseId, std::pair<TimeNs, TimeNs>>> open = {{f.AddPhase(0, "r", "run", 0, Sec(100)), {0, Sec(100)}}};
    for (int k = 0; k < 300; ++k) {
      auto [parent, span] = open[rng() % open.size()];
      TimeNs len = span.second - span.first;
      if (len < 4) continue;
      TimeNs s = span.first + static_cast<TimeNs>(rng() % static_cast<uint64_t>(len / 2));
      TimeNs e = s + 1 + static_cast<TimeNs>(rng() % static_cast<uint64_t>(span.second - s));
      open.push_back({f.AddPhase(parent, "p" + std::to_string(k), "run/x", s, std::min(e, span.second)), {s, e}});
    }
    json t = Data(f.Build())["timeline"];
    EXPECT_EQ(t["shown_phases"], f.run.phases.size());
    ExpectValidLayout(t);
  }
}

// Beyond the budget only the shallowest levels are drawn; the rest are counted on their parents.
TEST(HtmlReportTest, LevelOfDetailKeepsShallowLevels) {
  RunFixture f;
  f.run.info.start_ns = 0;
  f.run.info.end_ns = Sec(20);
  auto root = f.AddPhase(0, "wf", "run", 0, Sec(20));
  for (int s = 0; s < 2; ++s) {
    auto step = f.AddPhase(root, "step" + std::to_string(s), "run/step", Sec(10 * s), Sec(10 * s + 10));
    for (int e = 0; e < 10; ++e) {
      TimeNs e0 = Sec(10 * s + e);
      auto epoch = f.AddPhase(step, "epoch", "run/step/epoch", e0, e0 + Sec(1));
      for (int i = 0; i < 100; ++i) f.AddPhase(epoch, "it", "run/step/epoch/iteration", e0 + i * Sec(1) / 100, e0 + (i + 1) * Sec(1) / 100);
    }
  }
  HtmlReportOptions options;
  options.max_timeline_phases = 100;
  json t = Data(f.Build(), options)["timeline"];
  EXPECT_EQ(t["total_phases"], 1 + 2 + 20 + 2000);
  EXPECT_EQ(t["shown_phases"], 1 + 2 + 20);
  EXPECT_EQ(t["depth_limit"], 2);
  int64_t collapsed = 0;
  for (const json& c : t["collapsed"]) collapsed += c.get<int64_t>();
  EXPECT_EQ(collapsed, 2000);
  ExpectValidLayout(t);

  // With room for two families of iterations, the two longest epochs get theirs.
  f.run.phases[3].end_ns += Sec(1) / 2;  // step0's first epoch, the longest
  options.max_timeline_phases = 250;
  t = Data(f.run, options)["timeline"];
  EXPECT_EQ(t["shown_phases"], 23 + 200);
  EXPECT_EQ(t["depth_limit"], 2);
  EXPECT_EQ(t["collapsed"][2].get<int64_t>(), 0) << "the longest epoch, third in start order, is drawn with its iterations";
  ExpectValidLayout(t);

  options.max_timeline_phases = 2;  // even the steps do not fit: the first ones in time
  t = Data(f.run, options)["timeline"];
  EXPECT_EQ(t["shown_phases"], 2);
  EXPECT_EQ(t["depth_limit"], 1);
  ExpectValidLayout(t);
}

TEST(HtmlReportTest, UntrustedNamesCannotEscapeTheDataElement) {
  model::Run run = BasicRun();
  const std::string evil = "</script><script>alert(1)</script><!-- & \"q\" 'a' \xff";
  run.phases[3].name = evil;
  run.info.command = {"python3", evil};
  run.Index();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  std::string page = RenderHtmlReport(run, a, analysis::AttributeResources(run));
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_EQ(page.find("<!-- &"), std::string::npos);
  EXPECT_NE(page.find("<title>GradeML run 7: python3 &#39;&lt;/script&gt;"), std::string::npos);
  json data = HtmlPageData(page);
  bool found = false;
  for (const json& s : data["timeline"]["strings"]) found = found || s == "</script><script>alert(1)</script><!-- & \"q\" 'a' \xef\xbf\xbd";
  EXPECT_TRUE(found) << "the name reads back exactly (invalid UTF-8 replaced)";
  // The template's markers are all replaced; the bundled script and style are inlined.
  EXPECT_EQ(page.find("<!--GRADEML_"), std::string::npos);
  EXPECT_EQ(page.find("<!--SCRIPT-->"), std::string::npos);
  EXPECT_NE(page.find("<style>"), std::string::npos);
  EXPECT_GT(page.size(), 50000u);
}

TEST(HtmlReportTest, Escapers) {
  EXPECT_EQ(EscapeJsonForScript(R"({"a":"</script>&"})"), R"({"a":"\u003c/script\u003e\u0026"})");
  EXPECT_EQ(EscapeHtml("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
}

TEST(HtmlReportTest, EmptyRunStillRenders) {
  model::Run run;
  run.info.id = 1;
  run.Index();
  analysis::RunAnalysis a = analysis::AnalyzeRun(run);
  json data = HtmlPageData(RenderHtmlReport(run, a, analysis::AttributeResources(run)));
  EXPECT_EQ(data["timeline"]["shown_phases"], 0);
  EXPECT_TRUE(data["steps"].empty());
}

}  // namespace
}  // namespace grademl::report

namespace grademl::report {
namespace {

// The labels of the stacked "who used what" plot of one metric.
std::vector<std::string> StackedLabels(const json& d, const std::string& metric) {
  std::vector<std::string> out;
  for (const json& c : d["stacked"]) {
    if (c["metric"] != metric) continue;
    for (const json& s : c["series"]) out.push_back(s["label"]);
  }
  return out;
}

// 100 epochs of one process are one legend entry, "epoch ×100", not 100; their layer holds
// all their usage.
TEST(HtmlReportTest, RepeatedEpochsAreOneStackedLayer) {
  RunFixture f;
  f.run.info.start_ns = 0;
  f.run.info.end_ns = Sec(100);
  auto root = f.AddPhase(0, "python train.py", "run", 0, Sec(100));
  auto proc = f.AddProcess(root, "python train.py", 0, Sec(100), 10);
  f.Counter(f.last_process_resource, model::metric::kProcCpuUser, {{0, 0}, {Sec(100), 100}});
  for (int e = 0; e < 100; ++e) {
    f.AddPhase(proc, "epoch " + std::to_string(e + 1), "run/process/epoch", Sec(e), Sec(e + 1), 10);
  }
  json d = Data(f.Build());
  EXPECT_EQ(StackedLabels(d, "cpu"), (std::vector<std::string>{"epoch \u00d7100"}));
  for (const json& c : d["stacked"]) {
    if (c["metric"] != "cpu") continue;
    double total = 0;
    for (const json& v : c["series"][0]["values"]) total += v.is_number() ? v.get<double>() : 0.0;
    EXPECT_NEAR(total / 40.0 * 100.0, 100.0, 5.0);  // 40 slices of 2.5 s: 1 core all along
    EXPECT_EQ(c["series"][0]["count"], 100);
  }
}

// 50 identical workers (a DataLoader's, named like their parent) are one entry; a different
// process keeps its own.
TEST(HtmlReportTest, IdenticalWorkerProcessesAreOneStackedLayer) {
  RunFixture f;
  f.run.info.start_ns = 0;
  f.run.info.end_ns = Sec(10);
  auto root = f.AddPhase(0, "python main.py", "run", 0, Sec(10));
  auto main_proc = f.AddProcess(root, "python main.py", 0, Sec(10), 10);
  for (int w = 0; w < 50; ++w) {
    f.AddProcess(main_proc, "python main.py", Sec(1), Sec(9), 100 + w);
    f.Counter(f.last_process_resource, model::metric::kProcCpuUser, {{Sec(1), 0}, {Sec(9), 4}});
  }
  f.AddProcess(main_proc, "gzip out.txt", Sec(2), Sec(8), 99);
  f.Counter(f.last_process_resource, model::metric::kProcCpuUser, {{Sec(2), 0}, {Sec(8), 3}});
  json d = Data(f.Build());
  EXPECT_EQ(StackedLabels(d, "cpu"), (std::vector<std::string>{"python main.py \u00d750", "gzip out.txt"}));
}

}  // namespace
}  // namespace grademl::report
