#include "record/log_rules.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <ctime>

#include "core/text.h"
#include "workflow/yaml_bounds.h"

namespace grademl::record {
namespace {

// Memory RE2 may use for one expression (compiled program and DFA cache; past it RE2
// falls back to slower, still linear, matching, and a too large expression is refused).
constexpr int64_t kRegexMaxMem = 4 << 20;
// Rules in one file: each holds up to kRegexMaxMem.
constexpr size_t kMaxRules = 256;

char LowerAscii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string_view GroupText(const RegexGroups& m, int group) {
  if (group < 0 || static_cast<size_t>(group) >= m.size() || m[group].data() == nullptr) return {};
  return TrimBlanks(std::string_view(m[group].data(), m[group].size()));
}

// Skips a bracket expression starting at s[i] == '['; returns the index after its ']', or
// npos when it is not closed.
size_t SkipClass(std::string_view s, size_t i) {
  ++i;
  if (i < s.size() && s[i] == '^') ++i;
  while (i < s.size()) {
    if (s[i] == '\\') {
      i += 2;
    } else if (s[i] == ']') {
      return i + 1;
    } else {
      ++i;
    }
  }
  return std::string_view::npos;
}

// Skips a group starting at s[i] == '('; returns the index after its ')', or npos.
size_t SkipGroup(std::string_view s, size_t i) {
  int depth = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '\\') {
      i += 2;
    } else if (c == '[') {
      i = SkipClass(s, i);
      if (i == std::string_view::npos) return i;
    } else if (c == '(') {
      ++depth;
      ++i;
    } else if (c == ')') {
      ++i;
      if (--depth == 0) return i;
    } else {
      ++i;
    }
  }
  return std::string_view::npos;
}

// True when the expression has a '|' outside groups and classes: no literal is certain.
bool HasTopLevelAlternation(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    char c = s[i];
    if (c == '\\') {
      i += 2;
    } else if (c == '[') {
      i = SkipClass(s, i);
      if (i == std::string_view::npos) return true;
    } else if (c == '(') {
      i = SkipGroup(s, i);
      if (i == std::string_view::npos) return true;
    } else if (c == '|') {
      return true;
    } else {
      ++i;
    }
  }
  return false;
}

// Why RE2 cannot take an expression written for the ECMAScript engine GradeML used before,
// when the reason is a feature it lacks on purpose (empty otherwise): backreferences and
// lookaround need backtracking, which is what makes a match take exponential time.
std::string UnsupportedFeature(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') {  // inside a class, \1 and (?= mean other things
      const size_t after = SkipClass(s, i);
      if (after == std::string_view::npos) return "";
      i = after - 1;
    } else if (s[i] == '\\' && i + 1 < s.size()) {
      if (s[i + 1] >= '1' && s[i + 1] <= '9') {
        return fmt::format("backreferences (\\{}) are not supported: rules are matched with RE2, in time linear in "
                           "the line",
                           s[i + 1]);
      }
      if (s[i + 1] == 'k' && i + 2 < s.size() && s[i + 2] == '<') {
        return "named backreferences (\\k<name>) are not supported: rules are matched with RE2, in time linear in the "
               "line";
      }
      ++i;
    } else if (s.substr(i).starts_with("(?=") || s.substr(i).starts_with("(?!") || s.substr(i).starts_with("(?<=") ||
               s.substr(i).starts_with("(?<!")) {
      return fmt::format("lookahead and lookbehind ({}...) are not supported: rules are matched with RE2, in time "
                         "linear in the line",
                         s.substr(i, s[i + 2] == '<' ? 4 : 3));
    }
  }
  return "";
}

// ECMAScript's \uXXXX is RE2's \x{XXXX}; the rest of the syntax the rules use is common.
std::string ToRe2Syntax(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      if (s[i + 1] == 'u' && i + 6 <= s.size() &&
          std::all_of(s.begin() + i + 2, s.begin() + i + 6, [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); })) {
        out += "\\x{";
        out += s.substr(i + 2, 4);
        out += '}';
        i += 5;
        continue;
      }
      out += s.substr(i, 2);
      ++i;
      continue;
    }
    out += s[i];
  }
  return out;
}

