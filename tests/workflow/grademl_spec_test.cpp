// GradeML's own workflow format (`steps:`), read through LoadWorkflowSpec.
#include <gtest/gtest.h>

#include "spec_test_support.h"
#include "workflow/workflow_spec.h"

namespace grademl::workflow {
namespace {

using testing::Edges;
using testing::LoadError;
using testing::LoadOk;
using testing::OrderNames;
using testing::SpecDir;
using testing::StepNames;

using Env = std::vector<std::pair<std::string, std::string>>;
using V = std::vector<std::string>;

TEST(GrademlSpecTest, ReadsStepsDepsByFileAndNameCwdEnvAndListCommands) {
  SpecDir dir;
  const std::string path = dir.Write("pipeline.yaml", R"(name: digits
env: {PYTHONHASHSEED: "0", OMP_NUM_THREADS: "4"}
steps:
  acquire:
    cmd: /usr/bin/python3 acquire.py --out data/raw.csv
    outs: [data/raw.csv]
  clean:
    cmd:
      - mkdir -p data
      - python3 clean.py
    deps: [data/raw.csv, acquire]
    outs: [data/clean.csv]
    env: {OMP_NUM_THREADS: "1", EXTRA: 2}
  report:
    cmd: ./report.sh
    cwd: sub/dir
    deps: [../../data/clean.csv]
    after: [acquire]
)");
  WorkflowSpec spec = LoadOk(path);
  EXPECT_EQ(spec.path, path);
  EXPECT_EQ(spec.format, "grademl");
  EXPECT_EQ(spec.name, "digits");
  ASSERT_EQ(StepNames(spec), (V{"acquire", "clean", "report"}));

  const StepSpec& acquire = spec.steps[0];
  EXPECT_EQ(acquire.cmd, "/usr/bin/python3 acquire.py --out data/raw.csv");
  EXPECT_EQ(acquire.outs, (V{"data/raw.csv"}));
  EXPECT_TRUE(acquire.deps.empty());
  EXPECT_EQ(acquire.cwd, dir.Path());
  EXPECT_EQ(acquire.line, 4);
  EXPECT_EQ(acquire.env, (Env{{"PYTHONHASHSEED", "0"}, {"OMP_NUM_THREADS", "4"}}));

  const StepSpec& clean = spec.steps[1];
  EXPECT_EQ(clean.cmd, "mkdir -p data && python3 clean.py");
  EXPECT_EQ(clean.deps, (V{"data/raw.csv"}));  // the step name went to `after`
  EXPECT_EQ(clean.after, (V{"acquire"}));
  EXPECT_EQ(clean.line, 7);
  // Workflow env first, step env overriding in place, then the step's own.
  EXPECT_EQ(clean.env, (Env{{"PYTHONHASHSEED", "0"}, {"OMP_NUM_THREADS", "1"}, {"EXTRA", "2"}}));

  const StepSpec& report = spec.steps[2];
  EXPECT_EQ(report.cwd, dir.Path("sub/dir"));
  EXPECT_EQ(report.after, (V{"acquire"}));
  EXPECT_EQ(report.line, 14);

  EXPECT_EQ(Edges(spec), (V{"acquire -> clean (after)", "acquire -> clean (file:data/raw.csv)",
                            "acquire -> report (after)", "clean -> report (file:../../data/clean.csv)"}));
  EXPECT_EQ(OrderNames(spec), (V{"acquire", "clean", "report"}));
}

TEST(GrademlSpecTest, DefaultsNameToFileStemAndKeepsFileOrderForIndependentSteps) {
  SpecDir dir;
  const std::string path = dir.Write("my-flow.yml", R"(steps:
  b: {cmd: echo b}
  a: {cmd: echo a}
  c: {cmd: echo c, deps: [b]}
)");
  WorkflowSpec spec = LoadOk(path);
  EXPECT_EQ(spec.name, "my-flow");
  EXPECT_EQ(StepNames(spec), (V{"b", "a", "c"}));
  EXPECT_EQ(OrderNames(spec), (V{"b", "a", "c"}));
  EXPECT_TRUE(spec.steps[0].env.empty());
}

TEST(GrademlSpecTest, OrderFollowsDependenciesNotFileOrder) {
  SpecDir dir;
  const std::string path = dir.Write("w.yaml", R"(steps:
  train: {cmd: ./train, deps: [data/features/]}
  features: {cmd: ./features, deps: [prepare], outs: [data/features]}
  prepare: {cmd: ./prepare}
  lint: {cmd: ./lint}
)");
  WorkflowSpec spec = LoadOk(path);
  EXPECT_EQ(Edges(spec), (V{"features -> train (file:data/features/)", "prepare -> features (after)"}));
  EXPECT_EQ(OrderNames(spec), (V{"prepare", "features", "train", "lint"}));
}

TEST(GrademlSpecTest, AbsoluteCwdAndAbsolutePathsMatch) {
  SpecDir dir;
  const std::string yaml = "steps:\n"
                           "  make:\n"
                           "    cmd: ./make\n"
                           "    outs: [out/model.bin]\n"
                           "  use:\n"
                           "    cmd: ./use\n"
                           "    cwd: " + dir.Path("elsewhere/..") + "\n" +
                           "    deps: [" + dir.Path("out") + "]\n";
  const std::string path = dir.Write("w.yaml", yaml);
  WorkflowSpec spec = LoadOk(path);
  EXPECT_EQ(spec.steps[1].cwd, dir.Path());
  EXPECT_EQ(Edges(spec), (V{"make -> use (file:" + dir.Path("out") + ")"}));
}

TEST(GrademlSpecTest, AStepNamedLikeItsOwnDepReadsThatDepAsAFile) {
  SpecDir dir;
  const std::string path = dir.Write("w.yaml", R"(steps:
  fetch: {cmd: ./fetch, outs: [data]}
  data: {cmd: ./data, deps: [data]}
)");
  WorkflowSpec spec = LoadOk(path);
  EXPECT_EQ(spec.steps[1].deps, (V{"data"}));
  EXPECT_TRUE(spec.steps[1].after.empty());
  EXPECT_EQ(Edges(spec), (V{"fetch -> data (file:data)"}));
}

TEST(GrademlSpecTest, ExpandsYamlMergeKeys) {
  SpecDir dir;
  const std::string path = dir.Write("w.yaml", R"(steps:
  a: &defaults
    cmd: ./a
    env: {X: "1"}
  b:
    <<: *defaults
    deps: [a]
)");
  WorkflowSpec spec = LoadOk(path);
  EXPECT_EQ(spec.steps[1].cmd, "./a");
  EXPECT_EQ(spec.steps[1].env, (Env{{"X", "1"}}));
  EXPECT_EQ(Edges(spec), (V{"a -> b (after)"}));
}

// One spec that must fail to load, and the message after "FILE:".
struct ErrorCase {
  const char* name;
  const char* yaml;
  const char* expected;  // after "FILE:"
};

class GrademlSpecErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(GrademlSpecErrorTest, NamesFileAndLine) {
  SpecDir dir;
  const std::string path = dir.Write("w.yaml", GetParam().yaml);
  EXPECT_EQ(LoadError(path), path + ":" + GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, GrademlSpecErrorTest,
    ::testing::Values(
        ErrorCase{"UnknownStepKey", "steps:\n  x:\n    cmdd: echo\n",
                  "3: step 'x': unknown key 'cmdd' (expected cmd, deps, outs, params, after, env, cwd, reuse)"},
        ErrorCase{"MissingCmd", "steps:\n  a: {cmd: echo}\n  x:\n    deps: [a]\n", "3: step 'x': missing 'cmd'"},
        ErrorCase{"NullStep", "steps:\n  x:\n", "2: step 'x': missing 'cmd'"},
        ErrorCase{"EmptyCmd", "steps:\n  x:\n    cmd: \"  \"\n", "3: step 'x': 'cmd' is empty"},
        ErrorCase{"NullCmd", "steps:\n  x:\n    cmd:\n    deps: []\n", "3: step 'x': 'cmd' is empty"},
        ErrorCase{"EmptySteps", "name: n\nsteps: {}\n", "2: no steps"},
        ErrorCase{"NullSteps", "name: n\nsteps:\n", "2: no steps"},
        ErrorCase{"StepsNotAMapping", "steps:\n  - a\n",
                  "2: 'steps' must be a mapping of step name to step, not a list"},
        ErrorCase{"DuplicateStep", "steps:\n  a: {cmd: echo}\n  b: {cmd: echo}\n  a: {cmd: echo 2}\n",
                  "4: duplicate step name 'a' (first defined on line 2)"},
        ErrorCase{"DuplicateStepKey", "steps:\n  a:\n    cmd: echo\n    cmd: echo 2\n",
                  "4: step 'a': duplicate key 'cmd'"},
        ErrorCase{"CmdMapping", "steps:\n  x:\n    cmd: {run: echo}\n",
                  "3: step 'x': 'cmd' must be a string or a list of strings, not a mapping"},
        ErrorCase{"CmdListOfLists", "steps:\n  x:\n    cmd:\n      - echo\n      - [a]\n",
                  "5: step 'x': 'cmd' list entries must be non-empty strings"},
        ErrorCase{"DepsNotAList", "steps:\n  x:\n    cmd: echo\n    deps: data.csv\n",
                  "4: step 'x': 'deps' must be a list of strings, not a string"},
        ErrorCase{"OutsEntryMapping", "steps:\n  x:\n    cmd: echo\n    outs:\n      - a\n      - {b: 1}\n",
                  "6: step 'x': 'outs' entries must be non-empty strings, not a mapping"},
        ErrorCase{"EnvNotAMapping", "steps:\n  x:\n    cmd: echo\n    env: [A=1]\n",
                  "4: step 'x': 'env' must be a mapping of variable to value, not a list"},
        ErrorCase{"EnvValueList", "env:\n  A: [1]\nsteps:\n  x: {cmd: echo}\n",
                  "2: env 'A' must be a string, not a list"},
        ErrorCase{"CwdEmpty", "steps:\n  x:\n    cmd: echo\n    cwd:\n",
                  "4: step 'x': 'cwd' must be a non-empty string"},
        ErrorCase{"StepNotAMapping", "steps:\n  x: echo hi\n",
                  "2: step 'x' must be a mapping (cmd, deps, outs, ...), not a string"},
        ErrorCase{"UnknownTopLevelKey", "steps:\n  x: {cmd: echo}\nstepz: 1\n",
                  "3: unknown top-level key 'stepz' (expected name, env, steps)"},
        ErrorCase{"AfterNamesNoStep",
                  "steps:\n  a: {cmd: echo}\n  b:\n    cmd: echo\n    after:\n      - a\n      - zz\n",
                  "7: step 'b': no step named 'zz' to come after"},
        ErrorCase{"SameOutTwice",
                  "steps:\n  a:\n    cmd: echo\n    outs: [data/x.csv]\n  b:\n    cmd: echo\n    outs:\n      - "
                  "./data//x.csv\n",
                  "8: steps 'a' and 'b' both declare output './data//x.csv'"},
        ErrorCase{
            "Cycle",
            "steps:\n  a: {cmd: echo, deps: [c.txt], outs: [a.txt]}\n  b: {cmd: echo, deps: [a.txt], outs: [b.txt]}\n"
            "  c: {cmd: echo, deps: [b], outs: [c.txt]}\n",
            "2: steps form a cycle: a -> b -> c -> a"},
        ErrorCase{"SelfAfter", "steps:\n  z: {cmd: echo}\n  a: {cmd: echo, after: [a]}\n",
                  "3: steps form a cycle: a -> a"},
        ErrorCase{"YamlSyntax", "steps:\n  a: {cmd: echo}\n   b: x\n", "3: end of map not found"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

}  // namespace
}  // namespace grademl::workflow
