// The human-readable report of one run (`grademl report`): a header (what ran, where, how it
// ended, what recording cost), the phase tree with what each phase used, what limited each
// top-level part and the critical path, how busy the hosts were, and the ranked issues.
// Rendering only: all numbers come from analysis::RunAnalysis.
#pragma once

#include <cstddef>
#include <string>

#include "analysis/level_breakdown.h"
#include "analysis/run_analysis.h"
#include "model/run.h"

namespace grademl::report {

// How the terminal report is laid out.
struct TerminalReportOptions {
  bool color = false;          // ANSI colours; the caller turns them off when not on a TTY
  size_t max_phases = 50;      // phase rows at most; the smallest subtrees fold into
                               // "… N more phases" lines (0: no limit)
  size_t max_name_width = 40;  // columns for the tree and the phase names
  // `grademl report --level`: the time at one level of the selected phases, after the tree
  // (nullptr: no such section). Not owned; must outlive the call.
  const analysis::LevelBreakdown* level_breakdown = nullptr;
};

// The report as text, lines ending in '\n'. Times are shown in local time.
std::string RenderTerminalReport(const model::Run& run, const analysis::RunAnalysis& analysis,
                                 const TerminalReportOptions& options = {});

}  // namespace grademl::report
