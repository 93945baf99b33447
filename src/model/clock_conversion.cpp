#include "model/clock_conversion.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

namespace grademl::model {

DurationNs OffsetAt(const std::vector<ClockEstimate>& estimates, TimeNs t) {
  if (estimates.empty()) return 0;
  auto after = std::lower_bound(estimates.begin(), estimates.end(), t,
                                [](const ClockEstimate& e, TimeNs v) { return e.t < v; });
  if (after == estimates.begin()) return after->offset_ns;
  if (after == estimates.end()) return estimates.back().offset_ns;
  const ClockEstimate& a = *(after - 1);
  const ClockEstimate& b = *after;
  if (b.t == a.t) return b.offset_ns;
  // In long double: the products of ns spans and ns offsets overflow int64.
  long double f = static_cast<long double>(t - a.t) / static_cast<long double>(b.t - a.t);
  return a.offset_ns + static_cast<DurationNs>(f * static_cast<long double>(b.offset_ns - a.offset_ns));
}

void ConvertHostClocks(Run& run) {
  if (run.clock_estimates.empty()) return;
  std::stable_sort(run.clock_estimates.begin(), run.clock_estimates.end(),
                   [](const ClockEstimate& a, const ClockEstimate& b) {
                     return a.host != b.host ? a.host < b.host : a.t < b.t;
                   });
  std::map<std::string, std::vector<ClockEstimate>, std::less<>> by_host;
  for (const ClockEstimate& e : run.clock_estimates) by_host[e.host].push_back(e);
  // The recording host is the run's clock: its own timestamps stay as they are, and another
  // host's go to the store's clock with its estimates, then back to the recording host's with
  // that host's (when it measured its clock too).
  const std::vector<ClockEstimate>* reference = nullptr;
  if (auto it = by_host.find(run.info.host); it != by_host.end()) reference = &it->second;
  auto shift = [&](std::string_view host, TimeNs& t) {
    if (t == 0 || host == run.info.host) return;  // "none", or the run's own clock
    auto it = by_host.find(host);
    if (it == by_host.end()) return;
    TimeNs store_t = SaturatingAdd(t, OffsetAt(it->second, t));
    t = reference != nullptr ? SaturatingAdd(store_t, -OffsetAt(*reference, store_t)) : store_t;
  };
  std::unordered_map<PhaseId, const std::string*> phase_host;
  for (Phase& p : run.phases) {
    // The end's offset is taken at the end's own host time, before the start moves.
    shift(p.host, p.end_ns);
    shift(p.host, p.start_ns);
    phase_host[p.id] = &p.host;
  }
  for (LogLine& l : run.logs) {
    auto it = phase_host.find(l.phase);
    if (it != phase_host.end()) shift(*it->second, l.t);
  }
  std::unordered_map<ResourceId, const std::string*> resource_host;
  for (Resource& r : run.resources) {
    shift(r.host, r.start_ns);
    resource_host[r.id] = &r.host;
  }
  for (Series& s : run.series) {
    auto it = resource_host.find(s.info.resource);
    if (it == resource_host.end()) continue;
    for (Sample& x : s.samples) shift(*it->second, x.t);
  }
  for (Track& t : run.tracks) shift(t.host, t.process_start_ns);
  for (Host& h : run.hosts) {
    auto it = by_host.find(h.name);
    if (it == by_host.end() || h.name == run.info.host) continue;
    h.clock_offset_ns = 0;
    DurationNs worst = 0;
    for (const ClockEstimate& e : it->second) worst = std::max(worst, e.uncertainty_ns);
    h.clock_uncertainty_ns = worst;
  }
}

}  // namespace grademl::model
