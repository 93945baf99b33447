// What both formats share: format detection, LooksLikeWorkflowFile, TopologicalOrder,
// file errors, and the fixture in our format.
#include "workflow/workflow_spec.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "spec_test_support.h"

namespace grademl::workflow {
namespace {

using testing::Edges;
using testing::LoadError;
using testing::LoadOk;
using testing::OrderNames;
using testing::SpecDir;

using V = std::vector<std::string>;

WorkflowSpec Graph(size_t n, std::vector<StepDependency> deps) {
  WorkflowSpec spec;
  for (size_t i = 0; i < n; ++i) spec.steps.push_back({.name = std::string(1, static_cast<char>('a' + i))});
  spec.dependencies = std::move(deps);
  return spec;
}

TEST(TopologicalOrderTest, PutsDependenciesFirstAndTiesInFileOrder) {
  EXPECT_EQ(Graph(4, {{2, 0, "after"}, {3, 1, "after"}}).TopologicalOrder(), (std::vector<size_t>{2, 0, 3, 1}));
  EXPECT_EQ(Graph(4, {}).TopologicalOrder(), (std::vector<size_t>{0, 1, 2, 3}));
  // A diamond written backwards, with a duplicate edge.
  EXPECT_EQ(Graph(4, {{3, 1, "file:x"}, {3, 2, "file:y"}, {1, 0, "after"}, {2, 0, "after"}, {3, 1, "after"}})
                .TopologicalOrder(),
            (std::vector<size_t>{3, 1, 2, 0}));
  EXPECT_TRUE(Graph(0, {}).TopologicalOrder().empty());
}

TEST(TopologicalOrderTest, PutsStepsOfACycleLastInFileOrder) {
  EXPECT_EQ(Graph(4, {{1, 2, "after"}, {2, 1, "after"}, {0, 3, "after"}}).TopologicalOrder(),
            (std::vector<size_t>{0, 3, 1, 2}));
}

TEST(WorkflowSpecTest, FindStep) {
  WorkflowSpec spec = Graph(3, {});
  EXPECT_EQ(spec.FindStep("b"), 1u);
  EXPECT_EQ(spec.FindStep("zz"), 3u);
}

TEST(LooksLikeWorkflowFileTest, WantsAYamlName) {
  SpecDir dir;
  EXPECT_TRUE(LooksLikeWorkflowFile(dir.Write("pipeline.yaml", "steps: {}\n")));
  EXPECT_TRUE(LooksLikeWorkflowFile(dir.Write("dvc.yml", "")));
  EXPECT_TRUE(LooksLikeWorkflowFile(dir.Write("UPPER.YAML", "")));
  EXPECT_FALSE(LooksLikeWorkflowFile(dir.Write("train.py", "")));
  // A missing file or a directory is still a workflow: loading it is a one-line error,
  // where running it as a command reported a failed "command" with misleading figures.
  EXPECT_TRUE(LooksLikeWorkflowFile(dir.Path("missing.yaml")));
  ASSERT_EQ(mkdir(dir.Path("folder.yaml").c_str(), 0755), 0);
  EXPECT_TRUE(LooksLikeWorkflowFile(dir.Path("folder.yaml")));
  EXPECT_FALSE(LooksLikeWorkflowFile("python3"));
  EXPECT_FALSE(LooksLikeWorkflowFile(""));
}

TEST(LoadWorkflowSpecTest, ReadsTheDigitsFixture) {
  const std::string dir = std::string(GRADEML_TESTDATA_DIR) + "/workflows";
  WorkflowSpec spec = LoadOk(dir + "/digits.yaml");
  EXPECT_EQ(spec.format, "grademl");
  EXPECT_EQ(spec.name, "digits");
  EXPECT_EQ(Edges(spec), (V{"acquire -> clean (file:data/raw.csv)", "clean -> train (file:data/clean.csv)",
                            "train -> evaluate (file:models/model.pkl)", "clean -> evaluate (file:data/clean.csv)"}));
  EXPECT_EQ(OrderNames(spec), (V{"acquire", "clean", "train", "evaluate"}));
  EXPECT_EQ(spec.steps[2].env,
            (std::vector<std::pair<std::string, std::string>>{{"PYTHONHASHSEED", "0"}, {"OMP_NUM_THREADS", "1"}}));
}

// The full example of docs/workflows.md must load, with the dependencies it describes.
TEST(LoadWorkflowSpecTest, ReadsTheExampleInTheDocs) {
  std::ifstream in(std::string(GRADEML_SOURCE_DIR) + "/docs/workflows.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t begin = doc.find("```yaml\nname: digits");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = doc.find("```", begin + 7);
  SpecDir dir;
  WorkflowSpec spec = LoadOk(dir.Write("digits.yaml", doc.substr(begin + 8, end - begin - 8)));
  EXPECT_EQ(Edges(spec), (V{"acquire -> clean (file:data/raw.csv)", "clean -> train (file:data/clean.csv)",
                            "train -> evaluate (file:models/model.pkl)", "clean -> evaluate (file:data/clean.csv)",
                            "evaluate -> publish (after)", "publish -> notify (after)"}));
  EXPECT_EQ(spec.steps[4].cwd, dir.Path("tools"));
  EXPECT_EQ(spec.steps[2].cmd, "mkdir -p models && /usr/bin/python3 train.py data/clean.csv models/");
}

TEST(LoadWorkflowSpecTest, RelativePathsResolveAgainstTheCurrentDirectory) {
  SpecDir dir;
  dir.Write("sub/w.yaml", "steps:\n  a: {cmd: echo}\n");
  char old[4096];
  ASSERT_NE(getcwd(old, sizeof old), nullptr);
  ASSERT_EQ(chdir(dir.Path().c_str()), 0);
  StatusOr<WorkflowSpec> spec = LoadWorkflowSpec("sub/w.yaml");
  ASSERT_EQ(chdir(old), 0);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->path, "sub/w.yaml");
  EXPECT_EQ(spec->steps[0].cwd, dir.Path("sub"));
}

TEST(LoadWorkflowSpecTest, UnreadableFile) {
  SpecDir dir;
  const std::string missing = dir.Path("nope.yaml");
  StatusOr<WorkflowSpec> spec = LoadWorkflowSpec(missing);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(spec.status().message(), missing + ": cannot read: No such file or directory");
  ASSERT_EQ(mkdir(dir.Path("d.yaml").c_str(), 0755), 0);
  EXPECT_EQ(LoadError(dir.Path("d.yaml")), dir.Path("d.yaml") + ": cannot read: Is a directory");
}

TEST(LoadWorkflowSpecTest, NotAWorkflow) {
  SpecDir dir;
  const std::string want =
      "not a workflow: expected a top-level 'steps:' mapping (GradeML format) or 'stages:' (DVC format)";
  const std::string empty = dir.Write("empty.yaml", "");
  EXPECT_EQ(LoadError(empty), empty + ": " + want);
  const std::string other = dir.Write("other.yaml", "# a comment\nname: x\njobs: {}\n");
  EXPECT_EQ(LoadError(other), other + ":2: " + want);
  const std::string list = dir.Write("list.yaml", "- steps\n");
  EXPECT_EQ(LoadError(list), list + ":1: " + want);
}

TEST(LoadWorkflowSpecTest, BothStepsAndStages) {
  SpecDir dir;
  const std::string path = dir.Write("w.yaml", "steps: {}\nstages: {}\n");
  EXPECT_EQ(LoadError(path), path +
                                 ":1: both 'steps:' and 'stages:' at the top level; a workflow is either "
                                 "GradeML's format (steps) or DVC's (stages)");
}

TEST(LoadWorkflowSpecTest, YamlSyntaxErrorNamesTheLine) {
  SpecDir dir;
  const std::string path = dir.Write("w.yaml", "steps:\n  a:\n    cmd: echo: x\n");
  EXPECT_EQ(LoadError(path), path + ":3: illegal map value");
  const std::string anchor = dir.Write("a.yaml", "steps:\n  a:\n    cmd: *nope\n");
  EXPECT_EQ(LoadError(anchor), anchor + ":3: the referenced anchor is not defined");
}

}  // namespace
}  // namespace grademl::workflow
