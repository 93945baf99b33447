// The artifact store's budget, applied (`grademl run --reuse` after a run, `grademl reuse
// --budget`): the experiment graph is loaded from the store, the materialised artifacts are
// planned by analysis::PlanMaterialization, and those not kept are evicted.
#pragma once

#include <cstdint>
#include <string>

#include "analysis/materialization.h"
#include "core/status.h"
#include "reuse/artifact_store.h"

namespace grademl::reuse {

// The default of --reuse-budget.
inline constexpr const char* kDefaultReuseBudget = "10G";

// The artifact directory for `db_location` and an --artifacts value ("" for the default).
// A PostgreSQL store has no default: an error says to give one.
StatusOr<std::string> ResolveArtifactsDir(const std::string& db_location, const std::string& given);

struct BudgetResult {
  analysis::MaterializationPlan plan;
  int64_t freed_bytes = 0;
};
// Plans what to keep of what `artifacts` holds within `budget_bytes`, and (unless `dry_run`)
// evicts the rest. A store that cannot be opened (missing, corrupt, unreadable, not a store)
// or whose step executions cannot be listed is an error naming it, and nothing is evicted.
StatusOr<BudgetResult> ApplyReuseBudget(const std::string& db_location, ArtifactStore& artifacts,
                                        int64_t budget_bytes, bool dry_run);

}  // namespace grademl::reuse
