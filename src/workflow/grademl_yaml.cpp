// GradeML's own workflow format: a top-level `steps:` mapping of step name to
// {cmd, deps, outs, after, env, cwd}, with optional `name:` and `env:` (docs/workflows.md).
#include <filesystem>
#include <unordered_set>

#include "workflow/spec_yaml_support.h"

namespace grademl::workflow::spec_internal {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// Variables in one `env:` mapping: every step copies the workflow's, and a process's
// environment is limited anyway (execve's E2BIG).
constexpr size_t kMaxEnvVariables = 1000;

// Reads one spec file in our format; each method reports errors at the offending node.
class GrademlReader {
 public:
  explicit GrademlReader(const std::string& path) : file_(path), dir_(DirectoryOf(path)) {}

  StatusOr<ParsedSpec> Read(const YAML::Node& root) {
    ParsedSpec parsed;
    parsed.spec.path = file_;
    parsed.spec.format = "grademl";
    parsed.spec.name = std::filesystem::path(file_).stem().string();
    Env env;
    YAML::Node steps_key, steps;
    std::unordered_set<std::string> seen;
    for (const MapEntry& e : MapEntries(root)) {
      const std::string key = e.key.Scalar();
      if (!seen.insert(key).second) return Error(LineOf(e.key), fmt::format("duplicate key '{}'", key));
      if (key == "name") {
        if (!e.value.IsScalar() || e.value.Scalar().empty()) {
          return Error(ValueLine(e.key, e.value), "'name' must be a non-empty string");
        }
        parsed.spec.name = e.value.Scalar();
      } else if (key == "env") {
        GRADEML_RETURN_IF_ERROR(ReadEnv("", e.key, e.value, &env));
      } else if (key == "steps") {
        steps_key.reset(e.key);
        steps.reset(e.value);
      } else {
        return Error(LineOf(e.key), fmt::format("unknown top-level key '{}' (expected name, env, steps)", key));
      }
    }
    if (steps.IsNull() || (steps.IsMap() && steps.size() == 0)) return Error(LineOf(steps_key), "no steps");
    if (!steps.IsMap()) {
      return Error(LineOf(steps),
                   fmt::format("'steps' must be a mapping of step name to step, not {}", KindName(steps)));
    }
    for (const MapEntry& e : MapEntries(steps)) {
      GRADEML_RETURN_IF_ERROR(ReadStep(e.key, e.value, env, &parsed));
    }
    MoveStepNameDeps(&parsed);
    return parsed;
  }

 private:
  Status Error(int line, const std::string& reason) const { return SpecError(file_, line, reason); }

  // `where` is "step 'x': " for a step's env, empty for the workflow's.
  Status ReadEnv(const std::string& where, const YAML::Node& key, const YAML::Node& value, Env* env) const {
    if (value.IsNull()) return Status::Ok();
    if (!value.IsMap()) {
      return Error(ValueLine(key, value),
                   fmt::format("{}'env' must be a mapping of variable to value, not {}", where, KindName(value)));
    }
    const std::vector<MapEntry> entries = MapEntries(value);
    if (entries.size() > kMaxEnvVariables) {
      return Error(ValueLine(key, value), fmt::format("{}'env' has more than {} variables", where, kMaxEnvVariables));
    }
    for (const MapEntry& e : entries) {
      if (!e.key.IsScalar() || e.key.Scalar().empty() || e.key.Scalar().find('=') != std::string::npos) {
        return Error(LineOf(e.key), fmt::format("{}env: not a variable name", where));
      }
      const std::string& var = e.key.Scalar();
      if (!e.value.IsScalar()) {
        return Error(ValueLine(e.key, e.value),
                     fmt::format("{}env '{}' must be a string, not {}", where, var, KindName(e.value)));
      }
      SetEnv(env, var, e.value.Scalar());
    }
    return Status::Ok();
  }

  static void SetEnv(Env* env, const std::string& var, const std::string& value) {
    for (auto& [k, v] : *env) {
      if (k == var) {
        v = value;
        return;
      }
    }
    env->emplace_back(var, value);
  }

  Status ReadStringList(const std::string& step, const YAML::Node& key, const YAML::Node& value,
                        std::vector<std::string>* out, std::vector<int>* lines) const {
    const std::string what = key.Scalar();
    if (value.IsNull()) return Status::Ok();
    if (!value.IsSequence()) {
      return Error(ValueLine(key, value),
                   fmt::format("step '{}': '{}' must be a list of strings, not {}", step, what, KindName(value)));
    }
    for (const YAML::Node& item : value) {
      if (!item.IsScalar() || item.Scalar().empty()) {
        return Error(LineOf(item), fmt::format("step '{}': '{}' entries must be non-empty strings, not {}", step, what,
                                               item.IsScalar() ? "an empty string" : KindName(item)));
      }
      out->push_back(item.Scalar());
      lines->push_back(LineOf(item));
    }
    return Status::Ok();
  }

