// BackgroundWriter: persists a run while it is being recorded.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/status.h"
#include "core/time.h"
#include "model/run_builder.h"
#include "store/database.h"

namespace grademl::store {

// Moves deltas from a RunBuilder into a Database on its own thread, one transaction every
// `flush_interval`, so that a grademl killed with SIGKILL leaves everything up to about one
// interval (plus one write) before the kill in the file. A delta whose write failed is kept
// and retried, merged with the next one, so a transient error (a busy lock, a full disk
// that was cleaned) loses nothing; the first error is still kept and returned by Stop().
// The Database and RunBuilder must outlive the writer.
class BackgroundWriter {
 public:
  static constexpr DurationNs kDefaultFlushInterval = 500 * kNsPerMs;

  BackgroundWriter(Database* db, model::RunBuilder* builder, model::RunId run,
                   DurationNs flush_interval = kDefaultFlushInterval);
  // Stops (with a final flush) if Stop() was not called; its error, if any, is then lost.
  ~BackgroundWriter();
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Writes what changed so far now, on the caller's thread, and returns that write's status.
  Status FlushNow();
  // Stops the thread, does a final flush and returns the first error of any write (OK when
  // every write succeeded). Later calls return the same.
  Status Stop();

 private:
  void Loop();
  Status Flush(bool final = false);

  Database* const db_;
  model::RunBuilder* const builder_;
  const model::RunId run_;
  const DurationNs interval_;

  std::mutex flush_mu_;     // serialises flushes; guards pending_ and first_error_
  model::RunDelta pending_;  // taken from the builder, not yet written
  Status first_error_;

  std::mutex stop_mu_;  // serialises Stop()
  bool stopped_ = false;
  std::mutex mu_;       // guards stop_
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace grademl::store
