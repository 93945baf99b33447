// The Spark event log importer: Spark's own record of an application (the JSON-lines file
// spark.eventLog.dir holds, one listener event per line; Spark 1.x to 4.x field names), as a
// single file or a rolling `eventlog_v2_<appId>` directory, plain or zstd.
//
// ReadAll() parses each line with simdjson (DOM, in place in the line reader's buffer; a line
// refused only for bytes that are not UTF-8 or a lone surrogate escape is parsed again
// repaired, importers/json_text.h, each such character U+FFFD) and
// keeps what the model needs as compact records: the application, SQL executions, jobs,
// stage attempts, task attempts (times, ids, status, and the task metrics that are set,
// packed), executors and hosts; nothing else of the line is kept. Emit() then resolves every
// span (what the log lacks from what it has) and builds the tree application ->
// (sql_execution) -> job -> stage -> task under ImportTarget::under,
// one async track and one process resource per executor (with counter series built from the
// task ends), the hosts, and the stages' parents as "shuffle" edges, and counts what it
// could not use per reason in the source's ingest stats. docs/engines.md has the mapping.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "importers/importer.h"
#include "importers/slice_tracker.h"
#include "importers/spark/line_reader.h"

namespace grademl::importers::spark {

// The task metrics kept (TaskEnd's "Task Metrics"), in Spark's units.
enum Metric : uint8_t {
  kRunMs,                 // Executor Run Time
  kCpuNs,                 // Executor CPU Time (Spark 2.1+)
  kDeserializeMs,         // Executor Deserialize Time
  kDeserializeCpuNs,      // Executor Deserialize CPU Time
  kGcMs,                  // JVM GC Time
  kResultSerializeMs,     // Result Serialization Time
  kResultBytes,           // Result Size
  kMemorySpillBytes,      // Memory Bytes Spilled
  kDiskSpillBytes,        // Disk Bytes Spilled
  kPeakExecutionMemory,   // Peak Execution Memory
  kShuffleRemoteBytes,    // Shuffle Read Metrics: Remote Bytes Read
  kShuffleLocalBytes,     //   Local Bytes Read
  kShuffleFetchWaitMs,    //   Fetch Wait Time
  kShuffleRecordsRead,    //   Total Records Read
  kShuffleRemoteBlocks,   //   Remote Blocks Fetched
  kShuffleLocalBlocks,    //   Local Blocks Fetched
  kShuffleRemoteDiskBytes,//   Remote Bytes Read To Disk
  kShuffleWriteBytes,     // Shuffle Write Metrics: Shuffle Bytes Written
  kShuffleWriteNs,        //   Shuffle Write Time
  kShuffleRecordsWritten, //   Shuffle Records Written
  kInputBytes,            // Input Metrics: Bytes Read
  kInputRecords,          //   Records Read
  kOutputBytes,           // Output Metrics: Bytes Written
  kOutputRecords,         //   Records Written
  kMetricCount
};
// The phase tag each metric becomes ("executor_run_ms", ...).
std::string_view MetricTag(Metric m);

class SparkLogImporter final : public TraceRead {
 public:
  SparkLogImporter(std::string path, ImportTarget& target);

  // Reads the whole input: every line before the first damaged one is used; `Status` is the
  // damage ("PATH: line N: what", or the input's "PATH: byte N: what"), which makes the
  // result partial. A refused input (an lz4 or snappy log) is an error Status instead. The
  // files of a rolling log (TraceInput::parts) with some missing between them (or before the
  // first) are read all the same; the result is then partial too, its error naming the
  // missing files' indices.
  Status ReadAll(TraceInput& input);

  TimeNs start_ns() const override;
  TimeNs end_ns() const override;
  StatusOr<ImportResult> Emit() override;

  // Bounds against hostile logs (docs/import.md, "Limits"): what one log (a file, or a
  // rolling directory's files together) makes the importer hold. Real logs stay far below:
  // a TaskEnd line is a few KB, so 20M events are tens of GB of log; Spark's own UI struggles
  // past a few million tasks; a job lists its stages once (iterative jobs: thousands). Past
  // the bound on events, tasks, stage ids or executors, reading stops at that line with one
  // line "PATH: line N: more than B ... (GradeML's bound); the rest is not imported" (what
  // came before is imported, partial). Stage links (each stage attempt's parents, times
  // each parent's attempts: the work of the shuffle edges) past their bound: the edges
  // past it are not added, partial with one line. ImportTarget::max_events and
  // max_records lower them (tests).
  static constexpr int64_t kMaxEventsPerFile = 20'000'000;     // lines with an event
  static constexpr int64_t kMaxTasksPerFile = 5'000'000;       // task attempts, ~100-300 bytes each
  static constexpr int64_t kMaxStageIdsPerFile = 50'000'000;   // ids jobs list and parent ids, 8-12 bytes each
  static constexpr int64_t kMaxExecutorsPerFile = 100'000;     // each becomes a track, a resource, series
  static constexpr int64_t kMaxStageLinksPerFile = 50'000'000; // parent attempts examined for edges

