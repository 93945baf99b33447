#include "workflow/user_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/text.h"
#include "workflow/spec_yaml_support.h"
#include "workflow/yaml_bounds.h"

namespace grademl::workflow {

namespace {

using spec_internal::KindName;
using spec_internal::LineOf;
using spec_internal::MapEntries;
using spec_internal::SpecError;
using spec_internal::ValueLine;

constexpr size_t kMaxConfigBytes = 1 << 20;

// A list of strings (a single string is a list of one), each non-empty.
Status ReadStrings(const YAML::Node& key, const YAML::Node& value, const std::string& file,
                   const std::string& what, std::vector<std::string>& out) {
  if (value.IsScalar()) {
    out.push_back(value.Scalar());
  } else if (value.IsSequence()) {
    for (const YAML::Node& item : value) {
      if (!item.IsScalar()) return SpecError(file, LineOf(item), what + ": each entry must be a string, not " + KindName(item));
      out.push_back(item.Scalar());
    }
  } else if (!value.IsNull()) {
    return SpecError(file, ValueLine(key, value), what + " must be a list of strings, not " + KindName(value));
  }
  for (const std::string& s : out) {
    if (s.empty()) return SpecError(file, ValueLine(key, value), what + ": an entry is empty");
  }
  return Status::Ok();
}

// A section: a mapping whose keys are all in `known`; calls `read(key, value)` for each.
template <typename Read>
Status ReadSection(const YAML::Node& key, const YAML::Node& value, const std::string& file,
                   const std::string& section, std::initializer_list<std::string_view> known, Read read) {
  if (value.IsNull()) return Status::Ok();
  if (!value.IsMap()) return SpecError(file, ValueLine(key, value), section + " must be a mapping, not " + KindName(value));
  for (const auto& e : MapEntries(value)) {
    const std::string name = e.key.IsScalar() ? e.key.Scalar() : "";
    bool ok = false;
    for (std::string_view k : known) ok = ok || name == k;
    if (!ok) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return SpecError(file, LineOf(e.key), "unknown key '" + section + "." + name + "' (known: " + list + ")");
    }
    if (Status s = read(name, e.key, e.value); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

std::string UserConfigPath() {
  if (const char* p = std::getenv("GRADEML_CONFIG"); p != nullptr && *p != '\0') return p;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x != nullptr && *x != '\0') {
    return std::string(x) + "/grademl/config.yaml";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') return std::string(h) + "/.config/grademl/config.yaml";
  return "";
}

StatusOr<UserConfig> ParseUserConfig(const std::string& text, const std::string& file) {
  StatusOr<YAML::Node> doc = LoadBoundedYaml(text, file);
  if (!doc.ok()) return doc.status();
  UserConfig config;
  config.path = file;
  const YAML::Node& root = *doc;
  if (root.IsNull()) return config;
  if (!root.IsMap()) return SpecError(file, LineOf(root), std::string("the config must be a mapping, not ") + KindName(root));
  Status s = ReadSection(YAML::Node(), root, file, "", {"redact", "reuse"}, [&](const std::string& name, const YAML::Node& k,
                                                                                const YAML::Node& v) -> Status {
    if (name == "redact") {
      return ReadSection(k, v, file, "redact", {"patterns"}, [&](const std::string&, const YAML::Node& k2, const YAML::Node& v2) {
        return ReadStrings(k2, v2, file, "redact.patterns", config.redact_patterns);
      });
    }
    return ReadSection(k, v, file, "reuse", {"trust"}, [&](const std::string&, const YAML::Node& k2, const YAML::Node& v2) {
      return ReadStrings(k2, v2, file, "reuse.trust", config.reuse_trust);
    });
  });
  if (!s.ok()) {
    // Top-level unknown keys read "unknown key '.x'": drop the dot of the empty section.
    std::string m = s.message();
    if (auto at = m.find("unknown key '."); at != std::string::npos) m.erase(at + 13, 1);
    return Status(s.code(), m);
  }
  return config;
}

StatusOr<UserConfig> LoadUserConfigFile(const std::string& path, bool required) {
  if (path.empty()) return UserConfig{};
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && !required) return UserConfig{};
    return IoError("{}: cannot read the grademl config: {}", EscapeControl(path), std::strerror(errno));
  }
  if (st.st_uid != geteuid() && st.st_uid != 0) {
    return InvalidArgument("{}: owned by another user (uid {}); grademl reads only a config of yours, which decides whom to trust",
                           EscapeControl(path), st.st_uid);
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return InvalidArgument("{}: writable by its group or others; grademl reads only a config nobody else can change, "
                           "which decides whom to trust (chmod go-w {})", EscapeControl(path), EscapeControl(path));
  }
  StatusOr<std::string> text = ReadBoundedFile(path, kMaxConfigBytes);
  if (!text.ok()) return text.status();
  return ParseUserConfig(*text, path);
}

StatusOr<UserConfig> LoadUserConfig() {
  const char* env = std::getenv("GRADEML_CONFIG");
  return LoadUserConfigFile(UserConfigPath(), env != nullptr && *env != '\0');
}

}  // namespace grademl::workflow
