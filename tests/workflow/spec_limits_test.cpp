// Hostile workflow specs: alias cycles and bombs, deep nesting, huge generated stages,
// long dependency chains and cycles, NUL bytes, control characters, files that are not
// files. Each must end quickly with a one-line "FILE:LINE: reason" (or load, when valid).
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "core/text.h"
#include "run_with_deadline.h"
#include "workflow/spec_yaml_support.h"
#include "workflow/spec_test_support.h"
#include "workflow/yaml_bounds.h"

namespace grademl::workflow {
namespace {

using grademl::testing::RunWithDeadline;

using testing::Edges;
using testing::LoadError;
using testing::LoadOk;
using testing::SpecDir;

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One line, no raw control character.
void ExpectOneCleanLine(const std::string& message) {
  EXPECT_EQ(message, EscapeControl(message)) << message;
}

// --- alias cycles ---

TEST(SpecLimitsTest, SelfReferentialAliasInOurFormat) {
  SpecDir dir;
  const std::string path = dir.Write("p.yaml", "steps:\n  a:\n    cmd: echo hi\n    env: &a {B: '1', <<: *a}\n");
  const std::string error = LoadError(path);
  EXPECT_EQ(error, path + ":4: alias '*a' is used inside its own anchor '&a' (line 4): the node would contain itself");
}

TEST(SpecLimitsTest, SelfReferentialAliasInDvcVars) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", "stages:\n  s:\n    cmd: echo ${b}\nvars:\n  - &a {b: 1, <<: *a}\n");
  EXPECT_TRUE(Contains(LoadError(path), path + ":5: alias '*a' is used inside its own anchor")) << LoadError(path);
}

TEST(SpecLimitsTest, SelfReferentialAliasInParamsAndVarsFiles) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", "stages:\n  s:\n    cmd: echo hi\n");
  const std::string params = dir.Write("params.yaml", "x: 1\na: &a {b: 1, <<: *a}\n");
  EXPECT_TRUE(Contains(LoadError(path), params + ":2: alias '*a' is used inside its own anchor")) << LoadError(path);

  SpecDir dir2;
  const std::string path2 = dir2.Write("dvc.yaml", "vars:\n  - v.yaml\nstages:\n  s:\n    cmd: echo hi\n");
  const std::string vars = dir2.Write("v.yaml", "a: &a [1, *a]\n");
  EXPECT_TRUE(Contains(LoadError(path2), vars + ":1: alias '*a' is used inside its own anchor")) << LoadError(path2);
}

TEST(SpecLimitsTest, AliasToAnEarlierAnchorIsFine) {
  SpecDir dir;
  const std::string path =
      dir.Write("p.yaml", "base: &b {A: '1'}\nsteps:\n  x:\n    cmd: echo\n    env: {<<: *b, C: '2'}\n  y:\n    cmd: echo\n"
                          "    env: *b\n");
  // `base` is not a key of our format: the error is about it, not about the aliases.
  EXPECT_TRUE(Contains(LoadError(path), path + ":1: unknown top-level key 'base'")) << LoadError(path);
}

// --- bombs ---

// "Billion laughs": 9 lists of 9 aliases to the level below, 9^9 strings when expanded.
std::string LaughsBomb() {
  std::string text = "stages:\n  s:\n    cmd: echo hi\nvars:\n  - a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 10; ++i) {
    text += "    a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 9; ++j) text += (j ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  return text;
}

TEST(SpecLimitsTest, AliasBombInVarsIsRefused) {
  SpecDir dir;
  const std::string bomb = LaughsBomb();
  ASSERT_LT(bomb.size(), 1000u);
  const std::string path = dir.Write("dvc.yaml", bomb);
  const std::string error = LoadError(path);
  // a5 is the first level whose expansion passes 200,000 nodes (9^5 = 59,049 strings in a5,
  // 9^6 in a6): counted without expanding anything.
  EXPECT_EQ(error, path + ":10: the document has more than 200000 nodes (each alias counted as the nodes it stands "
                          "for: an alias or merge-key bomb?)");
}

TEST(SpecLimitsTest, MergeKeyBombIsRefused) {
  SpecDir dir;
  std::string text = "x0: &x0 {k: v}\n";
  for (int i = 1; i < 40; ++i) {
    const std::string prev = "*x" + std::to_string(i - 1);
    text += "x" + std::to_string(i) + ": &x" + std::to_string(i) + " {<<: [" + prev + ", " + prev + ", " + prev + ", " +
            prev + "], k" + std::to_string(i) + ": v}\n";
  }
  text += "steps:\n  s:\n    cmd: echo hi\n    env: *x39\n";
  const std::string path = dir.Write("p.yaml", text);
  EXPECT_TRUE(Contains(LoadError(path), "the document has more than 200000 nodes")) << LoadError(path);
}

