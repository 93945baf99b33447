// Log rules: regular expressions that turn a step's output lines into phases (epochs,
// training steps, progress bars, errors) under the step's phase.
//
// A LogRuleSet is an ordered list of LogRules: the built-in ones (Keras and generic epochs,
// generic steps, tqdm bars, Python tracebacks) and those of a user rules file (YAML). A
// LogPhaseTracker follows one step's output and opens and closes phases through the
// RunBuilder as the rules match. docs/log-rules.md describes the rules and the file format.
//
// Expressions are matched with RE2, whose time is linear in the line's length whatever the
// expression: a user rule such as `(a+)+$` cannot freeze a run. RE2 has no backreferences
// and no lookaround; a rule that uses them is refused when the rules are loaded.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <re2/re2.h>

#include "core/status.h"
#include "core/time.h"
#include "model/run.h"
#include "model/run_builder.h"

namespace grademl::record {

// A literal that every match of a regular expression contains, found by reading the
// expression's source conservatively (an empty text when none is certain). Lets a tracker
// skip the regex engine for the many lines that cannot match.
struct RequiredLiteral {
  std::string text;        // lower-cased when the expression ignores case
  bool at_start = false;   // the match begins at the start of the line with `text`
};
RequiredLiteral FindRequiredLiteral(std::string_view regex_source, bool ignore_case);

// The groups of a match: [0] the whole match, [i] capture group i (data() null when the
// group did not take part).
using RegexGroups = std::vector<re2::StringPiece>;

// One rule, with its compiled expressions and what a match means.
//
// A line matching `begin` opens a phase of `type` under the step's phase, named by
// `name_template` and tagged with the captures named in `tags`; the rule's previous phase,
// still open, ends there (sequential repetition: epochs). A line matching `end` closes the
// open phase. Variants: `instant` records a zero-length phase; `marks_end` records a phase
// that ends at the line and began at the rule's previous match (or when the step began);
// `progress` follows progress bars, one open phase per bar, closed when current == total.
struct LogRule {
  std::string name;            // unique in a set; a user rule replaces a built-in of its name
  std::string type;            // the phase type (the leaf of its type path)
  std::string name_template;   // "epoch {1}", "fold {fold}"; empty rendered name: `type`
  std::shared_ptr<const re2::RE2> begin;   // shared: rule sets are copied (Append)
  std::shared_ptr<const re2::RE2> end;     // null when the rule has none
  bool instant = false;
  bool marks_end = false;
  bool ignore_case = false;
  bool disabled = false;       // matches nothing; only hides a built-in of the same name
  // Capture group names, 1-based: tags[0] names group 1. An empty name records no tag.
  std::vector<std::string> tags;
  // When non-zero, the capture group that identifies a phase: a begin line whose key equals
  // that of the rule's open (or, with marks_end, last) phase is part of it, not a new one.
  int key_group = 0;
  // Progress rules: the capture groups holding the current count and the total.
  std::optional<std::pair<int, int>> progress;

  // For documentation and error messages.
  std::string begin_source;
  std::string end_source;
  std::string origin;          // "built-in" or "FILE:LINE"

  // Pre-filters for begin and end (see FindRequiredLiteral).
  RequiredLiteral begin_literal;
  RequiredLiteral end_literal;
};

// An ordered list of rules. For each line the first rule that matches it takes it.
class LogRuleSet {
 public:
  // The built-in rules, in their order: keras-epoch, epoch, step, tqdm, traceback.
  static LogRuleSet BuiltIn();
  // A user rules file (a regular file of at most 2 MiB, YAML checked as in
  // yaml_bounds.h). Errors read "FILE:LINE: reason" (bad regex, a feature RE2 lacks,
  // unknown key, missing begin, YAML syntax, ...), or "FILE: reason" when the file cannot
  // be read.
  static StatusOr<LogRuleSet> LoadFile(const std::string& path);
  // As LoadFile, from text; `origin` stands for the file name in positions and errors.
  static StatusOr<LogRuleSet> Parse(std::string_view yaml_text, const std::string& origin);

  // Appends the rules of `other` after these (so these are tried first), except those whose
  // name is already here: `user.Append(LogRuleSet::BuiltIn())` lets user rules override
  // and replace built-ins.
  void Append(const LogRuleSet& other);

  const std::vector<LogRule>& rules() const { return rules_; }
  const LogRule* Find(std::string_view name) const;
  bool empty() const { return rules_.empty(); }

 private:
  std::vector<LogRule> rules_;
};

// The per-line cost budget of a run's log rules (docs/log-rules.md, "Cost"): a rule whose
// expressions take more than `per_line` of CPU time on one line (a line's \r-separated
// segment) is switched off for the rest of the run, and `on_switched_off` says so once.
// RE2's time is linear in the line, but the constant can be large: an expression whose
// automaton does not fit RE2's memory budget falls back to a slower engine, and 256 of them
// took about a second a line. The trackers of one run share one budget; one thread at a time.
class RuleCostBudget {
 public:
  static constexpr DurationNs kDefaultPerLine = 2 * kNsPerMs;

