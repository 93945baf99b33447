// The part of a store's experiment graph that one run's reuse analysis needs: the executions
// with the keys of the run's steps (docs/reuse.md), read by reuse/stored_run.h for every verb
// that analyses a run.
#pragma once

#include <optional>
#include <string>

#include "model/experiment_graph.h"
#include "model/run.h"

namespace grademl::store {
class Database;
}

namespace grademl::reuse {

// Read with one indexed query per key (a store's whole graph may be large), by run id then
// phase id; nullopt when the run has no step keys, or when the store cannot list them (an
// older store): the run is then analysed without.
std::optional<model::ExperimentGraph> RunExperimentGraph(const std::string& db_location, const model::Run& run);
// The same from a store already open.
std::optional<model::ExperimentGraph> RunExperimentGraph(store::Database& db, const model::Run& run);

}  // namespace grademl::reuse