  Status ReadStep(const YAML::Node& name_node, const YAML::Node& body, const Env& workflow_env, ParsedSpec* parsed) {
    if (!name_node.IsScalar() || name_node.Scalar().empty()) {
      return Error(LineOf(name_node), "a step name must be a non-empty string");
    }
    StepSpec step;
    StepSource source;
    step.name = name_node.Scalar();
    step.line = LineOf(name_node);
    step.cwd = dir_;
    step.env = workflow_env;
    const std::string& name = step.name;
    if (!body.IsNull() && !body.IsMap()) {
      return Error(LineOf(body),
                   fmt::format("step '{}' must be a mapping (cmd, deps, outs, ...), not {}", name, KindName(body)));
    }
    bool has_cmd = false;
    std::unordered_set<std::string> seen;
    if (body.IsMap()) {
      for (const MapEntry& e : MapEntries(body)) {
        const YAML::Node& key = e.key;
        const YAML::Node& value = e.value;
        const std::string k = key.IsScalar() ? key.Scalar() : std::string();
        if (!seen.insert(k).second) return Error(LineOf(key), fmt::format("step '{}': duplicate key '{}'", name, k));
        if (k == "cmd") {
          GRADEML_ASSIGN_OR_RETURN(step.cmd, ReadCmd(name, key, value));
          has_cmd = true;
        } else if (k == "deps") {
          GRADEML_RETURN_IF_ERROR(ReadStringList(name, key, value, &step.deps, &source.dep_lines));
        } else if (k == "outs") {
          GRADEML_RETURN_IF_ERROR(ReadStringList(name, key, value, &step.outs, &source.out_lines));
        } else if (k == "after") {
          GRADEML_RETURN_IF_ERROR(ReadStringList(name, key, value, &step.after, &source.after_lines));
        } else if (k == "env") {
          GRADEML_RETURN_IF_ERROR(ReadEnv(fmt::format("step '{}': ", name), key, value, &step.env));
        } else if (k == "params") {
          std::vector<int> lines;
          std::vector<std::string> params;
          GRADEML_RETURN_IF_ERROR(ReadStringList(name, key, value, &params, &lines));
          // "KEY" is a key of params.yaml (as in DVC); "FILE:KEY" one of FILE; a name ending in
          // .yaml, .yml or .json, alone, the whole file.
          for (std::string& p : params) {
            bool whole_file = p.find(':') == std::string::npos &&
                              (p.ends_with(".yaml") || p.ends_with(".yml") || p.ends_with(".json"));
            step.params.push_back(whole_file || p.find(':') != std::string::npos ? p : "params.yaml:" + p);
          }
        } else if (k == "reuse") {
          if (!value.IsScalar() || (value.Scalar() != "true" && value.Scalar() != "false")) {
            return Error(ValueLine(key, value), fmt::format("step '{}': 'reuse' must be true or false", name));
          }
          if (value.Scalar() == "false") step.not_reusable = "reuse: false";
        } else if (k == "cwd") {
          if (!value.IsScalar() || value.Scalar().empty()) {
            return Error(ValueLine(key, value), fmt::format("step '{}': 'cwd' must be a non-empty string", name));
          }
          step.cwd = ResolvePath(dir_, value.Scalar());
        } else {
          return Error(LineOf(key),
                       fmt::format("step '{}': unknown key '{}' (expected cmd, deps, outs, params, after, env, "
                                   "cwd, reuse)",
                                   name, k));
        }
      }
    }
    if (!has_cmd) return Error(step.line, fmt::format("step '{}': missing 'cmd'", name));
    parsed->spec.steps.push_back(std::move(step));
    parsed->sources.push_back(std::move(source));
    return Status::Ok();
  }

  StatusOr<std::string> ReadCmd(const std::string& step, const YAML::Node& key, const YAML::Node& value) const {
    std::string cmd;
    if (value.IsScalar()) {
      cmd = value.Scalar();
    } else if (value.IsSequence()) {
      for (const YAML::Node& part : value) {
        if (!part.IsScalar() || part.Scalar().empty()) {
          return Error(LineOf(part), fmt::format("step '{}': 'cmd' list entries must be non-empty strings", step));
        }
        cmd += (cmd.empty() ? "" : " && ") + part.Scalar();
      }
    } else if (!value.IsNull()) {
      return Error(LineOf(value), fmt::format("step '{}': 'cmd' must be a string or a list of strings, not {}", step,
                                              KindName(value)));
    }
    if (cmd.find_first_not_of(" \t\r\n") == std::string::npos) {
      return Error(ValueLine(key, value), fmt::format("step '{}': 'cmd' is empty", step));
    }
    return cmd;
  }

  // A dep that names another step is an ordering constraint, not a file: the name wins over
  // a file of the same name. (A step's own name stays a file: a step never follows itself.)
  static void MoveStepNameDeps(ParsedSpec* parsed) {
    std::unordered_set<std::string> names;
    for (const StepSpec& s : parsed->spec.steps) names.insert(s.name);
    for (size_t i = 0; i < parsed->spec.steps.size(); ++i) {
      StepSpec& step = parsed->spec.steps[i];
      StepSource& source = parsed->sources[i];
      std::vector<std::string> files;
      std::vector<int> file_lines;
      for (size_t j = 0; j < step.deps.size(); ++j) {
        if (names.count(step.deps[j]) && step.deps[j] != step.name) {
          step.after.push_back(step.deps[j]);
          source.after_lines.push_back(source.dep_lines[j]);
        } else {
          files.push_back(step.deps[j]);
          file_lines.push_back(source.dep_lines[j]);
        }
      }
      step.deps = std::move(files);
      source.dep_lines = std::move(file_lines);
    }
  }

  std::string file_;
  std::string dir_;
};

}  // namespace

StatusOr<ParsedSpec> ParseGrademlSpec(const std::string& path, const YAML::Node& root) {
  return GrademlReader(path).Read(root);
}

}  // namespace grademl::workflow::spec_internal
