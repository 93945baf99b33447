// What-if simulation: how long would the run have taken with some phases faster, slower
// or gone, with less time bound by a resource, with balanced parallel work, or with a
// different step concurrency? The run's schedule is replayed (analysis/schedule_graph.h)
// with the changes applied; docs/whatif.md describes the model and the change syntax.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/core_use.h"
#include "analysis/critical_path.h"
#include "analysis/phase_selector.h"
#include "core/status.h"
#include "core/time.h"
#include "model/experiment_graph.h"
#include "model/run.h"

namespace grademl::analysis {

// The resources a phase's time can be bound by, as named in resource changes.
// "communication": the communication kernels of an imported GPU trace that ran with nothing
// beside them (analysis/gpu_breakdown.h); `SEL:communication=0` is communication fully
// overlapped with computation.
inline constexpr std::array<std::string_view, 7> kWhatifResources = {"cpu", "memory", "disk", "network", "gpu",
                                                                      "waiting", "communication"};

// One change of a what-if question, parsed from its text:
//   SEL*F             scale the selected phases (their whole subtree) by F in [0, 1000]; *0 removes
//   -SEL              remove the selected phases (the same as SEL*0)
//   SEL:RES*F         scale the time the selected phases were bound by resource RES by F
//   SEL:RES=0         remove that time
//   balance:SEL       set concurrent same-type siblings among the selected to their mean
//   jobs=N, -j N, -jN run at most N steps at a time
//   SEL:threads=N     the selected phases' CPU-bound time scaled by used / min(N, available)
//                     cores: perfect scaling of the CPU-bound part (an upper bound on the saving)
//   SEL:cores=N       the same with N cores to use whatever the affinity and quota: used / N
//   SEL:num_workers=N data loading in N DataLoader workers: each data wait after the first of
//                     its epoch becomes max(0, load/N - compute of the previous iteration)
//   reuse:SEL         the selected workflow steps take the time restoring their recorded
//                     outputs would take (their bytes at the run's measured read speed,
//                     analysis/reuse.h) instead of their duration
// SEL is a phase selector (analysis/phase_selector.h): GLOB, type:GLOB or #ID.
struct WhatifChange {
  enum class Kind { kScale, kResource, kBalance, kJobs, kThreads, kCores, kNumWorkers, kReuse };
  Kind kind = Kind::kScale;
  std::string text;        // as written
  PhaseSelector selector;  // all but kJobs
  double factor = 1;       // kScale: of the duration; kResource: of the bound time
  std::string resource;    // kResource: one of kWhatifResources
  int jobs = 0;            // kJobs: >= 1
  int count = 0;           // kThreads, kCores, kNumWorkers: N (>= 1)
};

// Parses one change. Errors are one line naming the change and the 1-based position of the
// offending character: "bad change 'x*y': expected a number after '*' (at character 3)".
StatusOr<WhatifChange> ParseWhatifChange(std::string_view text);

// What the simulation needs beyond the run and the changes.
struct WhatifOptions {
  // Seconds of the phase's time (its whole subtree's) during which it was bound by the
  // resource (one of kWhatifResources). Needed by resource changes only; unset, they fail.
  std::function<double(model::PhaseId, std::string_view resource)> bound_seconds;
  // The core use of a phase (analysis/core_use.h: CoreUseOf). Needed by threads=N and
  // cores=N (with bound_seconds); unset, they fail.
  std::function<PhaseCoreUse(model::PhaseId)> core_use;
  // Limits of the critical paths listed in the result.
  CriticalPathOptions critical_path;
  // The store's experiment graph, when loaded: reuse:SEL's note then says whether an earlier
  // run had an execution of each step with the same key (what `grademl run --reuse` needs).
  // Not owned; may be null.
  const model::ExperimentGraph* graph = nullptr;
  // The graph's unchanged replay (ReplaySchedule(graph)), when the caller has it: it is not
  // replayed again. Not owned; may be null. Only with the overload that takes the graph.
  const Replay* baseline = nullptr;
  // Only the durations (measured_s, baseline_s, predicted_s, the jobs) and the notes: no
  // per-phase times, critical paths or slack (what the ranked issues need of each question).
  bool durations_only = false;
};

// One phase's times in the baseline replay and with the changes.
struct WhatifPhaseTime {
  model::PhaseId id = 0;
  TimeNs baseline_start_ns = 0;
  TimeNs baseline_end_ns = 0;
  TimeNs start_ns = 0;  // predicted
  TimeNs end_ns = 0;
};

// The answer to a what-if question.
struct WhatifResult {
  TimeNs start_ns = 0;     // the run's start: time zero of both schedules
  double measured_s = 0;   // the run's duration as recorded
  double baseline_s = 0;   // the replay of the unchanged run (the same, up to launch-order quirks)
  double predicted_s = 0;  // with the changes
  bool workflow = false;   // the top level is a schedule of workflow steps
  int baseline_jobs = 0;   // step concurrency limit (0: unlimited, or no steps)
  int jobs = 0;            // with the changes
  std::vector<WhatifPhaseTime> top_level;  // the root's children (the steps), in recorded start order
  std::vector<WhatifPhaseTime> phases;     // every replayed phase, by id
  CriticalPath baseline_critical_path;
  CriticalPath critical_path;              // with the changes
  std::vector<StepSlack> slack;            // per step, with the changes
  std::vector<std::string> notes;          // one per change, in order: what it did

  double saving_s() const { return baseline_s - predicted_s; }
  const WhatifPhaseTime* FindPhase(model::PhaseId id) const;
};

// Replays the run with the changes. Errors (InvalidArgument): a selector that matches no
// phase; reuse:SEL selecting a phase without a recorded step execution, or whose execution
// recorded no outputs; a resource change without options.bound_seconds (FailedPrecondition); more than 64
// scaling and balancing changes. The run must be indexed.
StatusOr<WhatifResult> SimulateWhatif(const model::Run& run, const std::vector<WhatifChange>& changes,
                                      const WhatifOptions& options = {});
// The same on the run's schedule graph built once (ScheduleGraph::Build(run)), for callers
// that ask many questions of one run (the ranked issues).
StatusOr<WhatifResult> SimulateWhatif(const model::Run& run, const ScheduleGraph& graph,
                                      const std::vector<WhatifChange>& changes, const WhatifOptions& options = {});

}  // namespace grademl::analysis
