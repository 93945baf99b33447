// Step identities (reuse/step_identity.h): what changes a step's key and what does not,
// with StepSpec values built by hand in two checkouts of identical content.
#include "reuse/step_identity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "workflow/spec_test_support.h"
#include "sha256sum.h"
#include "skip_or_fail.h"

namespace grademl::reuse {
namespace {

using workflow::testing::SpecDir;

constexpr const char* kStepIdentityParams =
    "train:\n"
    "  lr: 0.01\n"
    "  epochs: 3\n"
    "model: cnn\n";

// One checkout of the pipeline.
void StepIdentityTestCheckout(const SpecDir& dir, const std::string& sub) {
  dir.Write(sub + "/data.csv", "x,y\n1,2\n3,4\n");
  dir.Write(sub + "/src/model.py", "def model(): pass\n");
  dir.Write(sub + "/src/util/io.py", "import os\n");
  dir.Write(sub + "/params.yaml", kStepIdentityParams);
  dir.Write(sub + "/config.json", "{\"layers\": [64, 32], \"dropout\": 0.5}\n");
}

workflow::StepSpec StepIdentityTestStep(const std::string& cwd) {
  workflow::StepSpec s;
  s.name = "train";
  s.cmd = "python src/model.py --data data.csv --out model.bin";
  s.deps = {"data.csv", "src"};
  s.outs = {"model.bin", "metrics.json"};
  s.params = {"params.yaml:train.lr", "config.json"};
  s.cwd = cwd;
  s.line = 3;
  return s;
}

const std::vector<std::string> kStepIdentityEnv = {
    "PATH=/usr/bin:/bin", "LANG=C.UTF-8",    "DIGITS_SCALE=1", "GRADEML_FOO=a",         "PWD=/home/ana/proj",
    "OLDPWD=/home/ana",   "HOME=/home/ana", "TERM=xterm",     "SSH_CLIENT=10.0.0.1 5 22", "NOVALUE"};

class StepIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status available = Sha256Available();
    ASSERT_TRUE(available.ok()) << available.message();
    if (access("/usr/bin/sha256sum", X_OK) != 0) SKIP_OR_FAIL_IN_CI("no /usr/bin/sha256sum (coreutils)");
    StepIdentityTestCheckout(dir_, "a");
    StepIdentityTestCheckout(dir_, "b");
  }
  // A step's key, with a new hasher (nothing remembered); "" and a test failure on an error.
  std::string Key(const workflow::StepSpec& s, const std::vector<std::string>& env = kStepIdentityEnv) {
    ContentHasher hasher(nullptr);
    StepIdentity id = IdentifyStep(s, hasher, env);
    EXPECT_TRUE(id.error.empty()) << id.error;
    EXPECT_TRUE(IsSha256Hex(id.key)) << id.key;
    return id.key;
  }
  std::string A() const { return dir_.Path("a"); }
  std::string B() const { return dir_.Path("b"); }

  SpecDir dir_;
};

TEST_F(StepIdentityTest, SameKeyInTwoCheckouts) {
  ContentHasher hasher(nullptr);
  StepIdentity a = IdentifyStep(StepIdentityTestStep(A()), hasher, kStepIdentityEnv);
  StepIdentity b = IdentifyStep(StepIdentityTestStep(B()), hasher, kStepIdentityEnv);
  ASSERT_TRUE(a.error.empty()) << a.error;
  EXPECT_TRUE(IsSha256Hex(a.key));
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.not_reusable, "");
  EXPECT_GT(a.bytes_read, 0);
  // Inputs: deps, then params, in declaration order, with their content hashes.
  ASSERT_EQ(a.inputs.size(), 4u);
  EXPECT_EQ(a.inputs[0].path, "data.csv");
  EXPECT_EQ(a.inputs[0].hash, grademl::testing::Sha256sumOf(A() + "/data.csv"));
  EXPECT_EQ(a.inputs[0].size, 12);
  EXPECT_FALSE(a.inputs[0].directory);
  EXPECT_EQ(a.inputs[1].path, "src");
  EXPECT_TRUE(a.inputs[1].directory);
  EXPECT_EQ(a.inputs[1].size, 18 + 10);
  EXPECT_EQ(a.inputs[2].path, "params.yaml:train.lr");
  EXPECT_TRUE(IsSha256Hex(a.inputs[2].hash));
  EXPECT_EQ(a.inputs[3].path, "config.json");
  EXPECT_EQ(a.inputs[3].hash, grademl::testing::Sha256sumOf(A() + "/config.json"));
  EXPECT_EQ(a.inputs, b.inputs);
  // An absolute dep naming the same file is hashed the same (its path as written differs).
  workflow::StepSpec abs = StepIdentityTestStep(B());
  abs.deps[0] = A() + "/data.csv";
  StepIdentity c = IdentifyStep(abs, hasher, kStepIdentityEnv);
  EXPECT_EQ(c.inputs[0].hash, a.inputs[0].hash);
}

