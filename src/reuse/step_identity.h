// A workflow step's identity for reuse across runs (docs/reuse.md, "A step's identity"): one
// SHA-256 over everything that determines its result — its command, the relative paths of its
// outs, the content of each declared dep, the value of each declared parameter, and its
// environment (the spec's env over grademl's own, less the variables IgnoredInIdentity names:
// GRADEML_*, the working directory's path and the terminal session's). Two executions with
// the same key computed the same thing, whoever ran them and in whichever checkout.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "model/run.h"
#include "reuse/content_hash.h"
#include "workflow/workflow_spec.h"

namespace grademl::reuse {

struct StepIdentity {
  std::string key;                          // hex SHA-256; "" when an input could not be hashed
  std::string error;                        // why `key` is "" (an input missing or unreadable)
  std::vector<model::StepArtifact> inputs;  // deps then params, in declaration order
  std::string not_reusable;                 // why --reuse never skips the step ("" when it may)
  DurationNs hash_ns = 0;                   // time spent hashing
  int64_t bytes_read = 0;                   // bytes read to hash (the cache's hits are not read)
};

// Whether an environment variable is left out of step identities: GRADEML_*, and those that
// name the session rather than the computation (PWD, OLDPWD, SHLVL, _, HOME, USER, LOGNAME,
// MAIL, HOSTNAME, TERM*, COLORTERM, COLUMNS, LINES, DISPLAY, WAYLAND_DISPLAY, XAUTHORITY,
// SSH_*, XDG_*, DBUS_*, TMUX*, STY, WINDOW, LS_COLORS, LESS*, PAGER, EDITOR, VISUAL, HIST*,
// PS1-PS4, PROMPT_COMMAND, SUDO_*).
bool IgnoredInIdentity(std::string_view name);

// Why the spec alone makes `step` never skipped ("" when it does not): an opt-out in the spec,
// no outs (nothing to restore), no deps and no parameters (what it reads is not declared),
// or following a step by name (it may read what that step left outside its outs).
std::string NotReusableBySpec(const workflow::StepSpec& step);

// Hashes the step's deps and parameters and computes its key. `environment` is grademl's own
// ("NAME=value" entries, as in environ).
StepIdentity IdentifyStep(const workflow::StepSpec& step, const ContentHasher& hasher,
                          const std::vector<std::string>& environment);

// The value of parameter `param` ("FILE:KEY" or "FILE") of a step running in `cwd`, as hashed:
// a file's bytes, or a canonical form of the key's YAML/JSON value (mapping keys sorted), so
// that reordering a file's keys or editing another key changes nothing.
StatusOr<model::StepArtifact> HashParameter(const std::string& param, const std::string& cwd,
                                            const ContentHasher& hasher, int64_t* bytes_read);

// grademl's environment as "NAME=value" entries.
std::vector<std::string> CurrentEnvironment();

}  // namespace grademl::reuse
