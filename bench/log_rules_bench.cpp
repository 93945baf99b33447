// Log rules: the cost per output line of LogPhaseTracker with the built-in rules (and one
// user rule without a literal, which runs the regex engine on every line), over noise lines
// that match nothing, tqdm bars and epoch lines; the *Budget variants also measure each rule's
// CPU time per line for the per-line cost budget (RuleCostBudget), as grademl run does.
// docs/log-rules.md (Cost) quotes the figures.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "model/run_builder.h"
#include "record/log_rules.h"

namespace {

using grademl::record::LogPhaseTracker;
using grademl::record::LogRuleSet;

std::vector<std::string> NoiseLines() {
  return {"2024-05-01 10:00:00.123456: I tensorflow/core/platform/cpu_feature_guard.cc:182] optimized",
          "Downloading data from https://storage.example.com/mnist.npz",
          "11490434/11490434 [==============================] - 1s 0us/step",
          "Using device: cuda:0",
          "loss=0.2315 acc=0.9123 lr=1.0e-03"};
}

std::vector<std::string> TqdmLines() {
  std::vector<std::string> lines;
  for (int i = 0; i <= 100; ++i) {
    lines.push_back("train: " + std::to_string(i) + "%|" + std::string(i / 10, '#') + std::string(10 - i / 10, ' ') +
                    "| " + std::to_string(i) + "/100 [00:01<00:00, 99.1it/s]");
  }
  return lines;
}

std::vector<std::string> EpochLines() {
  std::vector<std::string> lines;
  for (int i = 0; i < 100; ++i) {
    lines.push_back("Epoch " + std::to_string(i / 10) + " batch " + std::to_string(i) + " loss=0.25");
  }
  return lines;
}

LogRuleSet Rules(bool with_user_rule) {
  LogRuleSet rules;
  if (with_user_rule) {
    auto user = LogRuleSet::Parse(
        "rules:\n  - name: kv\n    type: metric\n    begin: '(\\w+)=([0-9.]+)\\s+(\\w+)=([0-9.]+)$'\n    instant: true\n",
        "bench.yaml");
    if (!user.ok()) std::abort();
    rules = *user;
  }
  rules.Append(LogRuleSet::BuiltIn());
  return rules;
}

// `budget`: each rule's cost measured and charged to a RuleCostBudget, as grademl run does.
void Run(benchmark::State& state, const std::vector<std::string>& lines, bool with_user_rule, bool budget = false) {
  const LogRuleSet rules = Rules(with_user_rule);
  grademl::record::RuleCostBudget costs(&rules);
  grademl::model::RunBuilder builder{grademl::model::RunInfo{}};
  const auto run = builder.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 1});
  const auto step = builder.BeginPhase({.parent = run, .name = "s", .type = "step", .start_ns = 1});
  grademl::record::LogPhaseTracker tracker(&rules, &builder, step, "host", 1, budget ? &costs : nullptr);
  int64_t t = 10;
  for (auto _ : state) {
    for (const std::string& line : lines) tracker.OnLine(++t, line);
    (void)builder.TakeDelta();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(lines.size()));
}

void BM_NoiseLines(benchmark::State& s) { Run(s, NoiseLines(), false); }
void BM_TqdmLines(benchmark::State& s) { Run(s, TqdmLines(), false); }
void BM_EpochLines(benchmark::State& s) { Run(s, EpochLines(), false); }
void BM_NoiseLinesUserRule(benchmark::State& s) { Run(s, NoiseLines(), true); }
void BM_TqdmLinesUserRule(benchmark::State& s) { Run(s, TqdmLines(), true); }

void BM_NoiseLinesBudget(benchmark::State& s) { Run(s, NoiseLines(), false, true); }
void BM_TqdmLinesBudget(benchmark::State& s) { Run(s, TqdmLines(), false, true); }
void BM_EpochLinesBudget(benchmark::State& s) { Run(s, EpochLines(), false, true); }
void BM_NoiseLinesUserRuleBudget(benchmark::State& s) { Run(s, NoiseLines(), true, true); }
void BM_TqdmLinesUserRuleBudget(benchmark::State& s) { Run(s, TqdmLines(), true, true); }

BENCHMARK(BM_NoiseLines);
BENCHMARK(BM_NoiseLinesBudget);
BENCHMARK(BM_TqdmLinesBudget);
BENCHMARK(BM_EpochLinesBudget);
BENCHMARK(BM_NoiseLinesUserRuleBudget);
BENCHMARK(BM_TqdmLinesUserRuleBudget);
BENCHMARK(BM_TqdmLines);
BENCHMARK(BM_EpochLines);
BENCHMARK(BM_NoiseLinesUserRule);
BENCHMARK(BM_TqdmLinesUserRule);

}  // namespace

BENCHMARK_MAIN();