StatusOr<std::shared_ptr<const re2::RE2>> CompileRegex(const std::string& source, bool ignore_case) {
  if (const std::string why = UnsupportedFeature(source); !why.empty()) {
    return InvalidArgument("bad regular expression '{}': {}", source, why);
  }
  re2::RE2::Options options;
  options.set_log_errors(false);
  options.set_case_sensitive(!ignore_case);
  options.set_max_mem(kRegexMaxMem);
  auto re = std::make_shared<const re2::RE2>(ToRe2Syntax(source), options);
  if (!re->ok()) return InvalidArgument("bad regular expression '{}': {}", source, re->error());
  return re;
}

// The capture group a reference names: a number ("2") or a tag name ("fold").
std::optional<int> ResolveGroup(const LogRule& rule, std::string_view ref) {
  if (ref.empty()) return std::nullopt;
  if (std::all_of(ref.begin(), ref.end(), IsDigit)) {
    int group = 0;
    auto [ptr, ec] = std::from_chars(ref.data(), ref.data() + ref.size(), group);
    if (ec != std::errc() || ptr != ref.data() + ref.size()) return std::nullopt;
    if (group < 0 || group > rule.begin->NumberOfCapturingGroups()) return std::nullopt;
    return group;
  }
  for (size_t i = 0; i < rule.tags.size(); ++i)
    if (rule.tags[i] == ref) return static_cast<int>(i + 1);
  return std::nullopt;
}

// Walks a name template: literal text goes to `text`, each "{ref}" to `placeholder`.
// Returns an error for an unclosed or unknown placeholder.
template <typename TextFn, typename RefFn>
Status WalkTemplate(std::string_view tpl, TextFn&& text, RefFn&& placeholder) {
  size_t i = 0;
  while (i < tpl.size()) {
    char c = tpl[i];
    if ((c == '{' || c == '}') && i + 1 < tpl.size() && tpl[i + 1] == c) {
      text(std::string_view(&tpl[i], 1));
      i += 2;
    } else if (c == '{') {
      size_t close = tpl.find('}', i);
      if (close == std::string_view::npos) return InvalidArgument("unclosed '{{' in phase name '{}'", tpl);
      GRADEML_RETURN_IF_ERROR(placeholder(tpl.substr(i + 1, close - i - 1)));
      i = close + 1;
    } else {
      size_t next = tpl.find_first_of("{}", i + 1);
      if (next == std::string_view::npos) next = tpl.size();
      text(tpl.substr(i, next - i));
      i = next;
    }
  }
  return Status::Ok();
}

std::string Render(const LogRule& rule, const RegexGroups& m) {
  std::string out;
  Status st = WalkTemplate(
      rule.name_template, [&](std::string_view t) { out += t; },
      [&](std::string_view ref) {
        if (auto group = ResolveGroup(rule, ref)) out += GroupText(m, *group);
        return Status::Ok();
      });
  (void)st;  // templates are checked when rules are made
  return out;
}

// Checks a rule's fields against one another; `field` tells which one is at fault.
Status CheckRule(const LogRule& rule, std::string* field) {
  const size_t groups = static_cast<size_t>(rule.begin->NumberOfCapturingGroups());
  if (rule.tags.size() > groups) {
    *field = "tags";
    return InvalidArgument("{} tag names given but begin has {} capture group{}", rule.tags.size(), groups,
                           groups == 1 ? "" : "s");
  }
  *field = "phase_name";
  GRADEML_RETURN_IF_ERROR(WalkTemplate(
      rule.name_template, [](std::string_view) {},
      [&](std::string_view ref) {
        if (ResolveGroup(rule, ref)) return Status::Ok();
        return InvalidArgument("phase name '{}' refers to {{{}}}, which is neither a capture group number nor a tag",
                               rule.name_template, ref);
      }));
  *field = "";
  int modes = int(rule.instant) + int(rule.marks_end) + int(rule.progress.has_value());
  if (modes > 1) return InvalidArgument("a rule can be only one of instant, marks: end and progress");
  if (rule.end && modes > 0) {
    *field = "end";
    return InvalidArgument("an `end` expression goes only with a rule that opens phases (not instant, marks: end or progress)");
  }
  if (rule.key_group != 0 && rule.instant) {
    *field = "key";
    return InvalidArgument("an instant rule has no key");
  }
  return Status::Ok();
}

