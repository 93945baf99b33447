// The report of `grademl diff RUN_A RUN_B`: what got slower or faster from run A to run B,
// by how much and which resource changed, as plain text or as JSON (schema
// "grademl.diff/1", documented in docs/diff.md). Rendering only: every number comes from
// analysis::RunDiff.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/run_diff.h"
#include "model/run.h"

namespace grademl::report {

inline constexpr const char* kDiffSchema = "grademl.diff/1";

struct DiffReportOptions {
  size_t top = 10;             // significant changes listed in the text at most (0: all)
  size_t width = 100;          // columns the sentences are wrapped to
  size_t max_name_width = 40;  // columns for a key in the steps table
};

// The diff as text, lines ending in '\n'. Times are shown in local time.
std::string RenderDiffText(const model::Run& a, const model::Run& b, const analysis::RunDiff& diff,
                           const DiffReportOptions& options = {});

// The diff as a JSON value; every key, significant or not. Every string in it is valid
// UTF-8, so dump() cannot throw.
nlohmann::json RenderDiffJson(const model::Run& a, const model::Run& b, const analysis::RunDiff& diff);

// One plain sentence for one key's change, e.g. "train/epoch got 4.20 s slower (+38%):
// mostly more time waiting on the disk (+3.90 s)." Names are sanitized.
std::string DiffSentence(const analysis::PhaseDiff& d, const analysis::RunDiff& diff);

}  // namespace grademl::report
