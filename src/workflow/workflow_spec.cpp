// The common part of the workflow spec readers: file reading, format detection, the checks
// and dependency inference shared by both formats, and TopologicalOrder.
#include "workflow/workflow_spec.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include "core/text.h"
#include "workflow/spec_yaml_support.h"
#include "workflow/yaml_bounds.h"

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
  // Names and values quoted in a reason come from the file: shown escaped, never raw.
  if (line <= 0) return InvalidArgument("{}: {}", EscapeControl(file), EscapeControl(reason));
  return InvalidArgument("{}:{}: {}", EscapeControl(file), line, EscapeControl(reason));
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
  const YamlLimits limits;
  StatusOr<std::string> text = ReadBoundedFile(path, limits.max_file_bytes);
  if (!text.ok()) {
    // Not readable, not a regular file or too large: an I/O-kind error, for callers that
    // prefix it with where the file was named.
    const StatusCode code =
        text.status().code() == StatusCode::kInvalidArgument ? StatusCode::kIoError : text.status().code();
    return Status(code, EscapeControl(text.status().message()));
  }
  return LoadBoundedYaml(*text, path, limits);
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

// Finds a cycle in the step graph; empty when there is none. The cycle starts (and ends)
// at its step that comes first in the file. A depth-first search with an explicit stack: a
// chain of 200,000 steps must not overflow the thread's stack.
std::vector<size_t> FindCycle(size_t n, const std::vector<StepDependency>& deps) {
  std::vector<std::vector<size_t>> next(n);
  for (const auto& d : deps) next[d.from].push_back(d.to);
  enum Color { kWhite, kGray, kBlack };
  std::vector<Color> color(n, kWhite);
  struct Frame {
    size_t step;
    size_t edge;  // the next edge of `step` to follow
  };
  std::vector<Frame> path;  // the gray steps, in order
  std::vector<size_t> cycle;
  for (size_t root = 0; root < n && cycle.empty(); ++root) {
    if (color[root] != kWhite) continue;
    color[root] = kGray;
    path.push_back({root, 0});
    while (!path.empty() && cycle.empty()) {
      Frame& top = path.back();
      if (top.edge == next[top.step].size()) {
        color[top.step] = kBlack;
        path.pop_back();
        continue;
      }
      const size_t w = next[top.step][top.edge++];
      if (color[w] == kGray) {
        auto it = std::find_if(path.begin(), path.end(), [w](const Frame& f) { return f.step == w; });
        for (; it != path.end(); ++it) cycle.push_back(it->step);
      } else if (color[w] == kWhite) {
        color[w] = kGray;
        path.push_back({w, 0});
      }
    }
    path.clear();
  }
  if (cycle.empty()) return cycle;
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  cycle.push_back(cycle.front());
  return cycle;
}

// Edges between steps, at most: each output inside a directory that many steps read is one
// edge per reader, so a hostile spec could ask for billions.
constexpr size_t kMaxDependencies = 1'000'000;
// The longest string execve passes in argv or the environment: MAX_ARG_STRLEN (32 pages)
// counts the terminating NUL. A longer `cmd` could never start.
constexpr size_t kMaxCommandBytes = 128 * 1024 - 1;

}  // namespace

