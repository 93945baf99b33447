// The analyses' cost on two run shapes that once took far longer than their size warrants,
// each against a peer measured in the same process on the same run: for the what-if, indexing
// the run (model::Run::Index, one pass over its phases); for the summary, one plain sweep of
// all its samples in time order. The speed
// bounds of the unit tests WhatifTest.MillionPhases (< 5 s) and RunSummaryTest.ADeepChain...
// (< 10 s) moved here (issue 27: tests assert no wall-clock speed); bench/cost.py runs it in
// `make bench-check`, which fails when a ratio is 1.5x its baseline in bench/results.json.
//
//   whatif_1m_phases: the what-if replay (`type:iteration*0.5`) of a run of 1,000,024 phases
//                     (10 epochs of 99,999 iterations of 19 us).
//   summary_deep_chain: the run summary of a chain of 2,000 nested processes with 200 RSS
//                     samples each (400,000 samples): must not take depth x samples.
//
// A plain main: prints one JSON object per shape, {"name", "figure", "peer_figure"} in CPU
// seconds of this process (the least of REPETITIONS runs of each), on stdout.
//
//   build/bench/analysis_shapes_bench [REPETITIONS]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "analysis/run_summary.h"
#include "analysis/whatif.h"
#include "model/metric_names.h"
#include "model/run.h"
#include "process_clock.h"

namespace grademl {
namespace {

using bench::CpuSeconds;

constexpr TimeNs Sec(double s) { return static_cast<TimeNs>(s * 1e9); }

model::PhaseId AddPhase(model::Run& run, model::PhaseId parent, const char* name, const char* type, TimeNs start,
                        TimeNs end, int32_t pid) {
  model::Phase p;
  p.id = static_cast<model::PhaseId>(run.phases.size()) + 1;
  p.parent = parent;
  p.name = name;
  p.type = type;
  p.start_ns = start;
  p.end_ns = end;
  p.host = "node1";
  p.pid = pid;
  run.phases.push_back(std::move(p));
  return run.phases.back().id;
}

// The shape of WhatifTest.MillionPhases (tests/analysis/whatif_test.cpp).
model::Run MillionPhases() {
  model::Run run;
  run.phases.reserve(1'000'010);
  auto root = AddPhase(run, 0, "run", "run", 0, Sec(2000), 0);
  auto proc = AddPhase(run, root, "python", "run/process", 0, Sec(2000), 100);
  TimeNs t = Sec(1);
  for (int e = 0; e < 10; ++e) {
    auto epoch = AddPhase(run, proc, "epoch", "run/process/epoch", t, 0, 100);
    for (int i = 0; i < 99'999; ++i) {
      AddPhase(run, epoch, "iteration", "run/process/epoch/iteration", t + 1000, t + 20'000, 100);
      t += 20'000;
    }
    run.phases[static_cast<size_t>(epoch) - 1].end_ns = t;
    t += Sec(1);
  }
  run.info.end_ns = Sec(2000);
  return run;
}

// The shape of RunSummaryTest.ADeepChainWithManySamples (tests/analysis/run_summary_test.cpp).
model::Run DeepChain() {
  model::Run run;
  constexpr int kDepth = 2000, kSamples = 200;
  run.info.end_ns = Sec(1000);
  model::PhaseId parent = AddPhase(run, 0, "run", "run", 0, Sec(1000), 0);
  for (int i = 0; i < kDepth; ++i) {
    int32_t pid = 10 + i;
    parent = AddPhase(run, parent, "p", "process", Sec(i * 0.1), Sec(1000), pid);
    model::Resource r;
    r.id = static_cast<model::ResourceId>(run.resources.size()) + 1;
    r.kind = model::ResourceKind::kProcess;
    r.name = std::to_string(pid);
    r.host = "node1";
    r.pid = pid;
    r.phase = parent;
    run.resources.push_back(r);
    model::Series s;
    s.info.id = static_cast<model::SeriesId>(run.series.size()) + 1;
    s.info.resource = r.id;
    s.info.name = std::string(model::metric::kProcRss);
    s.info.kind = model::SeriesKind::kGauge;
    for (int j = 0; j < kSamples; ++j) s.samples.push_back({Sec(i * 0.1 + j * 0.01), static_cast<double>(1 + (j % 7))});
    run.series.push_back(std::move(s));
  }
  return run;
}

// The least CPU seconds of `work` over `repetitions` runs.
double LeastCpu(int repetitions, const std::function<void()>& work) {
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < repetitions; ++i) {
    double t0 = CpuSeconds();
    work();
    best = std::min(best, CpuSeconds() - t0);
  }
  return best;
}

void Print(const char* name, double figure, double peer) {
  std::printf("{\"name\": \"%s\", \"figure\": %.6g, \"peer_figure\": %.6g}\n", name, figure, peer);
  std::fflush(stdout);
}

}  // namespace
}  // namespace grademl

int main(int argc, char** argv) {
  using namespace grademl;
  int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  {
    model::Run run = MillionPhases();
    double index = LeastCpu(repetitions, [&] { run.Index(); });
    StatusOr<analysis::WhatifChange> change = analysis::ParseWhatifChange("type:iteration*0.5");
    if (!change.ok()) {
      std::fprintf(stderr, "analysis_shapes_bench: %s\n", change.status().message().c_str());
      return 1;
    }
    double saving = 0;
    double whatif = LeastCpu(repetitions, [&] {
      StatusOr<analysis::WhatifResult> r = analysis::SimulateWhatif(run, {*change});
      saving = r.ok() ? r->saving_s() : 0;
    });
    // 10 epochs x 99,999 iterations x 9.5 us saved each.
    if (std::abs(saving - 10 * 99'999 * 9.5e-6) > 1e-6) {
      std::fprintf(stderr, "analysis_shapes_bench: the what-if saved %g s, not 9.49991 s\n", saving);
      return 1;
    }
    Print("whatif_1m_phases", whatif, index);
  }
  {
    model::Run run = DeepChain();
    run.Index();
    // The peer: one plain sweep of the run's samples in time order (gathered and sorted),
    // the least a summary of memory held at once can do.
    double sweep = LeastCpu(repetitions, [&] {
      std::vector<model::Sample> all;
      for (const model::Series& s : run.series) all.insert(all.end(), s.samples.begin(), s.samples.end());
      std::sort(all.begin(), all.end(), [](const model::Sample& a, const model::Sample& b) { return a.t < b.t; });
      double held = 0, peak = 0;
      for (const model::Sample& x : all) peak = std::max(peak, held += x.v);
      if (peak < 0) std::abort();  // keeps the sweep
    });
    size_t processes = 0;
    double summary = LeastCpu(repetitions, [&] { processes = analysis::SummarizeRun(run).phases[0].process_count; });
    if (processes != 2000) {
      std::fprintf(stderr, "analysis_shapes_bench: %zu processes in the chain's summary, not 2000\n", processes);
      return 1;
    }
    Print("summary_deep_chain", summary, sweep);
  }
  return 0;
}
