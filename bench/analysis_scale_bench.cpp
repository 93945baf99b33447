// Scale benchmark of the analyses: synthesises a run with about 1,000,000 phases and
// 10,000,000 samples and times each analysis of it on its own.
//
// The run: a workflow of 8 steps one after the other, each running 25 Python-like
// processes at once (200 processes). Each process has 10 epochs of iterations, each
// iteration a forward and a backward phase (5021 phases per process), and 6 series sampled
// every 100 ms (CPU user and system, RSS, storage bytes read and written, threads). The host has 16
// cores, memory, a disk, two interfaces and a GPU, also at 100 ms.
//
// A plain main, not Google Benchmark: each analysis runs for seconds on one input that takes
// longer to build than to analyse, so it is timed once per repetition with a steady clock.
//
//   build-store/bench/analysis_scale_bench [REPETITIONS]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "analysis/attribution.h"
#include "analysis/bottlenecks.h"
#include "analysis/critical_path.h"
#include "analysis/imbalance.h"
#include "analysis/issues.h"
#include "analysis/whatif.h"
#include "analysis/run_summary.h"
#include "model/metric_names.h"
#include "model/run.h"
#include "process_clock.h"
#include "synthetic_run.h"

namespace grademl {
namespace {

using bench::CpuSeconds;
using bench::PeakRssMiB;

using bench::RunSynth;
using bench::kProcessesPerStep;
using bench::kSteps;

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace
}  // namespace grademl

int main(int argc, char** argv) {
  using namespace grademl;
  using Clock = std::chrono::steady_clock;
  int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;

  auto t0 = Clock::now();
  model::Run run = RunSynth().Build();
  double build_s = Seconds(Clock::now() - t0);
  size_t samples = 0;
  for (const auto& s : run.series) samples += s.samples.size();
  std::printf(
      "synthetic run: %zu phases, %zu processes, %zu series, %zu samples, %.0f s long (built in %.1f s, "
      "peak RSS %.0f MiB)\n",
      run.phases.size(), static_cast<size_t>(kSteps * kProcessesPerStep), run.series.size(), samples,
      NsToSeconds(run.info.end_ns - run.info.start_ns), build_s, PeakRssMiB());

  for (int rep = 0; rep < repetitions; ++rep) {
    double total = 0, total_cpu = 0;
    // Times one analysis: wall-clock seconds and CPU seconds.
    auto timed = [&](auto&& analysis, double& wall, double& cpu) {
      auto a = Clock::now();
      double c = CpuSeconds();
      auto result = analysis();
      cpu = CpuSeconds() - c;
      wall = Seconds(Clock::now() - a);
      total += wall;
      total_cpu += cpu;
      return result;
    };
    double summary_s = 0, summary_cpu = 0, attribution_s = 0, attribution_cpu = 0;
    analysis::RunSummary summary = timed([&] { return analysis::SummarizeRun(run); }, summary_s, summary_cpu);
    analysis::Attribution attribution =
        timed([&] { return analysis::AttributeResources(run); }, attribution_s, attribution_cpu);

    // The other analyses, and the ranked issues (which replay the run once per candidate).
    double bottlenecks_s = 0, bottlenecks_cpu = 0, imbalance_s = 0, imbalance_cpu = 0, path_s = 0, path_cpu = 0,
           whatif_s = 0, whatif_cpu = 0, issues_s = 0, issues_cpu = 0;
    analysis::Bottlenecks bottlenecks =
        timed([&] { return analysis::FindBottlenecks(run); }, bottlenecks_s, bottlenecks_cpu);
    auto imbalance = timed([&] { return analysis::FindImbalance(run); }, imbalance_s, imbalance_cpu);
    // The what-if command's cost (its own graph), before the shared graph is held.
    auto whatif = timed(
        [&] {
          auto change = analysis::ParseWhatifChange("type:forward*0.5");
          return analysis::SimulateWhatif(run, {*change});
        },
        whatif_s, whatif_cpu);
    // As AnalyzeRun does: one schedule graph and one replay of it, shared by the critical path
    // and the ranked issues ("FindCriticalPath" below includes building them).
    std::optional<analysis::ScheduleGraph> schedule;
    std::optional<analysis::Replay> baseline;
    auto path = timed(
        [&] {
          schedule.emplace(analysis::ScheduleGraph::Build(run));
          baseline.emplace(schedule->empty() ? analysis::Replay{} : analysis::ReplaySchedule(*schedule));
          return analysis::FindCriticalPath(*schedule, *baseline);
        },
        path_s, path_cpu);
    auto issues = timed(
        [&] {
          return analysis::RankIssues(run, bottlenecks, imbalance, path, {}, nullptr, nullptr, nullptr, nullptr, nullptr,
                                      nullptr, &*schedule, &*baseline);
        },
        issues_s, issues_cpu);
    std::printf(
        "rep %d: FindBottlenecks %.3f s (CPU %.3f s) | FindImbalance %.3f s (CPU %.3f s) | FindCriticalPath %.3f s "
        "(CPU %.3f s) | one what-if (type:forward*0.5 -> %.0f s of %.0f s) %.3f s (CPU %.3f s) | RankIssues "
        "(%zu issues) %.3f s (CPU %.3f s)\n",
        rep + 1, bottlenecks_s, bottlenecks_cpu, imbalance_s, imbalance_cpu, path_s, path_cpu,
        whatif.ok() ? whatif->predicted_s : -1.0, whatif.ok() ? whatif->baseline_s : -1.0, whatif_s, whatif_cpu,
        issues.size(), issues_s, issues_cpu);

    if (rep == 0) {
      // The fitted CPU rules, as a check that the fit finds the demands the run was built with
      // (forward ~1 core, backward ~1.6, the rest of an iteration ~0.22, a process alone 0.3).
      for (const analysis::RuleFit& fit : attribution.fits) {
        if (fit.metric != analysis::attributed::kCpu) continue;
        std::printf("cpu fit: %zu rows, R^2 %.4f, RMS residual %.4f cores\n", fit.rows, fit.r_squared,
                    fit.residual_rms);
        for (const analysis::TypeRule& t : fit.types) {
          std::printf("  %-45s beta %.4f  %-16s %s\n", t.type.c_str(), t.beta,
                      analysis::FormatDemandRule(t.rule).c_str(),
                      std::string(analysis::RuleSourceName(t.source)).c_str());
        }
      }
    }
    const analysis::MetricAttribution* cpu = attribution.Find(analysis::attributed::kCpu);
    std::printf(
        "rep %d: SummarizeRun %.3f s (CPU %.3f s) | AttributeResources %.3f s (CPU %.3f s) | "
        "all analyses %.3f s (CPU %.3f s) | root CPU %.1f core-s (summary %.1f), %zu metrics, %zu fits | "
        "peak RSS %.0f MiB\n",
        rep + 1, summary_s, summary_cpu, attribution_s, attribution_cpu, total, total_cpu,
        cpu != nullptr ? cpu->usage[0] : 0.0, summary.phases[0].cpu_seconds, attribution.metrics.size(),
        attribution.fits.size(), PeakRssMiB());
  }
  return 0;
}
