// Imbalance: where sibling phases that should take about as long as each other did not.
//
// Siblings are grouped by their parent, their type and what they do (for processes their
// program; for other phases their name without digits and their non-numeric tags, so that
// shard_1..shard_4 or epoch 1..epoch 9 are compared but train_cnn and train_baseline are
// not), then split by time:
//  - concurrent: siblings that overlap in time (parallel workers, DataLoader workers,
//    parallel steps). The parent waits for the slowest: actual = the longest, balanced =
//    the mean, cost = actual - balanced, the straggler = the longest.
//  - sequential: repeated siblings one after the other (epochs, iterations). Those much
//    slower than the median are stragglers; cost = what they took beyond the median.
// Engine tasks carry a tag kImbalanceGroupTag (Dask: the task prefix; Spark: the stage
// attempt): phases of one type and group value are compared with each other wherever they
// sit in the tree (Dask tasks run under different worker processes), and not with their
// other siblings; the group's parent is their nearest common ancestor.
// FindImbalance is a pure function of the model; docs/bottlenecks.md describes it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "model/run.h"

namespace grademl::analysis {

enum class ImbalanceKind {
  kConcurrent,  // siblings running at the same time: the parent waits for the slowest
  kSequential,  // repeated siblings one after the other: some much slower than the median
};
// "concurrent", "sequential".
std::string_view ImbalanceKindName(ImbalanceKind kind);

inline constexpr size_t kMaxListedStragglers = 60;

// The tag that puts phases into one comparison group across parents (see above).
inline constexpr char kImbalanceGroupTag[] = "group";

// One imbalanced group of sibling phases.
struct Imbalance {
  ImbalanceKind kind = ImbalanceKind::kConcurrent;
  model::PhaseId parent = 0;  // the siblings' parent
  std::string type;           // the siblings' type path
  std::string program;        // for processes: the program they run (first word of the name)
  int64_t count = 0;          // phases in the group
  TimeNs start_ns = 0;        // from the first start to the last end of the group
  TimeNs end_ns = 0;
  // concurrent: the longest phase and the mean; sequential: the sum of the durations, and
  // the sum were every straggler as fast as the median.
  double actual_s = 0;
  double balanced_s = 0;
  double cost_s = 0;          // actual_s - balanced_s: the time imbalance cost
  model::PhaseId straggler = 0;  // the slowest phase
  double straggler_s = 0;        // its duration
  int64_t straggler_count = 0;   // concurrent: 1; sequential: the phases slower than the threshold
  // sequential: the stragglers (at most kMaxListedStragglers, the first ones in time).
  std::vector<model::PhaseId> stragglers;
  double mean_s = 0;
  double median_s = 0;
};

// Thresholds, named and documented in docs/bottlenecks.md.
struct ImbalanceOptions {
  // A group is reported only when its cost is at least this many seconds ...
  double min_cost_s = 0.1;
  // ... and at least this fraction of the run's duration.
  double min_cost_fraction = 0.01;
  // Siblings overlapping by more than this are concurrent (touching ends are not).
  double overlap_tolerance_s = 0.001;
  // Sequential groups need at least this many phases to have a meaningful median.
  int min_sequential_count = 3;
  // A sequential phase longer than this many times the median is a straggler.
  double straggler_factor = 1.5;
  // A sequential group is reported only when at most this fraction of it are stragglers:
  // when many phases are slow, the durations are simply spread (two kinds of batches).
  double max_straggler_fraction = 0.25;
};

// The imbalanced groups of a run, the costliest first. The run must be indexed.
std::vector<Imbalance> FindImbalance(const model::Run& run, const ImbalanceOptions& options = {});

}  // namespace grademl::analysis
