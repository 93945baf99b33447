#include "analysis/spark_stages.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include "core/time.h"
#include "analysis/phase_tags.h"

namespace grademl::analysis {

namespace {

double DurationS(const model::Phase& p, TimeNs run_end) {
  TimeNs end = p.end_ns != 0 ? p.end_ns : run_end;
  return end > p.start_ns ? NsToSeconds(end - p.start_ns) : 0.0;
}

std::string Pct(double f) { return fmt::format("{:.0f}%", 100.0 * f); }

std::string Secs(double s) { return FormatDuration(static_cast<DurationNs>(std::llround(s * 1e9))); }

std::string Bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.1f} {}", b, units[u]);
}

// The data a task read: its input and its shuffle read.
int64_t TaskDataBytes(const model::Phase& task) {
  return IntTag(task, "input_bytes") + IntTag(task, "shuffle_read_bytes");
}

// One task attempt's tags into the sums.
void AddTask(const model::Phase& task, double duration_s, SparkTaskSums& s) {
  ++s.tasks;
  std::string_view status = TagOf(task, "status");
  if (status == "failed") ++s.failed;
  if (status == "killed") ++s.killed;
  if (TagOf(task, "speculative") == "true") ++s.speculative;
  s.task_s += duration_s;
  s.executor_run_s += IntTag(task, "executor_run_ms") / 1e3;
  if (HasTag(task, "executor_cpu_ns")) {
    s.has_cpu = true;
    s.executor_cpu_s += IntTag(task, "executor_cpu_ns") / 1e9;
  }
  s.gc_s += IntTag(task, "gc_ms") / 1e3;
  s.deserialize_s += IntTag(task, "executor_deserialize_ms") / 1e3;
  s.shuffle_fetch_wait_s += IntTag(task, "shuffle_fetch_wait_ms") / 1e3;
  s.shuffle_write_s += IntTag(task, "shuffle_write_ns") / 1e9;
  s.scheduler_delay_s += IntTag(task, "scheduler_delay_ms") / 1e3;
  s.input_bytes += IntTag(task, "input_bytes");
  s.output_bytes += IntTag(task, "output_bytes");
  s.shuffle_read_bytes += IntTag(task, "shuffle_read_bytes");
  s.shuffle_remote_bytes += IntTag(task, "shuffle_remote_bytes");
  s.shuffle_write_bytes += IntTag(task, "shuffle_write_bytes");
  s.memory_spill_bytes += IntTag(task, "memory_spill_bytes");
  s.disk_spill_bytes += IntTag(task, "disk_spill_bytes");
  s.result_bytes += IntTag(task, "result_bytes");
}

