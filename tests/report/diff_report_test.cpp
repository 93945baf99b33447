// The diff report: golden text and JSON for a fixed pair of runs (tests/data/diff/), and
// the pieces of its sentences.
#include "report/diff_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "analysis/run_analysis.h"
#include "golden.h"
#include "sample_runs.h"

namespace grademl::testing {
namespace {

namespace metric = model::metric;
using analysis::PhaseDiff;
using analysis::RunDiff;
using nlohmann::json;

// A stretch of a process's life: what its main thread did from `start` to `end` (seconds
// from the run's start).
struct Segment {
  double start = 0, end = 0;
  double run = 0;        // on a CPU, per second
  double disk_wait = 0;  // in disk wait, per second
  double wait = 0;       // waiting for a CPU, per second
};

std::vector<model::Sample> Piecewise(TimeNs t0, const std::vector<Segment>& segments, double Segment::*rate) {
  std::vector<model::Sample> out;
  double v = 0;
  for (const Segment& s : segments) {
    for (double t = s.start; t < s.end - 1e-9; t += 0.5) {
      if (out.empty() || out.back().t < t0 + Sec(t)) out.push_back({t0 + Sec(t), v});
      v += (s.*rate) * (std::min(t + 0.5, s.end) - t);
    }
  }
  out.push_back({t0 + Sec(segments.back().end), v});
  return out;
}

model::PhaseId AddProc(RunFixture& f, TimeNs t0, model::PhaseId parent, const std::string& name, int32_t pid,
                       const std::vector<Segment>& segments) {
  model::PhaseId id =
      f.AddProcess(parent, name, t0 + Sec(segments.front().start), t0 + Sec(segments.back().end), pid);
  model::ResourceId r = f.last_process_resource;
  f.Counter(r, metric::kProcSchedRun, Piecewise(t0, segments, &Segment::run));
  f.Counter(r, metric::kProcSchedWait, Piecewise(t0, segments, &Segment::wait));
  f.Counter(r, metric::kProcStateDiskWait, Piecewise(t0, segments, &Segment::disk_wait));
  f.Counter(r, metric::kProcCpuUser, Piecewise(t0, segments, &Segment::run));
  return id;
}

// A workflow run of `end` seconds starting at t0, steps added by the caller.
struct WorkflowRun {
  RunFixture f;
  TimeNs t0 = 0;
  model::PhaseId root = 0;

