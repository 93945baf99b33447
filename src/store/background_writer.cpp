#include "store/background_writer.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <thread>

#include <fmt/format.h>

namespace grademl::store {
BackgroundWriter::BackgroundWriter(Database* db, model::RunBuilder* builder, model::RunId run,
                                   DurationNs flush_interval)
    : BackgroundWriter(db, builder, run, Options{.flush_interval = flush_interval}) {}

BackgroundWriter::BackgroundWriter(Database* db, model::RunBuilder* builder, model::RunId run, Options options)
    : db_(db), builder_(builder), run_(run), options_(std::move(options)) {
  GRADEML_CHECK(db != nullptr && builder != nullptr);
  GRADEML_CHECK(options_.flush_interval > 0);
  thread_ = std::thread([this] { Loop(); });
}

BackgroundWriter::~BackgroundWriter() { (void)Stop(); }

void BackgroundWriter::Loop() {
  using Clock = std::chrono::steady_clock;
  const auto interval = std::chrono::nanoseconds(options_.flush_interval);
  auto next = Clock::now() + interval;
  std::unique_lock lock(mu_);
  while (true) {
    bool soon = cv_.wait_until(lock, next, [this] { return stop_ || flush_soon_; });
    if (stop_) break;
    flush_soon_ = false;
    lock.unlock();
    Status flushed = Flush();  // a failure is reported and the delta retried next time
    if (flushed.ok() && !soon && !synced_ahead_) {
      synced_ahead_ = true;
      db_->SyncAhead();  // beside the workload: the end has less to sync (Database::SyncAhead)
    }
    lock.lock();
    // A fixed cadence; after a write slower than the interval, the next flush follows at
    // once; after one asked for (FlushSoon), the next is an interval later.
    next = soon ? Clock::now() + interval : std::max(next + interval, Clock::now());
  }
}

void BackgroundWriter::Notify(const Event& event) const {
  if (options_.on_event) options_.on_event(event);
}

size_t BackgroundWriter::PendingBytes() const { return model::EstimatedBytes(pending_); }

Status BackgroundWriter::Flush(bool final) {
  std::lock_guard lock(flush_mu_);
  // What leaves the builder is held here from now on (an estimate first, so that the sum the
  // event collector reads never misses it; the exact one once merged).
  held_bytes_.store(held_bytes_.load(std::memory_order_relaxed) + builder_->unsent_bytes(), std::memory_order_relaxed);
  model::MergeDelta(pending_, builder_->TakeDelta(final));
  if (pending_.empty()) {
    held_bytes_.store(0, std::memory_order_relaxed);
    return Status::Ok();
  }
  held_bytes_.store(PendingBytes(), std::memory_order_relaxed);
  Status st = db_->WriteDelta(run_, pending_);
  if (st.ok()) {
    pending_ = model::RunDelta();
    held_bytes_.store(0, std::memory_order_relaxed);
    if (!gone_said_) {
      // A stat of the file: a store deleted under the recorder is said at once.
      if (Status present = db_->CheckPresent(); !present.ok()) {
        gone_said_ = true;
        Notify({.kind = Event::kStoreGone, .status = present, .dropped_samples = dropped_});
      }
    }
    if (failing_) {
      failing_ = false;
      Notify({.kind = Event::kRecovered, .status = Status::Ok(), .dropped_samples = dropped_});
    }
    return st;
  }
  if (first_error_.ok()) first_error_ = st;
  if (!failing_) {
    failing_ = true;
    Notify({.kind = Event::kFailing, .status = st, .dropped_samples = dropped_});
  }
  // Bounded memory while the store keeps failing: the bulk (samples, log lines) goes first.
  if (PendingBytes() > options_.max_pending_bytes) {
    const bool first_drop = dropped_ == 0;
    dropped_ += pending_.samples.size() + pending_.logs.size();
    pending_.samples = {};
    pending_.logs = {};
    held_bytes_.store(PendingBytes(), std::memory_order_relaxed);
    if (first_drop) Notify({.kind = Event::kDropping, .status = st, .dropped_samples = dropped_});
  }
  return st;
}

Status BackgroundWriter::FlushNow() { return Flush(); }

void BackgroundWriter::FlushSoon() {
  {
    std::lock_guard lock(mu_);
    flush_soon_ = true;
  }
  cv_.notify_all();
}

Status BackgroundWriter::first_error() {
  std::lock_guard lock(flush_mu_);
  return first_error_;
}

uint64_t BackgroundWriter::dropped_samples() {
  std::lock_guard lock(flush_mu_);
  return dropped_;
}

Status BackgroundWriter::Stop(const FinalWrite& final_write) {
  std::lock_guard stop_lock(stop_mu_);
  if (stopped_) return final_status_;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  {
    // The run keeps why its recording had trouble (docs/store.md: runs.error).
    std::lock_guard lock(flush_mu_);
    if (!first_error_.ok()) {
      std::string note = "store: writes failed for a while (" + first_error_.message() + ")";
      if (dropped_ > 0) note += fmt::format("; {} samples and log lines dropped to bound memory", dropped_);
      builder_->UpdateRunInfo([&](model::RunInfo& info) { info.error += (info.error.empty() ? "" : "; ") + note; });
    }
  }
  using Clock = std::chrono::steady_clock;
  const auto busy_deadline = Clock::now() + std::chrono::nanoseconds(options_.final_busy_wait);
  auto gave_up = [&] { return final_write.give_up && final_write.give_up(); };
  // Sleeps `pause`, asking give_up every 50 ms; false when it said to give up.
  auto pause_for = [&](std::chrono::milliseconds pause) {
    for (auto until = Clock::now() + pause; Clock::now() < until;) {
      if (gave_up()) return false;
      std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(50), until - Clock::now()));
    }
    return !gave_up();
  };
  int retries = 0;
  bool stopped_waiting = false;
  Status st = Flush(/*final=*/true);
  if (!st.ok() && final_write.on_wait) final_write.on_wait(st);
  while (!st.ok()) {
    if (st.code() == StatusCode::kUnavailable) {
      if (Clock::now() >= busy_deadline) break;
      if (!pause_for(std::chrono::milliseconds(100))) {
        stopped_waiting = true;
        break;
      }
    } else {
      if (st.code() == StatusCode::kNotFound || ++retries > options_.final_retries) break;
      if (!pause_for(std::chrono::seconds(1))) {
        stopped_waiting = true;
        break;
      }
    }
    st = Flush(/*final=*/true);
  }
  stopped_ = true;
  std::lock_guard lock(flush_mu_);
  if (!st.ok()) {
    final_status_ = Status(st.code(), fmt::format("{}{}; not stored: {} phases, {} samples, {} log lines and the run's end",
                                                  stopped_waiting ? "stopped waiting for the store: " : "",
                                                  st.message(), pending_.phases.size(), pending_.samples.size() + dropped_,
                                                  pending_.logs.size()));
  } else if (dropped_ > 0) {
    final_status_ = Status(first_error_.code(), fmt::format("{}; {} samples and log lines were dropped to bound memory",
                                                            first_error_.message(), dropped_));
  }
  return final_status_;
}

}  // namespace grademl::store