// The stage's bottleneck from its sums and skew (SparkOptions documents the rule).
void Diagnose(SparkStage& st, const SparkOptions& o) {
  const SparkTaskSums& s = st.sums;
  if (s.task_s <= 0) return;
  const double t = s.task_s;
  // Time in the executor neither on the CPU, in GC, nor waiting on or writing shuffles.
  const double off_cpu =
      s.has_cpu ? std::max(0.0, s.executor_run_s - s.executor_cpu_s - s.gc_s - s.shuffle_fetch_wait_s - s.shuffle_write_s) / t
                : 0.0;
  struct Candidate {
    std::string_view kind;
    double fraction;
    double threshold;
  };
  double skew = 0;
  if (st.median_task_s > 0 && st.max_task_s >= o.skew_factor * st.median_task_s && st.duration_s > 0) {
    skew = std::min(1.0, (st.max_task_s - st.median_task_s) / st.duration_s);
  }
  const Candidate problems[] = {
      {"gc", s.gc_s / t, o.min_share},
      {"shuffle_wait", s.shuffle_fetch_wait_s / t, o.min_share},
      {"scheduler_delay", s.scheduler_delay_s / t, o.min_share},
      {"deserialize", s.deserialize_s / t, o.min_share},
      {"spill", s.disk_spill_bytes > 0 ? off_cpu : 0.0, o.min_share},
      {"skew", skew, o.min_skew_share},
  };
  const Candidate* best = nullptr;
  for (const Candidate& c : problems) {
    if (c.fraction >= c.threshold && (best == nullptr || c.fraction > best->fraction)) best = &c;
  }
  // A slow task is data skew only when it read more than the others; otherwise it was slow
  // where or when it ran (a fresh executor's warm-up, a loaded host): a straggler.
  const bool data_skew = st.slowest_task_data_bytes - st.median_task_data_bytes >= o.min_skew_bytes &&
                         static_cast<double>(st.slowest_task_data_bytes) >=
                             o.skew_factor * static_cast<double>(st.median_task_data_bytes);
  if (best != nullptr) {
    st.bottleneck = best->kind == "skew" && !data_skew ? std::string("straggler") : std::string(best->kind);
    st.bottleneck_fraction = best->fraction;
  } else if (s.has_cpu && s.executor_cpu_s / t >= o.min_cpu_share) {
    st.bottleneck = "cpu";
    st.bottleneck_fraction = s.executor_cpu_s / t;
  } else if (off_cpu >= o.min_io_share && s.input_bytes + s.output_bytes > 0) {
    st.bottleneck = "io";
    st.bottleneck_fraction = off_cpu;
  } else {
    return;
  }
  const std::string p = Pct(st.bottleneck_fraction);
  const std::string& b = st.bottleneck;
  if (b == "gc") {
    st.advice = fmt::format(
        "Tasks spent {} of their time in JVM garbage collection: give the executors more memory "
        "(spark.executor.memory) or keep less in memory (cache less, or in serialized form).",
        p);
  } else if (b == "shuffle_wait") {
    st.advice = fmt::format(
        "Tasks spent {} of their time waiting for shuffle blocks from other executors: shuffle less data (filter or "
        "aggregate before the shuffle), or look at the network and the executors serving the blocks.",
        p);
  } else if (b == "scheduler_delay") {
    st.advice = fmt::format(
        "{} of the task time was scheduler delay (waiting to start, shipping the task and its result): use fewer, "
        "larger tasks (fewer partitions), or lighten the driver.",
        p);
  } else if (b == "deserialize") {
    st.advice = fmt::format(
        "Tasks spent {} of their time deserialising their code and data before running: broadcast large objects "
        "instead of capturing them in closures, or use fewer, larger tasks.",
        p);
  } else if (b == "spill") {
    st.advice = fmt::format(
        "Tasks spilled {} to disk and spent {} of their time off the CPU: give the executors more memory "
        "(spark.executor.memory, spark.memory.fraction) or use more partitions so that each fits in memory.",
        Bytes(static_cast<double>(s.disk_spill_bytes)), p);
  } else if (b == "skew") {
    st.advice = fmt::format(
        "The slowest task took {} against a median of {} ({:.1f}x): the data is skewed; repartition it, or salt "
        "the hot keys, so that the partitions are even.",
        Secs(st.max_task_s), Secs(st.median_task_s), st.max_task_s / st.median_task_s);
  } else if (b == "straggler") {
    const double excess = st.max_task_s - st.median_task_s;
    const std::string data = fmt::format("it read {} against the median task's {}",
                                         Bytes(static_cast<double>(st.slowest_task_data_bytes)),
                                         Bytes(static_cast<double>(st.median_task_data_bytes)));
    const std::string where = st.slowest_task_executor.empty() ? std::string("its executor")
                                                               : "executor " + st.slowest_task_executor;
    if (st.slowest_task_startup_s >= 0.5 * excess) {
      st.advice = fmt::format(
          "The slowest task took {} against a median of {} ({:.1f}x), but the data is not skewed ({}): {} of it "
          "was start-up (deserialising the task, GC, scheduler delay), as in the first tasks on a fresh executor. "
          "Short stages pay this warm-up; keep executors alive across jobs, or give each task more work.",
          Secs(st.max_task_s), Secs(st.median_task_s), st.max_task_s / st.median_task_s, data,
          Secs(st.slowest_task_startup_s));
    } else {
      st.advice = fmt::format(
          "The slowest task took {} against a median of {} ({:.1f}x), but the data is not skewed ({}): it was slow "
          "where it ran ({}: look at that host's load, disk and GC); spark.speculation=true re-runs such "
          "stragglers elsewhere.",
          Secs(st.max_task_s), Secs(st.median_task_s), st.max_task_s / st.median_task_s, data, where);
    }
  } else if (b == "cpu") {
    st.advice = fmt::format(
        "Tasks were on the CPU {} of their time: the stage is compute-bound; more executor cores, or more "
        "partitions if cores sat idle, would spread it.",
        p);
  } else if (b == "io") {
    st.advice = fmt::format(
        "Tasks spent {} of their time off the CPU (not in GC nor waiting for shuffles) reading {} and writing {}: "
        "the storage they read and write limited the stage.",
        p, Bytes(static_cast<double>(s.input_bytes)), Bytes(static_cast<double>(s.output_bytes)));
  }
}

}  // namespace

void SparkTaskSums::Add(const SparkTaskSums& o) {
  tasks += o.tasks;
  failed += o.failed;
  killed += o.killed;
  speculative += o.speculative;
  task_s += o.task_s;
  executor_run_s += o.executor_run_s;
  executor_cpu_s += o.executor_cpu_s;
  has_cpu = has_cpu || o.has_cpu;
  gc_s += o.gc_s;
  deserialize_s += o.deserialize_s;
  shuffle_fetch_wait_s += o.shuffle_fetch_wait_s;
  shuffle_write_s += o.shuffle_write_s;
  scheduler_delay_s += o.scheduler_delay_s;
  input_bytes += o.input_bytes;
  output_bytes += o.output_bytes;
  shuffle_read_bytes += o.shuffle_read_bytes;
  shuffle_remote_bytes += o.shuffle_remote_bytes;
  shuffle_write_bytes += o.shuffle_write_bytes;
  memory_spill_bytes += o.memory_spill_bytes;
  disk_spill_bytes += o.disk_spill_bytes;
  result_bytes += o.result_bytes;
}