// Fills a built-in rule; they are known to be well formed.
LogRule MakeBuiltIn(std::string name, std::string type, std::string name_template, std::string begin,
                    std::vector<std::string> tags, bool ignore_case = false) {
  LogRule rule;
  rule.name = std::move(name);
  rule.type = std::move(type);
  rule.name_template = std::move(name_template);
  rule.begin_source = std::move(begin);
  rule.ignore_case = ignore_case;
  auto re = CompileRegex(rule.begin_source, ignore_case);
  GRADEML_CHECK_MSG(re.ok(), re.status().message());
  rule.begin = std::move(*re);
  rule.tags = std::move(tags);
  rule.origin = "built-in";
  rule.begin_literal = FindRequiredLiteral(rule.begin_source, ignore_case);
  return rule;
}

void CheckBuiltIn(const LogRule& rule) {
  std::string field;
  Status st = CheckRule(rule, &field);
  GRADEML_CHECK_MSG(st.ok(), rule.name + ": " + st.message());
}

constexpr const char* kKnownKeys =
    "name, type, begin, end, phase_name, tags, key, progress, instant, marks, ignore_case, disabled";

// Reads a rules document; every error names origin:line.
class RulesParser {
 public:
  explicit RulesParser(const std::string& origin) : origin_(origin) {}

  Status Parse(std::string_view text, std::vector<LogRule>* out) {
    GRADEML_ASSIGN_OR_RETURN(YAML::Node root, workflow::LoadBoundedYaml(text, origin_, workflow::YamlLimits(), "YAML syntax: "));
    try {
      return ParseRoot(root, out);
    } catch (const YAML::Exception& e) {  // a conversion the checks above did not foresee
      return InvalidArgument("{}:{}: {}", origin_, e.mark.line + 1, e.msg);
    }
  }

 private:
  int Line(const YAML::Node& node) const {
    YAML::Mark mark = node.Mark();
    return mark.is_null() ? 0 : mark.line + 1;
  }
  // Names, expressions and values quoted in `reason` come from the file: shown escaped.
  Status Error(const YAML::Node& at, const std::string& reason) const {
    int line = Line(at);
    if (line == 0) return InvalidArgument("{}: {}", EscapeControl(origin_), EscapeControl(reason));
    return InvalidArgument("{}:{}: {}", EscapeControl(origin_), line, EscapeControl(reason));
  }

  Status ParseRoot(const YAML::Node& root, std::vector<LogRule>* out) {
    if (root.IsNull()) return InvalidArgument("{}:1: empty rules file; expected a `rules:` list", origin_);
    if (!root.IsMap()) return Error(root, "expected a map with a `rules:` list");
    std::optional<YAML::Node> rules;
    for (auto it = root.begin(); it != root.end(); ++it) {
      std::string key = it->first.Scalar();
      if (key != "rules") return Error(it->first, fmt::format("unknown key '{}' (expected `rules:`)", key));
      rules.emplace(it->second);
    }
    if (!rules || rules->IsNull()) return Status::Ok();  // "rules:" with no entries
    if (!rules->IsSequence()) return Error(*rules, "`rules:` must be a list of rules");
    if (rules->size() > kMaxRules) return Error(*rules, fmt::format("more than {} rules in one file", kMaxRules));
    for (const YAML::Node& item : *rules) {
      LogRule rule;
      GRADEML_RETURN_IF_ERROR(ParseRule(item, &rule));
      for (const LogRule& earlier : *out) {
        if (earlier.name == rule.name)
          return Error(item, fmt::format("a rule named '{}' is already defined at {}", rule.name, earlier.origin));
      }
      out->push_back(std::move(rule));
    }
    return Status::Ok();
  }

