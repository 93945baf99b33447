// Ranked issues: the few things that limit a run most, each with the seconds fixing it would
// save (estimated by the what-if engine, not guessed) and one plain sentence.
//
// RankIssues proposes candidates from the other analyses — a step (or top-level process)
// bound by one resource, one that mostly waits, imbalanced parallel work, slow repeated
// phases (stragglers), time waiting on a DataLoader, a step concurrency limit that held work
// back, a step or process using fewer cores than it may while the host's cores sit idle
// (underused_cores), a workflow step that recomputed what an earlier run had (redundant_step) — asks the what-if engine what a concrete change would save (the bound time 2x
// faster, the wait gone, the siblings balanced, stragglers as fast as the median, more
// steps at once), and keeps those that would save something, the largest first.
// A pure function: it never prints.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/bottlenecks.h"
#include "analysis/communication.h"
#include "analysis/core_use.h"
#include "analysis/critical_path.h"
#include "analysis/gpu_breakdown.h"
#include "analysis/hosts.h"
#include "analysis/imbalance.h"
#include "analysis/reuse.h"
#include "analysis/spark_stages.h"
#include "model/run.h"

namespace grademl::analysis {

// One issue of a run.
struct Issue {
  model::PhaseId phase = 0;  // the phase it is about (for imbalance: the slowest sibling)
  // "cpu", "memory", "disk", "network", "gpu" (bound by that resource), "waiting",
  // "imbalance", "straggler", "data_wait", "concurrency", "underused_cores"; from imported
  // GPU traces: "gpu_host_wait" (the GPU idle waiting for the host's launches),
  // "gpu_exposed_communication" (communication kernels nothing else ran beside); from Spark
  // event logs, a stage's bottleneck: "spark_gc", "spark_shuffle_wait",
  // "spark_scheduler_delay", "spark_deserialize", "spark_spill" (skewed stages come as
  // "imbalance" of their tasks); from the ranks of distributed jobs: "rank_straggler" (the
  // rank the others waited for); from a run across hosts: "host_straggler" (the host whose
  // part ended last, well after the others), "clock_causality" (edges between hosts that go
  // backwards in time beyond the clocks' measured uncertainty; no saving, always listed last);
  // from the experiment graph: "redundant_step" (a workflow step that ran although an earlier
  // run had an execution with the same key).
  std::string kind;
  // What the change would save, by the what-if engine. For levers whose effect depends on how
  // well the work scales (underused_cores, num_workers), an upper bound.
  double impact_s = 0;
  double impact_fraction = 0;  // impact_s / the run's duration
  std::string change;          // the what-if change behind impact_s (`grademl whatif RUN CHANGE`)
  std::string text;            // one plain sentence
};

// Thresholds, named and documented in docs/analysis.md.
struct IssueOptions {
  size_t max_issues = 10;
  // Issues saving less than this many seconds, or this fraction of the run, are dropped.
  double min_impact_s = 0.05;
  double min_impact_fraction = 0.01;
  // A resource's bound time becomes this many times faster in the proposed change.
  double speedup = 2.0;
  // A phase must be bound by a resource (or waiting) at least this fraction of its time
  // for that to be proposed.
  double min_share = 0.2;
  // At most this many phases are considered (the longest first): each costs a replay.
  size_t max_candidates = 24;
  // underused_cores: a phase at least this long, CPU-bound at least min_share of it, using at
  // least this many cores fewer than it may, while at least this many of the host's cores
  // were idle on average.
  double underused_min_s = 1.0;
  double underused_min_spare_cores = 0.5;
  double underused_min_idle_cores = 0.5;
};

// Seconds of a phase's time bound by a resource ("cpu", ..., "gpu", or "waiting" for
// total_waiting_s()), from the bottleneck analysis: the what-if engine's provider.
std::function<double(model::PhaseId, std::string_view)> BoundSecondsOf(const Bottlenecks& bottlenecks);
// The same, plus "communication": the exposed communication seconds of the imported GPU
// traces (GpuRankSummary::exposed_comm_us) of a rank's process phase and its ancestors (the
// largest over the ranks below them), and of the phases in that process (host phases and
// communication kernels), within their time.
std::function<double(model::PhaseId, std::string_view)> BoundSecondsOf(const Bottlenecks& bottlenecks,
                                                                        const model::Run& run,
                                                                        const GpuAnalysis* gpu);

// Ranks the issues of an indexed run, the largest impact first. `core_use` (FindCoreUse),
// when given, saves computing it again; `gpu` (AnalyzeGpu), when given, adds the GPU issues
// of imported traces; `spark` (AnalyzeSpark), the bottlenecks of Spark stages (the stage's
// time bound by the problem halved, replayed by the what-if engine); `communication`
// (AnalyzeCommunication), the stragglers among the ranks of distributed jobs; `hosts`
// (AnalyzeHosts), the straggler host and the causality check of a run across hosts; `reuse`
// (AnalyzeReuse), the workflow steps that recomputed what an earlier run had (redundant_step:
// the what-if saving of `reuse:#ID`, restoring their outputs instead). `schedule` (the run's
// ScheduleGraph::Build) and `baseline` (its ReplaySchedule), when given, are used instead of
// building and replaying them again: each candidate then costs one replay of the change.
std::vector<Issue> RankIssues(const model::Run& run, const Bottlenecks& bottlenecks,
                              const std::vector<Imbalance>& imbalance, const CriticalPathResult& critical_path,
                              const IssueOptions& options = {}, const CoreUse* core_use = nullptr,
                              const GpuAnalysis* gpu = nullptr, const SparkAnalysis* spark = nullptr,
                              const CommunicationAnalysis* communication = nullptr,
                              const HostsAnalysis* hosts = nullptr, const ReuseAnalysis* reuse = nullptr,
                              const ScheduleGraph* schedule = nullptr, const Replay* baseline = nullptr);

// The issues of a run across hosts: host_straggler (impact: how much earlier the run would
// end had the straggler host's part ended by the median of the others' ends, i.e. when the
// next-latest host's did; no what-if change) and clock_causality (impact 0: a warning about
// the data, not a saving); impact_fraction over `run_s`.
std::vector<Issue> HostIssues(const model::Run& run, const HostsAnalysis& hosts, double run_s);

// The GPU issues of imported traces, per rank: the GPU idle waiting on the host
// (gpu_host_wait) and communication running alone (gpu_exposed_communication), each when it
// is at least options.issue_min_pct of the rank's GPU span. impact_s is the time in the
// profiled window (the trace), impact_fraction that time over `run_s`.
std::vector<Issue> GpuIssues(const GpuAnalysis& gpu, double run_s, const GpuAnalysisOptions& options = {});

// The stragglers among the ranks of distributed jobs (rank_straggler): per job whose
// straggler stands out, the others' mean wait for it in collectives (what making it as fast
// as them would save at most); impact_fraction that over `run_s`. No what-if change.
std::vector<Issue> CommunicationIssues(const model::Run& run, const CommunicationAnalysis& communication, double run_s);

// The what-if engine's core-use provider: the phase's entry in `core_use` when it has one,
// else CoreUseOf(run, id).
std::function<PhaseCoreUse(model::PhaseId)> CoreUseOfRun(const model::Run& run, const CoreUse* core_use);

}  // namespace grademl::analysis
