#include "analysis/derived/counter_rate.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace grademl::analysis::derived {

namespace {

constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

// The known points of a counter, read in place: index 0 is the origin when there is one.
class Points {
 public:
  explicit Points(const Counter& c) : c_(c), offset_(c.origin && !c.samples.empty() ? 1 : 0) {}
  size_t size() const { return c_.samples.size() + offset_; }
  TimeNs t(size_t i) const { return i < offset_ ? *c_.origin : c_.samples[i - offset_].t; }
  double v(size_t i) const { return i < offset_ ? 0.0 : c_.samples[i - offset_].v; }

 private:
  const Counter& c_;
  size_t offset_;
};

// For each interval [times[k], times[k+1]]: the counter's increase over its known part
// (segments between known points, decreases counted 0) and that part's length in ns.
void Sweep(const Counter& c, std::span<const TimeNs> times, std::vector<double>& increase,
           std::vector<double>& known_ns) {
  size_t n = times.size() < 2 ? 0 : times.size() - 1;
  increase.assign(n, 0.0);
  known_ns.assign(n, 0.0);
  Points p(c);
  if (n == 0 || p.size() < 2) return;
  // The segment [p.t(j), p.t(j+1)] being walked, started by bisection at the last point before
  // times[0] (what walking from point 0 reaches): a short window of a long counter reads the
  // points inside it, not the whole series before it.
  size_t lo = 0, hi = p.size();
  while (lo < hi) {
    size_t m = lo + (hi - lo) / 2;
    if (p.t(m) < times[0]) lo = m + 1;
    else hi = m;
  }
  size_t j = lo > 0 ? lo - 1 : 0;
  for (size_t k = 0; k < n; ++k) {
    TimeNs a = times[k], b = times[k + 1];
    if (b <= a) continue;
    while (j + 1 < p.size() && p.t(j + 1) < a) ++j;
    for (size_t s = j; s + 1 < p.size() && p.t(s) < b; ++s) {
      TimeNs t0 = p.t(s), t1 = p.t(s + 1);
      if (t1 <= t0) {
        // Two points at one instant (a process sampled at its very start): a step there, an
        // increase with no length to spread over.
        if (t0 >= a && p.v(s + 1) > p.v(s)) increase[k] += p.v(s + 1) - p.v(s);
        continue;
      }
      TimeNs lo = std::max(a, t0), hi = std::min(b, t1);
      if (hi <= lo) continue;
      double len = static_cast<double>(hi - lo);
      double delta = p.v(s + 1) - p.v(s);
      if (delta > 0) increase[k] += delta * len / static_cast<double>(t1 - t0);
      known_ns[k] += len;
    }
  }
}

// SumAsCounter's common case in one pass: the counters with samples (a process's CPU user,
// system and unseen children) share their sample times, strictly increasing, and their origin.
// The same sums in the same order as the general path (AddCumulativeIncreases over the union
// of times, then the steps at the origin sorted), without merging or bisecting. False (and
// `out` untouched) when the case does not hold.
bool SumSampledTogether(std::span<const Counter> counters, std::vector<model::Sample>& out) {
  const Counter* first = nullptr;
  for (const Counter& c : counters) {
    if (c.empty()) continue;
    if (first == nullptr) {
      first = &c;
      for (size_t i = 1; i < c.samples.size(); ++i) {
        if (c.samples[i].t <= c.samples[i - 1].t) return false;
      }
      continue;
    }
    if (c.origin != first->origin || c.samples.size() != first->samples.size()) return false;
    for (size_t i = 0; i < c.samples.size(); ++i) {
      if (c.samples[i].t != first->samples[i].t) return false;
    }
  }
  if (first == nullptr) return false;
  const SampleSpan times = first->samples;
  const size_t n = times.size();
  // Before the first sample: the origin, a point of its own or (at the first sample's time) a
  // step there, its amount the counters' first values added in ascending order.
  const bool origin_point = first->origin && *first->origin < times[0].t;
  const bool origin_step = first->origin && *first->origin == times[0].t;
  out.clear();
  out.reserve(n + 1);
  if (origin_point) out.push_back({*first->origin, 0.0});
  out.push_back({times[0].t, 0.0});
  if (origin_step) {
    std::vector<double> steps;
    for (const Counter& c : counters) {
      if (!c.empty() && c.samples.front().v > 0) steps.push_back(c.samples.front().v);
    }
    std::sort(steps.begin(), steps.end());
    double step = 0;
    for (double v : steps) step += v;
    if (step > 0) out.push_back({times[0].t, 0.0 + step});
  }
  // Each counter's increase since its first known point (the origin's 0, when it has one).
  std::vector<const Counter*> present;
  std::vector<double> acc;
  for (const Counter& c : counters) {
    if (c.empty()) continue;
    present.push_back(&c);
    acc.push_back(first->origin ? std::max(0.0, c.samples.front().v - 0.0) : 0.0);
  }
  if (origin_point) {
    double sum = 0;
    for (double a : acc) sum += a;
    out.back().v = sum;
  }
  for (size_t i = 1; i < n; ++i) {
    double sum = 0;
    for (size_t k = 0; k < present.size(); ++k) {
      acc[k] += std::max(0.0, present[k]->samples[i].v - present[k]->samples[i - 1].v);
      sum += acc[k];
    }
    out.push_back({times[i].t, sum});
  }
  return true;
}

}  // namespace

