// The machine-readable report of one run (`grademl report --json`), schema
// "grademl.report/1", documented field by field in docs/json-report.md. Rendering only.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/run_analysis.h"
#include "model/run.h"

namespace grademl::report {

inline constexpr const char* kReportSchema = "grademl.report/1";

// The report as a JSON value. Every string in it is valid UTF-8, so dump() cannot throw.
nlohmann::json RenderJsonReport(const model::Run& run, const analysis::RunAnalysis& analysis);

// The "run" object of the report; also used for the entries of `grademl ls --json`.
nlohmann::json RunInfoJson(const model::RunInfo& info);

}  // namespace grademl::report