  WorkflowRun(model::RunId id, TimeNs start, double end, std::string uuid) : t0(start) {
    model::RunInfo& info = f.run.info;
    info.id = id;
    info.uuid = std::move(uuid);
    info.command = {"pipeline.yaml"};
    info.cwd = "/home/ada/project";
    info.host = "node1";
    info.start_ns = start;
    info.end_ns = start + Sec(end);
    info.exit_code = 0;
    info.complete = true;
    info.grademl_version = "0.1.0";
    info.interval_ns = 500 * kNsPerMs;
    root = f.AddPhase(0, "project", "run", start, start + Sec(end));
  }
  model::PhaseId Step(const std::string& name, double s, double e, std::vector<model::PhaseId> deps = {}) {
    model::PhaseId id = f.AddPhase(root, name, "run/step", t0 + Sec(s), t0 + Sec(e));
    for (model::PhaseId d : deps) f.run.edges.push_back({d, id, "after"});
    return id;
  }
  void Epochs(model::PhaseId process, int32_t pid, int n, double s, double e) {
    for (int k = 0; k < n; ++k) {
      f.AddPhase(process, "epoch " + std::to_string(k + 1), "run/step/process/process/epoch",
                 t0 + Sec(s + (e - s) * k / n), t0 + Sec(s + (e - s) * (k + 1) / n), pid);
    }
  }
};

// Run 3: prepare (2 s of CPU), train (4 epochs, 8 s of CPU), then a report step asleep
// for 2 s (its name holds an escape sequence). Run 5, an hour later: prepare 0.5 s faster,
// train with 6 epochs and 4 s more in disk wait, no report step, a new evaluate step.
std::pair<model::Run, model::Run> DiffPair() {
  WorkflowRun a(3, kT0, 12, "1f0c3a55-0000-4000-8000-000000000003");
  {
    auto prepare = a.Step("prepare", 0, 2);
    auto sh = AddProc(a.f, a.t0, prepare, "/bin/sh -c python3 prepare.py", 100, {{.start = 0, .end = 2}});
    AddProc(a.f, a.t0, sh, "python3 prepare.py --rows 1000", 101, {{.start = 0.01, .end = 2, .run = 1}});
    auto train = a.Step("train", 2, 10, {prepare});
    auto sh2 = AddProc(a.f, a.t0, train, "/bin/sh -c python3 train.py", 102, {{.start = 2, .end = 10}});
    auto py = AddProc(a.f, a.t0, sh2, "python3 train.py --epochs 4", 103, {{.start = 2.01, .end = 10, .run = 1}});
    a.Epochs(py, 103, 4, 2.5, 10);
    auto rep = a.Step("report\x1b[31m", 10, 12, {train});
    AddProc(a.f, a.t0, rep, "sleep 2", 104, {{.start = 10, .end = 12}});
  }
  WorkflowRun b(5, kT0 + Sec(3600), 15.5, "1f0c3a55-0000-4000-8000-000000000005");
  {
    auto prepare = b.Step("prepare", 0, 1.5);
    auto sh = AddProc(b.f, b.t0, prepare, "/bin/sh -c python3 prepare.py", 200, {{.start = 0, .end = 1.5}});
    AddProc(b.f, b.t0, sh, "python3 prepare.py --rows 500", 201, {{.start = 0.01, .end = 1.5, .run = 1}});
    auto train = b.Step("train", 1.5, 13.5, {prepare});
    auto sh2 = AddProc(b.f, b.t0, train, "/bin/sh -c python3 train.py", 202, {{.start = 1.5, .end = 13.5}});
    auto py = AddProc(b.f, b.t0, sh2, "python3 train.py --epochs 6", 203,
                      {{.start = 1.51, .end = 9.5, .run = 1}, {.start = 9.5, .end = 13.5, .disk_wait = 1}});
    b.Epochs(py, 203, 6, 2, 13.5);
    auto evaluate = b.Step("evaluate", 13.5, 15.5, {train});
    AddProc(b.f, b.t0, evaluate, "python3 evaluate.py", 204, {{.start = 13.5, .end = 15.5, .run = 0.5}});
  }
  return {a.f.Build(), b.f.Build()};
}

struct Rendered {
  model::Run a, b;
  RunDiff diff;
};

Rendered Render(const analysis::DiffOptions& options = {}) {
  auto [a, b] = DiffPair();
  analysis::RunAnalysis aa = analysis::AnalyzeRun(a), ab = analysis::AnalyzeRun(b);
  RunDiff diff = analysis::DiffRuns(a, aa, b, ab, options);
  return {std::move(a), std::move(b), std::move(diff)};
}

TEST(DiffReportTest, TextGolden) {
  UseUtc();
  Rendered r = Render();
  std::string text = report::RenderDiffText(r.a, r.b, r.diff);
  ExpectMatchesGolden(text, "../diff/diff.txt");
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << "names are sanitized";
  EXPECT_NE(text.find("Run 3 → run 5: the run took 3.50 s longer (12.00 s → 15.50 s, +29%)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("Step train got 4.00 s slower (+50%): mostly 4.00 s more time waiting on the disk."),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("6 phases instead of 4"), std::string::npos) << text;
}

TEST(DiffReportTest, JsonGolden) {
  Rendered r = Render();
  json j = report::RenderDiffJson(r.a, r.b, r.diff);
  ExpectMatchesGolden(j.dump(2) + "\n", "../diff/diff.json");
  EXPECT_EQ(j["schema"], "grademl.diff/1");
  EXPECT_EQ(j["a"]["id"], 3);
  EXPECT_EQ(j["b"]["id"], 5);
  EXPECT_NEAR(j["makespan"]["delta_s"].get<double>(), 3.5, 1e-9);
  const json& first = j["phases"][0];
  EXPECT_EQ(first["rank"], 1);
  EXPECT_TRUE(first["significant"].get<bool>());
  EXPECT_NEAR(std::abs(first["delta_s"].get<double>()), 4, 1e-6);
  bool saw_train = false, saw_removed = false;
  for (const json& p : j["phases"]) {
    if (p["key"] == "train") {
      saw_train = true;
      EXPECT_EQ(p["kind"], "step");
      EXPECT_EQ(p["status"], "changed");
      EXPECT_EQ(p["main_change"]["resource"], "disk");
      EXPECT_NEAR(p["seconds_delta"]["disk"].get<double>(), 4, 0.05);
      EXPECT_EQ(p["a"]["count"], 1);
      EXPECT_TRUE(p["b"]["critical"].get<bool>());
    }
    if (p["status"] == "removed" && p["kind"] == "step") {
      saw_removed = true;
      EXPECT_TRUE(p["b"].is_null());
      EXPECT_EQ(p["path"][0], "report\x1b[31m");  // raw in JSON (escaped by the encoder)
    }
  }
  EXPECT_TRUE(saw_train);
  EXPECT_TRUE(saw_removed);
  EXPECT_EQ(j["top_level"], json({"prepare", "train", "report\x1b[31m", "evaluate"}));
}

TEST(DiffReportTest, TopLimitsTheListAndTheFloorIsNamed) {
  UseUtc();
  Rendered r = Render({.min_change_s = 0.001});
  std::string text = report::RenderDiffText(r.a, r.b, r.diff, {.top = 2});
  EXPECT_NE(text.find(" 2. "), std::string::npos) << text;
  EXPECT_EQ(text.find(" 3. "), std::string::npos) << text;
  EXPECT_NE(text.find("smaller (--top 0 lists all)"), std::string::npos) << text;
  EXPECT_NE(text.find("changes under 1 ms left out"), std::string::npos) << text;
}

TEST(DiffReportTest, SameRunTwice) {
  UseUtc();
  auto [a, b] = DiffPair();
  analysis::RunAnalysis aa = analysis::AnalyzeRun(a);
  RunDiff diff = analysis::DiffRuns(a, aa, a, aa);
  std::string text = report::RenderDiffText(a, a, diff);
  EXPECT_NE(text.find("the run took as long"), std::string::npos) << text;
  EXPECT_NE(text.find("Nothing changed by 120 ms or more."), std::string::npos) << text;
  EXPECT_EQ(text.find("critical path changed"), std::string::npos) << text;
}

TEST(DiffReportTest, Sentences) {
  RunDiff diff;
  diff.run_a = 1;
  diff.run_b = 2;
  PhaseDiff d;
  d.key = "train/epoch";
  d.kind = analysis::DiffKind::kPhase;
  d.status = PhaseDiff::Status::kChanged;
  d.a.count = 3;
  d.a.total_s = 6;
  d.b.count = 3;
  d.b.total_s = 4.5;
  d.delta_s = -1.5;
  d.ratio = 0.75;
  d.mean_delta_s = -0.5;
  d.seconds_delta[0] = -1.7;
  d.seconds_delta[analysis::kDiffWaiting] = 0.2;
  d.seconds_delta[analysis::kDiffUnknown] = 0.1;  // under a tenth of the change: left out
  d.main_category = 0;
  EXPECT_EQ(report::DiffSentence(d, diff),
            "train/epoch got 1.50 s faster (-25%): 3 phases, each 500 ms faster on average; mostly 1.70 s less "
            "time computing on the CPU, also other waiting +200 ms.");
  // Slower with the machine's CPUs saturated: said right after the resource.
  PhaseDiff slow = d;
  slow.delta_s = 1.5;
  slow.ratio = 1.25;
  slow.mean_delta_s = 0.5;
  slow.seconds_delta = {};
  slow.seconds_delta[0] = 1.5;
  slow.b.saturated_s[0] = 1.2;
  EXPECT_EQ(report::DiffSentence(slow, diff),
            "train/epoch got 1.50 s slower (+25%): 3 phases, each 500 ms slower on average; mostly 1.50 s more "
            "time computing on the CPU (the whole machine's CPU was saturated for 1.20 s of it).");
  d.status = PhaseDiff::Status::kRemoved;
  EXPECT_EQ(report::DiffSentence(d, diff), "train/epoch is gone from run 2 (run 1 had 3 phases, 6.00 s in all).");
  d.kind = analysis::DiffKind::kProcess;
  d.key = "evaluate/python3 eval\tx.py";
  d.status = PhaseDiff::Status::kAdded;
  d.a = {};
  d.b.count = 1;
  d.b.total_s = 2;
  d.delta_s = 2;
  d.seconds_delta = {};
  d.seconds_delta[2] = 2;
  d.main_category = 2;
  EXPECT_EQ(report::DiffSentence(d, diff),
            "Process evaluate/python3 eval x.py is new in run 2: 2.00 s; mostly 2.00 s waiting on the "
            "disk.");
}

}  // namespace
}  // namespace grademl::testing
