// Shared by the workflow spec tests: a scratch directory to write spec files into, and
// short renderings of a loaded spec (names, edges) to compare against.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/status.h"
#include "workflow/workflow_spec.h"

namespace grademl::workflow::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at scope exit.
class SpecDir {
 public:
  SpecDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "grademl_spec_XXXXXX").string();
    GRADEML_CHECK(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~SpecDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  SpecDir(const SpecDir&) = delete;
  SpecDir& operator=(const SpecDir&) = delete;

  // Writes `text` to `relative` (creating its directories) and returns its full path.
  std::string Write(const std::string& relative, const std::string& text) const {
    const std::filesystem::path file = path_ / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << text;
    return file.string();
  }
  std::string Path(const std::string& relative = "") const {
    return relative.empty() ? path_.string() : (path_ / relative).string();
  }

 private:
  std::filesystem::path path_;
};

inline WorkflowSpec LoadOk(const std::string& path) {
  StatusOr<WorkflowSpec> spec = LoadWorkflowSpec(path);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  if (!spec.ok()) return WorkflowSpec{};
  return std::move(spec).value();
}

// The error message of a load that must fail.
inline std::string LoadError(const std::string& path) {
  StatusOr<WorkflowSpec> spec = LoadWorkflowSpec(path);
  EXPECT_FALSE(spec.ok()) << "loaded " << path;
  return spec.ok() ? std::string() : spec.status().message();
}

inline std::vector<std::string> StepNames(const WorkflowSpec& spec) {
  std::vector<std::string> names;
  for (const StepSpec& s : spec.steps) names.push_back(s.name);
  return names;
}

inline std::vector<std::string> OrderNames(const WorkflowSpec& spec) {
  std::vector<std::string> names;
  for (size_t i : spec.TopologicalOrder()) names.push_back(spec.steps[i].name);
  return names;
}

// Each dependency as "from -> to (via)".
inline std::vector<std::string> Edges(const WorkflowSpec& spec) {
  std::vector<std::string> edges;
  for (const StepDependency& d : spec.dependencies) {
    edges.push_back(spec.steps[d.from].name + " -> " + spec.steps[d.to].name + " (" + d.via + ")");
  }
  return edges;
}

}  // namespace grademl::workflow::testing
