// Core use: for a phase (a workflow step, a process, the run), how many threads it ran,
// how many cores it kept busy (on average and at its peak), how many cores it could have
// used (its processes' CPU affinity and cgroup quota, else the host's cores) and how many of
// the host's cores sat idle meanwhile. The facts behind `underused_cores` issues and the
// what-if engine's `threads=N` / `cores=N` levers. A pure function of the model.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/run.h"

namespace grademl::analysis {

struct PhaseCoreUse {
  model::PhaseId phase = 0;
  double duration_s = 0;
  double cpu_seconds = 0;     // CPU time (user + system) of its processes inside the phase
  double avg_cores = 0;       // cpu_seconds / duration_s
  double peak_cores = 0;      // the most cores busy over one window (CoreUseOptions::window_s)
  int64_t peak_threads = 0;   // the most threads its processes ran at once (sampled)
  int64_t processes = 0;      // processes in the phase's subtree (1 for a phase inside a process)
  // The process that used the most CPU: its share of cpu_seconds and its most threads (a
  // shell wrapping one single-threaded program: 1 thread, ~100%).
  double top_process_share = 0;
  int64_t top_process_threads = 0;
  // Cores it could have used: min(CPU affinity, cgroup quota) of its processes (the largest
  // among them), else the host's cores; 0 when nothing is known.
  double available_cores = 0;
  std::string available_from;  // "affinity", "cgroup quota", "host" (or "" when unknown)
  int64_t host_cores = 0;      // cores of the phase's host (0: no host CPU series)
  double host_idle_cores = 0;  // the host's cores idle (idle + iowait) during the phase, on average
  // From the auto-instrumentation's tags in the subtree (the largest value), when present.
  std::optional<int64_t> torch_threads;
  std::optional<int64_t> num_workers;
};

struct CoreUseOptions {
  // Peak cores are measured over windows this long, at least two sampling intervals, and at
  // most 400 windows per phase.
  double window_s = 1.0;
  // At most this many phases (steps and processes, the longest first) are summarised.
  size_t max_phases = 512;
};

// Core use of the root, the workflow steps and the process phases (the longest first, at
// most options.max_phases), in run order.
struct CoreUse {
  std::vector<PhaseCoreUse> phases;
  const PhaseCoreUse* Find(model::PhaseId id) const;
};
CoreUse FindCoreUse(const model::Run& run, const CoreUseOptions& options = {});

// The core use of any one phase (a phase inside a process is measured on that process over
// the phase's time). The run must be indexed.
PhaseCoreUse CoreUseOf(const model::Run& run, model::PhaseId phase, const CoreUseOptions& options = {});

// How many cores the phase kept busy while it was CPU-bound: its CPU seconds over its
// CPU-bound seconds, at most its peak (and at least its average). 0 when it was never
// CPU-bound.
double CoresUsedWhileCpuBound(const PhaseCoreUse& use, double cpu_bound_s);

}  // namespace grademl::analysis
