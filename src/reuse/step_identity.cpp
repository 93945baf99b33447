#include "reuse/step_identity.h"

#include <algorithm>
#include <map>

#include "core/sha256.h"
#include "core/text.h"
#include "workflow/spec_yaml_support.h"
#include "workflow/yaml_bounds.h"

extern char** environ;

namespace grademl::reuse {
namespace {

// A canonical serialisation of a YAML value: scalars length-prefixed, mapping keys sorted.
void CanonicalYaml(const YAML::Node& node, std::string& out, int depth) {
  if (depth > 256) return;  // LoadBoundedYaml bounds nesting already
  switch (node.Type()) {
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      out += 's';
      out += std::to_string(s.size());
      out += ':';
      out += s;
      break;
    }
    case YAML::NodeType::Sequence:
      out += '[';
      for (const YAML::Node& item : node) CanonicalYaml(item, out, depth + 1);
      out += ']';
      break;
    case YAML::NodeType::Map: {
      // Each key and value serialised first, then sorted as strings. YAML::Nodes must not be
      // sorted themselves: assigning one to another writes through to the node it refers to
      // in the document (yaml-cpp's set_ref), so std::sort's moves overwrote one key's value
      // with another's ({betas: .., name: adam} and {betas: .., name: sgd} hashed the same).
      std::vector<std::pair<std::string, std::string>> items;
      for (const auto& kv : node) {
        std::string key;
        std::string value;
        CanonicalYaml(kv.first, key, depth + 1);
        CanonicalYaml(kv.second, value, depth + 1);
        items.emplace_back(std::move(key), std::move(value));
      }
      std::sort(items.begin(), items.end());
      out += '{';
      for (const auto& [key, value] : items) {
        out += key;
        out += value;
      }
      out += '}';
      break;
    }
    default:
      out += 'n';
      break;
  }
}

void PutField(std::string& out, std::string_view s) {
  out += s;
  out += '\0';
}

}  // namespace

bool IgnoredInIdentity(std::string_view name) {
  static constexpr std::string_view kExact[] = {"PWD",  "OLDPWD",    "SHLVL",   "_",        "HOME",   "USER",
                                                "LOGNAME", "MAIL",   "HOSTNAME", "COLORTERM", "COLUMNS", "LINES",
                                                "DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "STY", "WINDOW",
                                                "LS_COLORS", "PAGER", "EDITOR", "VISUAL", "PS1", "PS2", "PS3",
                                                "PS4", "PROMPT_COMMAND"};
  static constexpr std::string_view kPrefixes[] = {"GRADEML_", "TERM", "SSH_", "XDG_", "DBUS_", "TMUX",
                                                   "LESS",     "HIST", "SUDO_"};
  for (std::string_view e : kExact) {
    if (name == e) return true;
  }
  for (std::string_view p : kPrefixes) {
    if (name.starts_with(p)) return true;
  }
  return false;
}

std::string NotReusableBySpec(const workflow::StepSpec& step) {
  if (!step.not_reusable.empty()) return step.not_reusable;
  if (step.outs.empty()) return "no outs: nothing to restore";
  if (step.deps.empty() && step.params.empty()) return "no deps or params: what it reads is not declared";
  if (!step.after.empty()) {
    return fmt::format("runs after '{}' by name: it may read what that step left outside its outs",
                       EscapeControl(step.after.front()));
  }
  return "";
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

StatusOr<model::StepArtifact> HashParameter(const std::string& param, const std::string& cwd,
                                            const ContentHasher& hasher, int64_t* bytes_read) {
  size_t colon = param.find(':');
  std::string file = param.substr(0, colon);
  std::string abs = workflow::spec_internal::ResolvePath(cwd, file);
  model::StepArtifact a{.path = param};
  if (colon == std::string::npos) {  // the whole file
    GRADEML_ASSIGN_OR_RETURN(ContentHash h, hasher.Hash(abs));
    if (bytes_read != nullptr) *bytes_read += h.bytes_read;
    a.hash = h.hash;
    a.size = h.size;
    a.directory = h.directory;
    return a;
  }
  std::string key = param.substr(colon + 1);
  GRADEML_ASSIGN_OR_RETURN(std::string text, workflow::ReadBoundedFile(abs, workflow::YamlLimits().max_file_bytes));
  if (bytes_read != nullptr) *bytes_read += static_cast<int64_t>(text.size());
  GRADEML_ASSIGN_OR_RETURN(YAML::Node root, workflow::LoadBoundedYaml(text, file));
  // "a.b.c": nested mapping keys (a key containing dots as written is tried first).
  YAML::Node node = YAML::Clone(root);
  std::string_view rest = key;
  while (!rest.empty()) {
    if (!node.IsMap()) return NotFound("{}: no parameter '{}'", EscapeControl(file), EscapeControl(key));
    YAML::Node whole = node[std::string(rest)];
    if (whole) {
      node = whole;
      break;
    }
    size_t dot = rest.find('.');
    std::string part(rest.substr(0, dot));
    YAML::Node next = node[part];
    if (!next) return NotFound("{}: no parameter '{}'", EscapeControl(file), EscapeControl(key));
    node = next;
    rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
  }
  std::string canonical;
  CanonicalYaml(node, canonical, 0);
  a.hash = Sha256Hex(canonical);
  a.size = static_cast<int64_t>(canonical.size());
  return a;
}

StepIdentity IdentifyStep(const workflow::StepSpec& step, const ContentHasher& hasher,
                          const std::vector<std::string>& environment) {
  StepIdentity id;
  id.not_reusable = NotReusableBySpec(step);
  int64_t start = WallClock::MonotonicNow();
  std::string text = "grademl-step 1";
  text += '\0';
  PutField(text, "cmd");
  PutField(text, step.cmd);
  for (const std::string& out : step.outs) {
    PutField(text, "out");
    PutField(text, out);
  }
  for (const std::string& dep : step.deps) {
    model::StepArtifact a{.path = dep};
    StatusOr<ContentHash> h = hasher.Hash(workflow::spec_internal::ResolvePath(step.cwd, dep));
    if (h.ok()) {
      a.hash = h->hash;
      a.size = h->size;
      a.directory = h->directory;
      id.bytes_read += h->bytes_read;
    } else if (id.error.empty()) {
      id.error = fmt::format("dep '{}': {}", EscapeControl(dep), h.status().message());
    }
    PutField(text, "dep");
    PutField(text, dep);
    PutField(text, a.hash);
    id.inputs.push_back(std::move(a));
  }
  for (const std::string& param : step.params) {
    StatusOr<model::StepArtifact> a = HashParameter(param, step.cwd, hasher, &id.bytes_read);
    if (!a.ok()) {
      if (id.error.empty()) id.error = fmt::format("param '{}': {}", EscapeControl(param), a.status().message());
      a = model::StepArtifact{.path = param};
    }
    PutField(text, "param");
    PutField(text, param);
    PutField(text, a->hash);
    id.inputs.push_back(std::move(*a));
  }
  std::map<std::string, std::string> env;
  for (const std::string& entry : environment) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos || IgnoredInIdentity(std::string_view(entry).substr(0, eq))) continue;
    env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [name, value] : step.env) {
    if (!IgnoredInIdentity(name) || !name.starts_with("GRADEML_")) env[name] = value;
  }
  for (const auto& [name, value] : env) {
    PutField(text, "env");
    PutField(text, name);
    PutField(text, value);
  }
  if (id.error.empty()) id.key = Sha256Hex(text);
  id.hash_ns = WallClock::MonotonicNow() - start;
  return id;
}

}  // namespace grademl::reuse