TEST(SpecLimitsTest, TextBombIsRefused) {
  SpecDir dir;
  std::string text = "stages:\n  s:\n    cmd: echo hi\nvars:\n  - big: &s '" + std::string(1 << 20, 'x') + "'\n    copies: [";
  for (int i = 0; i < 20; ++i) text += i ? ", *s" : "*s";
  text += "]\n";
  const std::string path = dir.Write("dvc.yaml", text);
  EXPECT_TRUE(Contains(LoadError(path), path + ":6: the document has more than 16 MiB of text")) << LoadError(path);
}

TEST(SpecLimitsTest, DeepNestingIsRefusedBeforeYamlCppRecurses) {
  SpecDir dir;
  const std::string path = dir.Write("p.yaml", "steps: " + std::string(100000, '[') + std::string(100000, ']') + "\n");
  EXPECT_EQ(LoadError(path), path + ":1: nested more than 256 levels deep (aliases expanded)");
  // Nesting through aliases counts too: each level nests the one before twice as deep.
  std::string text = "l0: &l0 " + std::string(200, '[') + std::string(200, ']') + "\n";
  text += "l1: &l1 " + std::string(100, '[') + "*l0" + std::string(100, ']') + "\nsteps: {}\n";
  const std::string aliased = dir.Write("q.yaml", text);
  EXPECT_EQ(LoadError(aliased), aliased + ":2: nested more than 256 levels deep (aliases expanded)");
}

// --- files ---

TEST(SpecLimitsTest, LargeFilesAreRefusedUnread) {
  SpecDir dir;
  const std::string path = dir.Write("p.yaml", "steps:\n  a:\n    cmd: echo '" + std::string(3 << 20, 'x') + "'\n");
  EXPECT_EQ(LoadError(path), path + ": cannot read: larger than 2 MiB; GradeML reads YAML files up to that size");
}

TEST(SpecLimitsTest, ParamsThatAreNotFilesAreRefusedWithoutBlocking) {
  SpecDir dir;
  const std::string path = dir.Write("dvc.yaml", "vars:\n  - zero.yaml\n  - fifo.yaml\nstages:\n  s:\n    cmd: echo\n");
  ASSERT_EQ(symlink("/dev/zero", dir.Path("zero.yaml").c_str()), 0);
  ASSERT_EQ(mkfifo(dir.Path("fifo.yaml").c_str(), 0600), 0);
  EXPECT_EQ(LoadError(path), path + ":2: vars: " + dir.Path("zero.yaml") +
                                 ": cannot read: not a regular file (a character device)");
  SpecDir dir2;
  const std::string path2 = dir2.Write("dvc.yaml", "vars:\n  - fifo.yaml\nstages:\n  s:\n    cmd: echo\n");
  ASSERT_EQ(mkfifo(dir2.Path("fifo.yaml").c_str(), 0600), 0);
  EXPECT_EQ(LoadError(path2), path2 + ":2: vars: " + dir2.Path("fifo.yaml") + ": cannot read: not a regular file (a FIFO)");
  SpecDir dir3;
  const std::string path3 = dir3.Write("dvc.yaml", "vars:\n  - d.yaml\nstages:\n  s:\n    cmd: echo\n");
  ASSERT_EQ(mkdir(dir3.Path("d.yaml").c_str(), 0755), 0);
  EXPECT_EQ(LoadError(path3), path3 + ":2: vars: " + dir3.Path("d.yaml") + ": cannot read: Is a directory");
  // The spec itself.
  EXPECT_EQ(LoadError("/dev/zero"), "/dev/zero: cannot read: not a regular file (a character device)");
  EXPECT_EQ(LoadError(dir2.Path("fifo.yaml")), dir2.Path("fifo.yaml") + ": cannot read: not a regular file (a FIFO)");
}

// --- generated steps ---