SparkAnalysis AnalyzeSpark(const model::Run& run, const SparkOptions& options) {
  SparkAnalysis out;
  const TimeNs run_end = run.EffectiveEnd();
  for (const model::Phase& app_phase : run.phases) {
    if (!app_phase.leaf_is("application") || TagOf(app_phase, "engine") != "spark") continue;
    SparkApplication app;
    app.phase = app_phase.id;
    app.name = app_phase.name;
    app.app_id = std::string(TagOf(app_phase, "app_id"));
    app.spark_version = std::string(TagOf(app_phase, "spark_version"));
    app.skipped_stages = IntTag(app_phase, "skipped_stages");
    app.executors = IntTag(app_phase, "executors");
    app.duration_s = DurationS(app_phase, run_end);
    // Walk the application's subtree: SQL executions and jobs hold stages, stages hold tasks.
    std::vector<std::pair<const model::Phase*, model::PhaseId>> todo = {{&app_phase, 0}};  // (phase, its job)
    while (!todo.empty()) {
      auto [p, job] = todo.back();
      todo.pop_back();
      for (model::PhaseId c : run.ChildrenOf(p->id)) {
        const model::Phase* child = run.FindPhase(c);
        if (child == nullptr) continue;
        std::string_view leaf = child->leaf_type();
        if (leaf == "sql_execution") {
          ++app.sql_executions;
          todo.push_back({child, job});
        } else if (leaf == "job") {
          ++app.jobs;
          if (TagOf(*child, "status") == "failed") ++app.failed_jobs;
          todo.push_back({child, child->id});
        } else if (leaf == "stage") {
          SparkStage st;
          st.phase = child->id;
          st.job = job;
          st.stage_id = IntTag(*child, "stage_id");
          st.attempt = IntTag(*child, "attempt");
          st.job_id = IntTag(*child, "job_id", -1);
          st.name = child->name;
          st.status = std::string(TagOf(*child, "status"));
          st.duration_s = DurationS(*child, run_end);
          std::vector<std::pair<double, const model::Phase*>> ok;
          std::vector<int64_t> data;  // of the successful tasks
          for (model::PhaseId k : run.ChildrenOf(child->id)) {
            const model::Phase* task = run.FindPhase(k);
            if (task == nullptr || !task->leaf_is("task")) continue;
            double d = DurationS(*task, run_end);
            AddTask(*task, d, st.sums);
            if (TagOf(*task, "status") == "success") {
              ok.emplace_back(d, task);
              data.push_back(TaskDataBytes(*task));
            }
          }
          if (!ok.empty()) {
            std::sort(ok.begin(), ok.end(), [](const auto& a, const auto& b) {
              return a.first != b.first ? a.first < b.first : a.second->id < b.second->id;
            });
            const model::Phase& slowest = *ok.back().second;
            st.max_task_s = ok.back().first;
            st.slowest_task = slowest.id;
            size_t n = ok.size();
            st.median_task_s = n % 2 == 1 ? ok[n / 2].first : (ok[n / 2 - 1].first + ok[n / 2].first) / 2;
            std::sort(data.begin(), data.end());
            st.median_task_data_bytes = n % 2 == 1 ? data[n / 2] : (data[n / 2 - 1] + data[n / 2]) / 2;
            st.slowest_task_data_bytes = TaskDataBytes(slowest);
            st.slowest_task_startup_s = (IntTag(slowest, "executor_deserialize_ms") + IntTag(slowest, "gc_ms") +
                                         IntTag(slowest, "scheduler_delay_ms")) / 1e3;
            st.slowest_task_executor = std::string(TagOf(slowest, "executor"));
          }
          Diagnose(st, options);
          ++app.stages;
          if (st.status == "failed") ++app.failed_stages;
          app.sums.Add(st.sums);
          app.stages_detail.push_back(std::move(st));
        } else if (leaf == "task") {  // a task outside any stage (a damaged log)
          AddTask(*child, DurationS(*child, run_end), app.sums);
        }
      }
    }
    std::sort(app.stages_detail.begin(), app.stages_detail.end(), [](const SparkStage& a, const SparkStage& b) {
      return std::tie(a.stage_id, a.attempt, a.phase) < std::tie(b.stage_id, b.attempt, b.phase);
    });
    out.applications.push_back(std::move(app));
  }
  return out;
}

}  // namespace grademl::analysis
