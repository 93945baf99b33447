// Hostile log rules: expressions that backtrack catastrophically, features RE2 lacks,
// oversized expressions, YAML bombs, files that are not files, control characters in
// errors. Each ends quickly: loaded and matched in linear time, or refused with FILE:LINE.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "core/text.h"
#include "run_with_deadline.h"
#include "model/run_builder.h"
#include "record/log_rules.h"
#include "workflow/spec_test_support.h"

namespace grademl::record {
namespace {

using grademl::testing::RunWithDeadline;

std::string LimitsParseError(const std::string& yaml) {
  auto rules = LogRuleSet::Parse(yaml, "r.yaml");
  EXPECT_FALSE(rules.ok()) << yaml;
  return rules.ok() ? "" : rules.status().message();
}

std::string Rule(const std::string& begin) {
  return "rules:\n  - name: x\n    type: t\n    begin: '" + begin + "'\n    instant: true\n";
}

TEST(LogRulesLimitsTest, CatastrophicBacktrackingRuleEndsQuickly) {
  auto rules = LogRuleSet::Parse(Rule("(a+)+$") + "  - name: y\n    type: t\n    begin: '^(\\w+\\s?)*$'\n", "r.yaml");
  ASSERT_TRUE(rules.ok()) << rules.status().message();
  // A backtracking engine takes 2^n steps on these lines; 60 characters would take years.
  const int status = RunWithDeadline(20, [&] {
    model::RunBuilder builder{model::RunInfo{}};
    const model::PhaseId step = builder.BeginPhase({.parent = 0, .name = "s", .type = "step", .start_ns = 1});
    LogPhaseTracker tracker(&*rules, &builder, step, "h", 1);
    for (int i = 0; i < 100; ++i) {
      tracker.OnLine(10 + i, std::string(2000, 'a') + "!");
      tracker.OnLine(10 + i, "word word word word word word word word word word word word word word word !");
    }
    if (tracker.regex_runs() < 200) _exit(3);
  });
  EXPECT_EQ(status, 0);
}

TEST(LogRulesLimitsTest, BackreferencesAndLookaroundAreRefusedAtLoad) {
  EXPECT_EQ(LimitsParseError(Rule("^(\\w+) \\1$")),
            "r.yaml:4: rule 'x': begin: bad regular expression '^(\\w+) \\1$': backreferences (\\1) are not "
            "supported: rules are matched with RE2, in time linear in the line");
  EXPECT_EQ(LimitsParseError(Rule("^Epoch (?=\\d)")),
            "r.yaml:4: rule 'x': begin: bad regular expression '^Epoch (?=\\d)': lookahead and lookbehind ((?=...) "
            "are not supported: rules are matched with RE2, in time linear in the line");
  EXPECT_TRUE(LimitsParseError(Rule("(?<!x)y")).find("lookahead and lookbehind ((?<!...)") != std::string::npos);
  // Inside a class, ( ? = are plain characters, not a lookahead: accepted.
  EXPECT_TRUE(LogRuleSet::Parse(Rule("[(?=]x"), "r.yaml").ok());
}

TEST(LogRulesLimitsTest, EcmaScriptUnicodeEscapesStillWork) {
  auto rules = LogRuleSet::Parse(Rule("^caf\\u00e9 (\\d+)"), "r.yaml");
  ASSERT_TRUE(rules.ok()) << rules.status().message();
  EXPECT_TRUE(re2::RE2::PartialMatch("caf\xc3\xa9 3", *rules->rules()[0].begin));
  EXPECT_FALSE(re2::RE2::PartialMatch("cafe 3", *rules->rules()[0].begin));
}

TEST(LogRulesLimitsTest, OversizedExpressionIsRefused) {
  const std::string error = LimitsParseError(Rule("((((a{100}){100}){100}){100})"));
  EXPECT_EQ(error.rfind("r.yaml:4: rule 'x': begin: bad regular expression '((((a{100}){100}){100}){100})': ", 0), 0u)
      << error;
}

TEST(LogRulesLimitsTest, YamlBombsAndCyclesAreRefused) {
  EXPECT_EQ(LimitsParseError("rules: &r [{name: x, type: t, begin: a, tags: *r}]\n"),
            "r.yaml:1: alias '*r' is used inside its own anchor '&r' (line 1): the node would contain itself");
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 9; ++j) bomb += (j ? ", *a" : "*a") + std::to_string(i - 1);
    bomb += "]\n";
  }
  EXPECT_TRUE(LimitsParseError(bomb).find("r.yaml:6: the document has more than 200000 nodes") == 0) << LimitsParseError(bomb);
}

TEST(LogRulesLimitsTest, TooManyRulesAreRefused) {
  std::string text = "rules:\n";
  for (int i = 0; i < 257; ++i) text += "  - {name: r" + std::to_string(i) + ", type: t, begin: 'x" + std::to_string(i) + "'}\n";
  EXPECT_EQ(LimitsParseError(text), "r.yaml:2: more than 256 rules in one file");
}

TEST(LogRulesLimitsTest, RulesFilesThatAreNotFilesAreRefusedWithoutBlocking) {
  workflow::testing::SpecDir dir;
  ASSERT_EQ(mkfifo(dir.Path("fifo.yaml").c_str(), 0600), 0);
  auto fifo = LogRuleSet::LoadFile(dir.Path("fifo.yaml"));
  ASSERT_FALSE(fifo.ok());
  EXPECT_EQ(fifo.status().message(), dir.Path("fifo.yaml") + ": cannot read: not a regular file (a FIFO)");
  auto zero = LogRuleSet::LoadFile("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(), "/dev/zero: cannot read: not a regular file (a character device)");
  auto folder = LogRuleSet::LoadFile(dir.Path());
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.status().message(), dir.Path() + ": cannot read: Is a directory");
  auto large = LogRuleSet::LoadFile(dir.Write("big.yaml", "rules:\n# " + std::string(3 << 20, 'x') + "\n"));
  ASSERT_FALSE(large.ok());
  EXPECT_EQ(large.status().message(),
            dir.Path("big.yaml") + ": cannot read: larger than 2 MiB; GradeML reads YAML files up to that size");
}

// Found by the fuzzer under ASan: each value of a rule was read through a reference to a
// temporary of yaml-cpp's iterator (stack-use-after-scope; only a sanitizer build sees it).
TEST(LogRulesLimitsTest, RuleValuesAreReadSafely) {
  EXPECT_EQ(LimitsParseError("rules:\n  - name: validation\n    type: eval\n\n    end: '^Fold \\d+ done'\n"),
            "r.yaml:2: rule 'validation' has no `begin` expression");
}

TEST(LogRulesLimitsTest, ControlCharactersInErrorsAreEscaped) {
  const std::string error = LimitsParseError("rules:\n  - name: \"evil\\e[2J\\n\"\n    type: t\n");
  EXPECT_EQ(error, "r.yaml:2: rule 'evil\\x1b[2J\\n' has no `begin` expression");
  EXPECT_EQ(LimitsParseError("rules:\n  - name: \"a\\0\"\n"),
            "r.yaml:2: a NUL byte (\\0) in a string; GradeML refuses NUL in every value");
}

}  // namespace
}  // namespace grademl::record