Status LinkSteps(ParsedSpec& parsed) {
  WorkflowSpec& spec = parsed.spec;
  const std::string& file = spec.path;
  std::vector<StepSpec>& steps = spec.steps;
  if (steps.empty()) return SpecError(file, 0, "no steps");

  for (const StepSpec& step : steps) {
    if (step.cmd.size() > kMaxCommandBytes) {
      return SpecError(file, step.line,
                       fmt::format("step '{}': 'cmd' is {} bytes; /bin/sh -c takes at most {} (Linux's MAX_ARG_STRLEN)",
                                   step.name, step.cmd.size(), kMaxCommandBytes));
    }
    for (const auto& [var, value] : step.env) {
      if (var.size() + 1 + value.size() > kMaxCommandBytes) {
        return SpecError(file, step.line, fmt::format("step '{}': env '{}' is longer than {} bytes (Linux's "
                                                      "MAX_ARG_STRLEN)",
                                                      step.name, var.substr(0, 64), kMaxCommandBytes));
      }
    }
  }

  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < steps.size(); ++i) {
    auto [it, inserted] = by_name.emplace(steps[i].name, i);
    if (!inserted) {
      return SpecError(
          file, steps[i].line,
          fmt::format("duplicate step name '{}' (first defined on line {})", steps[i].name,
                      steps[it->second].line));
    }
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t j = 0; j < steps[i].after.size(); ++j) {
      if (!by_name.count(steps[i].after[j])) {
        const auto& lines = parsed.sources[i].after_lines;
        return SpecError(file, j < lines.size() ? lines[j] : steps[i].line,
                         fmt::format("step '{}': no step named '{}' to come after", steps[i].name,
                                     steps[i].after[j]));
      }
    }
  }

  // Each output's path key and its step; a key has one owner (else an error). Ordered, so
  // that the outputs inside a directory are one range.
  std::map<std::vector<std::string>, size_t> out_owner;
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t j = 0; j < steps[i].outs.size(); ++j) {
      std::vector<std::string> key = PathKey(steps[i].cwd, steps[i].outs[j]);
      auto [it, inserted] = out_owner.emplace(std::move(key), i);
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
  std::vector<size_t> from_steps;
  for (size_t to = 0; to < steps.size(); ++to) {
    for (const std::string& name : steps[to].after) add(by_name.at(name), to, "after");
    for (size_t j = 0; j < steps[to].deps.size(); ++j) {
      const std::string& dep = steps[to].deps[j];
      const std::vector<std::string> dep_key = PathKey(steps[to].cwd, dep);
      // The outputs that are the dep or contain it (its prefixes), then those inside it.
      from_steps.clear();
      std::vector<std::string> prefix;
      for (const std::string& part : dep_key) {
        prefix.push_back(part);
        auto it = out_owner.find(prefix);
        if (it != out_owner.end()) from_steps.push_back(it->second);
      }
      for (auto it = out_owner.upper_bound(dep_key); it != out_owner.end() && Covers(dep_key, it->first); ++it) {
        from_steps.push_back(it->second);
      }
      std::sort(from_steps.begin(), from_steps.end());
      from_steps.erase(std::unique(from_steps.begin(), from_steps.end()), from_steps.end());
      for (size_t from : from_steps) {
        if (from == to) continue;
        add(from, to, "file:" + dep);
        if (spec.dependencies.size() > kMaxDependencies) {
          const auto& lines = parsed.sources[to].dep_lines;
          return SpecError(file, j < lines.size() ? lines[j] : steps[to].line,
                           fmt::format("more than {} dependencies between steps", kMaxDependencies));
        }
      }
    }
  }

  const std::vector<size_t> cycle = FindCycle(steps.size(), spec.dependencies);
  if (!cycle.empty()) {
    // A long cycle is shown by its ends: the message stays one short line.
    constexpr size_t kShown = 8;
    std::string names;
    for (size_t k = 0; k < cycle.size(); ++k) {
      if (cycle.size() > kShown + 1 && k == kShown / 2) {
        names += " -> ...";
        k = cycle.size() - kShown / 2 - 1;
        continue;
      }
      names += (names.empty() ? "" : " -> ") + steps[cycle[k]].name;
    }
    if (cycle.size() > kShown + 1) names += fmt::format(" ({} steps)", cycle.size() - 1);
    return SpecError(file, steps[cycle.front()].line, "steps form a cycle: " + names);
  }
  return Status::Ok();
}

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
  return ext == ".yaml" || ext == ".yml";
}

StatusOr<WorkflowSpec> LoadWorkflowSpec(const std::string& path) {
  const YamlLimits limits;
  StatusOr<std::string> text = ReadBoundedFile(path, limits.max_file_bytes);
  if (!text.ok()) return Status(text.status().code(), EscapeControl(text.status().message()));
  return ParseWorkflowSpec(*text, path);
}

StatusOr<WorkflowSpec> ParseWorkflowSpec(std::string_view text, const std::string& path) {
  GRADEML_ASSIGN_OR_RETURN(YAML::Node root, LoadBoundedYaml(text, path));
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
