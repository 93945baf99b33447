#include "model/redactor.h"

#include "core/text.h"

#include <re2/re2.h>

#include <array>
#include <cmath>
#include <mutex>

namespace grademl::model {

struct Redactor::Pattern {
  // kKeyValue: group 1 a key or flag (IsSecretKey decides), 2 the separator, 3 the value.
  // kGroup: group 1 is the secret. kWhole: the whole match is. kEntropy: group 1, when it looks
  // random (HighEntropy).
  enum Kind { kKeyValue, kGroup, kWhole, kEntropy };
  std::unique_ptr<re2::RE2> re;
  Kind kind = kWhole;
};

namespace {

char RedactLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Whether text[i..] starts with `word` (lowercase), ignoring case.
bool RedactAt(std::string_view text, size_t i, std::string_view word) {
  if (text.size() - i < word.size()) return false;
  for (size_t k = 0; k < word.size(); ++k)
    if (RedactLower(text[i + k]) != word[k]) return false;
  return true;
}

// The secret words (a key ending with one names a secret), '-' and '.' read as '_'.
constexpr std::array<std::string_view, 16> kRedactSecretSuffixes = {
    "password", "passwd",      "passphrase",  "token",      "secret",      "api_key",     "apikey",
    "access_key", "private_key", "secret_key", "credentials", "credential", "auth",        "session_key",
    "signing_key", "encryption_key"};

// Words before "token" that make it a tokenizer's word, not a secret (pad_token, max_tokens...).
constexpr std::array<std::string_view, 26> kRedactTokenizerWords = {
    "pad",   "eos",    "bos",   "unk",     "sep",    "cls",    "mask",  "max",   "min",
    "num",   "n",      "start", "end",     "special", "add",   "image", "audio", "video",
    "prefix", "suffix", "middle", "eot",   "stop",   "total",  "per",   "new"};

// A value that looks random: long enough, letters and digits, and at least 3 bits of Shannon
// entropy per character.
bool RedactHighEntropy(std::string_view s) {
  if (s.size() < 16) return false;
  bool letter = false, digit = false;
  std::array<int, 256> counts{};
  for (char c : s) {
    letter |= (RedactLower(c) >= 'a' && RedactLower(c) <= 'z');
    digit |= (c >= '0' && c <= '9');
    ++counts[static_cast<unsigned char>(c)];
  }
  if (!letter || !digit) return false;
  double h = 0;
  for (int n : counts) {
    if (n == 0) continue;
    double p = static_cast<double>(n) / static_cast<double>(s.size());
    h -= p * std::log2(p);
  }
  return h >= 3.0;
}

// The secret words of the built-in patterns, as RE2 alternatives (IsSecretKey has the last word).
constexpr const char* kRedactWords =
    "pass(?:word|wd|phrase)|token|secret|api[_.-]?key|access[_.-]?key|private[_.-]?key|secret[_.-]?key|"
    "credentials?|auth|session[_.-]?key|signing[_.-]?key|encryption[_.-]?key";

std::mutex redactor_current_mu;
// Never destroyed (like BuiltIn's): RE2's own statics may be gone at exit, and threads still
// running then may use it.
std::shared_ptr<const Redactor>& RedactorCurrentSlot() {
  static auto* current = new std::shared_ptr<const Redactor>(Redactor::BuiltIn());
  return *current;
}

}  // namespace

Redactor::Redactor() = default;
Redactor::~Redactor() = default;

bool Redactor::IsSecretKey(std::string_view raw) {
  while (!raw.empty() && raw.front() == '-') raw.remove_prefix(1);
  if (raw.empty() || raw.size() > 256) return false;
  char buf[257];
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = RedactLower(raw[i]);
    buf[i] = (c == '-' || c == '.') ? '_' : c;
  }
  std::string_view key(buf, raw.size());
  for (std::string_view suffix : kRedactSecretSuffixes) {
    if (!key.ends_with(suffix)) continue;
    if (suffix == "token") {
      std::string_view before = key.substr(0, key.size() - suffix.size());
      while (!before.empty() && before.back() == '_') before.remove_suffix(1);
      size_t cut = before.rfind('_');
      std::string_view word = cut == std::string_view::npos ? before : before.substr(cut + 1);
      for (std::string_view t : kRedactTokenizerWords)
        if (word == t) return false;
    }
    return true;
  }
  return false;
}