TEST_F(StepIdentityTest, ContentCommandEnvironmentAndOutsChangeTheKey) {
  const std::string base = Key(StepIdentityTestStep(A()));
  ASSERT_EQ(Key(StepIdentityTestStep(B())), base);

  // A dep's content (a file; a file inside a dep directory; a file added to it).
  dir_.Write("b/data.csv", "x,y\n1,2\n3,5\n");
  EXPECT_NE(Key(StepIdentityTestStep(B())), base);
  dir_.Write("b/data.csv", "x,y\n1,2\n3,4\n");
  EXPECT_EQ(Key(StepIdentityTestStep(B())), base);
  dir_.Write("b/src/util/io.py", "import sys\n");
  EXPECT_NE(Key(StepIdentityTestStep(B())), base);
  dir_.Write("b/src/util/io.py", "import os\n");
  EXPECT_EQ(Key(StepIdentityTestStep(B())), base);
  dir_.Write("b/src/util/new.py", "");
  EXPECT_NE(Key(StepIdentityTestStep(B())), base);

  workflow::StepSpec s = StepIdentityTestStep(A());
  s.cmd += " --seed 1";
  EXPECT_NE(Key(s), base);

  s = StepIdentityTestStep(A());
  s.outs[0] = "model2.bin";
  EXPECT_NE(Key(s), base);
  s = StepIdentityTestStep(A());
  s.outs.pop_back();
  EXPECT_NE(Key(s), base);

  s = StepIdentityTestStep(A());
  s.deps.push_back("params.yaml");
  EXPECT_NE(Key(s), base);

  // The step's name and line are not part of it.
  s = StepIdentityTestStep(A());
  s.name = "train@other";
  s.line = 99;
  EXPECT_EQ(Key(s), base);

  std::vector<std::string> env = kStepIdentityEnv;
  env[2] = "DIGITS_SCALE=0.1";
  EXPECT_NE(Key(StepIdentityTestStep(A()), env), base);
  env = kStepIdentityEnv;
  env.push_back("CUDA_VISIBLE_DEVICES=1");
  EXPECT_NE(Key(StepIdentityTestStep(A()), env), base);
  env = kStepIdentityEnv;
  env.erase(env.begin() + 1);  // LANG gone
  EXPECT_NE(Key(StepIdentityTestStep(A()), env), base);
  // The order of the environment is not.
  env = kStepIdentityEnv;
  std::swap(env[0], env[2]);
  EXPECT_EQ(Key(StepIdentityTestStep(A()), env), base);
}

TEST_F(StepIdentityTest, SessionVariablesDoNotChangeTheKey) {
  const std::string base = Key(StepIdentityTestStep(A()));
  std::vector<std::string> env = {"PATH=/usr/bin:/bin",
                                  "LANG=C.UTF-8",
                                  "DIGITS_SCALE=1",
                                  "GRADEML_FOO=b",
                                  "GRADEML_BAR=1",
                                  "PWD=/tmp/ci-1234/proj",
                                  "OLDPWD=/",
                                  "HOME=/root",
                                  "TERM=dumb",
                                  "SSH_CLIENT=192.168.1.1 6 22",
                                  "SSH_TTY=/dev/pts/3",
                                  "SHLVL=3",
                                  "_=/usr/bin/grademl",
                                  "XDG_RUNTIME_DIR=/run/user/0"};
  EXPECT_EQ(Key(StepIdentityTestStep(B()), env), base);
  // None of them at all.
  EXPECT_EQ(Key(StepIdentityTestStep(B()), {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "DIGITS_SCALE=1"}), base);
}

