// Reuse across runs, per run (docs/reuse.md): which workflow steps were restored from an
// earlier run's outputs instead of running (time saved, time restoring), and which ran
// although an earlier run's execution had the same key, i.e. recomputed what the experiment
// graph already had (redundant). A pure function: it never prints.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/experiment_graph.h"
#include "model/run.h"

namespace grademl::analysis {

// One step execution of the run, as reuse sees it.
struct StepReuse {
  model::PhaseId phase = 0;
  std::string step;
  std::string outcome;       // "ran", "failed", "reused"
  double cost_s = 0;         // its duration when it ran; reused: the cost of the execution restored
  double restore_s = 0;      // reused: the time restoring its outputs took
  std::string reused_from;   // reused: the uuid of the run whose outputs were restored
  // Redundant: it ran, yet an earlier run's execution (ran or reused) had the same key.
  bool redundant = false;
  model::RunId earlier_run = 0;    // the latest such run
  std::string earlier_uuid;
  std::string earlier_step;        // the step's name in that run
  // Every output's hash the same as that execution's output at the same path (none
  // unreadable), and as many outputs.
  bool outputs_identical = false;
  std::vector<std::string> outputs;  // its outputs' paths, as declared
  int64_t output_bytes = 0;          // their sizes, summed
  std::string not_reusable;          // why reuse never skips it ("" when it may)
};

// The run's step executions, and what reuse saved or could have saved.
struct ReuseAnalysis {
  std::vector<StepReuse> steps;  // one per step execution, by phase id
  int reused = 0;
  int redundant = 0;
  double redundant_s = 0;  // the redundant steps' cost
  double restore_s = 0;    // time restoring the reused steps' outputs
  double saved_s = 0;      // the reused steps' cost less their restore time
  // Reading speed for predicted restores: this run's hashing (bytes read / time) when it read
  // at least kMinMeasuredReadBytes, else kAssumedReadBytesPerS (read_speed_measured false).
  double read_bytes_per_s = 0;
  bool read_speed_measured = false;

  bool empty() const { return steps.empty(); }
  const StepReuse* Find(model::PhaseId phase) const;
};

inline constexpr int64_t kMinMeasuredReadBytes = 1 << 20;
inline constexpr double kAssumedReadBytesPerS = 200e6;

// The speed restoring outputs is predicted at: sum hashed_bytes / sum hash_ns over the run's
// step executions when they hashed at least kMinMeasuredReadBytes; else kAssumedReadBytesPerS
// and *measured = false.
double RestoreReadBytesPerSecond(const model::Run& run, bool* measured = nullptr);

// The latest execution of a run before `run` (another run with a smaller id or an earlier
// start) whose key is `key` and outcome "ran" or "reused"; nullptr when none (or key is "").
const model::StoredStepExecution* EarlierExecution(const model::ExperimentGraph& graph, const model::RunInfo& run,
                                                   std::string_view key);

// The run's step executions against the experiment graph (the store's executions; only those
// with a key of this run matter). An empty graph finds nothing redundant. The run must be
// indexed.
ReuseAnalysis AnalyzeReuse(const model::Run& run, const model::ExperimentGraph& graph);

}  // namespace grademl::analysis
