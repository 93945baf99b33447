// Redactor: the one place that decides which parts of a text are secrets and replaces them with
// "[redacted]" before they are stored (docs/privacy.md). RunBuilder passes every text it hands
// to the store through it (the run's command, phase names and tags, log lines, resource and
// track names, imported sources' tags), so every writer (recorder, agent, importers, workflow
// runner) is covered by construction.
//
// Built-in patterns: secret flags (`--password=X`, `--api-key X`), `KEY=value` / `key: value`
// where KEY names a secret (PASSWORD, TOKEN, SECRET, API_KEY, ACCESS_KEY, PRIVATE_KEY,
// CREDENTIALS, AUTH...), URLs with a password (`https://user:X@host`), `Bearer X`, cloud key
// formats (AWS AKIA/ASIA, GitHub ghp_/github_pat_, Slack xox?-, OpenAI-style sk-, Google AIza)
// and high-entropy tokens right after a secret word. The key or flag is kept
// (`--password=[redacted]`). Tokenizer words (`--max-tokens 512`, `--pad_token`, `--tokenizer`)
// are not secrets.
//
// User patterns (RE2; `--redact REGEX`, the user config's redact.patterns): a pattern with a
// capturing group redacts the group's text, one without the whole match.
//
// Cost: a clean text (no trigger word, no user pattern) is scanned once, byte by byte, with no
// allocation and no regular expression run. Thread-safe (const after Make).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace re2 {
class RE2;
}

namespace grademl::model {

inline constexpr std::string_view kRedacted = "[redacted]";

class Redactor {
 public:
  // The built-in patterns plus `user_patterns`; an invalid pattern is an error naming it.
  static StatusOr<std::shared_ptr<const Redactor>> Make(const std::vector<std::string>& user_patterns = {});
  // The built-in patterns only (never fails).
  static std::shared_ptr<const Redactor> BuiltIn();

  // The redactor RunBuilders use unless given one: the built-in one until SetCurrent (the CLI
  // sets it once from --redact, the user config and --no-redact: nullptr redacts nothing).
  static std::shared_ptr<const Redactor> Current();
  static void SetCurrent(std::shared_ptr<const Redactor> redactor);

  ~Redactor();
  Redactor(const Redactor&) = delete;
  Redactor& operator=(const Redactor&) = delete;

  // Redacts `text` in place; returns how many secrets were replaced (0: `text` untouched).
  int Redact(std::string& text) const;
  // A tag: its value wholly when its key names a secret (token, api_key, ...), else as text.
  int RedactTag(std::string_view key, std::string& value) const;
  // An argv: each argument as text, and the argument after a bare secret flag
  // (`--password`, `hunter2`) wholly.
  int RedactArgv(std::vector<std::string>& argv) const;

  // Whether `key` (a flag without its dashes, an environment variable, a tag key) names a
  // secret: it ends with a secret word (password, token, secret, api_key, ...) and is not a
  // tokenizer's word (pad_token, max_tokens, ...).
  static bool IsSecretKey(std::string_view key);

 private:
  Redactor();
  struct Pattern;
  bool MayHoldSecret(std::string_view text) const;
  int Apply(const Pattern& p, std::string& text) const;

  std::vector<Pattern> builtin_;
  std::vector<Pattern> user_;
};

}  // namespace grademl::model
