// WorkflowRunner: runs a workflow's steps as one recorded run. Steps start in dependency
// order, up to `jobs` at a time; each step is a phase under the run (its process tree under
// it, phases recognised in its output under that), and the spec's dependencies become
// dataflow edges. A failing step stops the steps that need it; the others finish.
// Each step's output is streamed to the terminal with a "step |" prefix, kept in the store
// (bounded per step) and fed to the log rules (matched on a thread of their own,
// log_matcher.h); a live progress line shows done / running /
// pending steps when stderr is a terminal. Step names are printed escaped (EscapeControl).
// Each step runs in a process group of its own, in the terminal's background; a signal to
// grademl starts no new step and reaches every step's whole tree, and the run ends once
// every process of it is gone (docs/workflows.md).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "model/run.h"
#include "record/recording.h"
#include "reuse/step_reuse.h"
#include "workflow/workflow_spec.h"

namespace grademl::workflow {

struct WorkflowRunOptions {
  record::RecordingOptions recording;
  int jobs = 0;             // steps at once; 0: the number of cores
  std::string rules_file;   // extra log rules (docs/log-rules.md), tried before the built-ins
  bool progress = true;     // a live progress line when stderr is a terminal
  // Each step's identity, inputs and outputs hashed for the experiment graph (docs/reuse.md);
  // off (--no-hash), nothing is hashed and nothing reused.
  bool hash = true;
  reuse::ReuseOptions reuse;       // reuse.reuse: --reuse; reuse.db_path is set from `recording`
};

struct WorkflowRunResult {
  model::RunId run_id = 0;
  int exit_code = 0;                 // 0 when every step succeeded
  std::vector<std::string> failed;   // steps that failed (or could not start)
  std::vector<std::string> skipped;  // steps not run because a step they need failed, or grademl was stopped
  std::vector<std::string> reused;   // steps whose outputs were restored instead of running them
  std::string recording_error;       // why part of the run is not in the store (the store failed)
  uint64_t stop_requests_at_end = 0; // StopRequests() when the steps had ended (Recording::stop_requests_at_end)
};

// Lines of one step's output kept in the store: the first kMaxStoredLines, then only a
// tail of the last kKeptTailLines, written when the step ends.
inline constexpr size_t kMaxStoredLines = 5000;
inline constexpr size_t kKeptTailLines = 200;
inline constexpr size_t kMaxLineBytes = 4096;

StatusOr<WorkflowRunResult> RunWorkflow(const WorkflowSpec& spec, const WorkflowRunOptions& options);

}  // namespace grademl::workflow