TEST(SpecLimitsTest, HugeMatrixIsRefusedBeforeExpanding) {
  SpecDir dir;
  std::string text = "stages:\n  s:\n    matrix:\n";
  for (int i = 0; i < 9; ++i) text += "      m" + std::to_string(i) + ": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n";
  text += "    cmd: echo ${item.m0}\n";
  const std::string path = dir.Write("dvc.yaml", text);
  EXPECT_EQ(LoadError(path), path + ":4: stage 's': 'matrix' has more than 10000 combinations; GradeML generates at "
                                    "most 10000 steps per stage");
  // 10^20 combinations overflow 64 bits: still refused, not wrapped around to a small number.
  std::string wide = "stages:\n  s:\n    matrix:\n";
  for (int i = 0; i < 20; ++i) wide += "      m" + std::to_string(i) + ": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n";
  wide += "    cmd: echo\n";
  EXPECT_TRUE(Contains(LoadError(dir.Write("w/dvc.yaml", wide)), "more than 10000 combinations"));
  // 100 x 100 is the most one stage may generate.
  std::string ok = "stages:\n  s:\n    matrix:\n      a: [";
  for (int i = 0; i < 100; ++i) ok += (i ? ", " : "") + std::to_string(i);
  ok += "]\n      b: ${m}\n    cmd: echo ${item.a} ${item.b}\nvars:\n  - m: [";
  for (int i = 0; i < 100; ++i) ok += (i ? ", " : "") + std::to_string(i);
  ok += "]\n";
  EXPECT_EQ(LoadOk(dir.Write("ok/dvc.yaml", ok)).steps.size(), 10000u);
}

TEST(SpecLimitsTest, HugeForeachIsRefused) {
  SpecDir dir;
  std::string text = "stages:\n  s:\n    foreach: [";
  for (int i = 0; i <= 10000; ++i) text += (i ? "," : "") + std::to_string(i);
  text += "]\n    do:\n      cmd: echo ${item}\n";
  const std::string path = dir.Write("dvc.yaml", text);
  EXPECT_EQ(LoadError(path), path + ":3: stage 's': generates 10001 steps; GradeML generates at most 10000 per stage");
}

TEST(SpecLimitsTest, ManyGeneratedStepsInAllAreRefused) {
  SpecDir dir;
  std::string text = "vars:\n  - n: [";
  for (int i = 0; i < 9000; ++i) text += (i ? "," : "") + std::to_string(i);
  text += "]\nstages:\n";
  for (int s = 0; s < 6; ++s) text += "  s" + std::to_string(s) + ":\n    foreach: ${n}\n    do:\n      cmd: echo\n";
  const std::string path = dir.Write("dvc.yaml", text);
  // The sixth stage (s5 on line 24, its foreach on 25) passes 50,000.
  EXPECT_EQ(LoadError(path), path + ":25: stage 's5': the foreach and matrix stages generate more than 50000 steps in all");
}

TEST(SpecLimitsTest, CopyingALargeContextIntoEveryInstanceIsBounded) {
  SpecDir dir;
  std::string params = "big: [";
  for (int i = 0; i < 150000; ++i) params += i ? ",1" : "1";
  params += "]\n";
  dir.Write("params.yaml", params);
  std::string text = "stages:\n  s:\n    foreach: [";
  for (int i = 0; i < 5000; ++i) text += (i ? "," : "") + std::to_string(i);
  text += "]\n    do:\n      vars:\n        - extra: 1\n      cmd: echo ${item}\n";
  const std::string path = dir.Write("dvc.yaml", text);
  EXPECT_TRUE(Contains(LoadError(path), "expanding the stages would copy more than 20000000 values")) << LoadError(path);
}

TEST(SpecLimitsTest, InterpolationBombIsRefused) {
  SpecDir dir;
  std::string text = "vars:\n  - s: '" + std::string(100000, 'x') + "'\nstages:\n  a:\n    cmd: echo";
  for (int i = 0; i < 20; ++i) text += " ${s}";
  text += "\n";
  const std::string path = dir.Write("dvc.yaml", text);
  EXPECT_EQ(LoadError(path), path + ":5: stage 'a': a string longer than 1 MiB after interpolation");
}

TEST(SpecLimitsTest, WideParamsAndKeyListsLoadInLinearTime) {
  // 90,000 keys (just under the node limit); looking each up by a linear scan took minutes.
  SpecDir dir;
  std::string params, wanted;
  for (int i = 0; i < 90000; ++i) {
    params += "k" + std::to_string(i) + ": " + std::to_string(i) + "\n";
    wanted += (i ? "," : "") + std::string("k") + std::to_string(i);
  }
  dir.Write("params.yaml", params);
  dir.Write("p.yaml", params);
  const std::string path =
      dir.Write("dvc.yaml", "vars:\n  - p.yaml:" + wanted + "\nstages:\n  s:\n    cmd: echo ${k89999} ${k7}\n");
  const int status = RunWithDeadline(60, [&] {
    StatusOr<WorkflowSpec> spec = LoadWorkflowSpec(path);
    if (!spec.ok() || spec->steps[0].cmd != "echo 89999 7") _exit(3);
  });
  EXPECT_EQ(status, 0);
}