TimeNs Counter::FirstKnown() const {
  if (samples.empty()) return 0;
  return origin ? std::min(*origin, samples.front().t) : samples.front().t;
}

TimeNs Counter::LastKnown() const { return samples.empty() ? 0 : samples.back().t; }

Counter CounterOf(const model::Run& run, const model::Resource& r, std::string_view name) {
  Counter c{SamplesOf(run.FindSeries(r.id, name)), std::nullopt};
  if (r.kind != model::ResourceKind::kProcess || c.samples.empty()) return c;
  // The process's start: its phase's (as the bottleneck and attribution analyses read it),
  // else the resource's own.
  // A phase's start is always known (0 included: a trace on a clock that starts at 0); a
  // resource's start_ns of 0 means "not recorded".
  const model::Phase* phase = r.phase != 0 ? run.FindPhase(r.phase) : nullptr;
  TimeNs start = phase != nullptr ? phase->start_ns : r.start_ns;
  if ((phase != nullptr || start > 0) && start <= c.samples.front().t) c.origin = start;
  return c;
}

std::vector<model::Sample> KnownPoints(const Counter& c) {
  Points p(c);
  std::vector<model::Sample> out(p.size());
  for (size_t i = 0; i < p.size(); ++i) out[i] = {p.t(i), p.v(i)};
  return out;
}

double IncreaseOver(const Counter& c, TimeNs a, TimeNs b) {
  TimeNs bounds[2] = {a, b};
  std::vector<double> increase, known;
  Sweep(c, bounds, increase, known);
  return increase.empty() ? 0.0 : increase[0];
}

IncreaseIndex::IncreaseIndex(const Counter& c) {
  Points p(c);
  const size_t np = p.size();
  t_.resize(np);
  v_.resize(np);
  cum_.resize(np);
  double sum = 0;
  for (size_t i = 0; i < np; ++i) {
    t_[i] = p.t(i);
    v_[i] = p.v(i);
    if (i > 0) sum += std::max(0.0, v_[i] - v_[i - 1]);
    cum_[i] = sum;
  }
}

double IncreaseIndex::Segment(size_t i, TimeNs lo, TimeNs hi) const {
  // The part [lo, hi] of the segment from point i-1 to point i (their times differ), spread
  // evenly over it as the walk does: one rounding, as in the walk.
  const double delta = std::max(0.0, v_[i] - v_[i - 1]);
  return delta * static_cast<double>(hi - lo) / static_cast<double>(t_[i] - t_[i - 1]);
}

