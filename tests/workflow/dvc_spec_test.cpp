// DVC's dvc.yaml, read through LoadWorkflowSpec: the shapes real DVC projects use.
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

using V = std::vector<std::string>;

TEST(DvcSpecTest, ReadsTheGetStartedProject) {
  const std::string dir = std::string(GRADEML_TESTDATA_DIR) + "/workflows/dvc_get_started";
  WorkflowSpec spec = LoadOk(dir + "/dvc.yaml");
  EXPECT_EQ(spec.format, "dvc");
  EXPECT_EQ(spec.name, "dvc_get_started");
  ASSERT_EQ(StepNames(spec), (V{"prepare", "featurize", "train", "evaluate"}));
  EXPECT_EQ(spec.steps[0].cmd, "python src/prepare.py data/data.xml");
  EXPECT_EQ(spec.steps[0].cwd, dir);
  EXPECT_EQ(spec.steps[0].line, 2);
  EXPECT_EQ(spec.steps[0].params, (V{"params.yaml:prepare.seed", "params.yaml:prepare.split"}));
  EXPECT_EQ(spec.steps[3].line, 33);
  // Mapping entries of outs, then metrics and plots, are all outputs.
  EXPECT_EQ(spec.steps[3].outs, (V{"eval/live/plots", "eval/prc", "eval/live/metrics.json", "eval/importance.png"}));
  EXPECT_EQ(Edges(spec), (V{"prepare -> featurize (file:data/prepared)", "featurize -> train (file:data/features)",
                            "featurize -> evaluate (file:data/features)", "train -> evaluate (file:model.pkl)"}));
  EXPECT_EQ(OrderNames(spec), (V{"prepare", "featurize", "train", "evaluate"}));
}

TEST(DvcSpecTest, MatchesDirectoriesBothWaysAfterNormalising) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", R"(stages:
  download:
    cmd: ./download
    outs: [data/]
  split:
    cmd: ./split
    deps: [data/raw.csv]
    outs: [data/prepared/train.csv, data/prepared/test.csv]
  count:
    cmd: ./count
    deps: [./data/prepared/../prepared]
  stats:
    cmd: ./stats
    deps: [data/prepared/train.csv]
  unrelated:
    cmd: ./unrelated
    deps: [database.csv, data2]
)");
  WorkflowSpec spec = LoadOk(path);
  EXPECT_EQ(Edges(spec),
            (V{"download -> split (file:data/raw.csv)", "download -> count (file:./data/prepared/../prepared)",
               "split -> count (file:./data/prepared/../prepared)", "download -> stats (file:data/prepared/train.csv)",
               "split -> stats (file:data/prepared/train.csv)"}));
}

TEST(DvcSpecTest, WdirSetsTheStepDirectoryAndResolvesItsPaths) {
  SpecDir dir;
  const std::string path = dir.Write("proj/dvc.yaml", R"(stages:
  gen:
    cmd: ./gen
    wdir: tools/../gen
    outs: [../data/x.csv]
  use:
    cmd: ./use
    wdir: data
    deps: [x.csv]
)");
  WorkflowSpec spec = LoadOk(path);
  EXPECT_EQ(spec.name, "proj");
  EXPECT_EQ(spec.steps[0].cwd, dir.Path("proj/gen"));
  EXPECT_EQ(spec.steps[1].cwd, dir.Path("proj/data"));
  EXPECT_EQ(Edges(spec), (V{"gen -> use (file:x.csv)"}));
}

TEST(DvcSpecTest, ReadsParamsInBothFormsListCommandsAndIgnoresCacheFields) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", R"(stages:
  train:
    desc: Trains the model
    meta: {owner: me}
    frozen: false
    always_changed: false
    cmd:
      - mkdir -p out
      - python train.py
    params:
      - lr
      - train.epochs
      - params_custom.yaml:
          - a
          - b.c
      - other.yaml:
    outs:
      - out/model.pkl:
          cache: false
          persist: true
      - out/logs/:
    metrics:
      - out/metrics.json:
          cache: false
    plots:
      - out/loss.csv:
          x: step
          y: loss
)");
  WorkflowSpec spec = LoadOk(path);
  ASSERT_EQ(spec.steps.size(), 1u);
  EXPECT_EQ(spec.steps[0].cmd, "mkdir -p out && python train.py");
  EXPECT_EQ(spec.steps[0].params, (V{"params.yaml:lr", "params.yaml:train.epochs", "params_custom.yaml:a",
                                     "params_custom.yaml:b.c", "other.yaml"}));
  EXPECT_EQ(spec.steps[0].outs, (V{"out/model.pkl", "out/logs/", "out/metrics.json", "out/loss.csv"}));
}

