#include "store/background_writer.h"

#include <algorithm>
#include <chrono>
#include <iterator>

namespace grademl::store {
namespace {

template <typename T>
void Append(std::vector<T>& into, std::vector<T>&& from) {
  if (into.empty()) {
    into = std::move(from);
  } else {
    into.insert(into.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  }
}

// Folds `later` into `into` so that writing `into` equals writing both in order: phases are
// upserts and the newest info wins, so appending keeps the later state.
void Merge(model::RunDelta& into, model::RunDelta&& later) {
  if (later.info) into.info = std::move(later.info);
  Append(into.phases, std::move(later.phases));
  Append(into.edges, std::move(later.edges));
  Append(into.resources, std::move(later.resources));
  Append(into.series, std::move(later.series));
  Append(into.samples, std::move(later.samples));
  Append(into.logs, std::move(later.logs));
}

}  // namespace

BackgroundWriter::BackgroundWriter(Database* db, model::RunBuilder* builder, model::RunId run,
                                   DurationNs flush_interval)
    : db_(db), builder_(builder), run_(run), interval_(flush_interval) {
  GRADEML_CHECK(db != nullptr && builder != nullptr);
  GRADEML_CHECK(flush_interval > 0);
  thread_ = std::thread([this] { Loop(); });
}

BackgroundWriter::~BackgroundWriter() { (void)Stop(); }

void BackgroundWriter::Loop() {
  using Clock = std::chrono::steady_clock;
  const auto interval = std::chrono::nanoseconds(interval_);
  auto next = Clock::now() + interval;
  std::unique_lock lock(mu_);
  while (!cv_.wait_until(lock, next, [this] { return stop_; })) {
    lock.unlock();
    (void)Flush();  // a failure is kept in first_error_ and the delta retried next time
    lock.lock();
    // A fixed cadence; after a write slower than the interval, the next flush follows at once.
    next = std::max(next + interval, Clock::now());
  }
}

Status BackgroundWriter::Flush(bool final) {
  std::lock_guard lock(flush_mu_);
  Merge(pending_, builder_->TakeDelta(final));
  if (pending_.empty()) return Status::Ok();
  Status st = db_->WriteDelta(run_, pending_);
  if (st.ok()) {
    pending_ = model::RunDelta();
  } else if (first_error_.ok()) {
    first_error_ = st;
  }
  return st;
}

Status BackgroundWriter::FlushNow() { return Flush(); }

Status BackgroundWriter::Stop() {
  std::lock_guard stop_lock(stop_mu_);
  if (!stopped_) {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    (void)Flush(/*final=*/true);
    stopped_ = true;
  }
  std::lock_guard lock(flush_mu_);
  return first_error_;
}

}  // namespace grademl::store