double IncreaseIndex::Over(TimeNs a, TimeNs b) const {
  const size_t np = t_.size();
  if (b <= a || np < 2) return 0;
  // The first points at or after a and b (at a step, the first point of it).
  const size_t ia = static_cast<size_t>(std::lower_bound(t_.begin(), t_.end(), a) - t_.begin());
  const size_t ib = static_cast<size_t>(std::lower_bound(ia + t_.begin(), t_.end(), b) - t_.begin());
  if (ia == np || ib == 0) return 0;  // the window ends before the first point or starts after the last
  double sum = 0;
  if (ia > 0 && t_[ia] > a) {
    // a inside the segment ending at point ia: its part from a, or [a, b] when b is in it too.
    if (ia == ib) return Segment(ia, a, b);
    sum += Segment(ia, a, t_[ia]);
  }
  // The whole segments from point ia to the first point at b, or to the last point before b
  // (a step at a counted, one at b not), then the part of the segment b falls inside.
  const bool b_at_point = ib < np && t_[ib] == b;
  sum += cum_[b_at_point ? ib : ib - 1] - cum_[ia];
  if (ib < np && t_[ib] > b) sum += Segment(ib, t_[ib - 1], b);
  return sum;
}

std::vector<double> IncreasesOver(const Counter& c, std::span<const TimeNs> times) {
  std::vector<double> increase, known;
  Sweep(c, times, increase, known);
  return increase;
}

std::vector<double> RatesOver(std::span<const Counter> counters, std::span<const TimeNs> times, double divisor) {
  size_t n = times.size() < 2 ? 0 : times.size() - 1;
  std::vector<double> out(n, kUnknown);
  std::vector<double> increase, known;
  for (const Counter& c : counters) {
    Sweep(c, times, increase, known);
    for (size_t k = 0; k < n; ++k) {
      if (known[k] <= 0) continue;
      double rate = increase[k] / (known[k] * 1e-9) / divisor;
      out[k] = std::isnan(out[k]) ? rate : out[k] + rate;
    }
  }
  return out;
}

double Increase(const Counter& c) {
  Points p(c);
  double sum = 0;
  for (size_t i = 1; i < p.size(); ++i) {
    double delta = p.v(i) - p.v(i - 1);
    if (delta > 0) sum += delta;
  }
  return sum;
}

double MeanRate(const Counter& c) {
  TimeNs span = c.LastKnown() - c.FirstKnown();
  if (c.empty() || span <= 0) return kUnknown;
  return Increase(c) / (static_cast<double>(span) * 1e-9);
}

void AddCumulativeIncreases(std::span<const Counter> counters, std::span<const TimeNs> times,
                            std::vector<double>& into) {
  if (into.size() < times.size()) into.resize(times.size(), 0.0);
  if (times.empty()) return;
  // One pass per counter, without the per-interval vectors of Sweep (these are hot loops: a
  // host's cores over every sample time). C(t), the increase from the first known point to t
  // (increases only), is read at each time; the result is C(times[k]) - C(times[0]), which is
  // what Sweep sums interval by interval. At a time holding a step (two points at one instant)
  // C is read before the step, as Sweep counts a step in the interval that starts there.
  for (const Counter& c : counters) {
    Points p(c);
    if (p.size() < 2) continue;
    const size_t np = p.size();
    // Start at the last point before times[0] (found by bisection: a short window of a long
    // counter reads a few points); C is counted from there, as only differences are returned.
    size_t lo = 0, hi = np;
    while (lo < hi) {
      size_t m = lo + (hi - lo) / 2;
      if (p.t(m) < times[0]) lo = m + 1;
      else hi = m;
    }
    size_t i = lo > 0 ? lo - 1 : 0;  // then: the first point with p.t(i) >= t
    double before_i = 0;              // C at point i (before any step there), from the start point
    double base = 0;       // C(times[0])
    for (size_t k = 0; k < times.size(); ++k) {
      const TimeNs t = times[k];
      while (i < np && p.t(i) < t) {
        if (i + 1 < np) before_i += std::max(0.0, p.v(i + 1) - p.v(i));
        ++i;
      }
      double at;
      if (i == 0) {
        at = 0;  // before (or at) the first known point
      } else if (i == np) {
        at = before_i;  // after the last: C of the last point
      } else if (p.t(i) == t) {
        at = before_i;  // at point i, the first at t: before any step at t
      } else {
        // Strictly between point i-1 and point i.
        const double delta = std::max(0.0, p.v(i) - p.v(i - 1));
        const double c_prev = before_i - delta;
        at = c_prev + delta * static_cast<double>(t - p.t(i - 1)) / static_cast<double>(p.t(i) - p.t(i - 1));
      }
      if (k == 0) base = at;
      into[k] += at - base;
    }
  }
}