  Status Scalar(const YAML::Node& node, const std::string& key, std::string* out) {
    if (!node.IsScalar()) return Error(node, fmt::format("`{}` must be a string", key));
    *out = node.Scalar();
    return Status::Ok();
  }
  Status Bool(const YAML::Node& node, const std::string& key, bool* out) {
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value))
      return Error(node, fmt::format("`{}` must be true or false", key));
    *out = value;
    return Status::Ok();
  }
  Status Group(const LogRule& rule, const YAML::Node& node, const std::string& key, int* out) {
    std::string ref;
    GRADEML_RETURN_IF_ERROR(Scalar(node, key, &ref));
    auto group = ResolveGroup(rule, ref);
    if (!group || *group == 0)
      return Error(node, fmt::format("`{}: {}` is neither a capture group number of begin nor a tag name", key, ref));
    *out = *group;
    return Status::Ok();
  }

  Status ParseRule(const YAML::Node& node, LogRule* rule) {
    if (!node.IsMap()) return Error(node, fmt::format("a rule must be a map of keys ({})", kKnownKeys));
    rule->origin = fmt::format("{}:{}", origin_, Line(node));
    // The value of each key present (yaml-cpp nodes are references: copies, never assigned).
    std::optional<YAML::Node> begin, end, key, progress, tags, phase_name, type, marks_node;
    std::string marks = "start";
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string k = it->first.Scalar();
      const YAML::Node v = it->second;  // a copy: `it->` returns a temporary (a reference would dangle)
      if (k == "name") {
        GRADEML_RETURN_IF_ERROR(Scalar(v, k, &rule->name));
      } else if (k == "type") {
        GRADEML_RETURN_IF_ERROR(Scalar(v, k, &rule->type));
        type.emplace(v);
      } else if (k == "begin") {
        GRADEML_RETURN_IF_ERROR(Scalar(v, k, &rule->begin_source));
        begin.emplace(v);
      } else if (k == "end") {
        GRADEML_RETURN_IF_ERROR(Scalar(v, k, &rule->end_source));
        end.emplace(v);
      } else if (k == "phase_name") {
        GRADEML_RETURN_IF_ERROR(Scalar(v, k, &rule->name_template));
        phase_name.emplace(v);
      } else if (k == "tags") {
        tags.emplace(v);
      } else if (k == "key") {
        key.emplace(v);
      } else if (k == "progress") {
        progress.emplace(v);
      } else if (k == "instant") {
        GRADEML_RETURN_IF_ERROR(Bool(v, k, &rule->instant));
      } else if (k == "marks") {
        GRADEML_RETURN_IF_ERROR(Scalar(v, k, &marks));
        marks_node.emplace(v);
      } else if (k == "ignore_case") {
        GRADEML_RETURN_IF_ERROR(Bool(v, k, &rule->ignore_case));
      } else if (k == "disabled") {
        GRADEML_RETURN_IF_ERROR(Bool(v, k, &rule->disabled));
      } else {
        return Error(it->first, fmt::format("unknown key '{}' in a rule (known: {})", k, kKnownKeys));
      }
    }
    if (rule->name.empty()) return Error(node, "a rule needs a `name`");
    const std::string who = fmt::format("rule '{}'", rule->name);
    if (rule->disabled && !begin) return Status::Ok();  // only hides a rule of its name
    if (!begin) return Error(node, who + " has no `begin` expression");
    if (rule->type.empty()) return Error(type ? *type : node, who + " needs a non-empty `type`");
    if (rule->type.find('/') != std::string::npos) return Error(*type, who + ": `type` cannot contain '/'");
    if (marks == "end") {
      rule->marks_end = true;
    } else if (marks != "start") {
      return Error(*marks_node, who + ": `marks` must be start or end");
    }

    auto re = CompileRegex(rule->begin_source, rule->ignore_case);
    if (!re.ok()) return Error(*begin, who + ": begin: " + re.status().message());
    rule->begin = std::move(*re);
    rule->begin_literal = FindRequiredLiteral(rule->begin_source, rule->ignore_case);
    if (end) {
      auto end_re = CompileRegex(rule->end_source, rule->ignore_case);
      if (!end_re.ok()) return Error(*end, who + ": end: " + end_re.status().message());
      rule->end = std::move(*end_re);
      rule->end_literal = FindRequiredLiteral(rule->end_source, rule->ignore_case);
    }
    if (tags) {
      if (!tags->IsSequence()) return Error(*tags, who + ": `tags` must be a list of names, one per capture group");
      for (const YAML::Node& t : *tags) {
        if (t.IsNull()) {
          rule->tags.emplace_back();
        } else if (t.IsScalar()) {
          rule->tags.push_back(t.Scalar());
        } else {
          return Error(t, who + ": a tag name must be a string");
        }
      }
    }
    if (!phase_name) rule->name_template = rule->name;
    if (key) GRADEML_RETURN_IF_ERROR(Group(*rule, *key, "key", &rule->key_group));
    if (progress) {
      if (!progress->IsSequence() || progress->size() != 2)
        return Error(*progress, who + ": `progress` must be [current, total]: two capture groups");
      int current = 0, total = 0;
      GRADEML_RETURN_IF_ERROR(Group(*rule, (*progress)[0], "progress", &current));
      GRADEML_RETURN_IF_ERROR(Group(*rule, (*progress)[1], "progress", &total));
      rule->progress = std::make_pair(current, total);
    }

    std::string field;
    Status st = CheckRule(*rule, &field);
    if (!st.ok()) {
      const YAML::Node* at = &node;
      if (field == "tags" && tags) at = &*tags;
      if (field == "phase_name" && phase_name) at = &*phase_name;
      if (field == "end" && end) at = &*end;
      if (field == "key" && key) at = &*key;
      return Error(*at, who + ": " + st.message());
    }
    return Status::Ok();
  }

  std::string origin_;
};

