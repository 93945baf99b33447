#include "analysis/fine_sampling.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "analysis/phase_tags.h"

namespace grademl::analysis {
namespace {

bool FineIsTaggedEpoch(const model::Phase& p) {
  return p.leaf_is("epoch") &&
         (HasTag(p, "fine.every") || HasTag(p, "fine.iterations") || HasTag(p, "overhead.ns"));
}

// A tag as a finite decimal number; false when absent or malformed.
bool FineDoubleTag(const model::Phase& p, std::string_view key, double* out) {
  std::string_view v = TagOf(p, key);
  if (v.empty()) return false;
  double d = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec != std::errc() || ptr != v.data() + v.size() || !std::isfinite(d)) return false;
  *out = d;
  return true;
}

}  // namespace

FineSampling AnalyzeFineSampling(const model::Run& run) {
  FineSampling out;
  const TimeNs run_end = run.EffectiveEnd();
  for (const char* t : kFinePhaseTypes) out.types.push_back({.type = t});
  int64_t overhead_ns = 0;
  DurationNs epochs_ns = 0;
  for (const model::Phase& p : run.phases) {
    const std::string_view leaf = p.leaf_type();
    const TimeNs end = p.ended() ? p.end_ns : std::max(p.start_ns, run_end);
    for (FineTypeCounts& c : out.types) {
      if (leaf != c.type) continue;
      ++c.recorded;
      c.recorded_s += NsToSeconds(std::max<DurationNs>(0, end - p.start_ns));
    }
    if (!FineIsTaggedEpoch(p)) continue;
    ++out.epochs;
    epochs_ns += std::max<DurationNs>(0, end - p.start_ns);
    const int64_t every = std::max<int64_t>(1, IntTag(p, "fine.every", 1));
    out.every_min = out.epochs == 1 ? every : std::min(out.every_min, every);
    out.every_max = std::max(out.every_max, every);
    out.iterations += std::max<int64_t>(0, IntTag(p, "fine.iterations"));
    out.recorded_iterations += std::max<int64_t>(0, IntTag(p, "fine.recorded_iterations"));
    for (FineTypeCounts& c : out.types) {
      c.unrecorded += std::max<int64_t>(0, IntTag(p, "unrecorded." + c.type + ".count"));
      c.unrecorded_s += NsToSeconds(std::max<int64_t>(0, IntTag(p, "unrecorded." + c.type + ".ns")));
    }
    if (HasTag(p, "overhead.ns")) {
      out.overhead_measured = true;
      overhead_ns += std::max<int64_t>(0, IntTag(p, "overhead.ns"));
    }
    double budget = 0;
    if (FineDoubleTag(p, "overhead.budget", &budget) && budget >= 0) {
      out.budget = out.budget_known ? std::max(out.budget, budget) : budget;
      out.budget_known = true;
    }
  }
  if (out.epochs == 0) return FineSampling{};
  for (FineTypeCounts& c : out.types) {
    c.total = c.recorded + c.unrecorded;
    c.total_s = c.recorded_s + c.unrecorded_s;
  }
  out.overhead_s = NsToSeconds(overhead_ns);
  out.epochs_s = NsToSeconds(epochs_ns);
  out.overhead_fraction = out.epochs_s > 0 ? out.overhead_s / out.epochs_s : 0;
  return out;
}

}  // namespace grademl::analysis
