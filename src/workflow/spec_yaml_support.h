// Private to the workflow spec readers (workflow_spec.cpp, grademl_yaml.cpp, dvc_yaml.cpp):
// the hand-off from a format reader to the common checks, YAML node helpers, and error
// messages in the "FILE:LINE: reason" form.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "core/status.h"
#include "workflow/workflow_spec.h"

namespace grademl::workflow::spec_internal {

// Where the parts of one step were written, so that the common checks can point at the
// offending entry. Each vector is parallel to the StepSpec field of the same name.
struct StepSource {
  std::vector<int> dep_lines;
  std::vector<int> out_lines;
  std::vector<int> after_lines;
};

// What a format reader hands to the common checks: the steps, paths resolved, and where
// each part of them was written. `spec.dependencies` is left empty.
struct ParsedSpec {
  WorkflowSpec spec;
  std::vector<StepSource> sources;  // parallel to spec.steps
};

// The 1-based line of a node, or 0 when yaml-cpp does not know it.
int LineOf(const YAML::Node& node);
// The line of a mapping value, or of its key when the value is null (yaml-cpp marks an
// empty value at the start of the following line).
int ValueLine(const YAML::Node& key, const YAML::Node& value);

// One key/value pair of a mapping as MapEntries lists it.
struct MapEntry {
  YAML::Node key;
  YAML::Node value;
  bool merged = false;  // it came from a `<<` merge key
};
// The entries of a mapping in file order, with YAML merge keys (`<<: *anchor` or
// `<<: [*a, *b]`) expanded, as DVC's YAML reader does and yaml-cpp 0.7 does not: merged
// entries follow the explicit ones and never replace them; the first merged source wins.
// Duplicate explicit keys are all listed (yaml-cpp keeps them), for the callers to report.
std::vector<MapEntry> MapEntries(const YAML::Node& map);

// An InvalidArgument "FILE:LINE: reason" ("FILE: reason" when line is 0), with control
// characters of the file name and of the reason (which quotes names and values from the
// file) escaped by EscapeControl.
Status SpecError(const std::string& file, int line, const std::string& reason);

// "a mapping", "a list", "a string" or "empty", for messages about wrong types.
const char* KindName(const YAML::Node& node);

// The absolute, lexically normalised directory holding `file`.
std::string DirectoryOf(const std::string& file);
// `path` made absolute against `base_dir` (unless it is already) and lexically normalised,
// without a trailing separator.
std::string ResolvePath(const std::string& base_dir, const std::string& path);

// Reads and parses a YAML file within the limits of yaml_bounds.h: "FILE: cannot read:
// REASON" (kNotFound, kIoError; also for a file that is not regular or too large) or
// "FILE:LINE: reason" (kInvalidArgument: YAML syntax, alias cycles and bombs, NUL bytes,
// nesting). An empty file is a null node. After it, walks of the nodes may recurse.
StatusOr<YAML::Node> ReadYamlFile(const std::string& path);

// The checks and inference common to every format, run on a reader's result: unique names,
// known `after` names, no output declared by two steps, the dependencies (filled into
// `parsed.spec.dependencies`), no cycle. Walks the step graph without recursion.
Status LinkSteps(ParsedSpec& parsed);

// The format readers. `root` is the file's top-level mapping; `path` the file as given.
StatusOr<ParsedSpec> ParseGrademlSpec(const std::string& path, const YAML::Node& root);
StatusOr<ParsedSpec> ParseDvcSpec(const std::string& path, const YAML::Node& root);

}  // namespace grademl::workflow::spec_internal
