// What the artifact store keeps (`grademl reuse`): one line per materialised artifact with
// its size, utility and origin, as a table for people and a JSON document
// ("grademl.artifacts/1", docs/reuse.md) for scripts. Rendering only.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/materialization.h"

namespace grademl::report {

inline constexpr const char* kArtifactListSchema = "grademl.artifacts/1";

// Columns HASH (12 digits), SIZE, UTILITY (s), PER MiB, USES, RECREATE, KEPT, FROM (run, step
// and out path, escaped); then the totals, and against the budget when plan.budget_bytes >= 0
// (a listing without a budget applied has -1).
std::string RenderArtifactList(const analysis::MaterializationPlan& plan, const std::string& dir);
nlohmann::json RenderArtifactListJson(const analysis::MaterializationPlan& plan, const std::string& dir);

}  // namespace grademl::report