 private:
  static constexpr uint32_t kNone = 0xffffffffu;
  enum TaskStatus : uint8_t { kRunning, kSuccess, kFailed, kKilled };

  struct App {
    bool started = false, ended = false;
    std::string name, id, user, attempt, spark_version;
    int64_t start_ms = 0, end_ms = 0;
    std::optional<int64_t> exit_code;
    std::string driver_host_property, app_name_property, master;
  };
  struct Sql {
    int64_t id = 0;
    int64_t start_ms = 0, end_ms = 0;
    std::string description;
    model::PhaseId phase = 0;
  };
  struct Job {
    int64_t id = 0;
    int64_t submit_ms = 0, end_ms = 0;  // 0: not in the log (Spark 1.x)
    int64_t seen_start_ms = 0, seen_end_ms = 0;  // the latest time of the log when its events came
    bool ended = false;
    std::string result;   // "succeeded", "failed", "" (no JobEnd)
    std::string failure;  // JobFailed's exception message (first line)
    std::string name;     // the result stage's name (the last of Stage Infos)
    std::string description, group;
    std::vector<int64_t> stage_ids;
    std::optional<int64_t> sql;
    int64_t skipped_stages = 0;
    model::PhaseId phase = 0;
  };
  struct StageInfo {
    std::string name;
    int64_t num_tasks = 0;
    std::vector<int64_t> parents;
  };
  struct Stage {  // one stage attempt
    int64_t stage_id = 0, attempt = 0;
    uint32_t job = kNone;
    int64_t submit_ms = 0, complete_ms = 0;
    bool submitted = false, completed = false;
    std::string failure;
    int64_t first_launch_ms = 0, last_finish_ms = 0;
    int64_t tasks = 0;
    model::PhaseId phase = 0;
  };
  struct Executor {
    std::string id, host;
    int64_t cores = 0;
    int64_t added_ms = 0, removed_ms = 0;
    std::string removed_reason;
    model::TrackId track = 0;
    model::ResourceId resource = 0;
  };
  struct Task {  // one task attempt; metric values packed in metric_values_
    int64_t task_id = 0;
    int64_t launch_ms = 0, finish_ms = 0, getting_result_ms = 0;
    int32_t index = 0, attempt = 0;
    uint32_t stage = kNone;
    uint32_t executor = kNone;
    uint32_t reason = kNone;    // into strings_
    uint32_t locality = kNone;  // into strings_
    uint32_t values = kNone;    // into metric_values_: the values of the bits of `nonzero`, in order
    uint32_t seen = 0;          // metrics present in the log
    uint32_t nonzero = 0;       // of those, the ones not 0
    TaskStatus status = kRunning;
    bool speculative = false;
    bool ended = false;
    bool resubmitted = false;
  };

  // The event handlers (in the .cpp: their signatures use simdjson's types).
  struct Handlers;
  friend struct Handlers;

  void Drop(model::StatKey key, int64_t n = 1);
  // The bound in use: ImportTarget's when set (tests), else `own`.
  int64_t Bound(int64_t own, bool event) const;
  // Whether one more record (`held` already) of `what` passes its bound; if so, limit_ says so
  // naming the line being read, and the line is not used.
  bool OverBound(int64_t held, int64_t own, std::string_view what, bool event = false);
  // An indexed stat ("unknown_event:NAME"): at most model::kMaxIndexesPerStat names per stat.
  void Drop(model::StatKey key, std::string_view index) { stats_.Add(key, index); }
  void SeeTime(int64_t ms);
  uint32_t Intern(std::string_view text);
  uint32_t ExecutorFor(std::string_view id, std::string_view host);
  uint32_t StageFor(int64_t stage_id, int64_t attempt);
  uint32_t JobForStage(int64_t stage_id) const;
  std::string HostName(std::string_view spark_host) const;
  int64_t Metric(const Task& t, spark::Metric m) const;
  TimeNs Ns(int64_t ms) const;  // a log time (ms, valid) in the run's clock
  std::unordered_map<std::string, DurationNs> KnownHosts() const;
  void DecideClock();
  Status MaybeFlush();
  // Emit's steps.
  void ResolveSpans();
  Status EmitTree(model::SourceId source);
  // The stages' parents as edges, examining at most `budget` parent attempts
  // (kMaxStageLinksPerFile; attempts_of: each stage id's attempts).
  void EmitEdges(const std::unordered_map<int64_t, int64_t>& attempts_of, int64_t budget);
  void EmitExecutorSeries();

