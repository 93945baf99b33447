// BackgroundWriter: persists a run while it is being recorded.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "core/status.h"
#include "core/time.h"
#include "model/run_builder.h"
#include "store/database.h"

namespace grademl::store {

// Moves deltas from a RunBuilder into a Database on its own thread, one transaction every
// `flush_interval`, so that a grademl killed with SIGKILL leaves everything up to about one
// interval (plus one write) before the kill in the file.
//
// A write that fails (a lock held past the busy timeout, a full disk, a damaged page) loses
// nothing: its delta is kept in memory, merged with the next ones and retried every
// interval. The owner hears at once (Event::kFailing, then kRecovered or kDropping) and the
// first error is stored in the run's error field once a write succeeds. What is held is
// bounded (Options::max_pending_bytes): past the bound the held samples and log lines are
// dropped, counted (phases, edges, resources and series are always kept). Stop() retries the
// last write (Options::final_busy_wait while the store is locked, final_retries times for
// other errors) before it gives up and says what is missing.
// The Database and RunBuilder must outlive the writer.
class BackgroundWriter {
 public:
  static constexpr DurationNs kDefaultFlushInterval = 500 * kNsPerMs;

  // What the owner is told, on the writer's thread (or Stop's caller), as it happens.
  struct Event {
    enum Kind {
      kFailing,    // a write failed after the last one succeeded (or the first write); `status` says why
      kRecovered,  // a write succeeded after failures: everything held is stored
      kDropping,   // the held data passed the bound: `dropped_samples` so far are lost
      kStoreGone,  // the store is no longer where it was opened (Database::CheckPresent): writes go
                   // on into the open file, which nobody else will read; `status` says what happened
    };
    Kind kind;
    Status status;
    uint64_t dropped_samples = 0;
  };

  struct Options {
    DurationNs flush_interval = kDefaultFlushInterval;
    // About how much unwritten data may be held while the store fails (estimated from row
    // counts and text sizes).
    size_t max_pending_bytes = size_t{256} << 20;
    // Stop(): how long the last write is retried while the store is locked by a peer ...
    DurationNs final_busy_wait = 120 * kNsPerSec;
    // ... and how many times for other errors (a full disk, I/O errors), 1 s apart.
    int final_retries = 3;
    std::function<void(const Event&)> on_event;  // may be empty
  };

  BackgroundWriter(Database* db, model::RunBuilder* builder, model::RunId run,
                   DurationNs flush_interval = kDefaultFlushInterval);
  BackgroundWriter(Database* db, model::RunBuilder* builder, model::RunId run, Options options);
  // Stops (with a final flush) if Stop() was not called; its error, if any, is then lost.
  ~BackgroundWriter();
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Writes what changed so far now, on the caller's thread, and returns that write's status.
  Status FlushNow();
  // Asks the writer's thread for a write as soon as it is free, rather than at the next
  // interval, without waiting for it (a flood of events: the store writes as fast as it can
  // while the backlog is large, instead of once an interval).
  void FlushSoon();
  // How the final write may be waited on (Stop).
  struct FinalWrite {
    // Called once, when the final write fails for the first time (the store is locked,
    // down, ...), with why: to say at once what grademl waits for.
    std::function<void(const Status& why)> on_wait;
    // Asked between attempts, every 50 ms at least while waiting: true stops retrying (what
    // was not written is then said in Stop's status). The attempts themselves are as long
    // as the store's lock wait (Database::SetLockWait): set it short to stay interruptible.
    std::function<bool()> give_up;
  };
  // Stops the thread and does the final flush (retried as Options say). OK when everything
  // recorded is in the store, even if some writes failed on the way (first_error() says
  // why); otherwise why, and what is missing. Later calls return the same.
  Status Stop(const FinalWrite& final_write);
  Status Stop() { return Stop(FinalWrite{}); }
  // The first write error, OK if every write succeeded.
  Status first_error();
  // Samples and log lines dropped because the held data passed the bound.
  uint64_t dropped_samples();
  // About how many bytes of rows it holds (being written, or kept after a failed write),
  // estimated as the bound above is. Lock-free, so that the event collector can ask on
  // every pass, even while a write is under way; with RunBuilder::unsent_bytes() it is what
  // is accepted but not stored yet.
  size_t held_bytes() const { return held_bytes_.load(std::memory_order_relaxed); }

 private:
  void Loop();
  Status Flush(bool final = false);
  size_t PendingBytes() const;
  void Notify(const Event& event) const;

  Database* const db_;
  model::RunBuilder* const builder_;
  const model::RunId run_;
  const Options options_;

  std::mutex flush_mu_;      // serialises flushes; guards the fields down to dropped_
  model::RunDelta pending_;  // taken from the builder, not yet written
  Status first_error_;
  bool failing_ = false;     // the last write failed
  bool gone_said_ = false;   // kStoreGone was sent
  bool synced_ahead_ = false;  // Database::SyncAhead was called (writer thread only)
  uint64_t dropped_ = 0;     // samples and log lines dropped past the bound
  Status final_status_;
  std::atomic<size_t> held_bytes_{0};  // PendingBytes() of pending_, written under flush_mu_

  std::mutex stop_mu_;  // serialises Stop()
  bool stopped_ = false;
  std::mutex mu_;       // guards stop_, flush_soon_
  std::condition_variable cv_;
  bool stop_ = false;
  bool flush_soon_ = false;
  std::thread thread_;
};

}  // namespace grademl::store