std::vector<model::Sample> SumAsCounter(std::span<const Counter> counters) {
  std::vector<SampleSpan> spans;
  std::vector<TimeNs> times;
  bool origins = false;
  for (const Counter& c : counters) {
    if (c.empty()) continue;
    spans.push_back(c.samples);
    origins = origins || c.origin.has_value();
  }
  if (spans.empty()) return {};
  if (std::vector<model::Sample> out; SumSampledTogether(counters, out)) return out;
  DistinctTimes(spans, times);
  if (origins) {
    // The origins are few (one a counter): sorted apart and merged in, not re-sorting all.
    const size_t mid = times.size();
    for (const Counter& c : counters) {
      if (c.origin && !c.empty()) times.push_back(*c.origin);
    }
    std::sort(times.begin() + static_cast<std::ptrdiff_t>(mid), times.end());
    std::inplace_merge(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(mid), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
  }
  std::vector<double> sum;
  AddCumulativeIncreases(counters, times, sum);
  if (!origins) {
    std::vector<model::Sample> out(times.size());
    for (size_t i = 0; i < times.size(); ++i) out[i] = {times[i], sum[i]};
    return out;
  }
  // A process sampled at its very start already counted something there: a step at one
  // instant, kept as two points at that time (the amount belongs to that instant, not to the
  // interval after it). The sums after it already hold it, except after the last time.
  std::vector<std::pair<TimeNs, double>> steps;
  for (const Counter& c : counters) {
    if (c.origin && !c.empty() && *c.origin == c.samples.front().t && c.samples.front().v > 0) {
      steps.emplace_back(*c.origin, c.samples.front().v);
    }
  }
  std::sort(steps.begin(), steps.end());
  std::vector<model::Sample> out;
  out.reserve(times.size() + steps.size());
  size_t k = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    out.push_back({times[i], sum[i]});
    double step = 0;
    for (; k < steps.size() && steps[k].first <= times[i]; ++k) step += steps[k].second;
    if (step > 0) out.push_back({times[i], sum[i] + step});
  }
  return out;
}

RateSteps RateStepsOf(std::span<const Counter> counters, double divisor) {
  RateSteps out;
  // The sample times merged (series sampled together, like a host's cores, cost one
  // comparison a sample), then the origins, which are few.
  std::vector<SampleSpan> spans;
  bool origins = false;
  for (const Counter& c : counters) {
    spans.push_back(c.samples);
    origins = origins || (c.origin && !c.samples.empty());
  }
  DistinctTimes(spans, out.t);
  if (origins) {
    // The few origins sorted and merged in (the merged times are sorted already).
    const auto merged = static_cast<std::ptrdiff_t>(out.t.size());
    for (const Counter& c : counters) {
      if (c.origin && !c.samples.empty()) out.t.push_back(*c.origin);
    }
    std::sort(out.t.begin() + merged, out.t.end());
    std::inplace_merge(out.t.begin(), out.t.begin() + merged, out.t.end());
    out.t.erase(std::unique(out.t.begin(), out.t.end()), out.t.end());
  }
  out.rate = RatesOver(counters, out.t, divisor);
  return out;
}

}  // namespace grademl::analysis::derived
