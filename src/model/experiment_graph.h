// The experiment graph of a store (docs/reuse.md): every recorded execution of a workflow step
// across the store's runs — users, checkouts and hosts that share it — with the content hashes
// of what each read and wrote. Artifacts (by hash) are its vertices, step executions its edges.
// Loaded by store::Database::ListStepExecutions; read by the reuse analyses and the runner.
#pragma once

#include <string>
#include <vector>

#include "core/time.h"
#include "model/run.h"

namespace grademl::model {

// One step execution of a stored run.
struct StoredStepExecution {
  RunId run = 0;
  std::string run_uuid;
  TimeNs run_start_ns = 0;
  StepExecution execution;
  bool operator==(const StoredStepExecution&) const = default;
};

struct ExperimentGraph {
  std::vector<StoredStepExecution> executions;  // by run id, then phase id
};

}  // namespace grademl::model
