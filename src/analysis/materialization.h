// What to keep of the experiment graph's artifacts under a storage budget (docs/reuse.md,
// "What is kept"), after Derakhshan et al., "Optimizing Machine Learning Workloads in
// Collaborative Environments" (SIGMOD'20): an artifact is worth keeping when recomputing it
// would cost much, when many runs used it (or what was derived from it), and when it is close
// to a final artifact (a model, metrics); per byte it takes. The candidates are kept greedily
// by that utility per byte while they fit in the budget. A pure function: it never prints.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/experiment_graph.h"
#include "model/run.h"

namespace grademl::analysis {

// One candidate artifact (an output's content hash) and what keeping it is worth.
struct ArtifactUtility {
  std::string hash;
  int64_t size = 0;            // bytes, as the candidate said
  double recreation_s = 0;     // recomputing it from scratch: its producing step and every step it needs, once each
  int uses = 0;                // distinct runs that output or read it, or an artifact derived from it
  int distance_to_final = 0;   // the fewest steps from it to a final artifact (0: it is one)
  double utility = 0;          // recreation_s * uses / (1 + distance_to_final)
  double utility_per_byte = 0; // utility / max(size, 1)
  bool kept = false;           // kept within the budget; false: evicted
  // Where it came from: the latest (non-failed) execution that output it; 0 / "" when none did.
  model::RunId run = 0;
  std::string step;
  std::string path;
};

// The candidates by utility per byte, descending, each kept or evicted.
struct MaterializationPlan {
  std::vector<ArtifactUtility> artifacts;  // utility per byte descending (ties: utility descending, hash ascending)
  int64_t budget_bytes = 0;
  int64_t kept_bytes = 0;                  // the kept artifacts' sizes, summed (<= budget_bytes)
};

// Plans what to keep of `candidates` ({hash, size}: the artifacts materialised, or about to
// be) within `budget_bytes`: by utility per byte, each one that fits in what remains of the
// budget is kept, one that does not is skipped (a smaller one after it may still fit). A
// candidate the graph does not know has utility 0; a hash listed twice counts once (its first
// size). Failed executions are left out of the graph (docs/reuse.md).
MaterializationPlan PlanMaterialization(const model::ExperimentGraph& graph,
                                        const std::vector<std::pair<std::string, int64_t>>& candidates,
                                        int64_t budget_bytes);

}  // namespace grademl::analysis
