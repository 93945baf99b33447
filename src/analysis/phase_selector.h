// Phase selectors: how the what-if changes (and other analyses) name the phases they apply
// to. Three forms:
//
//   GLOB        the phase's name, as a shell glob ("train_cnn", "train@*", "epoch ?")
//   type:GLOB   the phase's type path ("run/step/epoch") or its last element ("epoch")
//   #ID         one phase by id ("#42")
//
// Globs support `*` (any run of characters, '/' included), `?` (one character), `[abc]`,
// `[a-z]`, `[!a-z]` (or `[^a-z]`) and `\` to take the next character literally. A glob
// matches the whole string.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "model/run.h"

namespace grademl::analysis {

// Whether `glob` matches the whole of `text` (syntax above). A malformed glob (an unclosed
// '[') matches its '[' literally; ParsePhaseSelector rejects such globs first.
bool GlobMatch(std::string_view glob, std::string_view text);

// A parsed selector: which phases a change or query names.
struct PhaseSelector {
  enum class Kind { kName, kType, kId };
  Kind kind = Kind::kName;
  std::string glob;       // kName, kType
  model::PhaseId id = 0;  // kId
  std::string text;       // as written

  bool Matches(const model::Phase& phase) const;
};

// Parses "GLOB", "type:GLOB" or "#ID". InvalidArgument (one line) names the 1-based
// character position of the problem within `text`, shifted by `offset` (the selector's
// position inside a longer change text).
StatusOr<PhaseSelector> ParsePhaseSelector(std::string_view text, size_t offset = 0);

}  // namespace grademl::analysis