TEST(DvcSpecTest, ForeachOverScalarsNamesInstancesByValue) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", R"(stages:
  prepare:
    cmd: ./prepare
    outs: [data]
  train:
    foreach: [cnn, mlp, 3]
    do:
      cmd: python train.py --model ${item}
      deps:
        - data/${item}.csv
      outs:
        - models/${item}.pkl
  compare:
    cmd: ./compare
    deps: [models/cnn.pkl, models/mlp.pkl]
)");
  WorkflowSpec spec = LoadOk(path);
  ASSERT_EQ(StepNames(spec), (V{"prepare", "train@cnn", "train@mlp", "train@3", "compare"}));
  EXPECT_EQ(spec.steps[1].cmd, "python train.py --model cnn");
  EXPECT_EQ(spec.steps[3].outs, (V{"models/3.pkl"}));
  EXPECT_EQ(spec.steps[2].line, 5);
  EXPECT_EQ(Edges(spec), (V{"prepare -> train@cnn (file:data/cnn.csv)", "prepare -> train@mlp (file:data/mlp.csv)",
                            "prepare -> train@3 (file:data/3.csv)", "train@cnn -> compare (file:models/cnn.pkl)",
                            "train@mlp -> compare (file:models/mlp.pkl)"}));
}

TEST(DvcSpecTest, ForeachOverMappingsNamesInstancesByIndex) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", R"(stages:
  build:
    foreach:
      - {os: linux, pyv: 3.9}
      - {os: macos, pyv: "3.10"}
    do:
      cmd: ./build --os ${item.os} --python ${item.pyv}
      outs:
        - dist/${item.os}-${item.pyv}
)");
  WorkflowSpec spec = LoadOk(path);
  ASSERT_EQ(StepNames(spec), (V{"build@0", "build@1"}));
  EXPECT_EQ(spec.steps[0].cmd, "./build --os linux --python 3.9");
  EXPECT_EQ(spec.steps[1].cmd, "./build --os macos --python 3.10");
  EXPECT_EQ(spec.steps[1].outs, (V{"dist/macos-3.10"}));
}

TEST(DvcSpecTest, ForeachOverAMappingNamesInstancesByKey) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", R"(stages:
  build:
    foreach:
      uk:
        epochs: 3
        thresh: 10
      us:
        epochs: 10
        thresh: 15
    do:
      cmd: python train.py '${key}' ${item.epochs} ${item.thresh}
      outs:
        - model-${key}.hdfs
)");
  WorkflowSpec spec = LoadOk(path);
  ASSERT_EQ(StepNames(spec), (V{"build@uk", "build@us"}));
  EXPECT_EQ(spec.steps[0].cmd, "python train.py 'uk' 3 10");
  EXPECT_EQ(spec.steps[1].cmd, "python train.py 'us' 10 15");
  EXPECT_EQ(spec.steps[1].outs, (V{"model-us.hdfs"}));
}

TEST(DvcSpecTest, InterpolatesParamsYamlVarsAndForeachData) {
  SpecDir dir;
  dir.Write("params.yaml", R"(train:
  lr: 0.001
  epochs: 10
  verbose: True
models: [cnn, mlp]
data_dir: data
)");
  dir.Write("extra.json", R"({"batch": 32, "unused": {"x": 1}, "deep": {"k": "v"}})");
  const std::string path = dir.Write("dvc.yaml", R"(vars:
  - data_dir: inputs
    out: results
  - extra.json:batch,deep.k
stages:
  train:
    foreach: ${models}
    do:
      cmd: python train.py --lr ${train.lr} --epochs ${train[epochs]} --v ${train.verbose} --b ${batch} ${deep.k}
      deps:
        - ${data_dir}/train.csv
      outs:
        - ${out}/${item}.pkl
      wdir: .
  literal:
    cmd: echo \${not_a_var} ${models[1]}
)");
  WorkflowSpec spec = LoadOk(path);
  ASSERT_EQ(StepNames(spec), (V{"train@cnn", "train@mlp", "literal"}));
  EXPECT_EQ(spec.steps[0].cmd, "python train.py --lr 0.001 --epochs 10 --v true --b 32 v");
  EXPECT_EQ(spec.steps[0].deps, (V{"inputs/train.csv"}));  // vars win over params.yaml
  EXPECT_EQ(spec.steps[1].outs, (V{"results/mlp.pkl"}));
  EXPECT_EQ(spec.steps[2].cmd, "echo ${not_a_var} mlp");
}

TEST(DvcSpecTest, UnpacksAMappingIntoCmdArguments) {
  SpecDir dir;
  dir.Write("params.yaml", R"(train:
  epochs: 10
  optimizer: adam
  name: "my model"
  shuffle: true
  dry_run: false
  layers: [64, 32]
  sched: {gamma: 0.5}
)");
  const std::string path = dir.Write("dvc.yaml", R"(stages:
  train:
    cmd: python train.py ${train}
)");
  WorkflowSpec spec = LoadOk(path);
  EXPECT_EQ(
      spec.steps[0].cmd,
      "python train.py --epochs 10 --optimizer adam --name 'my model' --shuffle --layers 64 32 --sched.gamma 0.5");
}

