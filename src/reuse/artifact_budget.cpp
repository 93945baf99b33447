#include "reuse/artifact_budget.h"

#include "store/database.h"

namespace grademl::reuse {

StatusOr<std::string> ResolveArtifactsDir(const std::string& db_location, const std::string& given) {
  if (!given.empty()) return given;
  std::string dir = ArtifactStore::DefaultDirFor(db_location);
  if (dir.empty()) {
    return InvalidArgument("a PostgreSQL store keeps no artifacts of its own: give --artifacts DIR, a directory "
                           "every host that runs the workflow can reach");
  }
  return dir;
}

namespace {

Status CannotReadGraph(const Status& why) {
  return Status(why.code(), "cannot rank the artifacts without the store's experiment graph, nothing evicted: " +
                                why.message());
}

}  // namespace

StatusOr<BudgetResult> ApplyReuseBudget(const std::string& db_location, ArtifactStore& artifacts,
                                        int64_t budget_bytes, bool dry_run) {
  // The artifacts' utilities come from the store's graph: a store that cannot be read is an
  // error, never an empty graph (every artifact would have utility 0, and the budget would
  // evict what the store's runs need).
  model::ExperimentGraph graph;
  {
    auto db = store::Database::Open(db_location, store::Database::Mode::kReadOnly);
    if (!db.ok()) return CannotReadGraph(db.status());
    auto executions = (*db)->ListStepExecutions("");
    if (!executions.ok()) return CannotReadGraph(executions.status());
    graph.executions = std::move(*executions);
  }
  GRADEML_ASSIGN_OR_RETURN(std::vector<ArtifactStore::Stored> stored, artifacts.List());
  std::vector<std::pair<std::string, int64_t>> candidates;
  candidates.reserve(stored.size());
  for (const auto& s : stored) candidates.emplace_back(s.hash, s.size);
  BudgetResult result;
  result.plan = analysis::PlanMaterialization(graph, candidates, budget_bytes);
  if (dry_run) return result;
  std::vector<std::string> keep;
  for (const auto& a : result.plan.artifacts) {
    if (a.kept) keep.push_back(a.hash);
  }
  bool all_kept = keep.size() == result.plan.artifacts.size();
  if (!all_kept) {
    GRADEML_ASSIGN_OR_RETURN(result.freed_bytes, artifacts.Evict(keep));
  }
  return result;
}

}  // namespace grademl::reuse
