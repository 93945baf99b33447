#include "analysis/series_math.h"

#include <algorithm>

namespace grademl::analysis {

SampleSpan SamplesOf(const model::Series* series) {
  if (series == nullptr) return {};
  return SampleSpan(series->samples);
}

double LastValue(SampleSpan samples) { return samples.empty() ? 0.0 : samples.back().v; }

double CounterIncrease(SampleSpan samples) {
  double total = 0;
  for (size_t i = 1; i < samples.size(); ++i) {
    double delta = samples[i].v - samples[i - 1].v;
    if (delta > 0) total += delta;
  }
  return total;
}

namespace {

// The first sample with time > t.
SampleSpan::iterator FirstAfter(SampleSpan samples, TimeNs t) {
  return std::upper_bound(samples.begin(), samples.end(), t,
                          [](TimeNs value, const model::Sample& s) { return value < s.t; });
}

}  // namespace

double CounterValueAt(SampleSpan samples, TimeNs t) {
  if (samples.empty()) return 0;
  if (t <= samples.front().t) return samples.front().v;
  if (t >= samples.back().t) return samples.back().v;
  auto next = FirstAfter(samples, t);  // exists: t < back().t
  auto prev = next - 1;                // exists: t > front().t
  if (prev->t == t) return prev->v;
  double fraction = static_cast<double>(t - prev->t) / static_cast<double>(next->t - prev->t);
  return prev->v + (next->v - prev->v) * fraction;
}

std::vector<double> CounterValuesAt(SampleSpan samples, std::span<const TimeNs> times) {
  std::vector<double> out(times.size(), 0.0);
  if (samples.empty()) return out;
  size_t next = 0;  // the first sample with t > the current time
  for (size_t i = 0; i < times.size(); ++i) {
    TimeNs t = times[i];
    while (next < samples.size() && samples[next].t <= t) ++next;
    if (next == 0) {
      out[i] = samples.front().v;
    } else if (next == samples.size() || samples[next - 1].t == t) {
      out[i] = samples[next - 1].v;
    } else {
      const model::Sample& a = samples[next - 1];
      const model::Sample& b = samples[next];
      double fraction = static_cast<double>(t - a.t) / static_cast<double>(b.t - a.t);
      out[i] = a.v + (b.v - a.v) * fraction;
    }
  }
  return out;
}

double GaugeValueAt(SampleSpan samples, TimeNs t) {
  auto next = FirstAfter(samples, t);
  return next == samples.begin() ? 0.0 : (next - 1)->v;
}

double GaugeMax(SampleSpan samples) {
  if (samples.empty()) return 0;
  double best = samples.front().v;
  for (const auto& s : samples) best = std::max(best, s.v);
  return best;
}

double GaugeMean(SampleSpan samples) {
  if (samples.empty()) return 0;
  DurationNs span = SampledSpan(samples);
  if (span <= 0) return samples.back().v;
  double weighted = 0;
  for (size_t i = 0; i + 1 < samples.size(); ++i) {
    weighted += samples[i].v * static_cast<double>(samples[i + 1].t - samples[i].t);
  }
  return weighted / static_cast<double>(span);
}

void DistinctTimes(std::span<const SampleSpan> spans, std::vector<TimeNs>& out) {
  out.clear();
  auto by_time = [](const model::Sample& a, const model::Sample& b) { return a.t < b.t; };
  bool all_sorted = true;
  for (SampleSpan s : spans) all_sorted = all_sorted && std::is_sorted(s.begin(), s.end(), by_time);
  if (!all_sorted) {
    for (SampleSpan s : spans)
      for (const model::Sample& x : s) out.push_back(x.t);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return;
  }
  std::vector<TimeNs> merged;
  for (SampleSpan s : spans) {
    if (s.empty()) continue;
    // Already held: every sample's time is in `out` (both sorted, so one walk tells).
    size_t i = 0;
    bool held = true;
    for (const model::Sample& x : s) {
      while (i < out.size() && out[i] < x.t) ++i;
      if (i == out.size() || out[i] != x.t) {
        held = false;
        break;
      }
    }
    if (held) continue;
    merged.clear();
    merged.reserve(out.size() + s.size());
    i = 0;
    for (const model::Sample& x : s) {
      while (i < out.size() && out[i] < x.t) merged.push_back(out[i++]);
      if (i < out.size() && out[i] == x.t) ++i;
      if (merged.empty() || merged.back() != x.t) merged.push_back(x.t);
    }
    merged.insert(merged.end(), out.begin() + static_cast<std::ptrdiff_t>(i), out.end());
    out.swap(merged);
  }
}

DurationNs SampledSpan(SampleSpan samples) {
  return samples.size() < 2 ? 0 : samples.back().t - samples.front().t;
}

}  // namespace grademl::analysis
