// The redaction flags of the verbs that store (run, import, agent): --redact REGEX
// (repeatable) and --no-redact, and their wiring: the user config's redact.patterns
// (workflow/user_config.h) and the flags make the process's redactor (model/redactor.h),
// which every RunBuilder then uses (docs/privacy.md).
#pragma once

#include "workflow/user_config.h"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "core/status.h"

namespace grademl::cli {

struct RedactFlags {
  std::vector<std::string> patterns;  // --redact
  bool off = false;                   // --no-redact
};

void AddRedactFlags(CLI::App* sub, RedactFlags& flags);

// Builds and installs the redactor (Redactor::SetCurrent): the built-in patterns, the user
// config's and --redact's; none with --no-redact. An invalid pattern or an unreadable config is
// a one-line error (the caller exits with kExitUsage before anything runs).
Status ApplyRedactFlags(const RedactFlags& flags);
// The same with the user config already read (`run` reads it once for redaction and trust).
Status ApplyRedactFlags(const RedactFlags& flags, const workflow::UserConfig& config);

}  // namespace grademl::cli
