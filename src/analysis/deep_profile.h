// Operators profiled on a sample of the iterations, their profiling cost removed (issue 16,
// XSP's leveled experimentation; docs/analysis.md, "Operators on a sample"). Under
// `grademl run --deep` the Python auto-instrumentation records operator phases (type "op")
// only inside a few iterations, tagged deep=ops, and inside the data_wait phase before each
// (tagged deep=ops too). Recording operators slows those iterations down; the iterations
// without operators measure what they cost without that. Per mode (the iteration's `mode`
// tag, or its epoch's: train, eval) and per process:
//
//  - baseline: the median duration of the unprofiled iterations (the first 3 of them left out
//    as warm-up when there are more than 10);
//  - the profiling cost of profiled iteration i: D_i = max(0, duration_i - baseline); per
//    operator call e_i = D_i / ops_i (all op phases under it), a constant per call;
//  - of that, what lies inside an operator's own bracket: at most the cost of the cheapest
//    operator kind, its mean self time per call over the profiled phases (a view or a detach
//    does next to nothing of its own: what it measures is mostly the profiler): r_i =
//    min(e_i, that). The rest, e_i - r_i per call, falls between operators;
//  - per operator name o: its self time in iteration i, t_oi (each op phase's duration less
//    that of the op phases nested directly in it), and its calls n_oi; corrected
//    c_oi = max(0, t_oi - n_oi * r_i);
//  - per operator: the mean of c_oi over the profiled iterations (0 where it did not run),
//    its 95% interval (mean +- t(0.975, n-1) * sd / sqrt(n), Student's t, none for n = 1),
//    calls per iteration, its share of the baseline, and totals over all the iterations of
//    the mode in the process (mean x N, interval x N);
//  - the data_wait phases tagged deep=ops the same way against the median of the others: their
//    operators (data loading) are listed apart, with data_wait set, N the same iterations;
//  - what the operators do not cover: per profiled iteration, duration - D_i - sum_o c_oi.
// Empty when no iteration or data_wait is tagged deep=ops. A pure function of the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/run.h"

namespace grademl::analysis {

// The method in one sentence, for the JSON report ("method").
extern const char* const kDeepProfileMethod;

struct DeepOperator {
  std::string name;
  bool data_wait = false;           // ran inside the profiled data_wait phases (data loading)
  double calls_per_iteration = 0;   // mean n_oi
  double raw_mean_s = 0;            // mean t_oi, before the cost was removed
  double mean_s = 0;                // mean c_oi: corrected self time per iteration
  double sd_s = 0;                  // the sample standard deviation of c_oi (0 for n = 1)
  std::optional<double> half_interval_s;  // the 95% interval's half width; none for n = 1
  double share = 0;                 // mean_s / the baseline (the data_wait baseline for data_wait)
  double total_s = 0;               // mean_s x the iterations of the mode in the process
  std::optional<double> total_half_interval_s;
};

// One mode in one process.
struct DeepProfileGroup {
  std::string mode;               // "train", "eval"; empty when untagged
  model::PhaseId process = 0;     // the process phase (0: none; then host and pid)
  std::string host;
  int32_t pid = 0;
  std::string process_name;
  int64_t iterations = 0;         // all iterations of the mode in the process (N)
  int64_t profiled = 0;           // those tagged deep=ops (n)
  std::vector<int64_t> profiled_indices;  // their positions among the iterations, in time order, from 0
  std::vector<model::PhaseId> profiled_phases;
  bool baseline_known = false;    // false: no unprofiled iteration, no cost removed
  double baseline_s = 0;          // the median unprofiled iteration
  int64_t baseline_iterations = 0;  // how many it was taken over
  double mean_cost_s = 0;         // mean D_i
  double cost_fraction = 0;       // mean_cost_s / baseline_s
  double ops_per_iteration = 0;   // mean op phases per profiled iteration
  double cost_per_op_s = 0;       // sum D_i / sum ops_i
  double cost_inside_op_s = 0;    // the most of it taken to lie inside an operator's bracket
  double unattributed_s = 0;      // mean (duration_i - D_i - sum_o c_oi): not in any operator
  double unattributed_fraction = 0;  // unattributed_s / baseline_s
  // The profiled data_wait phases (before the profiled iterations).
  int64_t data_waits_profiled = 0;
  bool data_wait_baseline_known = false;
  double data_wait_baseline_s = 0;
  double data_wait_mean_cost_s = 0;
  double removed_s = 0;           // sum D_i over the iterations and the data_wait phases
  std::vector<DeepOperator> operators;  // the largest total first (data_wait's among them)
};

struct DeepProfile {
  std::vector<DeepProfileGroup> groups;  // by process, then mode
  double removed_s = 0;                  // over the groups

  bool empty() const { return groups.empty(); }
};

DeepProfile AnalyzeDeepProfile(const model::Run& run);

// t(0.975, df), Student's t for a two-sided 95% interval; the table's value at the largest
// tabulated df <= df (1..30, 40, 60, 120; 1.96 beyond), so never narrower than exact.
double StudentT975(int64_t df);

}  // namespace grademl::analysis
