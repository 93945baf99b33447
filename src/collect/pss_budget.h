// PssBudget: how the process tree monitor reads proportional set sizes (PSS) within a fixed
// share of one core. Reading /proc/PID/smaps_rollup walks the process's page tables, so it
// costs from microseconds (a shell) to a millisecond or more (gigabytes resident), far more
// than the stat read every pass makes; it cannot be done for every process at every pass.
//
// The policy (docs/metrics.md, "memory.pss"):
// - Only processes whose pages can be shared with another followed process read PSS: those
//   with a followed parent or a followed child alive (forked workers share their parent's
//   pages copy-on-write). A process with no followed relative reports its RSS as its PSS.
// - A sharing process's first read happens in the pass that first sees it: charged to the
//   budget, which may go into debt for it (up to `max_debt`), so that a fresh fork does
//   not show its parent's pages twice. Beyond that debt a fork not read yet counts as its
//   RSS beyond its parent's (the parent's pages taken as shared, counted with the parent).
// - A process whose followed relatives came or went since its last read (its share of the
//   pages changed: a second worker forked after the first was read) is read again in that
//   pass, also into debt, but only up to half of `max_debt`.
// - Refreshes, as long as the budget has credit: processes whose RSS moved by 5% or more
//   since their last read, largest change first, then those whose last read is 1 s old.
// - The budget is a bucket of CPU time filled at `core_fraction` of wall time (0.1% of a
//   core: the rest of the monitor takes 0.3-0.45% at 10 Hz with 200 processes, and the whole
//   must stay under 0.5%) and drained by the measured CPU time of every read (thread CPU
//   clock); it may go into debt by the first reads, and holds at most `max_bank` of credit.
// - Between reads a process's PSS is estimated as its last PSS plus the change of its RSS
//   since that read (new pages are its own), kept within [0, RSS].
#pragma once

#include <cstdint>

#include "core/time.h"

namespace grademl::collect {

class PssBudget {
 public:
  struct Options {
    double core_fraction = 0.001;            // of one core, for all PSS reads together
    DurationNs refresh_ns = kNsPerSec;       // a sharing process's PSS is at most this old...
    double rss_change = 0.05;                // ...or read again when its RSS moved this much
    DurationNs max_bank_ns = 20'000'000;     // credit saved up at most (20 ms)
    DurationNs max_debt_ns = 200'000'000;    // beyond this debt even first reads wait
    DurationNs forced_cost_ns = 0;           // test hook: every read costs this much (0: measured)
  };

  PssBudget() = default;
  explicit PssBudget(Options options) : options_(options) {}

  // Adds the credit earned since the previous call.
  void Refill(TimeNs now);
  // Whether a refresh (a read that could wait) may run now.
  bool CanRefresh() const { return bank_ns_ > 0; }
  // Whether a first read may run now.
  bool CanReadFirst() const { return bank_ns_ > -options_.max_debt_ns; }
  // Whether a read after a process's relatives came or went may run now: it may take the
  // budget into debt too, but only half as far (the rest is kept for first reads).
  bool CanReadAfterFamilyChange() const { return bank_ns_ > -options_.max_debt_ns / 2; }
  // Charges one read that took `measured_ns` of CPU time (replaced by the test hook's cost).
  void Charge(DurationNs measured_ns);

  // Whether a process read `since_read_ns` ago, with RSS `rss` now and `rss_at_read` then,
  // is due a refresh.
  bool RefreshDue(DurationNs since_read_ns, double rss, double rss_at_read) const;
  // How urgent a due refresh is (larger first).
  static double Urgency(double rss, double rss_at_read, DurationNs since_read_ns);
  // The PSS estimate between reads.
  static double Estimate(double pss_at_read, double rss_at_read, double rss_now);

  uint64_t reads() const { return reads_; }
  DurationNs spent_ns() const { return spent_ns_; }

 private:
  Options options_;
  TimeNs last_refill_ = 0;
  DurationNs bank_ns_ = 0;
  uint64_t reads_ = 0;
  DurationNs spent_ns_ = 0;
};

}  // namespace grademl::collect