// Copies `in` into `out` without ANSI escape sequences (CSI "ESC [ ... final", OSC
// "ESC ] ... BEL or ESC \", and two-character escapes).
void StripEscapes(std::string_view in, std::string* out) {
  out->clear();
  size_t i = 0;
  while (i < in.size()) {
    char c = in[i];
    if (c != '\x1b') {
      size_t next = in.find('\x1b', i);
      if (next == std::string_view::npos) next = in.size();
      out->append(in.substr(i, next - i));
      i = next;
      continue;
    }
    if (i + 1 >= in.size()) break;
    char kind = in[i + 1];
    i += 2;
    if (kind == '[') {
      while (i < in.size() && !(in[i] >= 0x40 && in[i] <= 0x7e)) ++i;
      if (i < in.size()) ++i;  // the final byte
    } else if (kind == ']') {
      while (i < in.size() && in[i] != '\x07' && !(in[i] == '\x1b' && i + 1 < in.size() && in[i + 1] == '\\')) ++i;
      if (i < in.size()) i += in[i] == '\x07' ? 1 : 2;
    }
  }
}

}  // namespace

RequiredLiteral FindRequiredLiteral(std::string_view s, bool ignore_case) {
  RequiredLiteral none;
  if (HasTopLevelAlternation(s)) return none;
  struct Run {
    std::string text;
    bool at_start = false;
  };
  std::vector<Run> runs;
  Run current;
  bool anchored = false;
  bool consumed = false;  // something was matched (or asserted) since the start
  auto flush = [&] {
    if (!current.text.empty()) runs.push_back(current);
    current = Run{};
  };
  size_t i = 0;
  if (!s.empty() && s[0] == '^') {
    anchored = true;
    i = 1;
  }
  while (i < s.size()) {
    char c = s[i];
    bool literal = false;
    char lit = 0;
    if (c == '\\') {
      if (i + 1 >= s.size()) return none;
      char d = s[i + 1];
      if (IsAlnum(d)) {  // \d \w \s \b \xhh \uhhhh \cX \0 \1: not a plain character
        i += 2;
        if (d == 'x') i += 2;
        if (d == 'u') i += 4;
        if (d == 'c') i += 1;
      } else {
        literal = true;
        lit = d;
        i += 2;
      }
    } else if (c == '[') {
      i = SkipClass(s, i);
      if (i == std::string_view::npos) return none;
    } else if (c == '(') {
      i = SkipGroup(s, i);
      if (i == std::string_view::npos) return none;
    } else if (c == '.' || c == '^' || c == '$') {
      ++i;
    } else if (c == ')' || c == ']' || c == '}' || c == '{' || c == '*' || c == '+' || c == '?' || c == '|') {
      return none;  // unexpected here: do not guess
    } else {
      literal = true;
      lit = c;
      ++i;
    }
    // A quantifier after the atom.
    bool optional = false, repeated = false;
    if (i < s.size()) {
      char q = s[i];
      if (q == '*' || q == '?') {
        optional = true;
        ++i;
      } else if (q == '+') {
        repeated = true;
        ++i;
      } else if (q == '{') {
        size_t close = s.find('}', i);
        if (close == std::string_view::npos) return none;
        std::string_view body = s.substr(i + 1, close - i - 1);
        size_t comma = body.find(',');
        std::string_view min = body.substr(0, comma);
        if (min.empty() || !std::all_of(min.begin(), min.end(), IsDigit)) return none;
        optional = std::all_of(min.begin(), min.end(), [](char ch) { return ch == '0'; });
        repeated = true;
        i = close + 1;
      }
      if ((optional || repeated) && i < s.size() && s[i] == '?') ++i;  // lazy
    }
    if (literal && !optional) {
      if (current.text.empty()) current.at_start = anchored && !consumed;
      current.text += ignore_case ? LowerAscii(lit) : lit;
      if (repeated) flush();
    } else {
      flush();
    }
    consumed = true;
  }
  flush();
  if (runs.empty()) return none;
  // A prefix check is the cheapest and rejects most lines: prefer it; else the longest.
  for (const Run& run : runs)
    if (run.at_start) return {run.text, true};
  const Run* best = &runs[0];
  for (const Run& run : runs)
    if (run.text.size() > best->text.size()) best = &run;
  return {best->text, false};
}