TEST_F(StepIdentityTest, SpecEnvironmentOverridesGrademls) {
  std::vector<std::string> env = kStepIdentityEnv;
  env[2] = "DIGITS_SCALE=0.1";
  const std::string with_01 = Key(StepIdentityTestStep(A()), env);
  workflow::StepSpec s = StepIdentityTestStep(A());
  s.env = {{"DIGITS_SCALE", "0.1"}};
  EXPECT_EQ(Key(s), with_01);
  EXPECT_NE(Key(s), Key(StepIdentityTestStep(A())));
  // GradeML's own variables in the spec are left out too.
  s = StepIdentityTestStep(A());
  s.env = {{"GRADEML_SAMPLE_INTERVAL", "10ms"}};
  EXPECT_EQ(Key(s), Key(StepIdentityTestStep(A())));
}

TEST_F(StepIdentityTest, ParameterKeyIgnoresTheRestOfItsFile) {
  workflow::StepSpec s = StepIdentityTestStep(A());
  s.params = {"params.yaml:train.lr"};
  const std::string base = Key(s);
  // Another key edited, keys reordered, comments and layout changed.
  dir_.Write("a/params.yaml",
             "# tuned\n"
             "model: resnet\n"
             "train: {epochs: 30, lr: 0.01}\n");
  EXPECT_EQ(Key(s), base);
  dir_.Write("a/params.yaml",
             "model: cnn\n"
             "train:\n"
             "  epochs: 3\n"
             "  lr: 0.02\n");
  EXPECT_NE(Key(s), base);
  // The same value in JSON.
  dir_.Write("a/params.yaml", "{\"train\": {\"epochs\": 3, \"lr\": 0.01}}\n");
  EXPECT_EQ(Key(s), base);

  // A mapping's value: its keys' order does not count, its values do.
  dir_.Write("a/opt.yaml", "opt:\n  name: adam\n  betas: [0.9, 0.999]\nother: 1\n");
  s.params = {"opt.yaml:opt"};
  const std::string opt = Key(s);
  dir_.Write("a/opt.yaml", "other: 2\nopt:\n  betas: [0.9, 0.999]\n  name: adam\n");
  EXPECT_EQ(Key(s), opt);
  dir_.Write("a/opt.yaml", "other: 2\nopt:\n  betas: [0.999, 0.9]\n  name: adam\n");
  EXPECT_NE(Key(s), opt);
  // With its keys out of order, a value edited still counts (sorting the mapping once
  // overwrote one key's value with another's, so that this was taken for the same).
  dir_.Write("a/opt.yaml", "opt:\n  betas: [0.9, 0.999]\n  name: sgd\n");
  EXPECT_NE(Key(s), opt);
  dir_.Write("a/opt.yaml", "opt:\n  z: 1\n  y: {c: 1, b: 2, a: 3}\n  x: 3\n");
  const std::string reversed = Key(s);
  dir_.Write("a/opt.yaml", "opt:\n  x: 3\n  y: {a: 3, b: 2, c: 1}\n  z: 1\n");
  EXPECT_EQ(Key(s), reversed);
  for (const char* edited : {"opt:\n  z: 1\n  y: {c: 1, b: 2, a: 3}\n  x: 4\n",
                             "opt:\n  z: 2\n  y: {c: 1, b: 2, a: 3}\n  x: 3\n",
                             "opt:\n  z: 1\n  y: {c: 1, b: 2, a: 4}\n  x: 3\n",
                             "opt:\n  z: 1\n  y: {c: 9, b: 2, a: 3}\n  x: 3\n",
                             "opt:\n  z: 3\n  y: {c: 1, b: 2, a: 3}\n  x: 1\n"}) {
    dir_.Write("a/opt.yaml", edited);
    EXPECT_NE(Key(s), reversed) << edited;
  }
}