TEST(DvcSpecTest, StageVarsAndMatrix) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", R"(stages:
  fit:
    matrix:
      model: [cnn, xgb]
      size: [1, 2]
      cfg: [{a: 1}]
    vars:
      - suffix: .bin
    cmd: ./fit ${item.model} ${item.size} ${item.cfg.a} ${key}
    outs:
      - out/${item.model}-${item.size}${suffix}
)");
  WorkflowSpec spec = LoadOk(path);
  ASSERT_EQ(StepNames(spec), (V{"fit@cnn-1-cfg0", "fit@cnn-2-cfg0", "fit@xgb-1-cfg0", "fit@xgb-2-cfg0"}));
  EXPECT_EQ(spec.steps[1].cmd, "./fit cnn 2 1 cnn-2-cfg0");
  EXPECT_EQ(spec.steps[2].outs, (V{"out/xgb-1.bin"}));
}

TEST(DvcSpecTest, TheForeachItemWinsOverStageVars) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", R"(stages:
  t:
    foreach: [a]
    do:
      vars:
        - {item: from-vars, tag: v1}
      cmd: echo ${item} ${tag}
)");
  WorkflowSpec spec = LoadOk(path);
  ASSERT_EQ(spec.steps.size(), 1u);
  EXPECT_EQ(spec.steps[0].cmd, "echo a v1");
}

TEST(DvcSpecTest, ExpandsYamlMergeKeys) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", R"(stages:
  base:
    cmd: ./base
    outs: [a.txt]
  small:
    <<: &common
      cmd: python train.py
      deps: [a.txt]
    outs: [small.pkl]
  large:
    <<: *common
    cmd: python train.py --large
    outs: [large.pkl]
)");
  WorkflowSpec spec = LoadOk(path);
  ASSERT_EQ(StepNames(spec), (V{"base", "small", "large"}));
  EXPECT_EQ(spec.steps[1].cmd, "python train.py");
  EXPECT_EQ(spec.steps[2].cmd, "python train.py --large");  // an explicit key wins over a merged one
  EXPECT_EQ(Edges(spec), (V{"base -> small (file:a.txt)", "base -> large (file:a.txt)"}));
}

TEST(DvcSpecTest, AStagesKeyMakesAnyYamlFileDvc) {
  SpecDir dir;
  const std::string path = dir.Write("pipelines/train.yaml", "stages:\n  a:\n    cmd: echo a\n");
  WorkflowSpec spec = LoadOk(path);
  EXPECT_EQ(spec.format, "dvc");
  EXPECT_EQ(spec.name, "pipelines");
}

// One spec that must fail to load, and the message after "FILE:".
struct DvcErrorCase {
  const char* name;
  const char* yaml;
  const char* expected;  // after "FILE:"
};

class DvcSpecErrorTest : public ::testing::TestWithParam<DvcErrorCase> {};

