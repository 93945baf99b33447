// Golden test of the Spark stage analysis (analysis/spark_stages.h) on the fixture log
// tests/data/importer/spark/fixture_app.log, imported with the real importer. Every expected
// figure is worked out by hand from the numbers the fixture's generator (make_fixtures.py)
// writes, one stage per bottleneck:
//   stage 0: 4 tasks x 1000 ms, GC 500 ms each               -> gc, 2000/4000 = 0.5
//   stage 1: 4 tasks x 2000 ms, fetch wait 1200 ms each      -> shuffle_wait, 4800/8000 = 0.6
//   stage 2: tasks of 100, 100, 100, 1000 ms, stage 1010 ms  -> skew, (1000 - 100)/1010
//   stage 3: 200, 200, 200 (failed), 110 (killed) ms, each 10 ms deserialising and running
//            40 ms (the killed one 20)                       -> scheduler_delay, (3*150 + 80)/710
// and the ranked issues they lead to (the what-if replay of the stage with that time halved;
// the skewed stage through the imbalance of its tasks).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "analysis/run_analysis.h"
#include "analysis/spark_stages.h"
#include "importers/importer.h"
#include "model/run.h"
#include "model/run_builder.h"

namespace grademl::analysis {
namespace {

model::Run ImportFixture() {
  model::RunInfo info;
  info.start_ns = 1'700'000'000'000'000'000;
  model::RunBuilder builder(info);
  model::PhaseId root = builder.BeginPhase({.parent = 0, .name = "import", .type = "run", .start_ns = info.start_ns});
  importers::ImportTarget target;
  target.builder = &builder;
  target.under = root;
  auto result = importers::ImportTraceFile(std::string(GRADEML_TESTDATA_DIR) + "/importer/spark/fixture_app.log", target);
  EXPECT_TRUE(result.ok()) << result.status().message();
  builder.EndPhase(root, 1'700'000'010'000'000'000);
  builder.UpdateRunInfo([](model::RunInfo& i) {
    i.end_ns = 1'700'000'010'000'000'000;
    i.complete = true;
  });
  model::RunDelta d = builder.TakeDelta(true);
  model::Run run;
  run.info = builder.run_info();
  run.phases = d.phases;
  run.edges = d.edges;
  run.resources = d.resources;
  for (auto& s : d.series) run.series.push_back({s, {}});
  for (auto& rec : d.samples) {
    for (auto& s : run.series)
      if (s.info.id == rec.series) s.samples.push_back(rec.sample);
  }
  run.sources = d.sources;
  run.tracks = d.tracks;
  run.hosts = d.hosts;
  run.ingest_stats = d.ingest_stats;
  run.Index();
  return run;
}

TEST(SparkStagesTest, FixtureSumsSkewAndBottlenecksWorkedOutByHand) {
  model::Run run = ImportFixture();
  SparkAnalysis spark = AnalyzeSpark(run);
  ASSERT_EQ(spark.applications.size(), 1u);
  const SparkApplication& app = spark.applications[0];
  EXPECT_EQ(app.name, "<script>alert('XSS')</script>");
  EXPECT_EQ(app.app_id, "app-fixture-0001");
  EXPECT_EQ(app.spark_version, "3.5.0");
  EXPECT_EQ(app.jobs, 2);
  EXPECT_EQ(app.failed_jobs, 0);
  EXPECT_EQ(app.sql_executions, 1);
  EXPECT_EQ(app.stages, 4);
  EXPECT_EQ(app.failed_stages, 0);
  EXPECT_EQ(app.skipped_stages, 1);
  EXPECT_EQ(app.executors, 2);
  EXPECT_DOUBLE_EQ(app.duration_s, 10.0);
  EXPECT_EQ(app.sums.tasks, 16);
  EXPECT_EQ(app.sums.failed, 1);
  EXPECT_EQ(app.sums.killed, 1);
  EXPECT_EQ(app.sums.speculative, 1);
  EXPECT_NEAR(app.sums.task_s, 4.0 + 8.0 + 1.3 + 0.71, 1e-9);
  EXPECT_NEAR(app.sums.gc_s, 2.0 + 0.2, 1e-9);
  EXPECT_EQ(app.sums.input_bytes, 4 << 20);
  EXPECT_EQ(app.sums.shuffle_read_bytes, 4 * 4000 + 3 * 1000 + 1000000);
  EXPECT_EQ(app.sums.shuffle_remote_bytes, 4 * 2000 + 3 * 500 + 500000);
  EXPECT_EQ(app.sums.shuffle_write_bytes, 4 * 1000);

  ASSERT_EQ(app.stages_detail.size(), 4u);
  const SparkStage& gc = app.stages_detail[0];
  EXPECT_EQ(gc.stage_id, 0);
  EXPECT_EQ(gc.job_id, 0);
  EXPECT_EQ(gc.status, "succeeded");
  EXPECT_NEAR(gc.duration_s, 1.05, 1e-9);
  EXPECT_EQ(gc.sums.tasks, 4);
  EXPECT_NEAR(gc.sums.task_s, 4.0, 1e-9);
  EXPECT_NEAR(gc.sums.executor_run_s, 3.8, 1e-9);
  EXPECT_NEAR(gc.sums.executor_cpu_s, 1.6, 1e-9);
  EXPECT_NEAR(gc.sums.deserialize_s, 0.08, 1e-9);
  EXPECT_NEAR(gc.sums.scheduler_delay_s, 4 * 0.030, 1e-9);  // 1000 - 950 - 20 ms each
  EXPECT_NEAR(gc.sums.shuffle_write_s, 4 * 0.001, 1e-9);
  EXPECT_EQ(gc.bottleneck, "gc");
  EXPECT_NEAR(gc.bottleneck_fraction, 0.5, 1e-9);
  EXPECT_NE(gc.advice.find("garbage collection"), std::string::npos) << gc.advice;
  EXPECT_NE(gc.advice.find("50%"), std::string::npos) << gc.advice;

  const SparkStage& shuffle = app.stages_detail[1];
  EXPECT_EQ(shuffle.bottleneck, "shuffle_wait");
  EXPECT_NEAR(shuffle.bottleneck_fraction, 0.6, 1e-9);
  EXPECT_NEAR(shuffle.sums.shuffle_fetch_wait_s, 4.8, 1e-9);

  const SparkStage& skew = app.stages_detail[2];
  EXPECT_EQ(skew.job_id, 1);
  EXPECT_NEAR(skew.max_task_s, 1.0, 1e-9);
  EXPECT_NEAR(skew.median_task_s, 0.1, 1e-9);
  EXPECT_EQ(skew.bottleneck, "skew");
  EXPECT_NEAR(skew.bottleneck_fraction, 0.9 / 1.01, 1e-9);
  EXPECT_NE(skew.advice.find("10.0x"), std::string::npos) << skew.advice;
  EXPECT_EQ(skew.slowest_task_data_bytes, 1000000);  // the slow task read 1000x the others' shuffle data
  EXPECT_EQ(skew.median_task_data_bytes, 1000);
  const model::Phase* slowest = run.FindPhase(skew.slowest_task);
  ASSERT_NE(slowest, nullptr);
  EXPECT_EQ(slowest->name, "task 3.0");

  const SparkStage& delay = app.stages_detail[3];
  EXPECT_EQ(delay.sums.tasks, 4);
  EXPECT_EQ(delay.sums.failed, 1);
  EXPECT_EQ(delay.sums.killed, 1);
  EXPECT_EQ(delay.sums.speculative, 1);
  EXPECT_NEAR(delay.sums.scheduler_delay_s, 0.53, 1e-9);
  EXPECT_EQ(delay.bottleneck, "scheduler_delay");
  EXPECT_NEAR(delay.bottleneck_fraction, 0.53 / 0.71, 1e-9);
  EXPECT_NEAR(delay.median_task_s, 0.2, 1e-9);  // the two successful attempts
}

TEST(SparkStagesTest, StageBottlenecksBecomeRankedIssuesAndSkewAnImbalance) {
  model::Run run = ImportFixture();
  RunAnalysis a = AnalyzeRun(run);
  std::map<std::string, const Issue*> by_kind;
  for (const Issue& i : a.issues) by_kind[i.kind] = &i;
  // Halving the bound time: stage 0 (1.05 s, GC 50%) scaled by 0.75 saves 1.05 * 0.25 s on
  // the application's chain; stage 1 (2.03 s, fetch wait 60%) by 0.7 saves 2.03 * 0.3 s.
  ASSERT_TRUE(by_kind.count("spark_gc"));
  EXPECT_NEAR(by_kind["spark_gc"]->impact_s, 1.05 * 0.25, 0.002);
  EXPECT_NE(by_kind["spark_gc"]->change.find("*0.75"), std::string::npos) << by_kind["spark_gc"]->change;
  ASSERT_TRUE(by_kind.count("spark_shuffle_wait"));
  EXPECT_NEAR(by_kind["spark_shuffle_wait"]->impact_s, 2.03 * 0.3, 0.002);
  ASSERT_TRUE(by_kind.count("spark_scheduler_delay"));
  EXPECT_NEAR(by_kind["spark_scheduler_delay"]->impact_s, 0.43 * (0.53 / 0.71) / 2, 0.002);
  EXPECT_NE(by_kind["spark_gc"]->text.find("stage 0: map at fixture.py:10"), std::string::npos)
      << by_kind["spark_gc"]->text;
  // The skewed stage's tasks (group "stage 2.0") are an imbalance: the slowest task 1000 ms
  // against a mean of (3 * 100 + 1000) / 4 = 325 ms.
  bool found = false;
  for (const Imbalance& g : a.imbalance) {
    const model::Phase* s = run.FindPhase(g.straggler);
    if (s == nullptr || s->leaf_type() != "task") continue;
    const model::Phase* stage = run.FindPhase(s->parent);
    if (stage == nullptr || stage->name.rfind("stage 2:", 0) != 0) continue;
    found = true;
    EXPECT_EQ(g.kind, ImbalanceKind::kConcurrent);
    EXPECT_EQ(g.count, 4);
    EXPECT_NEAR(g.straggler_s, 1.0, 1e-9);
    EXPECT_NEAR(g.mean_s, 0.325, 1e-9);
  }
  EXPECT_TRUE(found);
  EXPECT_TRUE(by_kind.count("imbalance"));
}

// A hand-built stage of four tasks that read the same data; the slowest takes 10x the
// median. Where its excess went decides the advice: start-up (a fresh executor's warm-up)
// or the place it ran. Not data skew either way.
model::Run StragglerRun(int slow_deserialize_ms) {
  model::Run run;
  run.info.start_ns = 1'000'000'000;
  run.info.end_ns = 20'000'000'000;
  auto add = [&](model::PhaseId id, model::PhaseId parent, std::string name, std::string type, TimeNs start,
                 TimeNs end, model::Tags tags) {
    run.phases.push_back({.id = id, .parent = parent, .name = std::move(name), .type = std::move(type),
                          .tags = std::move(tags), .start_ns = start, .end_ns = end});
  };
  add(1, 0, "run", "run", 1'000'000'000, 20'000'000'000, {});
  add(2, 1, "app", "run/application", 1'000'000'000, 20'000'000'000, {{"engine", "spark"}, {"app_id", "a1"}});
  add(3, 2, "job 0", "run/application/job", 2'000'000'000, 4'000'000'000, {{"status", "succeeded"}});
  add(4, 3, "stage 0: map", "run/application/job/stage", 2'000'000'000, 3'100'000'000,
      {{"stage_id", "0"}, {"attempt", "0"}, {"status", "succeeded"}});
  for (int i = 0; i < 4; ++i) {
    const bool slow = i == 3;
    const TimeNs d = slow ? 1'000'000'000 : 100'000'000;
    add(10 + i, 4, "task " + std::to_string(i) + ".0", "run/application/job/stage/task", 2'050'000'000,
        2'050'000'000 + d,
        {{"status", "success"}, {"executor", slow ? "7" : "1"}, {"input_bytes", "1048576"},
         {"shuffle_read_bytes", "0"}, {"executor_run_ms", slow ? "980" : "95"},
         {"executor_deserialize_ms", slow ? std::to_string(slow_deserialize_ms) : "2"}, {"gc_ms", "0"},
         {"scheduler_delay_ms", "3"}});
  }
  run.Index();
  return run;
}

TEST(SparkStagesTest, ASlowTaskThatReadNoMoreDataIsAStragglerNotSkew) {
  {  // 800 ms of the 1000 deserialising: warm-up
    model::Run run = StragglerRun(800);
    SparkAnalysis spark = AnalyzeSpark(run);
    ASSERT_EQ(spark.applications.size(), 1u);
    ASSERT_EQ(spark.applications[0].stages_detail.size(), 1u);
    const SparkStage& st = spark.applications[0].stages_detail[0];
    EXPECT_EQ(st.slowest_task, 13);
    EXPECT_EQ(st.slowest_task_data_bytes, 1 << 20);
    EXPECT_EQ(st.median_task_data_bytes, 1 << 20);
    EXPECT_NEAR(st.slowest_task_startup_s, 0.803, 1e-9);
    EXPECT_EQ(st.bottleneck, "straggler");
    EXPECT_NEAR(st.bottleneck_fraction, 0.9 / 1.1, 1e-9);  // (1000 - 100) ms of the stage's 1100
    EXPECT_NE(st.advice.find("warm-up"), std::string::npos) << st.advice;
    EXPECT_EQ(st.advice.find("skewed;"), std::string::npos) << st.advice;
  }
  {  // 10 ms deserialising: it was slow where it ran (executor 7)
    model::Run run = StragglerRun(10);
    SparkAnalysis spark = AnalyzeSpark(run);
    const SparkStage& st = spark.applications[0].stages_detail[0];
    EXPECT_EQ(st.bottleneck, "straggler");
    EXPECT_NE(st.advice.find("executor 7"), std::string::npos) << st.advice;
    EXPECT_EQ(st.advice.find("warm-up"), std::string::npos) << st.advice;
  }
}

TEST(SparkStagesTest, NoSparkPhasesNoApplications) {
  model::Run run;
  run.phases.push_back({.id = 1, .name = "app", .type = "run/application", .start_ns = 1, .end_ns = 2});
  run.Index();
  EXPECT_TRUE(AnalyzeSpark(run).empty());  // not tagged engine=spark
}

}  // namespace
}  // namespace grademl::analysis
