// Reading a phase's type path in the analyses' loops over every phase: the same answers as
// model::Phase::leaf_type(), which searches the type byte by byte from its end (about a
// tenth of a second per analysis of a million phases).
#pragma once

#include <string.h>

#include <string_view>

#include "model/run.h"

namespace grademl::analysis {

// Whether the type's last element is `leaf` (which holds no '/'): the type is `leaf`, or
// ends with '/' and `leaf`. The same as p.leaf_type() == leaf, with one comparison.
inline bool LeafIs(const model::Phase& p, std::string_view leaf) {
  std::string_view type = p.type;
  if (!type.ends_with(leaf)) return false;
  return type.size() == leaf.size() || type[type.size() - leaf.size() - 1] == '/';
}

// p.leaf_type(), found with memrchr.
inline std::string_view LeafType(const model::Phase& p) {
  std::string_view type = p.type;
  const void* slash = type.empty() ? nullptr : memrchr(type.data(), '/', type.size());
  if (slash == nullptr) return type;
  return type.substr(static_cast<size_t>(static_cast<const char*>(slash) - type.data()) + 1);
}

}  // namespace grademl::analysis
