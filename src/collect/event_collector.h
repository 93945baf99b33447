// EventCollector: the reader side of instrument/event_format.h. Follows the event files that
// instrumented processes write into the run's events directory and turns their records into
// phases (under each process's phase), tags, "user.<name>" gauge series on the process
// resource, and "flow" edges, through the RunBuilder.
//
// Reading never copies and never makes a syscall per chunk: each file is mapped read-only
// once, and a Poll loads the `committed` counter of each thread's current chunk (acquire)
// and walks the new records in place. Records that cannot be turned into model objects yet
// (the process's phase is not known yet, a name not read yet, no TSC rate yet) simply stay
// in the mapping: the thread's read cursor waits there and the next Poll tries again.
//
// The files are written by arbitrary user processes: a bad header, a bad record or a bad
// `committed` stops reading that file or chunk, never more. (One thing a reader of a shared
// mapping cannot defend against: a process that truncates its own file after it was mapped
// makes reads past the new end fault. The writer never does that.)
//
// Not thread-safe except stats(): Poll and Finish run on the sampling thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/time.h"
#include "model/run_builder.h"

namespace grademl::collect {

struct EventCollectorOptions {
  // TSC ticks per ns. 0: measured by the collector ((rdtsc, CLOCK_MONOTONIC) pairs at
  // construction and at every Poll). Tests set it to get exact conversions.
  double tsc_ticks_per_ns = 0;
  // List the directory at least every this many polls even when its mtime did not change
  // (mtime granularity can hide a file created right after the last listing).
  int rescan_every = 10;
  // A record whose name is still unknown after this many polls uses a placeholder name
  // ("#<id>") so that one bad record cannot stall its thread forever.
  int name_wait_polls = 50;
  // Minimum span of the TSC rate measurement.
  DurationNs min_rate_span_ns = 20 * kNsPerMs;
};

class EventCollector {
 public:
  using Options = EventCollectorOptions;
  struct ProcessInfo {
    model::PhaseId phase = 0;
    model::ResourceId resource = 0;
    TimeNs end_ns = 0;  // 0 while the process runs
  };

  // `process_of(pid)`: the phase/resource of that pid's process phase (phase 0 while not
  // known yet: its events stay pending). Called once per file per Poll (for end_ns).
  EventCollector(model::RunBuilder* builder, std::string dir, std::string host,
                 std::function<ProcessInfo(pid_t)> process_of, Options options = Options());
  ~EventCollector();
  EventCollector(const EventCollector&) = delete;
  EventCollector& operator=(const EventCollector&) = delete;

  // One pass: finds new files, reads newly committed records, converts what it can. A file
  // whose process has ended (ProcessInfo::end_ns) is read to its end, its open phases end
  // at the process's end, and it is unmapped.
  void Poll(TimeNs now);
  // A last Poll, then: pending records are applied (unknown names get placeholders; those
  // of processes never known are dropped), and every phase still open ends at its
  // process's end, or at `end` for a process still running. Nothing happens after it.
  void Finish(TimeNs end);

  struct Stats {
    size_t files = 0;    // event files read (valid header)
    size_t events = 0;   // records turned into model objects (name definitions not counted)
    size_t phases = 0;   // phases begun (instants included)
    size_t dropped = 0;  // events lost: by writers (file full) + unusable here
    size_t pending = 0;  // records read but not converted yet
  };
  Stats stats() const;

  // The TSC rate in use (ticks per ns), 0 while none yet.
  double tsc_ticks_per_ns() const;

 private:
  struct Chunk;
  struct Thread;
  struct File;

  model::RunBuilder* builder_;
  std::string dir_;
  std::string host_;
  std::function<ProcessInfo(pid_t)> process_of_;
  Options options_;

  std::vector<std::unique_ptr<File>> files_;
  std::unordered_set<std::string> seen_names_;  // directory entries already taken
  int64_t dir_mtime_ns_ = -1;
  int polls_since_listing_ = 0;
  bool finished_ = false;

  // TSC rate: (tsc, monotonic ns) at construction and the latest pair.
  uint64_t tsc0_ = 0;
  int64_t mono0_ = 0;
  double ticks_per_ns_ = 0;

  // flow id -> producing phase; flow id -> consumers seen before their producer.
  std::unordered_map<uint64_t, model::PhaseId> flow_producer_;
  std::unordered_map<uint64_t, std::vector<model::PhaseId>> flow_waiting_;
  // (process resource, series name) -> series.
  std::map<std::pair<model::ResourceId, std::string>, model::SeriesId> series_;

  mutable std::mutex stats_mu_;
  Stats stats_;
  size_t own_dropped_ = 0;
  size_t events_ = 0;
  size_t phases_ = 0;
  std::unordered_map<model::SeriesId, TimeNs> series_last_t_;

  void MeasureRate();
  void ListDirectory();
  void OpenFile(const std::string& name);
  void PollFile(File* f, bool final, TimeNs end);
  bool TryMapHeader(File* f);
  void ScanChunks(File* f);
  bool ScanChunk(File* f, Chunk* c);
  // Applies the records of one thread; false when it stopped at a record it cannot apply yet.
  bool ApplyThread(File* f, Thread* t, bool final);
  enum class Apply { kDone, kWait };
  Apply ApplyRecord(File* f, Thread* t, const uint8_t* rec, bool final);
  void CloseFile(File* f, TimeNs end);
  void UpdateStats();
};

}  // namespace grademl::collect
