// The Dask task log importer: the tasks grademl's scheduler plugin recorded
// (python/grademl/dask_plugin.py) into the run, each under the recorded process of the
// worker that ran it. docs/engines.md ("Dask distributed") has the mapping:
//   - a task is a phase of leaf type `task` named by its key, tagged key, prefix, group
//     (= prefix, for the imbalance analysis), worker, nbytes, type, thread, state (memory or
//     erred) and error; its startstops are child phases (compute, transfer, disk-read,
//     disk-write, deserialize, ...); a transfer is tagged source and, when the log tells,
//     bytes and keys; a task cancelled while a worker had it (state cancelled) spans from
//     when the scheduler gave it to the worker until it released it, without `group` (cut
//     short, it is no peer of its prefix's other tasks) and without children;
//   - a log of version 2 without its end record was cut short (its process killed, or the
//     plugin lost its file): imported, and the result partial with "PATH: line N: ...";
//   - a worker is the recorded process with its pid on its host (a loopback or the
//     scheduler's own address is the scheduler's host), the one alive when it ran tasks; a
//     worker that grademl did not record (another machine, a log imported on its own) gets a
//     phase of type `dask_worker` under the import's phase instead;
//   - dependencies are edges of kind "dask" between task phases; a transfer is an edge of
//     kind "transfer" from each dependency that ran on the source worker to the transfer
//     phase (from the source worker's phase when none did).
// Times: the log holds the scheduler's clock (the run's, on the scheduler's host). Workers
// add Dask's scheduler_delay (an estimate) to their compute and transfer times; on the
// scheduler's host, where the clocks are the same, each task's compute and transfer are
// shifted by the least amount that puts its compute between the moment the scheduler gave
// it to the worker and the moment the scheduler heard it finished. A task is kept within
// its worker process's lifetime.
//
// Two passes over the file (it is opened twice): Scan() reads the span, the workers and
// where any damage is; Emit() reads again up to the damage and adds everything through the
// RunBuilder as it goes. Memory: the workers, and per task key its phase and dependencies
// (for the edges), not the tasks' records.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "importers/dask/dask_log_reader.h"
#include "importers/importer.h"
#include "importers/slice_tracker.h"

namespace grademl::importers::dask {

// One task interval after the clock corrections (run clock, ns).
struct TaskInterval {
  std::string_view action;
  TimeNs start = 0, stop = 0;
  std::string_view source;
};

// The corrected intervals of one task: see the file comment. `local`: the worker shares the
// scheduler's clock. `shifted_ns`: how far compute and transfer were moved (0: not at all).
struct TaskTimes {
  std::vector<TaskInterval> intervals;
  TimeNs start = 0, end = 0;  // the task's span (sent..done, or done, without intervals)
  DurationNs shifted_ns = 0;
};
TaskTimes CorrectTaskTimes(const DaskTaskRecord& task, bool local, double time_delay_s);

// Seconds since the epoch as ns, or nullopt when out of range.
std::optional<TimeNs> SecondsToTimeNs(double seconds);

class DaskLogImporter final : public TraceRead {
 public:
  DaskLogImporter(std::string path, InputOpener open, ImportTarget& target);
  // The first pass. An error: nothing can be imported (not a Dask log, or unreadable).
  Status Scan();
  TimeNs start_ns() const override;
  TimeNs end_ns() const override;
  StatusOr<ImportResult> Emit() override;

  // Worker hosts: whether `host` (a worker address's host) is the scheduler's machine.
  static bool IsSchedulerHost(std::string_view host, const DaskHeader& header);