TEST(SpecLimitsTest, HugeEnvIsRefused) {
  SpecDir dir;
  std::string text = "env:\n";
  for (int i = 0; i <= 1000; ++i) text += "  V" + std::to_string(i) + ": x\n";
  text += "steps:\n  a:\n    cmd: echo\n";
  const std::string path = dir.Write("p.yaml", text);
  EXPECT_EQ(LoadError(path), path + ":2: 'env' has more than 1000 variables");
}

TEST(SpecLimitsTest, CommandsExecveCannotTakeAreRefused) {
  SpecDir dir;
  const std::string path = dir.Write("p.yaml", "steps:\n  a:\n    cmd: echo '" + std::string(200000, 'x') + "'\n");
  EXPECT_EQ(LoadError(path), path + ":2: step 'a': 'cmd' is 200007 bytes; /bin/sh -c takes at most 131071 (Linux's "
                                    "MAX_ARG_STRLEN)");
  const std::string env = dir.Write("q.yaml", "steps:\n  a:\n    cmd: echo\n    env: {V: '" + std::string(140000, 'x') +
                                                  "'}\n");
  EXPECT_EQ(LoadError(env), env + ":2: step 'a': env 'V' is longer than 131071 bytes (Linux's MAX_ARG_STRLEN)");
  // The most that can run (131,071 bytes and the NUL; `sh -c` with one more byte fails E2BIG).
  EXPECT_EQ(LoadOk(dir.Write("r.yaml", "steps:\n  a:\n    cmd: '" + std::string(131071, 'x') + "'\n")).steps.size(), 1u);
  EXPECT_TRUE(LoadError(dir.Write("s.yaml", "steps:\n  a:\n    cmd: '" + std::string(131072, 'x') + "'\n")).find(
                  "takes at most 131071") != std::string::npos);
}

// --- graph walks ---

// A ParsedSpec of n steps in a chain s0 <- s1 <- ... through files; `close` adds s0's
// dependency on the last step's output.
spec_internal::ParsedSpec Chain(size_t n, bool close) {
  spec_internal::ParsedSpec parsed;
  parsed.spec.path = "chain.yaml";
  for (size_t i = 0; i < n; ++i) {
    StepSpec step;
    step.name = "s" + std::to_string(i);
    step.cmd = "true";
    step.cwd = "/w";
    step.line = static_cast<int>(i + 2);
    step.outs = {"out/f" + std::to_string(i)};
    spec_internal::StepSource source;
    source.out_lines = {step.line};
    if (i > 0 || close) {
      step.deps = {"out/f" + std::to_string(i > 0 ? i - 1 : n - 1)};
      source.dep_lines = {step.line};
    }
    parsed.spec.steps.push_back(std::move(step));
    parsed.sources.push_back(std::move(source));
  }
  return parsed;
}

TEST(SpecLimitsTest, LongDependencyCycleIsFoundWithoutRecursion) {
  spec_internal::ParsedSpec parsed = Chain(200000, true);
  const Status st = spec_internal::LinkSteps(parsed);
  EXPECT_EQ(st.message(), "chain.yaml:2: steps form a cycle: s0 -> s1 -> s2 -> s3 -> ... -> s199997 -> s199998 -> "
                          "s199999 -> s0 (200000 steps)");
}

TEST(SpecLimitsTest, LongDependencyChainLinksAndOrders) {
  spec_internal::ParsedSpec parsed = Chain(200000, false);
  ASSERT_TRUE(spec_internal::LinkSteps(parsed).ok());
  const WorkflowSpec& spec = parsed.spec;
  ASSERT_EQ(spec.dependencies.size(), 199999u);
  EXPECT_EQ(spec.dependencies[0], (StepDependency{0, 1, "file:out/f0"}));
  EXPECT_EQ(spec.dependencies.back(), (StepDependency{199998, 199999, "file:out/f199998"}));
  const std::vector<size_t> order = spec.TopologicalOrder();
  ASSERT_EQ(order.size(), 200000u);
  for (size_t i = 0; i < order.size(); ++i) ASSERT_EQ(order[i], i);
}

