// The user's own GradeML settings: one YAML file that belongs to the user running grademl and
// that nobody else can change, because some settings decide whom to trust (whose artifacts
// `run --reuse` restores) and what to hide (redaction patterns). Read once by the CLI and
// handed down as options; nothing below the CLI reads it.
//
//   # ~/.config/grademl/config.yaml  (or $XDG_CONFIG_HOME/grademl/config.yaml, or $GRADEML_CONFIG)
//   redact:
//     patterns: ['(?i)internal-[0-9a-f]{8}']   # RE2 patterns redacted besides the built-in ones
//   reuse:
//     trust: [bob, carol]                      # users whose artifact records are restored from
//
// A missing file is an empty config (unless $GRADEML_CONFIG names it). A file another user
// owns, or that its group or others may write, is refused (one line, like ssh refuses a
// key others can read): a colleague who could edit it could make you trust them. Unknown keys
// and wrong types are "FILE:LINE: reason" errors; the YAML is read with the same bounds as a
// workflow spec (yaml_bounds.h).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace grademl::workflow {

struct UserConfig {
  std::string path;                          // the file read; empty when there was none
  std::vector<std::string> redact_patterns;  // redact.patterns, as written (compiled by the redactor)
  std::vector<std::string> reuse_trust;      // reuse.trust: user names
};

// Where the user's config is looked for: $GRADEML_CONFIG when set, else
// $XDG_CONFIG_HOME/grademl/config.yaml, else $HOME/.config/grademl/config.yaml ("" when none
// of these variables is set).
std::string UserConfigPath();

// Reads the config at UserConfigPath() (see above for when a missing file is an error).
StatusOr<UserConfig> LoadUserConfig();

// Reads `path`; `required`: a missing file is an error, else an empty config.
StatusOr<UserConfig> LoadUserConfigFile(const std::string& path, bool required);

// Parses config text (no ownership check): for tests and LoadUserConfigFile.
StatusOr<UserConfig> ParseUserConfig(const std::string& text, const std::string& file);

}  // namespace grademl::workflow