  // Bounds against hostile logs (docs/import.md, "Limits"): what one log makes the importer
  // hold or add. Real logs stay far below (Dask's scheduler spends about a millisecond a task:
  // 5M tasks are hours of scheduling; clusters have thousands of workers at most). Past one,
  // reading stops at that line with one line "PATH: line N: more than B ... (GradeML's
  // bound); the rest is not imported" (what came before is imported, partial).
  // ImportTarget::max_events (records) and max_records (the others) lower them (tests).
  static constexpr int64_t kMaxRecordsPerFile = 20'000'000;       // lines with a record
  static constexpr int64_t kMaxWorkersPerFile = 100'000;          // each a phase when it ran tasks
  static constexpr int64_t kMaxKeysPerFile = 5'000'000;           // distinct task keys, ~100 bytes each
  static constexpr int64_t kMaxDependenciesPerFile = 50'000'000;  // keys listed by dependency records
  // Dependencies examined to add a task's edges (its dependencies, again for each transfer):
  // a key with many dependencies run many times would otherwise add edges without end.
  static constexpr int64_t kMaxDependencyLinksPerFile = 50'000'000;

 private:
  struct Worker {
    std::string address, ip, name;
    int64_t pid = 0;
    int64_t nthreads = 0;
    std::optional<double> time_delay;  // the latest
    TimeNs joined = 0, left = 0;
    TimeNs first = INT64_MAX, last = INT64_MIN;  // its tasks' span
    int64_t tasks = 0;
    bool local = true;
    std::string host;              // the host its phases carry
    model::PhaseId phase = 0;      // its process phase, or its dask_worker phase
    bool recorded = false;         // phase is a recorded process
    TimeNs window_start = 0, window_end = 0;  // that process's lifetime
  };
  struct TaskRef {
    model::PhaseId phase = 0;
    uint32_t worker = 0;
    int64_t nbytes = -1;
  };
  class ScanVisitor;
  class EmitVisitor;

  static constexpr uint32_t kNoIndex = 0xffffffffu;
  // kNoIndex past the bound (limit_ then says so, naming `line`).
  uint32_t WorkerIndex(std::string_view address, int64_t line);
  uint32_t KeyId(std::string_view key, int64_t line);
  // Whether `held` (+1) passes the bound (ImportTarget's when set, else `own`); if so
  // limit_ says so (the first time), naming the line.
  bool OverBound(int64_t held, int64_t own, std::string_view what, int64_t line, bool record = false);
  void Drop(model::StatKey key, int64_t n = 1) { stats_.Add(key, n); }
  // Kept but adjusted: an info stat, also the source's tag (by name, as before the list).
  void Note(model::StatKey key, int64_t n = 1) {
    stats_.Add(key, n);
    NoteTag(key, n);
  }
  void NoteTag(model::StatKey key, int64_t n = 1) { notes_[std::string(model::InfoOf(key).name)] += n; }
  void ResolveWorkers();
  Status EmitTask(const DaskTaskRecord& task);
  Status MaybeFlush();

  std::string path_;
  InputOpener open_;
  ImportTarget& target_;
  DaskHeader header_;
  std::string local_host_;
  std::vector<Worker> workers_;
  std::unordered_map<std::string, uint32_t> worker_index_;
  // Task keys, interned: id -> TaskRef and dependencies.
  std::deque<std::string> keys_;
  std::unordered_map<std::string_view, uint32_t> key_index_;
  std::vector<TaskRef> tasks_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> deps_;
  model::IngestStatCounter stats_;  // events not imported, by reason
  SliceTracker tracker_{stats_};     // tasks outside their worker process
  std::map<std::string, int64_t> notes_;  // kept, adjusted, by reason: the source's tags
  int64_t lines_ = 0;        // lines to read (before the damage)
  int64_t dependencies_ = 0; // listed by dependency records (kMaxDependenciesPerFile)
  int64_t links_ = 0;        // dependencies examined for edges (kMaxDependencyLinksPerFile)
  Status limit_;             // a bound was passed: ends the reading
  int64_t line_ = 0;         // the line of the task being emitted
  int64_t records_ = 0;
  bool ended_ = false;       // the end record was read
  Status read_status_;
  TimeNs min_ = INT64_MAX, max_ = INT64_MIN;
  int64_t phases_ = 0, edges_ = 0, since_flush_ = 0;
  DurationNs max_shift_ = 0;
  model::PhaseSpec spec_;  // reused
  bool emitted_ = false;
};

// The Dask task log's entry in importers::TraceFormats().
TraceFormat DaskTraceFormat();

}  // namespace grademl::importers::dask
