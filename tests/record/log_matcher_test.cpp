// The log rules' per-line cost budget (RuleCostBudget, a rule's cost forced through the test
// hook, never measured against the machine's speed) and the LogMatcher that matches lines on
// a thread of its own: bounded queue, lines dropped from matching and counted, Drain cut
// short by a stop.
#include "record/log_matcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

namespace grademl::record {
namespace {

LogRuleSet MatcherTestRules() {
  auto rules = LogRuleSet::Parse(
      "rules:\n"
      "  - name: slow\n    type: tick\n    begin: '^tick (\\d+)'\n    instant: true\n"
      "  - name: fine\n    type: tock\n    begin: '^tock (\\d+)'\n    instant: true\n",
      "rules.yaml");
  EXPECT_TRUE(rules.ok()) << rules.status().message();
  return *rules;
}

size_t MatcherTestCount(model::RunBuilder& builder, const std::string& type) {
  size_t n = 0;
  for (const model::Phase& p : builder.PhasesWhere([](const model::Phase&) { return true; })) {
    n += p.leaf_type() == type ? 1 : 0;
  }
  return n;
}

// A rule whose cost on a line is over the budget is switched off after that line, once,
// with what it cost; the rules under budget go on.
TEST(RuleCostBudgetTest, ARuleOverBudgetIsSwitchedOffOnce) {
  LogRuleSet rules = MatcherTestRules();
  RuleCostBudget budget(&rules, 2 * kNsPerMs);
  budget.ForceCost("slow", 3 * kNsPerMs);
  budget.ForceCost("fine", 2 * kNsPerMs);  // at the budget is within it
  std::vector<std::pair<std::string, DurationNs>> off;
  budget.on_switched_off = [&](const LogRule& rule, DurationNs cost) { off.emplace_back(rule.name, cost); };
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId step = builder.BeginPhase({.name = "s", .type = "step", .start_ns = 1});
  LogPhaseTracker tracker(&rules, &builder, step, "h", 1, &budget);
  for (int i = 1; i <= 3; ++i) {
    tracker.OnLine(10 * i, "tick " + std::to_string(i));
    tracker.OnLine(10 * i + 1, "tock " + std::to_string(i));
  }
  ASSERT_EQ(off.size(), 1u);
  EXPECT_EQ(off[0].first, "slow");
  EXPECT_EQ(off[0].second, 3 * kNsPerMs);
  EXPECT_TRUE(budget.off(0));
  EXPECT_FALSE(budget.off(1));
  EXPECT_EQ(budget.switched_off(), 1u);
  EXPECT_EQ(MatcherTestCount(builder, "tick"), 1u);  // the line that showed the cost still counts
  EXPECT_EQ(MatcherTestCount(builder, "tock"), 3u);
}

// A rule that never runs its expression on a line (its literal is not in it) is not charged.
TEST(RuleCostBudgetTest, ARuleSkippedByItsLiteralIsNotCharged) {
  LogRuleSet rules = MatcherTestRules();
  RuleCostBudget budget(&rules, 2 * kNsPerMs);
  budget.ForceCost("*", 10 * kNsPerMs);
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId step = builder.BeginPhase({.name = "s", .type = "step", .start_ns = 1});
  LogPhaseTracker tracker(&rules, &builder, step, "h", 1, &budget);
  tracker.OnLine(10, "nothing to see");
  EXPECT_EQ(budget.switched_off(), 0u);
  tracker.OnLine(11, "tock 1");  // "slow" is skipped by its literal ("tick"), "fine" runs
  EXPECT_EQ(budget.switched_off(), 1u);
  EXPECT_FALSE(budget.off(0));
  EXPECT_TRUE(budget.off(1));
}

// Measured costs: a wall time over the budget only makes a rule a suspect (the thread may
// have been preempted); a CPU time over it then switches it off, one under it clears it.
TEST(RuleCostBudgetTest, AWallTimeMakesASuspectACpuTimeDecides) {
  LogRuleSet rules = MatcherTestRules();
  RuleCostBudget budget(&rules, 2 * kNsPerMs);
  budget.Charge(0, 5 * kNsPerMs, /*cpu=*/false);
  EXPECT_TRUE(budget.suspect(0));
  EXPECT_FALSE(budget.off(0));
  budget.Charge(0, 1 * kNsPerMs, /*cpu=*/true);
  EXPECT_FALSE(budget.suspect(0));
  EXPECT_FALSE(budget.off(0));
  budget.Charge(0, 5 * kNsPerMs, /*cpu=*/false);
  budget.Charge(0, 3 * kNsPerMs, /*cpu=*/true);
  EXPECT_TRUE(budget.off(0));
  EXPECT_FALSE(budget.off(1));
  EXPECT_EQ(budget.switched_off(), 1u);
}

TEST(RuleCostBudgetTest, ForcedCostsAreParsed) {
  LogRuleSet rules = MatcherTestRules();
  RuleCostBudget budget(&rules);
  EXPECT_TRUE(budget.ForceCostsFrom("slow=50ms,*=0").ok());
  EXPECT_EQ(budget.ForceCostsFrom("nobody=1ms").message(), "no rule named 'nobody'");
  EXPECT_EQ(budget.ForceCostsFrom("slow").message(), "'slow' is not NAME=DURATION");
  EXPECT_FALSE(budget.ForceCostsFrom("slow=5").ok());  // a duration needs its unit
}

TEST(LogMatcherTest, LinesAreMatchedOnItsThreadAndFinishEndsOpenPhases) {
  auto rules = LogRuleSet::BuiltIn();
  auto matcher = LogMatcher::Start(&rules).value();
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId step = builder.BeginPhase({.name = "s", .type = "step", .start_ns = 1});
  LogMatcher::Source src = matcher->AddSource(&builder, step, "h", 7);
  EXPECT_TRUE(matcher->Line(src, 10, "Epoch 1/2"));
  EXPECT_TRUE(matcher->Line(src, 20, "Epoch 2/2"));
  matcher->Finish(src, 30);
  EXPECT_TRUE(matcher->Drain(LogMatcher::kDefaultDrainLimit));
  std::vector<model::Phase> epochs =
      builder.PhasesWhere([](const model::Phase& p) { return p.leaf_type() == "epoch"; });
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_EQ(epochs[0].end_ns, 20);
  EXPECT_EQ(epochs[1].end_ns, 30);  // ended by Finish
  EXPECT_EQ(matcher->dropped_lines(), 0u);
}

// Two sources (two steps) whose lines come a read at a time, interleaved, many more than the
// thread takes at once: each line goes to its own source's phases, in order, and each
// source's Finish ends its own open phase.
TEST(LogMatcherTest, InterleavedSourcesKeepTheirOwnPhases) {
  auto rules = LogRuleSet::BuiltIn();
  auto matcher = LogMatcher::Start(&rules).value();
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId a = builder.BeginPhase({.name = "a", .type = "step", .start_ns = 1});
  model::PhaseId b = builder.BeginPhase({.name = "b", .type = "step", .start_ns = 1});
  LogMatcher::Source sa = matcher->AddSource(&builder, a, "h", 7);
  LogMatcher::Source sb = matcher->AddSource(&builder, b, "h", 8);
  constexpr int kEpochs = 3000;
  for (int i = 1; i <= kEpochs; ++i) {
    std::vector<std::string> lines = {"noise " + std::to_string(i), "Epoch " + std::to_string(i) + "/" +
                                                                       std::to_string(kEpochs)};
    EXPECT_EQ(matcher->Lines(i % 2 == 0 ? sa : sb, i * 10, lines), 0u);
    EXPECT_TRUE(lines.empty());
    EXPECT_TRUE(matcher->Line(i % 2 == 0 ? sb : sa, i * 10 + 5, "Epoch " + std::to_string(i) + "/" +
                                                                   std::to_string(kEpochs)));
  }
  matcher->Finish(sa, 1'000'000);
  matcher->Finish(sb, 2'000'000);
  ASSERT_TRUE(matcher->Drain(LogMatcher::kDefaultDrainLimit));
  for (model::PhaseId step : {a, b}) {
    std::vector<model::Phase> epochs = builder.PhasesWhere(
        [step](const model::Phase& p) { return p.leaf_type() == "epoch" && p.parent == step; });
    ASSERT_EQ(epochs.size(), static_cast<size_t>(kEpochs));
    // Epoch i of a step began at its line and ended where epoch i+1 began (5 or 15 ns later
    // in the other source's order), the last at the step's Finish.
    for (int i = 0; i + 1 < kEpochs; ++i) {
      EXPECT_EQ(epochs[i].end_ns, epochs[i + 1].start_ns) << i;
      EXPECT_LT(epochs[i].start_ns, epochs[i + 1].start_ns) << i;
    }
    EXPECT_EQ(epochs.back().end_ns, step == a ? 1'000'000 : 2'000'000);
  }
  EXPECT_EQ(matcher->dropped_lines(), 0u);
}

// A line larger than the whole queue cannot wait in it: it is dropped (counted, said once),
// the lines that fit are matched.
TEST(LogMatcherTest, WhatDoesNotFitTheQueueIsDroppedAndCounted) {
  auto rules = LogRuleSet::BuiltIn();
  auto matcher = LogMatcher::Start(&rules, {.max_queued_bytes = 256}).value();
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId step = builder.BeginPhase({.name = "s", .type = "step", .start_ns = 1});
  LogMatcher::Source src = matcher->AddSource(&builder, step, "h", 7);
  EXPECT_FALSE(matcher->Line(src, 10, "Epoch 1/2 " + std::string(300, 'x')));
  EXPECT_FALSE(matcher->Line(src, 11, std::string(300, 'y')));
  ASSERT_TRUE(matcher->Drain(LogMatcher::kDefaultDrainLimit));
  EXPECT_TRUE(matcher->Line(src, 20, "Epoch 2/2"));
  matcher->Finish(src, 30);
  ASSERT_TRUE(matcher->Drain(LogMatcher::kDefaultDrainLimit));
  EXPECT_EQ(matcher->dropped_lines(), 2u);
  std::vector<std::string> said = matcher->TakeMessages();
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("fell behind"), std::string::npos) << said[0];
  EXPECT_EQ(MatcherTestCount(builder, "epoch"), 1u);
  std::vector<std::string> tagged;
  model::PhaseId run = builder.BeginPhase({.name = "r", .type = "run", .start_ns = 1});
  matcher->RecordOutcome(builder, run, [&](const std::string& line) { tagged.push_back(line); });
  ASSERT_EQ(tagged.size(), 1u);
  EXPECT_EQ(tagged[0], "2 output lines were not matched by the log rules (matching fell behind, or was cut short)");
  auto phase = builder.GetPhase(run);
  ASSERT_TRUE(phase.has_value());
  bool found = false;
  for (const auto& [k, v] : phase->tags) found |= k == "grademl.log_lines_unmatched" && v == "2";
  EXPECT_TRUE(found);
}

// A Drain that is told to stop gives up at once: the lines still queued are dropped, but
// each source's Finish is still done (its phases end).
TEST(LogMatcherTest, ADrainToldToStopDropsTheRestButFinishes) {
  auto rules = LogRuleSet::BuiltIn();
  auto matcher = LogMatcher::Start(&rules).value();
  model::RunBuilder builder{model::RunInfo{}};
  model::PhaseId step = builder.BeginPhase({.name = "s", .type = "step", .start_ns = 1});
  LogMatcher::Source src = matcher->AddSource(&builder, step, "h", 7);
  for (int i = 0; i < 20000; ++i) matcher->Line(src, 10 + i, "Epoch " + std::to_string(i + 1) + "/20000");
  matcher->Finish(src, 100000);
  EXPECT_FALSE(matcher->Drain(LogMatcher::kDefaultDrainLimit, [] { return true; }));
  EXPECT_GT(matcher->dropped_lines(), 0u);
  std::vector<model::Phase> epochs =
      builder.PhasesWhere([](const model::Phase& p) { return p.leaf_type() == "epoch"; });
  for (const model::Phase& p : epochs) EXPECT_TRUE(p.ended()) << p.name;
  // Every line was matched or dropped, but for the one abandoned mid-way.
  EXPECT_GE(epochs.size() + matcher->dropped_lines(), 19999u);
  EXPECT_LE(epochs.size() + matcher->dropped_lines(), 20000u);
}

TEST(LogMatcherTest, AMalformedCostHookIsAnError) {
  auto rules = LogRuleSet::BuiltIn();
  setenv("GRADEML_TEST_RULE_COST", "nobody=1ms", 1);
  auto matcher = LogMatcher::Start(&rules);
  unsetenv("GRADEML_TEST_RULE_COST");
  ASSERT_FALSE(matcher.ok());
  EXPECT_EQ(matcher.status().message(), "GRADEML_TEST_RULE_COST: no rule named 'nobody'");
}

}  // namespace
}  // namespace grademl::record
