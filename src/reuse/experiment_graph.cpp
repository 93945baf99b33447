#include "reuse/experiment_graph.h"

#include <algorithm>
#include <set>

#include "store/database.h"

namespace grademl::reuse {

namespace {

bool RunHasStepKeys(const model::Run& run) {
  for (const model::StepExecution& e : run.step_executions) {
    if (!e.key.empty()) return true;
  }
  return false;
}

}  // namespace

std::optional<model::ExperimentGraph> RunExperimentGraph(const std::string& db_location, const model::Run& run) {
  if (!RunHasStepKeys(run)) return std::nullopt;
  auto db = store::Database::Open(db_location, store::Database::Mode::kReadOnly);
  if (!db.ok()) return std::nullopt;
  return RunExperimentGraph(**db, run);
}

std::optional<model::ExperimentGraph> RunExperimentGraph(store::Database& db, const model::Run& run) {
  std::set<std::string> keys;
  for (const model::StepExecution& e : run.step_executions) {
    if (!e.key.empty()) keys.insert(e.key);
  }
  if (keys.empty()) return std::nullopt;
  // One indexed query per key: a store's whole graph may be large.
  model::ExperimentGraph graph;
  for (const std::string& key : keys) {
    auto listed = db.ListStepExecutions(key);
    if (!listed.ok()) return std::nullopt;
    for (model::StoredStepExecution& s : *listed) {
      if (s.execution.key == key) graph.executions.push_back(std::move(s));
    }
  }
  // By run id, then phase id, as the store lists them.
  std::stable_sort(graph.executions.begin(), graph.executions.end(),
                   [](const model::StoredStepExecution& a, const model::StoredStepExecution& b) {
                     return a.run != b.run ? a.run < b.run : a.execution.phase < b.execution.phase;
                   });
  return graph;
}

}  // namespace grademl::reuse
