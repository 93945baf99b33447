// The encoding of the store's JSON-text columns: runs.command, a JSON array of strings;
// phases.tags, a JSON object of string values in the model's order; step_executions.inputs
// and .outputs, a JSON array of objects {"path","hash","size","directory"}.
//
// Strings are arbitrary bytes (argv need not be UTF-8), so they round-trip exactly: the
// encoder escapes only '"', '\\' and control characters and copies every other byte, and
// the decoder accepts any standard JSON for these shapes (whitespace, \uXXXX escapes with
// surrogate pairs, "\/") plus raw non-UTF-8 bytes. Decoding never throws; bad text is a
// kCorrupt Status ("bad JSON at byte N: ...").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/run.h"

namespace grademl::store {

std::string EncodeStringArray(const std::vector<std::string>& items);
StatusOr<std::vector<std::string>> DecodeStringArray(std::string_view json);

// Duplicate keys are kept as they are, in order, both ways.
std::string EncodeTags(const model::Tags& tags);
// The same into `out` (replacing its text, keeping its buffer): for writers encoding many rows.
void EncodeTagsInto(std::string& out, const model::Tags& tags);
StatusOr<model::Tags> DecodeTags(std::string_view json);

// A step execution's artifacts, in order: [{"path":"data/x","hash":"ab12...","size":42,
// "directory":false},...]. The decoder takes the four keys in any order (a missing one is
// the field's default) and refuses any other key, a size that is not an integer in int64's
// range, and a directory that is not true or false.
std::string EncodeArtifacts(const std::vector<model::StepArtifact>& artifacts);
StatusOr<std::vector<model::StepArtifact>> DecodeArtifacts(std::string_view json);

}  // namespace grademl::store