StatusOr<std::shared_ptr<const Redactor>> Redactor::Make(const std::vector<std::string>& user_patterns) {
  std::shared_ptr<Redactor> r(new Redactor());
  re2::RE2::Options opts;
  opts.set_log_errors(false);
  auto add = [&](std::vector<Pattern>& into, const std::string& text, Pattern::Kind kind) {
    Pattern p;
    p.re = std::make_unique<re2::RE2>(text, opts);
    p.kind = kind;
    if (!p.re->ok()) return false;
    into.push_back(std::move(p));
    return true;
  };
  const std::string words = kRedactWords;
  bool ok = true;
  // KEY=value, key: value, "key": "value", --flag=value (the key keeps its dashes).
  ok &= add(r->builtin_,
            "(?i)(?:^|[^a-z0-9_.-])([a-z0-9_.-]*(?:" + words + "))([\"']?[ \\t]*[=:][ \\t]*)(\"[^\"]*\"|'[^']*'|[^\\s\"',;&]+)",
            Pattern::kKeyValue);
  // --flag value.
  ok &= add(r->builtin_, "(?i)(?:^|[\\s\"'])(--?[a-z0-9_.-]*(?:" + words + "))([ \\t]+)(\"[^\"]*\"|'[^']*'|[^\\s\"']+)",
            Pattern::kKeyValue);
  // scheme://user:PASSWORD@host
  ok &= add(r->builtin_, "(?i)[a-z][a-z0-9+.-]*://[^\\s/?#@:]*:([^\\s/?#@]+)@", Pattern::kGroup);
  // Authorization: [Bearer|Basic|token] X, and Bearer X anywhere.
  ok &= add(r->builtin_,
            "(?i)\\bauthorization[\"']?[ \\t]*[:=][ \\t]*[\"']?(?:(?:bearer|basic|token|digest)[ \\t]+)?([^\\s\"',;]+)",
            Pattern::kGroup);
  ok &= add(r->builtin_, "(?i)\\bbearer[ \\t]+([a-z0-9._~+/=-]{8,})", Pattern::kGroup);
  // Cloud keys: AWS, GitHub, Slack, OpenAI-style, Google.
  ok &= add(r->builtin_,
            "\\b(?:(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255}|"
            "xox[abposr]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{35})\\b",
            Pattern::kWhole);
  // A random-looking value right after a secret word: "token abc123...", "the secret is ...".
  ok &= add(r->builtin_,
            "(?i)\\b(?:" + words + ")s?(?:[ \\t]+is)?[ \\t]+([A-Za-z0-9+/_.=-]{16,})", Pattern::kEntropy);
  GRADEML_CHECK_MSG(ok, "a built-in redaction pattern does not compile");
  for (const std::string& text : user_patterns) {
    Pattern p;
    p.re = std::make_unique<re2::RE2>(text, opts);
    if (!p.re->ok()) {
      return InvalidArgument("redaction pattern '{}': {}", EscapeControl(text), EscapeControl(p.re->error()));
    }
    p.kind = p.re->NumberOfCapturingGroups() > 0 ? Pattern::kGroup : Pattern::kWhole;
    r->user_.push_back(std::move(p));
  }
  return std::shared_ptr<const Redactor>(std::move(r));
}

std::shared_ptr<const Redactor> Redactor::BuiltIn() {
  static const auto* builtin = new std::shared_ptr<const Redactor>(*Make({}));
  return *builtin;
}

std::shared_ptr<const Redactor> Redactor::Current() {
  std::lock_guard lock(redactor_current_mu);
  return RedactorCurrentSlot();
}

void Redactor::SetCurrent(std::shared_ptr<const Redactor> redactor) {
  std::lock_guard lock(redactor_current_mu);
  RedactorCurrentSlot() = std::move(redactor);
}