  RuleCostBudget(const LogRuleSet* rules, DurationNs per_line = kDefaultPerLine);

  // Tests: `rule`'s cost on each line it runs on is taken to be `cost` instead of what was
  // measured (its expressions still run); "*" stands for every rule. From
  // $GRADEML_TEST_RULE_COST, "NAME=DURATION[,NAME=DURATION...]" (e.g. "slow=50ms,*=0ns"): an
  // error for a malformed value.
  void ForceCost(const std::string& rule, DurationNs cost);
  Status ForceCostsFrom(std::string_view spec);

  DurationNs per_line() const { return per_line_; }
  bool off(size_t rule) const { return off_[rule] || abandoned_.load(std::memory_order_relaxed); }
  // Every rule matches nothing from now on, the line being matched included (between two
  // rules): for a caller that stops waiting for the matching. Any thread.
  void Abandon() { abandoned_.store(true); }
  // Whether the costs are measured at all (an empty rule set's are not).
  bool measuring() const { return !off_.empty(); }
  // Costs are measured with the cheap monotonic clock first; a rule over the budget by that
  // clock becomes a suspect, whose next lines are measured in CPU time of the thread (a
  // syscall): only a CPU time over the budget switches it off, so that a matching thread
  // preempted on a busy machine never switches a rule off.
  bool suspect(size_t rule) const { return suspect_[rule]; }
  // One rule's cost on one line, in CPU time (`cpu`) or wall time: switches it off when a CPU
  // time (or a forced cost) is over the budget, makes it a suspect when a wall time is.
  void Charge(size_t rule, DurationNs measured, bool cpu);
  // Rules switched off so far.
  size_t switched_off() const { return switched_off_; }

  std::function<void(const LogRule& rule, DurationNs cost)> on_switched_off;

 private:
  const LogRuleSet* rules_;
  DurationNs per_line_;
  std::vector<bool> off_;
  std::vector<bool> suspect_;
  std::vector<std::optional<DurationNs>> forced_;
  std::optional<DurationNs> forced_all_;
  size_t switched_off_ = 0;
  std::atomic<bool> abandoned_{false};
};

// Follows one step's output, line by line, and opens and closes phases under the step's
// phase through the RunBuilder. One thread at a time; `rules` and `builder` must outlive it.
// With a RuleCostBudget, each rule's cost on each line is measured and charged to it; the
// rules it switched off are skipped.
class LogPhaseTracker {
 public:
  // Segments longer than this are matched on their first kMaxMatchedBytes only, which
  // bounds the matching cost of a line (RE2's time is linear in what it reads).
  static constexpr size_t kMaxMatchedBytes = 2048;

  LogPhaseTracker(const LogRuleSet* rules, model::RunBuilder* builder, model::PhaseId parent,
                  std::string host, int32_t pid, RuleCostBudget* budget = nullptr);

  // One line without its newline, seen at t. Carriage returns separate progress-bar
  // updates: each \r-separated segment counts as a line. ANSI escape sequences are ignored.
  // Lines after Finish() are ignored.
  void OnLine(TimeNs t, std::string_view line);
  // Ends every phase still open at t (the step ended).
  void Finish(TimeNs t);

  size_t phases_opened() const { return phases_opened_; }
  // Lines (segments) that some rule took, and regex engine runs (a segment can be run
  // through several rules).
  size_t lines_matched() const { return lines_matched_; }
  size_t regex_runs() const { return regex_runs_; }

 private:
  struct OpenPhase {
    model::PhaseId id = 0;
    std::string key;
    int64_t current = 0;   // progress rules: the last count seen
  };
  struct RuleState {
    std::vector<OpenPhase> open;   // at most one, but one per bar for progress rules
    bool has_last = false;         // marks_end rules: the previous match
    TimeNs last_t = 0;
    std::string last_key;
  };

  void OnSegment(TimeNs t, std::string_view segment);
  // Whether a line (lower-cased for an ignore-case literal) may match.
  static bool Passes(const RequiredLiteral& literal, std::string_view hay);
  void OnBegin(TimeNs t, size_t index, const RegexGroups& m);
  model::PhaseId Open(TimeNs start, const LogRule& rule, const RegexGroups& m);
  TimeNs ParentStart() const;

  const LogRuleSet* rules_;
  model::RunBuilder* builder_;
  model::PhaseId parent_;
  std::string host_;
  int32_t pid_;
  RuleCostBudget* budget_;
  bool finished_ = false;
  std::vector<RuleState> state_;
  std::string clean_;     // a segment without ANSI escapes
  std::string lowered_;   // a segment lower-cased, for ignore-case pre-filters
  RegexGroups groups_;         // the groups of the last match
  size_t phases_opened_ = 0;
  size_t lines_matched_ = 0;
  size_t regex_runs_ = 0;
};

}  // namespace grademl::record