TEST_F(StepIdentityTest, WholeFileParameterChangesWithAnyByte) {
  workflow::StepSpec s = StepIdentityTestStep(A());
  s.params = {"config.json"};
  const std::string base = Key(s);
  // The same JSON value, one space more.
  dir_.Write("a/config.json", "{\"layers\": [64, 32],  \"dropout\": 0.5}\n");
  EXPECT_NE(Key(s), base);
  dir_.Write("a/config.json", "{\"layers\": [64, 32], \"dropout\": 0.5}\n");
  EXPECT_EQ(Key(s), base);

  ContentHasher hasher(nullptr);
  int64_t read = 0;
  StatusOr<model::StepArtifact> p = HashParameter("config.json", A(), hasher, &read);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->path, "config.json");
  EXPECT_EQ(p->hash, grademl::testing::Sha256sumOf(A() + "/config.json"));
  EXPECT_EQ(p->size, 37);
  EXPECT_EQ(read, 37);
}

TEST_F(StepIdentityTest, DottedKeysWrittenLiterallyAndNested) {
  ContentHasher hasher(nullptr);
  // DVC writes keys with dots in them: "a.b" as one key.
  dir_.Write("a/p.yaml", "a.b: 5\nc: 1\n");
  StatusOr<model::StepArtifact> literal = HashParameter("p.yaml:a.b", A(), hasher, nullptr);
  ASSERT_TRUE(literal.ok()) << literal.status().message();
  dir_.Write("a/p.yaml", "c: 2\na.b: 5\n");
  StatusOr<model::StepArtifact> moved = HashParameter("p.yaml:a.b", A(), hasher, nullptr);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->hash, literal->hash);
  dir_.Write("a/p.yaml", "a.b: 6\nc: 1\n");
  StatusOr<model::StepArtifact> changed = HashParameter("p.yaml:a.b", A(), hasher, nullptr);
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->hash, literal->hash);

  // Nested, and a dotted key under a mapping.
  dir_.Write("a/q.yaml", "a:\n  b:\n    c: 5\n");
  StatusOr<model::StepArtifact> nested = HashParameter("q.yaml:a.b.c", A(), hasher, nullptr);
  ASSERT_TRUE(nested.ok()) << nested.status().message();
  EXPECT_EQ(nested->hash, literal->hash);  // the same value: 5
  dir_.Write("a/q.yaml", "a:\n  b.c: 5\n");
  StatusOr<model::StepArtifact> mixed = HashParameter("q.yaml:a.b.c", A(), hasher, nullptr);
  ASSERT_TRUE(mixed.ok()) << mixed.status().message();
  EXPECT_EQ(mixed->hash, literal->hash);

  // Not there.
  dir_.Write("a/q.yaml", "a:\n  b: 5\n");
  StatusOr<model::StepArtifact> missing = HashParameter("q.yaml:a.b.c", A(), hasher, nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("a.b.c"), std::string::npos) << missing.status().message();
  EXPECT_FALSE(HashParameter("q.yaml:a.x", A(), hasher, nullptr).ok());
  EXPECT_FALSE(HashParameter("nofile.yaml:a", A(), hasher, nullptr).ok());
}

TEST_F(StepIdentityTest, UnreadableInputGivesNoKeyAndNamesIt) {
  ContentHasher hasher(nullptr);
  workflow::StepSpec s = StepIdentityTestStep(A());
  s.deps.push_back("missing.csv");
  StepIdentity id = IdentifyStep(s, hasher, kStepIdentityEnv);
  EXPECT_EQ(id.key, "");
  EXPECT_NE(id.error.find("missing.csv"), std::string::npos) << id.error;
  ASSERT_EQ(id.inputs.size(), 5u);  // the others hashed still
  EXPECT_EQ(id.inputs[2].path, "missing.csv");
  EXPECT_EQ(id.inputs[2].hash, "");
  EXPECT_TRUE(IsSha256Hex(id.inputs[0].hash));

  s = StepIdentityTestStep(A());
  s.params = {"params.yaml:train.momentum"};
  id = IdentifyStep(s, hasher, kStepIdentityEnv);
  EXPECT_EQ(id.key, "");
  EXPECT_NE(id.error.find("train.momentum"), std::string::npos) << id.error;

  s = StepIdentityTestStep(A());
  s.params = {"absent.yaml:lr"};
  id = IdentifyStep(s, hasher, kStepIdentityEnv);
  EXPECT_EQ(id.key, "");
  EXPECT_NE(id.error.find("absent.yaml"), std::string::npos) << id.error;
}