bool Redactor::MayHoldSecret(std::string_view t) const {
  for (size_t i = 0; i < t.size(); ++i) {
    switch (RedactLower(t[i])) {
      case 'p':
        if (RedactAt(t, i, "pass")) return true;
        break;
      case 't':
        if (RedactAt(t, i, "token")) return true;
        break;
      case 's':
        if (RedactAt(t, i, "secret") || RedactAt(t, i, "sk-")) return true;
        break;
      case 'k':
        if (RedactAt(t, i, "key")) return true;
        break;
      case 'a':
        if (RedactAt(t, i, "auth") || RedactAt(t, i, "akia") || RedactAt(t, i, "asia") || RedactAt(t, i, "aiza")) return true;
        break;
      case 'c':
        if (RedactAt(t, i, "cred")) return true;
        break;
      case 'b':
        if (RedactAt(t, i, "bearer")) return true;
        break;
      case ':':
        if (RedactAt(t, i, "://")) return true;
        break;
      case 'g':
        if (RedactAt(t, i, "github_pat_")) return true;
        if (i + 3 < t.size() && RedactLower(t[i + 1]) == 'h' && t[i + 3] == '_') return true;
        break;
      case 'x':
        if (RedactAt(t, i, "xox")) return true;
        break;
      default:
        break;
    }
  }
  return false;
}

int Redactor::Apply(const Pattern& p, std::string& text) const {
  const int groups = p.kind == Pattern::kKeyValue ? 3 : p.kind == Pattern::kWhole ? 0 : 1;
  re2::StringPiece input(text);
  re2::StringPiece m[4];
  std::string out;
  size_t copied = 0, pos = 0;
  int count = 0;
  while (pos <= text.size() && p.re->Match(input, pos, text.size(), re2::RE2::UNANCHORED, m, groups + 1)) {
    const size_t m_start = static_cast<size_t>(m[0].data() - text.data());
    const size_t m_end = m_start + m[0].size();
    std::string_view secret;
    bool hit = false;
    switch (p.kind) {
      case Pattern::kKeyValue: {
        std::string_view key(m[1].data(), m[1].size()), sep(m[2].data(), m[2].size());
        std::string_view value(m[3].data(), m[3].size());
        if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'')) {
          value = value.substr(1, value.size() - 2);
        }
        bool spaced = sep.find_first_of("=:") == std::string_view::npos;
        hit = IsSecretKey(key) && !value.empty() && value != kRedacted && !(spaced && value.front() == '-');
        secret = value;
        break;
      }
      case Pattern::kGroup:
        secret = std::string_view(m[1].data() == nullptr ? "" : m[1].data(), m[1].size());
        hit = !secret.empty() && secret != kRedacted;
        break;
      case Pattern::kWhole:
        secret = std::string_view(m[0].data(), m[0].size());
        hit = !secret.empty() && secret != kRedacted;
        break;
      case Pattern::kEntropy:
        secret = std::string_view(m[1].data(), m[1].size());
        hit = RedactHighEntropy(secret);
        break;
    }
    if (hit) {
      const size_t s_start = static_cast<size_t>(secret.data() - text.data());
      out.append(text, copied, s_start - copied);
      out += kRedacted;
      copied = s_start + secret.size();
      ++count;
    }
    pos = m_end > m_start ? m_end : m_start + 1;
  }
  if (count > 0) {
    out.append(text, copied, std::string::npos);
    text = std::move(out);
  }
  return count;
}

int Redactor::Redact(std::string& text) const {
  int n = 0;
  if (MayHoldSecret(text)) {
    for (const Pattern& p : builtin_) n += Apply(p, text);
  }
  for (const Pattern& p : user_) n += Apply(p, text);
  return n;
}

int Redactor::RedactTag(std::string_view key, std::string& value) const {
  if (!value.empty() && value != kRedacted && IsSecretKey(key)) {
    value = kRedacted;
    return 1;
  }
  return Redact(value);
}

int Redactor::RedactArgv(std::vector<std::string>& argv) const {
  int n = 0;
  for (size_t i = 0; i < argv.size(); ++i) {
    n += Redact(argv[i]);
    const std::string& a = argv[i];
    if (a.size() > 1 && a[0] == '-' && a.find('=') == std::string::npos && IsSecretKey(a) && i + 1 < argv.size() &&
        !argv[i + 1].empty() && argv[i + 1][0] != '-' && argv[i + 1] != kRedacted) {
      argv[i + 1] = kRedacted;
      ++n;
      ++i;
    }
  }
  return n;
}

}  // namespace grademl::model
