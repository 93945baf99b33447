// Shared by the fuzz targets: a scratch directory for the readers that take a path, input
// splitting, and the check that an error is the one line the developers' guide promises.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/status.h"
#include "workflow/workflow_spec.h"

namespace grademl::fuzz {

// A directory under $TMPDIR made once per fuzzing process and removed at its exit.
const std::filesystem::path& ScratchDir();

// Writes `text` to ScratchDir()/name (replacing it) and returns the full path.
std::string WriteScratch(const std::string& name, std::string_view text);
// Removes ScratchDir()/name if it is there.
void RemoveScratch(const std::string& name);

// Splits the input at the first line that is exactly `marker` (a YAML comment such as
// "#--- params.yaml", so that a seed stays a valid file): what comes before the line and
// what comes after it, or the whole input as `first` with found = false.
struct SplitInput {
  std::string_view first;
  std::string_view second;
  bool found = false;
};
SplitInput SplitAtMarker(std::string_view data, std::string_view marker);

// Aborts (a fuzzer finding) unless a failed status carries a non-empty one-line message:
// hostile input must end with a one-line error, never a multi-line or empty one.
void CheckOneLineError(const Status& status);

// What the spec fuzz targets check of a loaded spec: a failure is a one-line error, and a
// spec that loaded orders every step exactly once. Aborts otherwise.
void CheckLoadedSpec(const StatusOr<workflow::WorkflowSpec>& spec);

}  // namespace grademl::fuzz
