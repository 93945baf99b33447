// EventCollector: the reader side of instrument/event_format.h. Listens on
// "<dir>/events.sock" for the event memories (sealed memfds) that instrumented processes
// hand over with SCM_RIGHTS, and turns their records into phases (under each process's
// phase), tags, "user.<name>" gauge series on the process resource, and "flow" edges,
// through the RunBuilder.
//
// The memories are written by arbitrary user processes, so every byte of them is hostile:
// they are never mapped here (a mapping can fault), but read with pread, each record once,
// into this process's memory, where it is validated and only then applied. A bad header, a
// bad record or a bad `committed` stops reading that memory or chunk, never more; reading
// survives a memory that shrinks or any descriptor a process sends. Chunks read to their
// end whose thread has moved on are freed (hole punched), so memory stays bounded. Records
// that cannot be turned into model objects yet (the process's phase is not known yet, a
// name not read yet, no TSC rate yet) wait in this process's memory, in their thread's
// queue; the next Poll tries again.
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
#include <utility>
#include <vector>

#include "core/time.h"
#include "model/run_builder.h"

namespace grademl::collect {

struct EventCollectorOptions {
  // TSC ticks per ns. 0: measured by the collector ((rdtsc, CLOCK_MONOTONIC) pairs at
  // construction and at every Poll). Tests set it to get exact conversions.
  double tsc_ticks_per_ns = 0;
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
  // known yet: its events stay pending). Called once per memory per Poll (for end_ns).
  // Starts listening on "<dir>/events.sock" at once (see listen_error()); `dir` may be
  // empty: no socket, memories come only through AddWriterMemory.
  EventCollector(model::RunBuilder* builder, std::string dir, std::string host,
                 std::function<ProcessInfo(pid_t)> process_of, Options options = Options());
  ~EventCollector();
  EventCollector(const EventCollector&) = delete;
  EventCollector& operator=(const EventCollector&) = delete;

  // Why the socket could not be set up ("" when listening): instrumented processes then
  // stay disabled.
  const std::string& listen_error() const { return listen_error_; }

  // Takes one writer's event memory (the descriptor is owned from here on, closed at the
  // latest by the destructor), as if it had arrived on the socket. False (and the
  // descriptor closed) when it is not a regular file sealed against shrinking. For the
  // fuzzer and tests; the socket path uses it too.
  bool AddWriterMemory(int fd);

  // One pass: takes memories handed over since, reads newly committed records, converts
  // what it can. A memory whose process has ended (ProcessInfo::end_ns) is read to its
  // end, its open phases end at the process's end, and it is released.
  void Poll(TimeNs now);
  // A last Poll, then: pending records are applied (unknown names get placeholders; those
  // of processes never known are dropped), and every phase still open ends at its
  // process's end, or at `end` for a process still running. Nothing happens after it.
  void Finish(TimeNs end);

  struct Stats {
    size_t files = 0;    // event memories read (valid header)
    size_t events = 0;   // records turned into model objects (name definitions not counted)
    size_t phases = 0;   // phases begun (instants included)
    size_t dropped = 0;  // events lost: by writers (memory full, too deep) + unusable here
    size_t too_deep = 0; // of those, phases a writer dropped for nesting deeper than kMaxDepth
    size_t pending = 0;  // records copied out but not converted yet (waiting for a name)
    // Writers that stopped taking memory because the program closed or replaced the
    // descriptor they reserved through (instrument::kWriterDescriptorLost): their process's
    // later events were dropped (counted in `dropped`).
    size_t descriptor_lost = 0;
  };
  Stats stats() const;

  // The TSC rate in use (ticks per ns), 0 while none yet.
  double tsc_ticks_per_ns() const;

 private:
  struct Chunk;
  struct Record;
  struct Thread;
  struct File;

  model::RunBuilder* builder_;
  std::string dir_;
  std::string host_;
  std::function<ProcessInfo(pid_t)> process_of_;
  Options options_;

  std::vector<std::unique_ptr<File>> files_;
  int listen_fd_ = -1;
  std::string listen_error_;
  std::string socket_path_;  // removed by the destructor
  struct Connection {
    int fd = -1;
    int polls = 0;
  };
  std::vector<Connection> connections_;  // accepted, memory not received yet
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
  void Listen();
  void AcceptWriters();
  void PollFile(File* f, bool final, TimeNs end);
  bool TryReadHeader(File* f);
  void ScanChunks(File* f);
  void ScanChunk(File* f, Thread* t, Chunk* c);
  void ReleaseChunk(File* f, Chunk* c);
  // Applies the records of one thread; false when it stopped at a record it cannot apply yet.
  bool ApplyThread(File* f, Thread* t, bool final);
  enum class Apply { kDone, kWait };
  Apply ApplyRecord(File* f, Thread* t, const Record& rec, bool final);
  void CloseFile(File* f, TimeNs end);
  TimeNs TimeOf(const File* f, uint64_t ticks) const;
  void UpdateStats();
};

}  // namespace grademl::collect
