#include "record/log_matcher.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/stop.h"
#include "core/text.h"

namespace grademl::record {

StatusOr<std::unique_ptr<LogMatcher>> LogMatcher::Start(const LogRuleSet* rules, Options options) {
  std::unique_ptr<LogMatcher> matcher(new LogMatcher(rules, options));
  if (const char* forced = std::getenv("GRADEML_TEST_RULE_COST"); forced != nullptr && *forced != '\0') {
    Status st = matcher->budget_.ForceCostsFrom(forced);
    if (!st.ok()) return InvalidArgument("GRADEML_TEST_RULE_COST: {}", st.message());
  }
  if (pipe2(matcher->notify_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status(StatusCode::kInternal, std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  LogMatcher* raw = matcher.get();
  raw->budget_.on_switched_off = [raw](const LogRule& rule, DurationNs cost) {
    std::lock_guard lock(raw->mu_);
    raw->switched_off_.push_back(rule.name);
    if (raw->switched_off_.size() > kSwitchOffLines) return;  // the rest in one line at the end
    raw->Say(fmt::format("log rule '{}' ({}) switched off for the rest of the run: it took {:.1f} ms of CPU on one "
                         "line (budget {:.1f} ms per rule and line)",
                         EscapeControl(rule.name), EscapeControl(rule.origin), static_cast<double>(cost) / 1e6,
                         static_cast<double>(raw->budget_.per_line()) / 1e6));
  };
  raw->thread_ = std::thread([raw] { raw->Loop(); });
  return matcher;
}

DurationNs LogMatcher::DrainLimit() { return StopCheck::Any()() ? kStoppedDrainLimit : kDefaultDrainLimit; }

LogMatcher::LogMatcher(const LogRuleSet* rules, Options options)
    : rules_(rules), options_(options), budget_(rules, options.per_line_budget) {}

LogMatcher::~LogMatcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  quitting_ = true;
  budget_.Abandon();  // the line being matched ends at the next rule
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (int fd : notify_) {
    if (fd >= 0) close(fd);
  }
}

LogMatcher::Source LogMatcher::AddSource(model::RunBuilder* builder, model::PhaseId parent, std::string host,
                                         int32_t pid) {
  auto tracker = std::make_unique<LogPhaseTracker>(rules_, builder, parent, std::move(host), pid, &budget_);
  std::lock_guard lock(mu_);
  trackers_.push_back(std::move(tracker));
  return trackers_.size() - 1;
}

bool LogMatcher::Line(Source source, TimeNs t, std::string_view line) {
  std::lock_guard lock(mu_);
  const size_t bytes = line.size() + kItemOverhead;
  if (dropping_ || queued_bytes_ + bytes > options_.max_queued_bytes) {
    if (dropped_++ == 0 && !dropping_) {
      Say("matching the log rules fell behind the output: lines are left out of matching (not out of the output) "
          "until it catches up");
    }
    return false;
  }
  const bool idle = queue_.empty() && !busy_;
  queue_.push_back({.tracker = trackers_[source].get(), .t = t, .finish = false, .line = std::string(line)});
  queued_bytes_ += bytes;
  if (idle) work_cv_.notify_one();  // else the thread looks at the queue before it waits
  return true;
}

size_t LogMatcher::Lines(Source source, TimeNs t, std::vector<std::string>& lines) {
  size_t dropped = 0;
  bool idle = false;  // the thread waits for work (else it looks at the queue before it does)
  {
    std::lock_guard lock(mu_);
    idle = queue_.empty() && !busy_;
    LogPhaseTracker* tracker = trackers_[source].get();
    for (std::string& line : lines) {
      const size_t bytes = line.size() + kItemOverhead;
      if (dropping_ || queued_bytes_ + bytes > options_.max_queued_bytes) {
        if (dropped_++ == 0 && !dropping_) {
          Say("matching the log rules fell behind the output: lines are left out of matching (not out of the "
              "output) until it catches up");
        }
        ++dropped;
        continue;
      }
      queue_.push_back({.tracker = tracker, .t = t, .finish = false, .line = std::move(line)});
      queued_bytes_ += bytes;
    }
  }
  lines.clear();
  if (idle) work_cv_.notify_one();
  return dropped;
}

void LogMatcher::Finish(Source source, TimeNs t) {
  std::lock_guard lock(mu_);
  queue_.push_back({.tracker = trackers_[source].get(), .t = t, .finish = true, .line = {}});
  work_cv_.notify_one();
}

void LogMatcher::Loop() {
  // Signals are for the reader's loop (or a handler): never this thread.
  sigset_t stops;
  sigemptyset(&stops);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&stops, s);
  pthread_sigmask(SIG_BLOCK, &stops, nullptr);
  std::unique_lock lock(mu_);
  std::deque<Item> batch;
  while (true) {
    work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    batch.swap(queue_);
    busy_ = true;
    lock.unlock();
    uint64_t dropped = 0;
    for (Item& item : batch) {
      if (quitting_.load(std::memory_order_relaxed)) break;
      if (item.finish) {
        item.tracker->Finish(item.t);
        continue;
      }
      if (dropping_.load(std::memory_order_relaxed)) {
        ++dropped;
      } else {
        item.tracker->OnLine(item.t, item.line);
      }
      queued_bytes_.fetch_sub(item.line.size() + kItemOverhead, std::memory_order_relaxed);
    }
    batch.clear();
    lock.lock();
    dropped_ += dropped;
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

bool LogMatcher::Drain(DurationNs limit, const std::function<bool()>& stop) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(limit);
  std::unique_lock lock(mu_);
  while (!queue_.empty() || busy_) {
    if (std::chrono::steady_clock::now() >= deadline || (stop && stop())) {
      // Give up: the lines left are dropped, the one being matched abandoned, but each
      // source's phases still end (its Finish is done).
      dropping_ = true;
      budget_.Abandon();
      work_cv_.notify_all();
      idle_cv_.wait(lock, [this] { return (queue_.empty() && !busy_) || stop_; });
      return false;
    }
    idle_cv_.wait_for(lock, std::chrono::milliseconds(5));
  }
  return true;
}

void LogMatcher::Say(std::string line) {
  messages_.push_back(std::move(line));
  char byte = 1;
  ssize_t w = write(notify_[1], &byte, 1);  // a full pipe already says there is something
  (void)w;
}

std::vector<std::string> LogMatcher::TakeMessages() {
  char buf[256];
  while (read(notify_[0], buf, sizeof buf) > 0) {
  }
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.swap(messages_);
  return out;
}

void LogMatcher::RecordOutcome(model::RunBuilder& builder, model::PhaseId run_phase,
                               const std::function<void(const std::string&)>& say) {
  for (const std::string& line : TakeMessages()) say(line);
  if (uint64_t dropped = dropped_lines(); dropped > 0) {
    say(fmt::format("{} output lines were not matched by the log rules (matching fell behind, or was cut short)",
                    dropped));
    builder.SetPhaseTag(run_phase, "grademl.log_lines_unmatched", std::to_string(dropped));
  }
  std::vector<std::string> off = switched_off();
  if (off.size() > kSwitchOffLines) {
    std::string more;
    for (size_t i = kSwitchOffLines; i < off.size(); ++i) more += (more.empty() ? "" : ", ") + EscapeControl(off[i]);
    say(fmt::format("{} more log rules were switched off for exceeding the budget: {}", off.size() - kSwitchOffLines,
                    more));
  }
  if (!off.empty()) {
    std::string names;
    for (const std::string& n : off) names += (names.empty() ? "" : ",") + n;
    builder.SetPhaseTag(run_phase, "grademl.log_rules_switched_off", names);
  }
}

uint64_t LogMatcher::dropped_lines() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

std::vector<std::string> LogMatcher::switched_off() const {
  std::lock_guard lock(mu_);
  return switched_off_;
}

}  // namespace grademl::record
