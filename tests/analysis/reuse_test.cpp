// Reuse across runs per run (analysis/reuse.h), the what-if change reuse:SEL and the
// redundant_step issue, on the hand-worked graph of tests/analysis/reuse_fixture.h.
#include "analysis/reuse.h"

#include <gtest/gtest.h>

#include "analysis/reuse_fixture.h"
#include "analysis/run_analysis.h"
#include "analysis/whatif.h"

namespace grademl::analysis {
namespace {

using testing::kReuseMB;
using testing::ReuseGraph;

// Run 3's ingest ran with the key runs 1 (ran) and 2 (restored) had: redundant, as of the
// latest of them, run 2, whose output had the same hash. featurize failed: not redundant.
TEST(ReuseTest, RedundantAsOfTheLatestEarlierRun) {
  model::Run run = testing::ReuseRun3();
  ReuseAnalysis r = AnalyzeReuse(run, ReuseGraph());
  ASSERT_EQ(r.steps.size(), 2u);
  const StepReuse& ingest = r.steps[0];
  EXPECT_EQ(ingest.phase, 2);
  EXPECT_EQ(ingest.step, "ingest");
  EXPECT_EQ(ingest.outcome, "ran");
  EXPECT_NEAR(ingest.cost_s, 12, 1e-9);
  EXPECT_TRUE(ingest.redundant);
  EXPECT_EQ(ingest.earlier_run, 2);
  EXPECT_EQ(ingest.earlier_uuid, "uuid-run-2");
  EXPECT_TRUE(ingest.outputs_identical);
  EXPECT_EQ(ingest.outputs, std::vector<std::string>{"data/clean.csv"});
  EXPECT_EQ(ingest.output_bytes, 200 * kReuseMB);
  const StepReuse& featurize = r.steps[1];
  EXPECT_EQ(featurize.outcome, "failed");
  EXPECT_FALSE(featurize.redundant);
  EXPECT_EQ(r.redundant, 1);
  EXPECT_NEAR(r.redundant_s, 12, 1e-9);
  EXPECT_EQ(r.reused, 0);
  // 100 MB hashed in 1 s.
  EXPECT_TRUE(r.read_speed_measured);
  EXPECT_NEAR(r.read_bytes_per_s, 100e6, 1e-3);
  EXPECT_EQ(r.Find(3), &r.steps[1]);
}

// Run 2 restored ingest (10 s, restored in 0.5 s) and featurize (20 s, in 1 s): 28.5 s saved,
// 1.5 s restoring. train's key is new. It hashed nothing: the read speed is assumed.
TEST(ReuseTest, RestoredStepsSaveTheirCostLessTheRestore) {
  ReuseAnalysis r = AnalyzeReuse(testing::ReuseRun2(), ReuseGraph());
  ASSERT_EQ(r.steps.size(), 4u);
  EXPECT_EQ(r.reused, 2);
  EXPECT_NEAR(r.restore_s, 1.5, 1e-9);
  EXPECT_NEAR(r.saved_s, 28.5, 1e-9);
  EXPECT_EQ(r.redundant, 0);
  EXPECT_EQ(r.steps[0].outcome, "reused");
  EXPECT_EQ(r.steps[0].reused_from, "uuid-run-1");
  EXPECT_NEAR(r.steps[1].restore_s, 1, 1e-9);
  EXPECT_FALSE(r.steps[2].redundant) << "no earlier run trained with this key";
  EXPECT_FALSE(r.read_speed_measured);
  EXPECT_NEAR(r.read_bytes_per_s, kAssumedReadBytesPerS, 1e-9);
}

TEST(ReuseTest, NoGraphFindsNothingRedundant) {
  ReuseAnalysis r = AnalyzeReuse(testing::ReuseRun3(), model::ExperimentGraph{});
  EXPECT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.redundant, 0);
  EXPECT_TRUE(AnalyzeReuse(model::Run{}, ReuseGraph()).empty());
}

// A run the store has not numbered yet (id 0) is compared by start: runs 1 and 2 started
// before it, run 3 after. A plot whose output hash changed is redundant but not identical.
TEST(ReuseTest, EarlierByStartAndOutputsThatDiffered) {
  model::Run run;
  run.info.uuid = "uuid-fresh";
  run.info.start_ns = testing::ReuseRunStart(2) + testing::Sec(500);
  model::StepExecution plot = testing::ReuseRunExecutions(1)[4];
  plot.outputs[0].hash = "hash-P-other";
  run.step_executions = {testing::ReuseRunExecutions(3)[0], plot};
  run.Index();
  ReuseAnalysis r = AnalyzeReuse(run, ReuseGraph());
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0].earlier_run, 2) << "run 3 started after this one";
  EXPECT_TRUE(r.steps[0].outputs_identical);
  EXPECT_TRUE(r.steps[1].redundant);
  EXPECT_EQ(r.steps[1].earlier_run, 1);
  EXPECT_FALSE(r.steps[1].outputs_identical);
}

TEST(ReuseTest, ParsesTheReuseChange) {
  auto ch = ParseWhatifChange("reuse:ingest");
  ASSERT_TRUE(ch.ok()) << ch.status().message();
  EXPECT_EQ(ch->kind, WhatifChange::Kind::kReuse);
  EXPECT_EQ(ch->selector.text, "ingest");
  auto id = ParseWhatifChange("reuse:#2");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->selector.kind, PhaseSelector::Kind::kId);
  EXPECT_FALSE(ParseWhatifChange("reuse:").ok());
}

