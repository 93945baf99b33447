#include "collect/pss_budget.h"

#include <algorithm>
#include <cmath>

namespace grademl::collect {

void PssBudget::Refill(TimeNs now) {
  if (last_refill_ != 0 && now > last_refill_) {
    auto earned = static_cast<DurationNs>(static_cast<double>(now - last_refill_) * options_.core_fraction);
    bank_ns_ = std::min(bank_ns_ + earned, options_.max_bank_ns);
  }
  if (now > last_refill_) last_refill_ = now;
}

void PssBudget::Charge(DurationNs measured_ns) {
  DurationNs cost = options_.forced_cost_ns > 0 ? options_.forced_cost_ns : std::max<DurationNs>(measured_ns, 0);
  bank_ns_ -= cost;
  spent_ns_ += cost;
  ++reads_;
}

bool PssBudget::RefreshDue(DurationNs since_read_ns, double rss, double rss_at_read) const {
  if (since_read_ns >= options_.refresh_ns) return true;
  return std::fabs(rss - rss_at_read) >= options_.rss_change * std::max(rss_at_read, 1.0);
}

double PssBudget::Urgency(double rss, double rss_at_read, DurationNs since_read_ns) {
  // Bytes of RSS moved since the read, then age (1 MB per second stale) to break ties.
  return std::fabs(rss - rss_at_read) + 1e6 * NsToSeconds(since_read_ns);
}

double PssBudget::Estimate(double pss_at_read, double rss_at_read, double rss_now) {
  return std::clamp(pss_at_read + (rss_now - rss_at_read), 0.0, std::max(rss_now, 0.0));
}

}  // namespace grademl::collect