TEST_P(DvcSpecErrorTest, NamesFileAndLine) {
  SpecDir dir;
  dir.Write("params.yaml", "lr: 0.1\n");
  const std::string path = dir.Write("dvc.yaml", GetParam().yaml);
  EXPECT_EQ(LoadError(path), path + ":" + GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Errors, DvcSpecErrorTest,
    ::testing::Values(
        DvcErrorCase{"MissingCmd", "stages:\n  a:\n    deps: [x]\n", "2: stage 'a': missing 'cmd'"},
        DvcErrorCase{"UnknownStageKey", "stages:\n  a:\n    cmd: echo\n    output: [x]\n",
                  "4: stage 'a': unknown key 'output' (expected cmd, deps, outs, params, metrics, plots, wdir, vars, "
                  "desc, meta, frozen, always_changed)"},
        DvcErrorCase{"UnknownTopLevelKey", "stages:\n  a: {cmd: echo}\nsteps: {}\n",
                  "3: unknown top-level key 'steps' (expected stages, vars, params, metrics, plots, artifacts, "
                  "datasets)"},
        DvcErrorCase{"NoStages", "plots:\n  - x.png\nstages: {}\n", "3: no stages"},
        DvcErrorCase{"MissingVariable", "stages:\n  a:\n    cmd: echo ${lr}\n    outs:\n      - m-${nope.x}.pkl\n",
                  "5: stage 'a': '${nope.x}' is not defined"},
        DvcErrorCase{"MissingVariableInForeachInstance",
                  "stages:\n  a:\n    foreach: [x]\n    do:\n      cmd: echo ${item} ${key}\n",
                  "5: stage 'a@x': '${key}' is not defined"},
        DvcErrorCase{"ListInterpolatedIntoAPath",
                  "vars:\n  - l: [1, 2]\nstages:\n  a:\n    cmd: echo\n    deps:\n      - ${l}\n",
                  "7: stage 'a': cannot interpolate a list '${l}' here"},
        DvcErrorCase{"ForeachWithoutDo", "stages:\n  a:\n    foreach: [x, y]\n", "2: stage 'a': 'foreach' without 'do'"},
        DvcErrorCase{"ForeachScalar", "stages:\n  a:\n    foreach: ${lr}\n    do: {cmd: echo}\n",
                  "3: stage 'a': 'foreach' must be a list or a mapping, not a string"},
        DvcErrorCase{"CmdNextToForeach", "stages:\n  a:\n    foreach: [x]\n    cmd: echo\n    do: {cmd: echo}\n",
                  "4: stage 'a': unknown key 'cmd' next to 'foreach' (expected foreach, do)"},
        DvcErrorCase{"OutsNotAList", "stages:\n  a:\n    cmd: echo\n    outs:\n      model.pkl: {cache: false}\n",
                  "5: stage 'a': 'outs' must be a list, not a mapping"},
        DvcErrorCase{"CmdMapping", "stages:\n  a:\n    cmd:\n      run: echo\n",
                  "4: stage 'a': 'cmd' must be a string or a list of strings, not a mapping"},
        DvcErrorCase{"OutsEntryTwoKeys", "stages:\n  a:\n    cmd: echo\n    outs:\n      - {a: {}, b: {}}\n",
                  "5: stage 'a': 'outs' entries must be paths or single 'path: {options}' mappings, not a mapping"},
        DvcErrorCase{"SameOutTwice",
                  "stages:\n  a:\n    cmd: echo\n    outs: [model.pkl]\n  b:\n    cmd: echo\n    wdir: sub\n"
                  "    metrics: [../model.pkl]\n",
                  "8: steps 'a' and 'b' both declare output '../model.pkl'"},
        DvcErrorCase{"Cycle",
                  "stages:\n  z: {cmd: echo}\n  a:\n    cmd: echo\n    deps: [b.txt]\n    outs: [a.txt]\n  b:\n"
                  "    cmd: echo\n    deps: [a.txt]\n    outs: [b.txt]\n",
                  "3: steps form a cycle: a -> b -> a"},
        DvcErrorCase{"ForeachNameCollision", "stages:\n  t@x: {cmd: echo}\n  t:\n    foreach: [x]\n    do: {cmd: echo}\n",
                  "3: duplicate step name 't@x' (first defined on line 2)"},
        DvcErrorCase{"DuplicateForeachKey", "stages:\n  a:\n    foreach: [x]\n    foreach: [y]\n    do: {cmd: echo}\n",
                  "4: stage 'a': duplicate key 'foreach'"},
        DvcErrorCase{"DuplicateStage", "stages:\n  a: {cmd: echo}\n  a: {cmd: echo}\n",
                  "3: duplicate step name 'a' (first defined on line 2)"},
        DvcErrorCase{"VarsTomlFile", "vars:\n  - params.toml\nstages:\n  a: {cmd: echo}\n",
                  "2: vars: cannot read 'params.toml': GradeML reads YAML and JSON parameter files only"},
        DvcErrorCase{"YamlSyntax", "stages:\n  a:\n    cmd: [echo\n", "4: end of sequence flow not found"}),
    [](const ::testing::TestParamInfo<DvcErrorCase>& info) { return info.param.name; });

TEST(DvcSpecFileErrorTest, VarsFileMissingNamesTheFile) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", "vars:\n  - missing.yaml\nstages:\n  a: {cmd: echo}\n");
  EXPECT_EQ(LoadError(path),
            path + ":2: vars: " + dir.Path("missing.yaml") + ": cannot read: No such file or directory");
}

TEST(DvcSpecFileErrorTest, BadParamsYamlIsReportedInIt) {
  SpecDir dir;
  const std::string params = dir.Write("params.yaml", "a: 1\n  b: [\n");
  const std::string path = dir.Write("dvc.yaml", "stages:\n  a: {cmd: echo}\n");
  EXPECT_EQ(LoadError(path), params + ":2: illegal map value");
}

TEST(DvcSpecFileErrorTest, DvcYamlFileNameWithoutStages) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", "steps:\n  a: {cmd: echo}\n");
  EXPECT_EQ(LoadError(path), path +
                                 ":1: unknown top-level key 'steps' (expected stages, vars, params, metrics, "
                                 "plots, artifacts, datasets)");
}

}  // namespace
}  // namespace grademl::workflow
