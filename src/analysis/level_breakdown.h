// Where the time of a phase went at one level of the stack (`grademl report --level LEVEL`,
// docs/analysis.md, "Levels"): the phases of that level (model/phase_level.h) in the selected
// phases' subtrees, the selected phases included, grouped by name, with their count and their
// self time at that level: a phase's duration less that of the phases of the same level
// nested in it (the nearest ones), so that nothing is counted twice. A pure function of the
// model.
//
// The selection is the phases a selector matches (analysis/phase_selector.h), less those
// nested in another match, or without a selector the run's root(s). Shares are of the
// selected phases' total duration; phases on device tracks may overlap each other, so the
// shares of the kernel level may add up to more than 100%. An open phase ends at the run's end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/phase_selector.h"
#include "core/status.h"
#include "model/phase_level.h"
#include "model/run.h"

namespace grademl::analysis {

struct LevelRow {
  std::string name;    // the phases' name
  int64_t count = 0;   // phases of that name at the level
  double total_s = 0;  // their self time at the level (each clamped at 0)
  double share = 0;    // total_s / LevelBreakdown::duration_s
};

struct LevelBreakdown {
  model::PhaseLevel level = model::PhaseLevel::kFramework;
  std::string selector;                // as written; empty: the whole run
  std::vector<model::PhaseId> phases;  // the selected phases
  double duration_s = 0;               // their total duration
  double covered_s = 0;  // the durations of the outermost phases at the level (the rows' totals add up to it)
  int64_t count = 0;     // phases at the level
  std::vector<LevelRow> rows;  // the largest total first, then by name
};

// The breakdown of the phases `selector` matches (nullptr: the whole run) at `level`.
// NotFound (one line) when the selector matches no phase.
StatusOr<LevelBreakdown> BreakDownByLevel(const model::Run& run, model::PhaseLevel level,
                                          const PhaseSelector* selector = nullptr);

}  // namespace grademl::analysis
