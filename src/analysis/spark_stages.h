// Spark: the applications, jobs and stages imported from Spark event logs
// (src/importers/spark/), summarised per stage from the task phases' metric tags: where each
// stage's task time went (executor CPU, GC, shuffle fetch wait, scheduler delay,
// deserialisation, ...), its skew (slowest task against the median), failed, killed and
// speculative attempts, and the stage's bottleneck in plain words. Task stragglers and
// skew across tasks also come out of the imbalance analysis (tasks carry the `group` tag).
// A pure function of the model; docs/engines.md describes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/run.h"

namespace grademl::analysis {

struct SparkStage {
  model::PhaseId phase = 0;   // the stage attempt's phase
  model::PhaseId job = 0;     // the job phase it is under
  int64_t stage_id = 0;
  int64_t attempt = 0;
  std::string name;           // Spark's stage name ("count at <console>:26")
  std::string status;         // "succeeded", "failed", "skipped"
  double duration_s = 0;      // submission to completion
  int64_t tasks = 0;          // task attempts
  int64_t failed_tasks = 0;
  int64_t killed_tasks = 0;
  int64_t speculative_tasks = 0;
  // Sums over the stage's task attempts, seconds / bytes.
  double task_s = 0;              // task wall time (launch to finish)
  double executor_run_s = 0;
  double executor_cpu_s = 0;
  double gc_s = 0;
  double deserialize_s = 0;       // executor deserialize time
  double shuffle_fetch_wait_s = 0;
  double scheduler_delay_s = 0;   // task time not accounted for by the executor (Spark UI's definition)
  int64_t input_bytes = 0, output_bytes = 0;
  int64_t shuffle_read_bytes = 0, shuffle_write_bytes = 0;
  int64_t spill_bytes = 0;        // memory + disk bytes spilled
  int64_t result_bytes = 0;
  double max_task_s = 0, median_task_s = 0;  // successful attempts
  model::PhaseId slowest_task = 0;
  // What limited the stage: "gc", "shuffle_wait", "scheduler_delay", "deserialize", "spill",
  // "skew", "cpu", "io" or "" when nothing stands out; and the share of task time behind it.
  std::string bottleneck;
  double bottleneck_fraction = 0;
  std::string advice;  // one plain sentence, "" when nothing stands out
};

struct SparkApplication {
  model::PhaseId phase = 0;
  std::string name;        // spark.app.name (untrusted: escape before rendering)
  std::string app_id;
  std::string spark_version;
  int64_t jobs = 0, failed_jobs = 0;
  int64_t stages = 0, failed_stages = 0;
  int64_t tasks = 0, failed_tasks = 0, killed_tasks = 0, speculative_tasks = 0;
  int64_t executors = 0;
  double duration_s = 0;
  std::vector<SparkStage> stages_detail;  // by stage id, then attempt
};

struct SparkAnalysis {
  std::vector<SparkApplication> applications;  // empty: the run has no Spark phases
  bool empty() const { return applications.empty(); }
};

// The Spark applications of a run (indexed). Empty when it has none.
SparkAnalysis AnalyzeSpark(const model::Run& run);

}  // namespace grademl::analysis
