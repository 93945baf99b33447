// The one way a verb loads and analyses a stored run: `report`, `whatif`, `query`, `diff`,
// `export` and the report at the end of `run` all go through here. The run is read from its
// store (read-only), with the part of the store's experiment graph its steps' keys select
// (RunExperimentGraph), and analysed with that graph: so the same run shows the same issues
// (a `redundant_step` among them) and the same redundant steps whichever verb shows them.
#pragma once

#include <optional>
#include <string>

#include "analysis/reuse.h"
#include "analysis/run_analysis.h"
#include "core/status.h"
#include "model/experiment_graph.h"
#include "model/run.h"

namespace grademl::reuse {

// A run loaded from its store, with the executions of the store's experiment graph that its
// reuse analysis needs.
struct StoredRun {
  model::Run run;
  // nullopt: the run has no step keys, or the store cannot list its executions (an older
  // store): nothing is then redundant, reused steps are still reported.
  std::optional<model::ExperimentGraph> graph;
  const model::ExperimentGraph* graph_or_null() const { return graph ? &*graph : nullptr; }
};

// Opens the store at `location` read-only, resolves `spec` (a run id, -N for the N-th latest,
// "latest" or "" for the latest) and loads the run and its graph. Errors are one line naming
// the store or the run.
StatusOr<StoredRun> LoadStoredRun(const std::string& location, const std::string& spec);
StatusOr<StoredRun> LoadStoredRun(const std::string& location, model::RunId id);
// A run loaded by other means (the copy `grademl query` reads): its graph from `location`,
// the run's own store.
StoredRun WithExperimentGraph(const std::string& location, model::Run run);

// Every analysis of the run, with its graph (analysis::AnalyzeRun).
analysis::RunAnalysis AnalyzeStoredRun(const StoredRun& stored);
// Only the reuse analysis, with the same graph: what AnalyzeStoredRun's `reuse` would be.
analysis::ReuseAnalysis AnalyzeStoredReuse(const StoredRun& stored);

}  // namespace grademl::reuse
