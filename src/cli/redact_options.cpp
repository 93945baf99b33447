#include "cli/redact_options.h"

#include "model/redactor.h"
#include "workflow/user_config.h"

namespace grademl::cli {

void AddRedactFlags(CLI::App* sub, RedactFlags& flags) {
  sub->add_option("--redact", flags.patterns,
                  "An RE2 pattern whose matches (or, with a capturing group, the group's text) are stored as "
                  "[redacted], besides the built-in secrets (--password/--token flags, KEY=value where KEY names a "
                  "secret, URL passwords, bearer tokens, cloud keys) and the config's redact.patterns; repeatable "
                  "(docs/privacy.md)")
      ->type_name("REGEX")
      ->allow_extra_args(false);
  sub->add_flag("--no-redact", flags.off,
                "Store command lines, log lines and tags as they are, secrets included (a private store only; "
                "docs/privacy.md)");
}

Status ApplyRedactFlags(const RedactFlags& flags) {
  if (flags.off) return ApplyRedactFlags(flags, workflow::UserConfig{});
  GRADEML_ASSIGN_OR_RETURN(workflow::UserConfig config, workflow::LoadUserConfig());
  return ApplyRedactFlags(flags, config);
}

Status ApplyRedactFlags(const RedactFlags& flags, const workflow::UserConfig& config) {
  if (flags.off) {
    if (!flags.patterns.empty()) return InvalidArgument("--no-redact cannot go with --redact");
    model::Redactor::SetCurrent(nullptr);
    return Status::Ok();
  }
  std::vector<std::string> patterns = config.redact_patterns;
  patterns.insert(patterns.end(), flags.patterns.begin(), flags.patterns.end());
  auto redactor = model::Redactor::Make(patterns);
  if (!redactor.ok()) {
    std::string where = config.path.empty() ? "--redact" : "--redact or " + config.path;
    return InvalidArgument("{}: {}", where, redactor.status().message());
  }
  model::Redactor::SetCurrent(std::move(*redactor));
  return Status::Ok();
}

}  // namespace grademl::cli
