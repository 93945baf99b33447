// LogMatcher: matches a run's output lines against its log rules on a thread of its own,
// beside the loop that reads the output and passes it on (a workflow's step pipes, a single
// command's relay taps), so that matching never holds up the output, the workload's pipe or
// grademl's handling of signals, however costly the rules.
//
// Lines wait in a queue of bounded size; when matching falls behind and the queue is full, a
// line is dropped from matching (never from the output, which the reader has passed on
// already) and counted. Each rule has a per-line cost budget (RuleCostBudget): a rule that
// exceeds it is switched off for the rest of the run, and the matcher says which in one line
// (TakeMessages). Each source (a step, the command) has its own LogPhaseTracker; phases go
// to the source's RunBuilder from the matcher's thread (RunBuilder is thread-safe).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "model/run_builder.h"
#include "record/log_rules.h"

namespace grademl::record {

class LogMatcher {
 public:
  // Bytes of lines (plus a small overhead per line) the queue holds at most.
  static constexpr size_t kDefaultMaxQueuedBytes = size_t{8} << 20;
  // How long Drain waits at most for what is queued when the run ends; after a stop request
  // (the workload was stopped by a signal to grademl), grademl's exit is not held up longer
  // than kStoppedDrainLimit.
  static constexpr DurationNs kDefaultDrainLimit = 10 * kNsPerSec;
  static constexpr DurationNs kStoppedDrainLimit = 500 * kNsPerMs;
  // kStoppedDrainLimit once grademl was asked to stop, else kDefaultDrainLimit.
  static DurationNs DrainLimit();

  struct Options {
    size_t max_queued_bytes = kDefaultMaxQueuedBytes;
    DurationNs per_line_budget = RuleCostBudget::kDefaultPerLine;
  };

  // Starts the matching thread. $GRADEML_TEST_RULE_COST (RuleCostBudget::ForceCostsFrom) is
  // read here: a malformed value is an error. `rules` must outlive the matcher.
  static StatusOr<std::unique_ptr<LogMatcher>> Start(const LogRuleSet* rules, Options options);
  static StatusOr<std::unique_ptr<LogMatcher>> Start(const LogRuleSet* rules) { return Start(rules, Options{}); }
  // Stops the thread; what is still queued is dropped.
  ~LogMatcher();
  LogMatcher(const LogMatcher&) = delete;
  LogMatcher& operator=(const LogMatcher&) = delete;

  // A stream of lines with its own tracker: phases under `parent` in `builder`, with `host`
  // and `pid`. `builder` must outlive the matcher (or the source's Finish and a Drain).
  using Source = size_t;
  Source AddSource(model::RunBuilder* builder, model::PhaseId parent, std::string host, int32_t pid);
  // A line (without its newline) seen at `t`, for matching. Never blocks: false when it was
  // dropped because the queue is full.
  bool Line(Source source, TimeNs t, std::string_view line);
  // Lines seen at `t`, queued under one lock (what one read brought); returns how many were
  // dropped. `lines` is left empty.
  size_t Lines(Source source, TimeNs t, std::vector<std::string>& lines);
  // The source ended at `t`: its phases still open end there, after its queued lines.
  // Never dropped.
  void Finish(Source source, TimeNs t);

  // Waits until everything queued so far is matched, for at most `limit` and while `stop`
  // (when given) returns false, checked every few milliseconds. When it gives up, the lines
  // still queued are dropped (counted) and the one being matched is abandoned, but every
  // Finish is still done. Returns true when everything was matched.
  bool Drain(DurationNs limit, const std::function<bool()>& stop = nullptr);

  // At the run's end, after Drain: the messages not taken yet and what matching left out go
  // to `say` (one line each), and are kept with the run as tags of `run_phase`:
  // grademl.log_lines_unmatched (lines dropped from matching), grademl.log_rules_switched_off
  // (the rules switched off, comma-separated).
  void RecordOutcome(model::RunBuilder& builder, model::PhaseId run_phase,
                     const std::function<void(const std::string&)>& say);

  // Readable (a pipe) when TakeMessages has something: for the reader's poll.
  int notify_fd() const { return notify_[0]; }
  // Lines for stderr, each escaped and without "grademl: " (a rule switched off, ...).
  std::vector<std::string> TakeMessages();
  // Lines dropped from matching so far.
  uint64_t dropped_lines() const;
  // The names of the rules switched off so far, in that order.
  std::vector<std::string> switched_off() const;

 private:
  struct Item {
    LogPhaseTracker* tracker = nullptr;  // the source's, resolved when queued
    TimeNs t = 0;
    bool finish = false;
    std::string line;
  };
  static constexpr size_t kItemOverhead = 64;
  // Rules switched off said one line each; the others in one line at the end.
  static constexpr size_t kSwitchOffLines = 5;

  LogMatcher(const LogRuleSet* rules, Options options);
  void Loop();
  void Say(std::string line);  // with mu_ held

  const LogRuleSet* rules_;
  const Options options_;
  RuleCostBudget budget_;  // the matching thread's, but for Abandon()
  int notify_[2] = {-1, -1};

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // the thread waits for items
  std::condition_variable idle_cv_;   // Drain waits for the queue to empty
  // The thread takes everything queued at once (one lock for a batch, not one per line);
  // what it took counts in queued_bytes_ until each line is matched.
  std::deque<Item> queue_;
  std::atomic<size_t> queued_bytes_{0};  // changed under mu_, or decreased by the thread
  bool busy_ = false;                 // the thread holds a batch
  std::atomic<bool> dropping_{false}; // Drain gave up: lines are dropped, finishes done
  bool stop_ = false;
  std::atomic<bool> quitting_{false}; // the destructor: the batch under way is dropped
  uint64_t dropped_ = 0;
  std::vector<std::unique_ptr<LogPhaseTracker>> trackers_;
  std::vector<std::string> messages_;
  std::vector<std::string> switched_off_;
  std::thread thread_;
};

}  // namespace grademl::record