// ---------------------------------------------------------------------------------------
// LogRuleSet

LogRuleSet LogRuleSet::BuiltIn() {
  LogRuleSet set;
  auto& r = set.rules_;

  LogRule keras = MakeBuiltIn("keras-epoch", "epoch", "epoch {1}", R"(^Epoch (\d+)/(\d+))", {"epoch", "epochs"});
  keras.key_group = 1;
  r.push_back(std::move(keras));

  LogRule epoch = MakeBuiltIn("epoch", "epoch", "epoch {1}", R"(^\W*epoch[ :=]+(\d+))", {"epoch"}, true);
  epoch.key_group = 1;
  r.push_back(std::move(epoch));

  LogRule step = MakeBuiltIn("step", "iteration", "step {1}", R"(^\W*(?:global[ _])?step[ :=]+(\d+))", {"step"}, true);
  step.key_group = 1;
  r.push_back(std::move(step));

  LogRule tqdm = MakeBuiltIn("tqdm", "progress", "{description}", R"(^\s*(?:([^:|\s][^:|]*): +)?(\d+)%\|.*\| *(\d+)/(\d+))",
                             {"description", "", "", "total"});
  tqdm.key_group = 1;
  tqdm.progress = std::make_pair(3, 4);
  r.push_back(std::move(tqdm));

  LogRule traceback = MakeBuiltIn("traceback", "error", "traceback", R"(^Traceback \(most recent call last\):)", {});
  traceback.instant = true;
  r.push_back(std::move(traceback));

  for (const LogRule& rule : r) CheckBuiltIn(rule);
  return set;
}

StatusOr<LogRuleSet> LogRuleSet::Parse(std::string_view yaml_text, const std::string& origin) {
  LogRuleSet set;
  GRADEML_RETURN_IF_ERROR(RulesParser(origin).Parse(yaml_text, &set.rules_));
  return set;
}

StatusOr<LogRuleSet> LogRuleSet::LoadFile(const std::string& path) {
  StatusOr<std::string> text = workflow::ReadBoundedFile(path, workflow::YamlLimits().max_file_bytes);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return NotFound("{}: no such rules file", EscapeControl(path));
    return Status(text.status().code(), EscapeControl(text.status().message()));
  }
  return Parse(*text, path);
}

void LogRuleSet::Append(const LogRuleSet& other) {
  for (const LogRule& rule : other.rules_)
    if (Find(rule.name) == nullptr) rules_.push_back(rule);
}

const LogRule* LogRuleSet::Find(std::string_view name) const {
  for (const LogRule& rule : rules_)
    if (rule.name == name) return &rule;
  return nullptr;
}

// ---------------------------------------------------------------------------------------
// RuleCostBudget

RuleCostBudget::RuleCostBudget(const LogRuleSet* rules, DurationNs per_line)
    : rules_(rules),
      per_line_(per_line),
      off_(rules->rules().size(), false),
      suspect_(rules->rules().size(), false),
      forced_(rules->rules().size()) {}

void RuleCostBudget::ForceCost(const std::string& rule, DurationNs cost) {
  if (rule == "*") {
    forced_all_ = cost;
    return;
  }
  const auto& rules = rules_->rules();
  for (size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].name == rule) forced_[i] = cost;
  }
}

Status RuleCostBudget::ForceCostsFrom(std::string_view spec) {
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    size_t eq = item.rfind('=');
    if (eq == std::string_view::npos || eq == 0) {
      return InvalidArgument("'{}' is not NAME=DURATION", EscapeControl(item));
    }
    std::string name(item.substr(0, eq)), value(item.substr(eq + 1));
    DurationNs cost = 0;
    if (value != "0") {
      StatusOr<DurationNs> parsed = ParseDuration(value);
      if (!parsed.ok()) return InvalidArgument("'{}': {}", EscapeControl(item), parsed.status().message());
      cost = *parsed;
    }
    if (name != "*" && rules_->Find(name) == nullptr) return InvalidArgument("no rule named '{}'", EscapeControl(name));
    ForceCost(name, cost);
  }
  return Status::Ok();
}

