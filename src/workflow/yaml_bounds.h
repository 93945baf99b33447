// Bounded YAML reading for every YAML file GradeML takes from a user (workflow specs,
// dvc.yaml, params and vars files, log rules files): the file is read only when it is a
// regular file no larger than a limit, and its text is checked by a streaming pass over
// yaml-cpp's parse events, before any node is built, so that a hostile document ends with a
// one-line "FILE:LINE: reason" instead of a crash, a hang or gigabytes of memory:
//   - an alias used inside its own anchor (`a: &a {b: 1, <<: *a}`), which makes a cyclic
//     node graph that any walk would follow forever;
//   - alias and merge-key bombs ("billion laughs"): the size of the document with every
//     alias expanded is computed from the events (each anchor's expanded size is known when
//     it closes), never by expanding;
//   - deep nesting (`[[[[...`), which yaml-cpp would recurse into.
// After the check, code walking the nodes may recurse (depth is bounded) and may expand
// aliases (the expanded size is bounded). docs/workflows.md lists the limits.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace grademl::workflow {

struct YamlLimits {
  size_t max_file_bytes = 2 << 20;              // the file itself
  size_t max_nodes = 200'000;                   // nodes, each alias counted as the nodes it stands for
  size_t max_expanded_bytes = 16 << 20;         // scalar text, each alias counted as the text it stands for
  size_t max_depth = 256;                       // nesting, aliases expanded
};

// Reads a whole file that must be a regular file of at most `max_bytes` (a directory, a
// FIFO, a device such as /dev/zero are refused without blocking or reading them).
// Errors: "FILE: cannot read: REASON" (kNotFound when it does not exist, kIoError), or
// "FILE: ..." (kInvalidArgument) for a file that is not regular or too large.
StatusOr<std::string> ReadBoundedFile(const std::string& path, size_t max_bytes);

// Checks `text` against `limits` (see above; NUL bytes in the text itself are refused too)
// and parses it. An empty document is a null node. Errors name `file` and the line:
// "FILE:LINE: reason" (kInvalidArgument); `syntax_prefix` goes before yaml-cpp's own
// messages (YAML syntax errors).
StatusOr<YAML::Node> LoadBoundedYaml(std::string_view text, const std::string& file,
                                     const YamlLimits& limits = YamlLimits(), const std::string& syntax_prefix = "");

}  // namespace grademl::workflow