TEST(StepIdentityNotReusableTest, ReasonsFromTheSpec) {
  workflow::StepSpec s;
  s.cmd = "make";
  s.deps = {"in.txt"};
  s.outs = {"out.txt"};
  s.cwd = "/tmp";
  EXPECT_EQ(NotReusableBySpec(s), "");

  workflow::StepSpec no_outs = s;
  no_outs.outs.clear();
  EXPECT_NE(NotReusableBySpec(no_outs).find("no outs"), std::string::npos) << NotReusableBySpec(no_outs);

  workflow::StepSpec no_inputs = s;
  no_inputs.deps.clear();
  EXPECT_NE(NotReusableBySpec(no_inputs).find("no deps or params"), std::string::npos);
  no_inputs.params = {"params.yaml:lr"};  // a parameter alone declares what it reads
  EXPECT_EQ(NotReusableBySpec(no_inputs), "");

  workflow::StepSpec after = s;
  after.after = {"prepare"};
  EXPECT_NE(NotReusableBySpec(after).find("'prepare'"), std::string::npos) << NotReusableBySpec(after);

  workflow::StepSpec opted_out = s;
  opted_out.not_reusable = "always_changed: true in dvc.yaml";
  EXPECT_EQ(NotReusableBySpec(opted_out), "always_changed: true in dvc.yaml");
  opted_out.outs.clear();  // the spec's own reason first
  EXPECT_EQ(NotReusableBySpec(opted_out), "always_changed: true in dvc.yaml");
}

TEST_F(StepIdentityTest, IdentifyStepCarriesTheReason) {
  ContentHasher hasher(nullptr);
  workflow::StepSpec s = StepIdentityTestStep(A());
  s.not_reusable = "reuse: false in the spec";
  StepIdentity id = IdentifyStep(s, hasher, kStepIdentityEnv);
  EXPECT_EQ(id.not_reusable, "reuse: false in the spec");
  EXPECT_TRUE(IsSha256Hex(id.key));  // still identified (recorded in the experiment graph)
  s = StepIdentityTestStep(A());
  s.after = {"prepare"};
  EXPECT_NE(IdentifyStep(s, hasher, kStepIdentityEnv).not_reusable, "");
}

TEST(StepIdentityIgnoredTest, SessionVariables) {
  for (const char* name : {"GRADEML_FOO", "GRADEML_", "PWD", "OLDPWD", "HOME", "TERM", "TERM_PROGRAM", "SSH_CLIENT",
                           "SSH_AUTH_SOCK", "SHLVL", "_", "USER", "LOGNAME", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS",
                           "TMUX", "TMUX_PANE", "LESSOPEN", "HISTSIZE", "SUDO_USER", "PS1", "PS4", "PROMPT_COMMAND",
                           "COLUMNS", "LINES", "LS_COLORS", "DISPLAY", "COLORTERM"}) {
    EXPECT_TRUE(IgnoredInIdentity(name)) << name;
  }
  for (const char* name : {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",
                           "DIGITS_SCALE", "LANG", "HOMEBREW_PREFIX", "USERNAME", "PS5", "OMPI_COMM_WORLD_SIZE",
                           "PMI_RANK", "GRADEML", "pwd", "MYHOME", ""}) {
    EXPECT_FALSE(IgnoredInIdentity(name)) << name;
  }
}

}  // namespace
}  // namespace grademl::reuse