void RuleCostBudget::Charge(size_t rule, DurationNs measured, bool cpu) {
  const bool forced = forced_[rule] || forced_all_;
  DurationNs cost = forced_[rule] ? *forced_[rule] : forced_all_ ? *forced_all_ : measured;
  if (off_[rule]) return;
  if (!forced && !cpu) {
    if (cost > per_line_) suspect_[rule] = true;  // measured again, in CPU time
    return;
  }
  if (cost <= per_line_) {
    suspect_[rule] = false;  // the wall time was the thread waiting, not the rule's cost
    return;
  }
  off_[rule] = true;
  ++switched_off_;
  if (on_switched_off) on_switched_off(rules_->rules()[rule], cost);
}

// ---------------------------------------------------------------------------------------
// LogPhaseTracker

namespace {

// CPU time of the calling thread: what a suspect rule's matching costs, not counting the time
// the thread was preempted (a busy machine must not switch rules off).
DurationNs LogRuleThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<DurationNs>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}

}  // namespace

LogPhaseTracker::LogPhaseTracker(const LogRuleSet* rules, model::RunBuilder* builder, model::PhaseId parent,
                                 std::string host, int32_t pid, RuleCostBudget* budget)
    : rules_(rules), builder_(builder), parent_(parent), host_(std::move(host)), pid_(pid), budget_(budget) {
  state_.resize(rules_->rules().size());
  if (budget_ != nullptr && !budget_->measuring()) budget_ = nullptr;
}

void LogPhaseTracker::OnLine(TimeNs t, std::string_view line) {
  if (finished_) return;
  while (!line.empty()) {
    size_t cr = line.find('\r');
    std::string_view segment = line.substr(0, cr);
    if (!segment.empty()) OnSegment(t, segment);
    if (cr == std::string_view::npos) break;
    line.remove_prefix(cr + 1);
  }
}

bool LogPhaseTracker::Passes(const RequiredLiteral& literal, std::string_view hay) {
  if (literal.text.empty()) return true;
  return literal.at_start ? hay.starts_with(literal.text) : hay.find(literal.text) != std::string_view::npos;
}

void LogPhaseTracker::OnSegment(TimeNs t, std::string_view segment) {
  if (segment.find('\x1b') != std::string_view::npos) {
    StripEscapes(segment, &clean_);
    segment = clean_;
  }
  if (segment.size() > kMaxMatchedBytes) segment = segment.substr(0, kMaxMatchedBytes);
  bool lowered_ready = false;
  auto haystack = [&](const LogRule& rule) -> std::string_view {
    if (!rule.ignore_case) return segment;
    if (!lowered_ready) {
      lowered_.resize(segment.size());
      std::transform(segment.begin(), segment.end(), lowered_.begin(), LowerAscii);
      lowered_ready = true;
    }
    return lowered_;
  };
  const auto& rules = rules_->rules();
  for (size_t i = 0; i < rules.size(); ++i) {
    const LogRule& rule = rules[i];
    if (rule.disabled || (budget_ != nullptr && budget_->off(i))) continue;
    RuleState& st = state_[i];
    // With a budget: the clock when this rule's first expression ran on the segment (the
    // thread's CPU clock for a suspect, else the monotonic one), and the charge of what both
    // of its expressions took.
    const bool cpu = budget_ != nullptr && budget_->suspect(i);
    auto clock = [cpu] { return cpu ? LogRuleThreadCpuNs() : WallClock::MonotonicNow(); };
    DurationNs clock_start = -1;
    auto start_clock = [&] {
      if (budget_ != nullptr && clock_start < 0) clock_start = clock();
    };
    auto charge = [&] {
      if (clock_start >= 0) budget_->Charge(i, clock() - clock_start, cpu);
    };
    if (rule.end && !st.open.empty() && Passes(rule.end_literal, haystack(rule))) {
      start_clock();
      ++regex_runs_;
      if (rule.end->Match(re2::StringPiece(segment.data(), segment.size()), 0, segment.size(), re2::RE2::UNANCHORED,
                          nullptr, 0)) {
        charge();
        for (const OpenPhase& open : st.open) builder_->EndPhase(open.id, t);
        st.open.clear();
        ++lines_matched_;
        return;
      }
    }
    if (!Passes(rule.begin_literal, haystack(rule))) {
      charge();
      continue;
    }
    start_clock();
    ++regex_runs_;
    groups_.assign(static_cast<size_t>(rule.begin->NumberOfCapturingGroups()) + 1, re2::StringPiece());
    const bool matched = rule.begin->Match(re2::StringPiece(segment.data(), segment.size()), 0, segment.size(),
                                           re2::RE2::UNANCHORED, groups_.data(), static_cast<int>(groups_.size()));
    charge();
    if (!matched) continue;
    ++lines_matched_;
    OnBegin(t, i, groups_);
    return;
  }
}

