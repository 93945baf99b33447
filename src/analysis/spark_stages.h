// Spark: the applications, jobs and stages imported from Spark event logs
// (src/importers/spark/), summarised per application and per stage attempt from the task
// phases' metric tags: where the tasks' time went (executor CPU, GC, shuffle fetch wait,
// scheduler delay, deserialisation, ...), the bytes they read, wrote, shuffled and spilled,
// failed, killed and speculative attempts, the skew of each stage (its slowest successful
// task against the median), and each stage's bottleneck with one sentence of advice. Task
// stragglers and skew also come out of the imbalance analysis (tasks carry the `group` tag),
// which is how they reach the ranked issues. A pure function of the model; docs/engines.md
// describes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/run.h"

namespace grademl::analysis {

// Sums over task attempts (all of them: failed and killed ones used the executors too).
struct SparkTaskSums {
  int64_t tasks = 0;              // task attempts
  int64_t failed = 0, killed = 0, speculative = 0;
  double task_s = 0;              // wall time, launch to finish
  double executor_run_s = 0;
  double executor_cpu_s = 0;      // 0 when the log has no CPU time (Spark before 2.1)
  bool has_cpu = false;
  double gc_s = 0;
  double deserialize_s = 0;       // executor deserialize time
  double shuffle_fetch_wait_s = 0;
  double shuffle_write_s = 0;
  double scheduler_delay_s = 0;   // task time not accounted for by the executor (Spark UI's definition)
  int64_t input_bytes = 0, output_bytes = 0;
  int64_t shuffle_read_bytes = 0, shuffle_remote_bytes = 0, shuffle_write_bytes = 0;
  int64_t memory_spill_bytes = 0, disk_spill_bytes = 0;
  int64_t result_bytes = 0;
  void Add(const SparkTaskSums& other);
};

struct SparkStage {
  model::PhaseId phase = 0;   // the stage attempt's phase
  model::PhaseId job = 0;     // the job phase it is under (0: none)
  int64_t stage_id = 0;
  int64_t attempt = 0;
  int64_t job_id = -1;
  std::string name;           // the phase's name ("stage 1: count at <console>:26"); untrusted
  std::string status;         // "succeeded", "failed", "unfinished"
  double duration_s = 0;      // submission to completion
  SparkTaskSums sums;
  // Skew: the slowest successful task against the median of the successful ones.
  double max_task_s = 0, median_task_s = 0;
  model::PhaseId slowest_task = 0;
  // The data the slowest successful task read (input + shuffle read bytes) against the
  // median task's, and the slowest task's start-up time (deserialisation, GC, scheduler
  // delay): a slow task that read no more than the others is a straggler, not data skew.
  int64_t slowest_task_data_bytes = 0, median_task_data_bytes = 0;
  double slowest_task_startup_s = 0;
  std::string slowest_task_executor;
  // What limited the stage: "gc", "shuffle_wait", "scheduler_delay", "deserialize", "spill",
  // "skew" (the slowest task read more data), "straggler" (it did not: warm-up or a slow
  // executor) (problems with a lever), "cpu", "io" (where the time went when no problem
  // stands out), or "" when nothing does; the share behind it (of the task time; for skew
  // and straggler, of the stage's duration) and one plain sentence of advice.
  std::string bottleneck;
  double bottleneck_fraction = 0;
  std::string advice;
};

struct SparkApplication {
  model::PhaseId phase = 0;
  std::string name;        // spark.app.name (untrusted: escape before rendering)
  std::string app_id;
  std::string spark_version;
  int64_t jobs = 0, failed_jobs = 0;
  int64_t sql_executions = 0;
  int64_t stages = 0, failed_stages = 0;  // stage attempts that ran
  int64_t skipped_stages = 0;             // in a job's plan but not run (their output existed)
  int64_t executors = 0;
  double duration_s = 0;
  SparkTaskSums sums;
  std::vector<SparkStage> stages_detail;  // by stage id, then attempt
};

struct SparkAnalysis {
  std::vector<SparkApplication> applications;  // empty: the run has no Spark phases
  bool empty() const { return applications.empty(); }
};

// Thresholds of the stage bottlenecks, named and documented in docs/engines.md.
struct SparkOptions {
  // A problem is the bottleneck when its share of the task time is at least this ...
  double min_share = 0.1;
  // ... and skew when the slowest task's excess over the median is this share of the stage
  // (data skew when it also read at least skew_factor times the median task's data,
  // "straggler" when it did not).
  double min_skew_share = 0.2;
  // Skew needs the slowest successful task at least this many times the median.
  double skew_factor = 1.5;
  // ... and data skew needs the slowest task to have read at least this many bytes more
  // than the median task (a few hundred bytes more do not make a task 2x slower).
  int64_t min_skew_bytes = 64 << 10;
  // With no problem: "cpu" when the tasks were on the CPU at least this share of their time,
  // "io" when off it (not in GC nor waiting on shuffles) at least this share with input or
  // output bytes.
  double min_cpu_share = 0.5;
  double min_io_share = 0.3;
};

// The Spark applications of a run (indexed). Empty when it has none.
SparkAnalysis AnalyzeSpark(const model::Run& run, const SparkOptions& options = {});

}  // namespace grademl::analysis
