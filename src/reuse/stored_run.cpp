#include "reuse/stored_run.h"

#include <memory>
#include <utility>

#include "reuse/experiment_graph.h"
#include "store/database.h"

namespace grademl::reuse {
namespace {

StatusOr<StoredRun> LoadStoredRunFrom(const std::string& location, const std::string* spec, model::RunId id) {
  GRADEML_ASSIGN_OR_RETURN(std::unique_ptr<store::Database> db,
                           store::Database::Open(location, store::Database::Mode::kReadOnly));
  if (spec != nullptr) {
    GRADEML_ASSIGN_OR_RETURN(id, db->ResolveRun(*spec));
  }
  StoredRun stored;
  GRADEML_ASSIGN_OR_RETURN(stored.run, db->LoadRun(id));
  stored.graph = RunExperimentGraph(*db, stored.run);
  return stored;
}

}  // namespace

StatusOr<StoredRun> LoadStoredRun(const std::string& location, const std::string& spec) {
  return LoadStoredRunFrom(location, &spec, 0);
}

StatusOr<StoredRun> LoadStoredRun(const std::string& location, model::RunId id) {
  return LoadStoredRunFrom(location, nullptr, id);
}

StoredRun WithExperimentGraph(const std::string& location, model::Run run) {
  StoredRun stored;
  stored.run = std::move(run);
  stored.graph = RunExperimentGraph(location, stored.run);
  return stored;
}

analysis::RunAnalysis AnalyzeStoredRun(const StoredRun& stored) {
  return analysis::AnalyzeRun(stored.run, stored.graph_or_null());
}

analysis::ReuseAnalysis AnalyzeStoredReuse(const StoredRun& stored) {
  return analysis::AnalyzeReuse(stored.run, stored.graph ? *stored.graph : model::ExperimentGraph{});
}

}  // namespace grademl::reuse
