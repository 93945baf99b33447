// Workflow specs: the steps of a multi-step pipeline read from a YAML file, whatever format
// it was written in (GradeML's own `steps:` format or DVC's dvc.yaml), with their paths
// resolved and the dependencies between steps inferred and checked.
//
// Every error is a Status whose message is one line "FILE:LINE: reason" (LINE of the
// offending YAML node, 1-based), or "FILE: reason" where no line applies. See
// docs/workflows.md for both formats.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace grademl::workflow {

// One step of a workflow, whatever file it came from.
struct StepSpec {
  std::string name;                 // unique in the workflow ("train@cnn" for DVC foreach instances)
  std::string cmd;                  // a shell command line, run with /bin/sh -c in `cwd` (a list of commands is joined with " && ")
  std::vector<std::string> deps;    // input files/dirs, as written (relative to `cwd` unless absolute)
  std::vector<std::string> outs;    // output files/dirs, as written (DVC metrics and plots included)
  std::vector<std::string> after;   // steps this one must follow explicitly (our format: deps that name a step, `after:`)
  std::vector<std::pair<std::string, std::string>> env;  // extra environment (workflow-level env first, step env overrides)
  std::vector<std::string> params;  // parameters ("params.yaml:train.lr", or a whole file "config.yaml"), relative to `cwd`:
                                    // their values are inputs of the step's identity (docs/reuse.md)
  std::string not_reusable;         // why `--reuse` never skips it, from the spec ("reuse: false", DVC's
                                    // "always_changed: true", "persist: true on out 'x'"); "" when it may
  std::string cwd;                  // absolute, lexically normalised directory the step runs in
  int line = 0;                     // 1-based line of the step's definition in the file
};

// An edge of the step graph: `to` needs `from`. `via` says why: "file:PATH" (an out of
// `from` is, contains or lies inside a dep of `to`; PATH as written in the dep) or "after"
// (explicit).
struct StepDependency {
  size_t from = 0;
  size_t to = 0;
  std::string via;

  bool operator==(const StepDependency&) const = default;
};

// A whole workflow: its steps in file order and the edges between them.
struct WorkflowSpec {
  std::string path;                          // the spec file as given
  std::string format;                        // "grademl" or "dvc"
  std::string name;                          // our `name:` field (default: the file's stem); for DVC the directory's name
  std::vector<StepSpec> steps;               // file order (foreach/matrix instances in item order)
  std::vector<StepDependency> dependencies;  // de-duplicated per (from, to, via); grouped by `to` in step order

  // Indexes of steps in a valid execution order (dependencies first, ties in file order).
  // Steps caught in a cycle (which LoadWorkflowSpec rejects) come last, in file order.
  std::vector<size_t> TopologicalOrder() const;
  // Index of the step called `name`, or steps.size() when there is none.
  size_t FindStep(const std::string& name) const;
};

// True when `arg` ends in .yaml or .yml, whether or not such a file exists: `grademl run X`
// then reads X as a workflow, so that a missing file or a directory is a one-line error
// (LoadWorkflowSpec's) rather than a command that fails to start.
bool LooksLikeWorkflowFile(const std::string& arg);

// Reads the file, detects the format (file name dvc.yaml/dvc.yml or a top-level `stages:`
// -> DVC; a top-level `steps:` -> ours; else an error), parses it, resolves paths, infers
// the dependencies and checks them (unknown step names, outputs declared twice, cycles).
// A file that is not a regular file, or larger than 2 MiB, or whose YAML passes the limits
// of docs/workflows.md (alias cycles and bombs, nesting, NUL bytes, generated steps) is an
// error too; loading ends quickly in bounded memory whatever the file holds.
StatusOr<WorkflowSpec> LoadWorkflowSpec(const std::string& path);

// As LoadWorkflowSpec, from the file's text (for fuzzing and tests): `path` names the file
// in errors, decides the format by its name and is where relative paths, params.yaml and
// vars files are looked for.
StatusOr<WorkflowSpec> ParseWorkflowSpec(std::string_view text, const std::string& path);

}  // namespace grademl::workflow