  std::string path_;
  ImportTarget& target_;

  App app_;
  std::vector<Sql> sqls_;
  std::unordered_map<int64_t, uint32_t> sql_index_;
  std::vector<Job> jobs_;
  std::unordered_map<int64_t, uint32_t> job_index_;
  std::unordered_map<int64_t, StageInfo> stage_info_;
  std::unordered_map<int64_t, std::vector<uint32_t>> stage_jobs_;  // jobs listing a stage, in JobStart order
  std::vector<Stage> stages_;
  std::map<std::pair<int64_t, int64_t>, uint32_t> stage_index_;
  std::vector<Executor> executors_;
  std::unordered_map<std::string, uint32_t> executor_index_;
  std::deque<Task> tasks_;
  std::unordered_map<int64_t, uint32_t> task_index_;  // by Task ID
  std::deque<int64_t> metric_values_;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> string_index_;
  model::IngestStatCounter stats_;  // what was not imported, or imported adjusted
  SliceTracker tracker_{stats_};     // spans never ended, tasks past their stage

  int64_t events_ = 0;
  int64_t lines_ = 0;
  int64_t stage_ids_ = 0;     // stage ids held: jobs' lists and parents (kMaxStageIdsPerFile)
  std::string_view line_file_;  // the line being read (valid while it is), for the bounds' messages
  int64_t line_number_ = 0;
  Status limit_;              // a bound was passed while reading: ends the reading
  int64_t min_ms_ = 0, max_ms_ = 0;  // 0: no time seen
  int64_t last_ms_ = 0;              // the latest time seen so far while reading
  int64_t offset_ns_ = 0;            // added to the driver's times: the run's clock
  std::string driver_host_;
  int64_t phases_ = 0, edges_ = 0, since_flush_ = 0;
  // What Emit's steps share: each record's span in the log's ms (ResolveSpans), the stage
  // attempts and tasks by start, each executor's tasks, the skipped stages (EmitTree).
  std::vector<int64_t> stage_start_, stage_end_, job_start_, job_end_, sql_start_, sql_end_;
  int64_t skipped_total_ = 0;
  std::vector<uint32_t> stage_order_, task_order_;
  std::vector<std::vector<uint32_t>> by_executor_;
  Status read_status_;
  std::vector<std::pair<int64_t, int64_t>> missing_;  // a rolling log's missing file indices
  std::string repaired_;  // a line that simdjson refused, repaired (importers/json_text.h)
  bool emitted_ = false;
  TimeNs out_start_ = 0, out_end_ = 0;
};

// The Spark format's entry in importers::TraceFormats().
TraceFormat SparkFormat();

// Content sniffing: the first line is a Spark listener event ({"Event":"SparkListener...",
// or "org.apache.spark..."), or the file is in one of the JVM codecs' own framings Spark
// writes (lz4-java's "LZ4Block", snappy-java's "\x82SNAPPY\0", compress-lzf's "ZV" chunks),
// so that the reader can refuse it with a clear message.
bool LooksLikeSparkEventLog(std::string_view head);

// The files of a rolling event log directory (`eventlog_v2_<appId>`: `events_<n>_<appId>`,
// compressed ones with a codec suffix), in the order of n, from the last compacted file
// (`.compact`) on; empty when `dir` is not such a directory. An error naming the file when
// one is called events_... but its index cannot be read (not a number, too large, negative,
// no '_' after it): Spark could not place it among the others either.
StatusOr<std::vector<std::string>> EventLogFiles(const std::string& dir);

// The indices missing from a rolling log's files as EventLogFiles lists them, as ranges
// [first, last]: between two files, and before the first unless it is a compacted one
// (Spark numbers the files from 1). Paths that are not events_<n>_... files are ignored.
std::vector<std::pair<int64_t, int64_t>> MissingEventLogIndices(std::span<const std::string> files);

}  // namespace grademl::importers::spark