TimeNs LogPhaseTracker::ParentStart() const {
  auto parent = builder_->GetPhase(parent_);
  return parent ? parent->start_ns : 0;
}

model::PhaseId LogPhaseTracker::Open(TimeNs start, const LogRule& rule, const RegexGroups& m) {
  model::PhaseSpec spec;
  spec.parent = parent_;
  spec.name = Render(rule, m);
  if (spec.name.empty()) spec.name = rule.type;
  spec.type = rule.type;
  spec.start_ns = start;
  spec.host = host_;
  spec.pid = pid_;
  for (size_t g = 0; g < rule.tags.size(); ++g) {
    if (rule.tags[g].empty()) continue;
    std::string_view value = GroupText(m, static_cast<int>(g + 1));
    if (!value.empty()) spec.tags.emplace_back(rule.tags[g], std::string(value));
  }
  ++phases_opened_;
  return builder_->BeginPhase(spec);
}

void LogPhaseTracker::OnBegin(TimeNs t, size_t index, const RegexGroups& m) {
  const LogRule& rule = rules_->rules()[index];
  RuleState& st = state_[index];
  std::string key = rule.key_group != 0 ? std::string(GroupText(m, rule.key_group)) : std::string();

  if (rule.instant) {
    builder_->EndPhase(Open(t, rule, m), t);
    return;
  }
  if (rule.marks_end) {
    if (st.has_last && rule.key_group != 0 && st.last_key == key) return;  // the same one again
    TimeNs start = st.has_last ? st.last_t : ParentStart();
    if (start == 0 || start > t) start = t;
    builder_->EndPhase(Open(start, rule, m), t);
    st.has_last = true;
    st.last_t = t;
    st.last_key = std::move(key);
    return;
  }
  if (rule.progress) {
    int64_t current = 0, total = 0;
    std::string_view cur_text = GroupText(m, rule.progress->first);
    std::string_view total_text = GroupText(m, rule.progress->second);
    auto [p1, e1] = std::from_chars(cur_text.data(), cur_text.data() + cur_text.size(), current);
    auto [p2, e2] = std::from_chars(total_text.data(), total_text.data() + total_text.size(), total);
    if (e1 != std::errc() || e2 != std::errc() || cur_text.empty() || total_text.empty()) return;
    auto it = std::find_if(st.open.begin(), st.open.end(), [&](const OpenPhase& o) { return o.key == key; });
    if (it != st.open.end()) {
      if (current >= it->current && current < total) {  // the same bar moving on
        it->current = current;
        return;
      }
      builder_->EndPhase(it->id, t);  // done, or a new bar of the same name started
      st.open.erase(it);
      if (current >= total) return;
    }
    if (current >= total) return;  // a bar first seen complete, or its closing repaint
    st.open.push_back({Open(t, rule, m), std::move(key), current});
    return;
  }
  if (!st.open.empty()) {
    if (rule.key_group != 0 && st.open.front().key == key) return;  // the same one again
    for (const OpenPhase& open : st.open) builder_->EndPhase(open.id, t);
    st.open.clear();
  }
  st.open.push_back({Open(t, rule, m), std::move(key), 0});
}

void LogPhaseTracker::Finish(TimeNs t) {
  if (finished_) return;
  finished_ = true;
  for (RuleState& st : state_) {
    for (const OpenPhase& open : st.open) builder_->EndPhase(open.id, t);
    st.open.clear();
  }
}

}  // namespace grademl::record
