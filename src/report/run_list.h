// The list of recorded runs (`grademl ls`): an aligned table for people and a versioned
// JSON document ("grademl.runs/1", see docs/json-report.md) for scripts. Rendering only.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/run.h"

namespace grademl::report {

inline constexpr const char* kRunListSchema = "grademl.runs/1";

// How the run table is laid out.
struct RunListOptions {
  bool color = false;             // ANSI colours for the status column
  size_t max_command_width = 80;  // longer command lines end in "…" (0: no limit)
};

// Columns ID, STARTED (local time), DURATION, STATUS (ok / exit N / signal NAME / incomplete /
// failed to start), OWNER (who recorded it; "-" when unknown), COMMAND; one run a line, in the order given. "No runs recorded.\n" for none.
std::string RenderRunList(const std::vector<model::RunInfo>& runs, const RunListOptions& options = {});

// {"schema": "grademl.runs/1", "runs": [...]}, one object per run in the order given.
nlohmann::json RenderRunListJson(const std::vector<model::RunInfo>& runs);

}  // namespace grademl::report
