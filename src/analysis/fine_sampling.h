// Fine phases recorded on a sample of the iterations (issue 16; docs/analysis.md, "Fine
// phases on a sample"). Under an overhead budget, the Python auto-instrumentation records the
// fine phases of a training loop (forward, backward, optimizer_step, loss, data_wait) in 1 of
// k iterations of an epoch and counts the others exactly without recording them: their number
// and total duration (perf_counter_ns) go into the epoch phase's tags, with its own measured
// cost. Iteration phases are never sampled. The epoch tags read here:
//
//   fine.every = k, fine.iterations, fine.recorded_iterations
//   unrecorded.T.count, unrecorded.T.ns      for each fine type T
//   overhead.ns (the instrumentation's measured cost in the epoch), overhead.budget ("0.01")
//
// For the run, per fine type: the recorded phases (count, seconds: every phase of that leaf
// type in the run), the unrecorded ones (the tags, summed over the epochs) and their exact
// totals (the sum); the iterations (all, and those whose fine phases were recorded); the
// budget (the largest over the epochs); the measured overhead in seconds and as a share of
// the tagged epochs' total duration. Empty when no epoch carries these tags. A pure function
// of the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/run.h"

namespace grademl::analysis {

// The fine phase types, in the order they are reported.
inline constexpr const char* kFinePhaseTypes[] = {"forward", "backward", "loss", "optimizer_step", "data_wait"};

struct FineTypeCounts {
  std::string type;
  int64_t recorded = 0;    // phases of the type in the run
  double recorded_s = 0;   // their total duration
  int64_t unrecorded = 0;  // unrecorded.T.count over the epochs
  double unrecorded_s = 0;  // unrecorded.T.ns over the epochs
  int64_t total = 0;       // recorded + unrecorded: every phase of the type that ran
  double total_s = 0;
};

struct FineSampling {
  int64_t epochs = 0;          // epochs carrying the tags
  int64_t every_min = 0;       // the smallest and largest fine.every over them (1: all recorded)
  int64_t every_max = 0;
  int64_t iterations = 0;           // fine.iterations over the epochs
  int64_t recorded_iterations = 0;  // fine.recorded_iterations over the epochs
  std::vector<FineTypeCounts> types;  // kFinePhaseTypes, in that order
  bool budget_known = false;
  double budget = 0;            // the largest overhead.budget (a fraction of the workload)
  bool overhead_measured = false;
  double overhead_s = 0;        // overhead.ns over the epochs
  double epochs_s = 0;          // the tagged epochs' total duration
  double overhead_fraction = 0;  // overhead_s / epochs_s

  bool empty() const { return epochs == 0; }
};

FineSampling AnalyzeFineSampling(const model::Run& run);

}  // namespace grademl::analysis
