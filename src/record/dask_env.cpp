#include "record/dask_env.h"
#include "core/strings.h"

#include <fmt/format.h>

namespace grademl::record {
namespace {

// The elements' text of a bracketed literal "[...]" or "(...)", without a trailing comma;
// nullopt when `value` is not one.
std::optional<std::string_view> SequenceBody(std::string_view value) {
  if (value.size() < 2) return std::nullopt;
  char open = value.front(), close = value.back();
  if (!((open == '[' && close == ']') || (open == '(' && close == ')'))) return std::nullopt;
  std::string_view body = TrimSpace(value.substr(1, value.size() - 2));
  if (!body.empty() && body.back() == ',') body = TrimSpace(body.substr(0, body.size() - 1));
  return body;
}

bool IsQuotedLiteral(std::string_view value) {
  return value.size() >= 2 && (value.front() == '\'' || value.front() == '"') && value.back() == value.front();
}

}  // namespace

std::string PythonStringLiteral(std::string_view text) {
  std::string out = "'";
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += ch;  // UTF-8 bytes stay as they are: the variable is decoded as UTF-8
        }
    }
  }
  out += "'";
  return out;
}

std::string MergeDaskPreload(std::optional<std::string_view> user) {
  const std::string ours = PythonStringLiteral(kDaskPluginModule);
  std::string_view value = user ? TrimSpace(*user) : std::string_view();
  if (value.empty()) return "[" + ours + "]";
  if (value.find(kDaskPluginModule) != std::string_view::npos) return std::string(*user);
  if (auto body = SequenceBody(value)) {
    return body->empty() ? "[" + ours + "]" : fmt::format("[{}, {}]", *body, ours);
  }
  // One preload: a quoted literal is kept as written; anything else is the plain string
  // Dask would have taken (literal_eval fails on it), quoted.
  std::string one = IsQuotedLiteral(value) ? std::string(value) : PythonStringLiteral(*user);
  return fmt::format("[{}, {}]", one, ours);
}

std::string MergeDaskPreloadArgv(std::string_view user) {
  std::string_view value = TrimSpace(user);
  auto body = SequenceBody(value);
  if (!body || body->empty() || (body->front() != '[' && body->front() != '(')) return std::string(user);
  return fmt::format("[{}, []]", *body);
}

std::vector<std::pair<std::string, std::string>> DaskEnvironment(std::optional<std::string_view> user_preload,
                                                                 std::optional<std::string_view> user_argv) {
  std::vector<std::pair<std::string, std::string>> env;
  bool had_preload = user_preload.has_value() && !TrimSpace(*user_preload).empty();
  env.emplace_back(kDaskPreloadVar, MergeDaskPreload(user_preload));
  if (had_preload && user_argv && user_preload->find(kDaskPluginModule) == std::string_view::npos) {
    env.emplace_back(kDaskPreloadArgvVar, MergeDaskPreloadArgv(*user_argv));
  }
  env.emplace_back(kDaskPreloadReplacedVar, had_preload ? "0" : "1");
  bool replace_argv = !had_preload && !user_argv.has_value();
  if (replace_argv) env.emplace_back(kDaskPreloadArgvVar, "[]");
  env.emplace_back(kDaskArgvReplacedVar, replace_argv ? "1" : "0");
  return env;
}

}  // namespace grademl::record
