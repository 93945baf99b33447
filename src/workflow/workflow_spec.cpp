// The common part of the workflow spec readers: file reading, format detection, the checks
// and dependency inference shared by both formats, and TopologicalOrder.
#include "workflow/workflow_spec.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include "workflow/spec_yaml_support.h"

namespace grademl::workflow {
namespace spec_internal {

int LineOf(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  const int line = node.Mark().line;
  return line >= 0 ? line + 1 : 0;
}

int ValueLine(const YAML::Node& key, const YAML::Node& value) {
  return !value.IsDefined() || value.IsNull() ? LineOf(key) : LineOf(value);
}

Status SpecError(const std::string& file, int line, const std::string& reason) {
  if (line <= 0) return InvalidArgument("{}: {}", file, reason);
  return InvalidArgument("{}:{}: {}", file, line, reason);
}

const char* KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: return "a string";
    default: return "empty";
  }
}

std::vector<MapEntry> MapEntries(const YAML::Node& map) {
  std::vector<MapEntry> entries;
  if (!map.IsMap()) return entries;
  std::vector<YAML::Node> sources;
  auto is_mergeable = [](const YAML::Node& n) {
    if (n.IsMap()) return true;
    if (!n.IsSequence() || n.size() == 0) return false;
    for (const YAML::Node& item : n) {
      if (!item.IsMap()) return false;
    }
    return true;
  };
  for (const auto& pair : map) {
    const YAML::Node& key = pair.first;
    const YAML::Node& value = pair.second;
    if (key.IsScalar() && key.Scalar() == "<<" && key.Tag() == "?" && is_mergeable(value)) {
      if (value.IsMap()) {
        sources.push_back(value);
      } else {
        for (const YAML::Node& item : value) sources.push_back(item);
      }
      continue;
    }
    entries.push_back({key, value, false});
  }
  if (sources.empty()) return entries;
  std::set<std::string> present;
  for (const MapEntry& e : entries) present.insert(e.key.Scalar());
  for (const YAML::Node& source : sources) {
    for (MapEntry& e : MapEntries(source)) {
      if (!present.insert(e.key.Scalar()).second) continue;
      e.merged = true;
      entries.push_back(std::move(e));
    }
  }
  return entries;
}

namespace {

std::string StripTrailingSeparators(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

std::string DirectoryOf(const std::string& file) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(file, ec);
  if (ec) abs = file;
  return StripTrailingSeparators(abs.lexically_normal().parent_path().string());
}

std::string ResolvePath(const std::string& base_dir, const std::string& path) {
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  return StripTrailingSeparators(p.lexically_normal().string());
}

StatusOr<YAML::Node> ReadYamlFile(const std::string& path) {
  std::string text;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError,
                  fmt::format("{}: cannot read: {}", path, strerror(err)));
  }
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      return IoError("{}: cannot read: {}", path, strerror(err));
    }
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return SpecError(path, e.mark.line >= 0 ? e.mark.line + 1 : 0, e.msg);
  }
}

namespace {

bool HasKey(const YAML::Node& map, const std::string& key) {
  if (!map.IsMap()) return false;
  for (const MapEntry& e : MapEntries(map)) {
    if (e.key.IsScalar() && e.key.Scalar() == key) return true;
  }
  return false;
}

// A path in the form the dependency checks compare: resolved against the step's directory
// and split into components. A URL (a DVC external dependency) stays one opaque component.
std::vector<std::string> PathKey(const std::string& cwd, const std::string& written) {
  if (written.find("://") != std::string::npos) return {written};
  const std::string resolved = ResolvePath(cwd, written);
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t slash = resolved.find('/', start);
    parts.push_back(resolved.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return parts;
}

// True when `inner` is `outer` or lies inside it.
bool Covers(const std::vector<std::string>& outer, const std::vector<std::string>& inner) {
  return outer.size() <= inner.size() && std::equal(outer.begin(), outer.end(), inner.begin());
}

std::string JoinKey(const std::vector<std::string>& parts) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) s += '/';
    s += parts[i];
  }
  return s;
}

// Finds a cycle in the step graph; empty when there is none. The cycle starts (and ends)
// at its step that comes first in the file.
std::vector<size_t> FindCycle(size_t n, const std::vector<StepDependency>& deps) {
  std::vector<std::vector<size_t>> next(n);
  for (const auto& d : deps) next[d.from].push_back(d.to);
  enum Color { kWhite, kGray, kBlack };
  std::vector<Color> color(n, kWhite);
  std::vector<size_t> stack;
  std::vector<size_t> cycle;
  std::function<bool(size_t)> visit = [&](size_t v) {
    color[v] = kGray;
    stack.push_back(v);
    for (size_t w : next[v]) {
      if (color[w] == kGray) {
        auto it = std::find(stack.begin(), stack.end(), w);
        cycle.assign(it, stack.end());
        return true;
      }
      if (color[w] == kWhite && visit(w)) return true;
    }
    stack.pop_back();
    color[v] = kBlack;
    return false;
  };
  for (size_t v = 0; v < n && cycle.empty(); ++v) {
    if (color[v] == kWhite) visit(v);
  }
  if (cycle.empty()) return cycle;
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  cycle.push_back(cycle.front());
  return cycle;
}