// reuse:ingest on run 3: ingest takes the 2 s restoring 200 MB at the measured 100 MB/s would,
// instead of 12 s; featurize follows at [2, 5]: 5 s predicted, 10 s saved.
TEST(ReuseTest, WhatifRestoresTheOutputsInstead) {
  model::Run run = testing::ReuseRun3();
  auto ch = ParseWhatifChange("reuse:ingest");
  ASSERT_TRUE(ch.ok());
  model::ExperimentGraph graph = ReuseGraph();
  WhatifOptions options;
  options.graph = &graph;
  auto r = SimulateWhatif(run, {*ch}, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->baseline_s, 15, 1e-6);
  EXPECT_NEAR(r->predicted_s, 5, 1e-6);
  EXPECT_NEAR(r->saving_s(), 10, 1e-6);
  ASSERT_EQ(r->notes.size(), 1u);
  EXPECT_EQ(r->notes[0],
            "reuse:ingest: 1 step (ingest) takes the time restoring its outputs would: 200.0 MB at 100.0 MB/s (as fast "
            "as this run's hashing read), 2.000 s instead of 12.000 s; run 2 had an execution with the same key");
  // Without the graph, nothing is said about earlier runs.
  auto plain = SimulateWhatif(run, {*ch});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->notes[0].find("same key"), std::string::npos);
}

TEST(ReuseTest, WhatifReuseErrorsNameThePhase) {
  model::Run run = testing::ReuseRun3();
  auto root = SimulateWhatif(run, {*ParseWhatifChange("reuse:#1")});
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "change 'reuse:#1': 'pipeline' (#1) has no recorded step execution: only workflow steps run by grademl run "
            "have one");
  run.step_executions[1].outputs.clear();
  auto none = SimulateWhatif(run, {*ParseWhatifChange("reuse:featurize")});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "change 'reuse:featurize': step 'featurize' (#3) recorded no outputs to restore");
  // A glob over the whole run selects its steps, not the root.
  auto all = SimulateWhatif(testing::ReuseRun3(), {*ParseWhatifChange("reuse:*")});
  ASSERT_TRUE(all.ok()) << all.status().message();
  // ingest 2 s, featurize restores 10 MB: 0.1 s.
  EXPECT_NEAR(all->predicted_s, 2.1, 1e-6);
}

// The redundant step is a ranked issue: its saving is the replay of reuse:#2.
TEST(ReuseTest, RedundantStepIssue) {
  model::Run run = testing::ReuseRun3();
  model::ExperimentGraph graph = ReuseGraph();
  RunAnalysis a = AnalyzeRun(run, &graph);
  EXPECT_EQ(a.reuse.redundant, 1);
  const Issue* issue = nullptr;
  for (const Issue& i : a.issues) {
    if (i.kind == "redundant_step") issue = &i;
  }
  ASSERT_NE(issue, nullptr);
  EXPECT_EQ(issue->phase, 2);
  EXPECT_EQ(issue->change, "reuse:#2");
  EXPECT_NEAR(issue->impact_s, 10, 1e-6);
  EXPECT_NEAR(issue->impact_fraction, 10.0 / 15, 1e-6);
  EXPECT_EQ(issue->text,
            "Step ingest recomputed data/clean.csv exactly as run 2 had; 10.00 s (67% of the run) could have been "
            "saved by restoring its outputs (grademl run --reuse).");
  // Without the graph: no such issue, the steps still listed.
  RunAnalysis plain = AnalyzeRun(run);
  EXPECT_EQ(plain.reuse.steps.size(), 2u);
  for (const Issue& i : plain.issues) EXPECT_NE(i.kind, "redundant_step");
}

// Outputs that differed, and a step reuse is off for, are said so.
TEST(ReuseTest, RedundantStepIssueOfANonDeterministicStep) {
  model::Run run = testing::ReuseRun3();
  run.step_executions[0].outputs[0].hash = "hash-A-other";
  model::ExperimentGraph graph = ReuseGraph();
  RunAnalysis a = AnalyzeRun(run, &graph);
  const Issue* issue = nullptr;
  for (const Issue& i : a.issues) {
    if (i.kind == "redundant_step") issue = &i;
  }
  ASSERT_NE(issue, nullptr);
  EXPECT_EQ(issue->text,
            "Step ingest recomputed data/clean.csv as run 2 had (its outputs differed: the step is not deterministic); "
            "10.00 s (67% of the run) could have been saved by restoring its outputs (grademl run --reuse).");
}

// A step that reuse never skips (here opted out) recomputed nothing that could have been
// restored: it is no redundant step, whatever its key.
TEST(ReuseTest, AStepReuseNeverSkipsIsNotRedundant) {
  model::Run run = testing::ReuseRun3();
  run.step_executions[0].not_reusable = "reuse: false";
  model::ExperimentGraph graph = ReuseGraph();
  RunAnalysis a = AnalyzeRun(run, &graph);
  for (const Issue& i : a.issues) EXPECT_NE(i.kind, "redundant_step") << i.text;
  ASSERT_NE(a.reuse.Find(run.step_executions[0].phase), nullptr);
  EXPECT_FALSE(a.reuse.Find(run.step_executions[0].phase)->redundant);
}

}  // namespace
}  // namespace grademl::analysis
