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
// name not read yet, no TSC rate yet) wait in the writer's memory, or (a name not read yet)
// in their thread's queue, within a bound; the next Poll tries again.
//
// Whatever the rate or the content of the memories, what it holds is bounded
// (docs/event-collection.md, "Bounds"): what it accepts and the store has not stored yet
// (Options::max_backlog_bytes; past it, new phases, samples and edges are dropped and
// counted), the phases open at once, the names, the flows waiting for their producer, the
// depth; values read from a memory (counts, indexes, lengths) are believed only as far as
// they are physically possible. Ended phases leave the RunBuilder's memory once stored,
// except those of the types the owner keeps (Options::keep_type).
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
#include <string_view>
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
  // Minimum span of the TSC rate measurement while the run goes on (TSC records wait until
  // then); Finish() takes the run's own span, however short (kFinishRateSpanNs at least).
  DurationNs min_rate_span_ns = 20 * kNsPerMs;
  // Bytes accepted but not stored yet: the builder's next delta and what the store's writer
  // holds (RunBuilder::unsent_bytes() + BackgroundWriter::held_bytes()), asked once per
  // pass. Empty: the builder's unsent_bytes() alone.
  std::function<size_t()> backlog_bytes;
  // Past this backlog, new phases (with everything inside them), counter samples and flow
  // edges are dropped, and counted, until the store has caught up: grademl's memory and the
  // time its last write takes stay bounded however fast processes write events.
  size_t max_backlog_bytes = size_t{64} << 20;
  // Phases open at once, estimated in bytes with their tags: past it, Begins are dropped.
  size_t max_open_bytes = size_t{64} << 20;
  // Ended phases are released from the builder's memory once handed out, except phases of a
  // leaf type this accepts, and the phases they were nested in, up to max_kept_phases (what
  // the end of a run still reads from the builder: trace exports and iterations). Empty:
  // none kept.
  std::function<bool(std::string_view leaf_type)> keep_type;
  size_t max_kept_phases = 100000;
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
    size_t dropped = 0;  // events lost: by writers (memory full, too deep) + unusable or dropped here
    size_t too_deep = 0; // of those, phases dropped for nesting deeper than kMaxDepth (writers' and here)
    size_t phases_dropped = 0;  // of those, phases (Begins, instants) this side read and dropped
    size_t over_backlog = 0;    // of those, records dropped because the store's backlog was full
    size_t pending = 0;  // records copied out but not converted yet (waiting for a name)
    // Writers that stopped taking memory because the program closed or replaced the
    // descriptor they reserved through (instrument::kWriterDescriptorLost): their process's
    // later events were dropped (counted in `dropped`).
    size_t descriptor_lost = 0;
  };
  Stats stats() const;

  // The TSC rate in use (ticks per ns), 0 while none yet, and the span it was measured
  // over (0 when none was measured: none yet, or Options::tsc_ticks_per_ns given).
  double tsc_ticks_per_ns() const;
  DurationNs tsc_rate_span_ns() const { return rate_span_ns_; }

  // The least span Finish() measures the rate over (waiting out the rest when the run was
  // shorter): min_rate_span_ns applies to the passes while the run goes on.
  static constexpr DurationNs kFinishRateSpanNs = kNsPerMs;

 private:
  struct Chunk;
  struct Record;
  struct Open;
  struct Thread;
  struct File;
  // How a thread's records are applied: a pass, the last pass, or the last pass of a
  // memory whose process was never known (everything counted as dropped).
  enum class Mode { kPoll, kFinal, kDiscard };

  model::RunBuilder* builder_;
  std::string dir_;
  std::string host_;
  std::function<ProcessInfo(pid_t)> process_of_;
  Options options_;

  std::vector<std::unique_ptr<File>> files_;  // not closed yet
  // What closed memories left to the stats.
  size_t closed_valid_ = 0;
  uint64_t closed_writer_dropped_ = 0;
  uint64_t closed_writer_too_deep_ = 0;
  size_t closed_descriptor_lost_ = 0;
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
  DurationNs rate_span_ns_ = 0;

  // flow id -> producing phase; flow id -> consumers seen before their producer (both
  // bounded: kMaxFlows entries).
  std::unordered_map<uint64_t, model::PhaseId> flow_producer_;
  std::unordered_map<uint64_t, std::vector<model::PhaseId>> flow_waiting_;
  size_t flow_waiting_count_ = 0;  // consumers in flow_waiting_
  // (process resource, series name) -> series.
  std::map<std::pair<model::ResourceId, std::string>, model::SeriesId> series_;

  mutable std::mutex stats_mu_;
  Stats stats_;
  size_t own_dropped_ = 0;
  size_t own_too_deep_ = 0;
  size_t phases_dropped_ = 0;
  size_t over_backlog_ = 0;
  size_t events_ = 0;
  size_t phases_ = 0;

  // Bounds (see the top).
  size_t budget_ = 0;      // bytes this pass may still accept (max_backlog_bytes - backlog)
  size_t open_bytes_ = 0;  // estimated bytes of the phases open on every thread
  size_t kept_ = 0;        // ended phases kept in memory (keep_type)
  size_t queued_ = 0;      // records copied out, waiting in threads' queues
  uint64_t pass_ = 0;      // passes over memories so far
  size_t name_bytes_ = 0;  // names held, all memories
  unsigned cpus_ = 1;      // for what writers can physically have dropped
  std::unordered_map<model::SeriesId, TimeNs> series_last_t_;

  void MeasureRate(DurationNs min_span);
  void Listen();
  void AcceptWriters();
  void PollFile(File* f, bool final, TimeNs end);
  bool TryReadHeader(File* f);
  void ClaimChunks(File* f);
  // Reads and applies `t`'s records, a chunk at a time; true when it made progress.
  bool PumpThread(File* f, Thread* t, Mode mode);
  void ScanChunk(File* f, Thread* t, Chunk* c, Mode mode);
  void ReleaseChunk(File* f, Chunk* c);
  // Applies the records of one thread; false when it stopped at a record it cannot apply yet.
  bool ApplyThread(File* f, Thread* t, Mode mode);
  enum class Apply { kDone, kWait };
  Apply ApplyRecord(File* f, Thread* t, const Record& rec, Mode mode);
  // Counts a record that is dropped here (a phase when it begins one).
  void DropRecord(uint8_t type, bool over_backlog);
  // Whether `bytes` more may be accepted in this pass (and takes them when so).
  bool TakeBudget(size_t bytes);
  void EndOpen(Thread* t, TimeNs end);
  void CloseFile(File* f, TimeNs end);
  TimeNs TimeOf(const File* f, uint64_t ticks) const;
  // What writers claim to have dropped, believed up to what is physically possible.
  uint64_t PlausibleCount(uint64_t claimed) const;
  void UpdateStats();
};

}  // namespace grademl::collect