TEST(SpecLimitsTest, DependencyOnADirectoryFindsTheOutputsInsideIt) {
  SpecDir dir;
  const std::string path = dir.Write("p.yaml",
                                     "steps:\n  a:\n    cmd: x\n    outs: [data/a.csv]\n  b:\n    cmd: x\n    outs: "
                                     "[data/sub/b.csv, data2]\n  c:\n    cmd: x\n    deps: [data]\n  d:\n    cmd: x\n"
                                     "    deps: [data/sub/b.csv/x]\n");
  const WorkflowSpec spec = LoadOk(path);
  EXPECT_EQ(Edges(spec), (std::vector<std::string>{"a -> c (file:data)", "b -> c (file:data)",
                                                   "b -> d (file:data/sub/b.csv/x)"}));
}

// --- NUL and control characters ---

TEST(SpecLimitsTest, NulBytesAreRefused) {
  SpecDir dir;
  const std::string cmd = dir.Write("a.yaml", "steps:\n  a:\n    cmd: \"echo a\\0b\"\n");
  EXPECT_EQ(LoadError(cmd), cmd + ":3: a NUL byte (\\0) in a string; GradeML refuses NUL in every value");
  const std::string name = dir.Write("b.yaml", "steps:\n  \"a\\0b\":\n    cmd: echo\n");
  EXPECT_TRUE(Contains(LoadError(name), name + ":2: a NUL byte")) << LoadError(name);
  const std::string dep = dir.Write("c.yaml", "steps:\n  a:\n    cmd: echo\n    deps: [\"x\\0y\"]\n");
  EXPECT_TRUE(Contains(LoadError(dep), dep + ":4: a NUL byte")) << LoadError(dep);
  const std::string env = dir.Write("d.yaml", "steps:\n  a:\n    cmd: echo\n    env: {X: \"\\0\"}\n");
  EXPECT_TRUE(Contains(LoadError(env), env + ":4: a NUL byte")) << LoadError(env);
  const std::string dvc = dir.Write("e/dvc.yaml", "stages:\n  a:\n    cmd: echo\n    outs: [\"o\\x00\"]\n");
  EXPECT_TRUE(Contains(LoadError(dvc), dvc + ":4: a NUL byte")) << LoadError(dvc);
  const std::string raw = dir.Write("f.yaml", std::string("steps:\n  a:\n    cmd: echo a\0b\n", 30));
  EXPECT_EQ(LoadError(raw), raw + ":3: a NUL byte in the file; GradeML refuses NUL in every value");
}

TEST(SpecLimitsTest, ControlCharactersInNamesAreShownEscaped) {
  SpecDir dir;
  const std::string path = dir.Write(
      "p.yaml", "steps:\n  \"evil\\e[2J\\nname\":\n    cmd: echo\n    after: [\"no\\rpe\"]\n");
  const std::string error = LoadError(path);
  EXPECT_EQ(error, path + ":4: step 'evil\\x1b[2J\\nname': no step named 'no\\rpe' to come after");
  ExpectOneCleanLine(error);
  const std::string cycle = dir.Write("q.yaml", "steps:\n  \"a\\tb\":\n    cmd: x\n    after: [c]\n  c:\n    cmd: x\n"
                                                "    after: [\"a\\tb\"]\n");
  EXPECT_EQ(LoadError(cycle), cycle + ":2: steps form a cycle: a\\tb -> c -> a\\tb");
  // Bytes that are not UTF-8 are shown as U+FFFD, not passed to the terminal.
  const std::string latin1 = dir.Write("r.yaml", "steps:\n  caf\xe9:\n    cmd: x\n    bogus: 1\n");
  const std::string bad = LoadError(latin1);
  EXPECT_EQ(bad, latin1 + ":4: step 'caf\xef\xbf\xbd': unknown key 'bogus' (expected cmd, deps, outs, params, after, env, cwd, reuse)");
  // A valid name with control characters loads, unchanged.
  const WorkflowSpec spec = LoadOk(dir.Write("s.yaml", "steps:\n  \"a\\x1bb\":\n    cmd: echo\n"));
  ASSERT_EQ(spec.steps.size(), 1u);
  EXPECT_EQ(spec.steps[0].name, "a\x1b" "b");
}

}  // namespace
}  // namespace grademl::workflow