// The checks and inference common to every format: unique names, known `after` names, no
// output declared by two steps, the dependencies, no cycle.
Status LinkSteps(ParsedSpec& parsed) {
  WorkflowSpec& spec = parsed.spec;
  const std::string& file = spec.path;
  std::vector<StepSpec>& steps = spec.steps;
  if (steps.empty()) return SpecError(file, 0, "no steps");

  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < steps.size(); ++i) {
    auto [it, inserted] = by_name.emplace(steps[i].name, i);
    if (!inserted) {
      return SpecError(
          file, steps[i].line,
          fmt::format("duplicate step name '{}' (first defined on line {})", steps[i].name, steps[it->second].line));
    }
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t j = 0; j < steps[i].after.size(); ++j) {
      if (!by_name.count(steps[i].after[j])) {
        const auto& lines = parsed.sources[i].after_lines;
        return SpecError(file, j < lines.size() ? lines[j] : steps[i].line,
                         fmt::format("step '{}': no step named '{}' to come after", steps[i].name, steps[i].after[j]));
      }
    }
  }

  std::vector<std::vector<std::vector<std::string>>> out_keys(steps.size());
  std::map<std::string, size_t> out_owner;
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t j = 0; j < steps[i].outs.size(); ++j) {
      out_keys[i].push_back(PathKey(steps[i].cwd, steps[i].outs[j]));
      auto [it, inserted] = out_owner.emplace(JoinKey(out_keys[i].back()), i);
      if (!inserted && it->second != i) {
        const auto& lines = parsed.sources[i].out_lines;
        return SpecError(file, j < lines.size() ? lines[j] : steps[i].line,
                         fmt::format("steps '{}' and '{}' both declare output '{}'", steps[it->second].name,
                                     steps[i].name, steps[i].outs[j]));
      }
    }
  }

  std::set<std::tuple<size_t, size_t, std::string>> seen;
  auto add = [&](size_t from, size_t to, std::string via) {
    if (seen.emplace(from, to, via).second) spec.dependencies.push_back({from, to, std::move(via)});
  };
  for (size_t to = 0; to < steps.size(); ++to) {
    for (const std::string& name : steps[to].after) add(by_name.at(name), to, "after");
    for (const std::string& dep : steps[to].deps) {
      const std::vector<std::string> dep_key = PathKey(steps[to].cwd, dep);
      for (size_t from = 0; from < steps.size(); ++from) {
        if (from == to) continue;
        for (const auto& out_key : out_keys[from]) {
          if (Covers(out_key, dep_key) || Covers(dep_key, out_key)) {
            add(from, to, "file:" + dep);
            break;
          }
        }
      }
    }
  }

  const std::vector<size_t> cycle = FindCycle(steps.size(), spec.dependencies);
  if (!cycle.empty()) {
    std::string names;
    for (size_t i : cycle) names += (names.empty() ? "" : " -> ") + steps[i].name;
    return SpecError(file, steps[cycle.front()].line, "steps form a cycle: " + names);
  }
  return Status::Ok();
}

}  // namespace
}  // namespace spec_internal

using namespace spec_internal;

std::vector<size_t> WorkflowSpec::TopologicalOrder() const {
  const size_t n = steps.size();
  std::vector<std::vector<size_t>> next(n);
  std::vector<size_t> pending(n, 0);
  std::set<std::pair<size_t, size_t>> edges;
  for (const auto& d : dependencies) {
    if (d.from >= n || d.to >= n || d.from == d.to || !edges.emplace(d.from, d.to).second) continue;
    next[d.from].push_back(d.to);
    ++pending[d.to];
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<size_t> order;
  std::vector<bool> placed(n, false);
  while (!ready.empty()) {
    const size_t v = ready.top();
    ready.pop();
    order.push_back(v);
    placed[v] = true;
    for (size_t w : next[v]) {
      if (--pending[w] == 0) ready.push(w);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!placed[i]) order.push_back(i);
  }
  return order;
}

size_t WorkflowSpec::FindStep(const std::string& step_name) const {
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].name == step_name) return i;
  }
  return steps.size();
}

bool LooksLikeWorkflowFile(const std::string& arg) {
  std::string ext = std::filesystem::path(arg).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext != ".yaml" && ext != ".yml") return false;
  std::error_code ec;
  return std::filesystem::is_regular_file(arg, ec);
}

StatusOr<WorkflowSpec> LoadWorkflowSpec(const std::string& path) {
  GRADEML_ASSIGN_OR_RETURN(YAML::Node root, ReadYamlFile(path));
  try {
    const std::string file_name = std::filesystem::path(path).filename().string();
    const bool dvc_name = file_name == "dvc.yaml" || file_name == "dvc.yml";
    const bool has_stages = HasKey(root, "stages");
    const bool has_steps = HasKey(root, "steps");
    StatusOr<ParsedSpec> parsed = Status(StatusCode::kInternal, "unset");
    if (dvc_name || (has_stages && !has_steps)) {
      parsed = ParseDvcSpec(path, root);
    } else if (has_steps && !has_stages) {
      parsed = ParseGrademlSpec(path, root);
    } else if (has_steps && has_stages) {
      return SpecError(path, LineOf(root),
                       "both 'steps:' and 'stages:' at the top level; a workflow is either GradeML's format "
                       "(steps) or DVC's (stages)");
    } else {
      return SpecError(path, root.IsDefined() && !root.IsNull() ? LineOf(root) : 0,
                       "not a workflow: expected a top-level 'steps:' mapping (GradeML format) or 'stages:' "
                       "(DVC format)");
    }
    if (!parsed.ok()) return parsed.status();
    GRADEML_RETURN_IF_ERROR(LinkSteps(*parsed));
    return std::move(parsed->spec);
  } catch (const YAML::Exception& e) {
    return SpecError(path, e.mark.line >= 0 ? e.mark.line + 1 : 0, e.msg);
  }
}

}  // namespace grademl::workflow
