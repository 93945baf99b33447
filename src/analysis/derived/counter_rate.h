// Counter -> rate: the ONE rule by which every analysis and report turns a cumulative counter
// (CPU seconds, bytes read, bytes sent) into a rate or an increase over an interval. Stated
// for users in docs/metrics.md ("Rates from counters"):
//
//  - Known points. A counter is known at its samples and, when it has one, at its origin: a
//    process's counters count from 0 at the process's start (its phase's start), so
//    the process's start is a known point of value 0. A host's, disk's or interface's counters
//    count from boot: they have no origin within the run.
//  - Between two consecutive known points the counter grew linearly: the rate over any part of
//    that interval is the interval's mean rate. A gap (a sampler that stalled, run-length
//    compression of a flat stretch) is therefore spread evenly over the gap.
//  - Before the first known point and after the last, nothing is known: there is no rate
//    there (NaN, "unknown"), never 0. An interval that is only partly known has the rate of
//    its known part (the increase over the known part divided by the known part's length).
//  - A decrease between two known points is a reset or a wrap (the collector rebases the
//    counters it records, so only imported or older runs hold one): that interval counts
//    no increase (rate 0), never a negative one, and the counter goes on from its new value.
//  - A sum of counters (the cores of a host, the counted disks) has, on each interval, the sum
//    of the rates of the counters known there (each with the rule above); unknown where none
//    is known.
//
// The raw arithmetic (interpolation, differences, division by time) lives in counter_rate.cpp
// and series_math.h; reports use these functions or the host and process rates built on them
// (host_rates.h), never the raw helpers (tests/report/no_rate_in_reports_test.cpp checks).
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "analysis/series_math.h"
#include "core/time.h"
#include "model/run.h"

namespace grademl::analysis::derived {

// A counter's samples and, when it counts from 0 at a known time before its first sample,
// that time.
struct Counter {
  SampleSpan samples;
  std::optional<TimeNs> origin;

  bool empty() const { return samples.empty(); }
  // The first and last known times (the origin counts); both 0 for an empty counter.
  TimeNs FirstKnown() const;
  TimeNs LastKnown() const;
};

// Series `name` of resource `r` as a Counter: a process's counters have their process's start
// as origin (its phase's start, else Resource::start_ns when that is after 0; only when it is
// at or before the first sample: a process sampled at its very start steps there); every
// other resource's have none.
Counter CounterOf(const model::Run& run, const model::Resource& r, std::string_view name);

// The known points of `c` as samples (the origin first, as a sample of value 0).
std::vector<model::Sample> KnownPoints(const Counter& c);

// How much `c` grew over [a, b], counting only its known part and only increases (a reset
// counts 0). 0 when no part of [a, b] is known.
double IncreaseOver(const Counter& c, TimeNs a, TimeNs b);

// IncreaseOver for many windows of one counter, each two bisections instead of a walk of the
// points inside it (core use reads each host core over hundreds of long phases): the counter's
// increases (decreases counted 0) summed once up to each known point; a window is the
// difference of two such sums for its whole segments plus its partial segments at both ends,
// computed as the walk computes them. Sums of increases, not counter values: a host's idle counter reads ~1e6 s
// since boot, and the difference of two such values would lose digits the increases keep.
// Equal to IncreaseOver up to rounding (the same increases summed in another order: within an
// ulp or two). A step at a is counted, one at b is not, as in IncreaseOver.
class IncreaseIndex {
 public:
  explicit IncreaseIndex(const Counter& c);
  double Over(TimeNs a, TimeNs b) const;

 private:
  double Segment(size_t i, TimeNs lo, TimeNs hi) const;
  std::vector<TimeNs> t_;
  std::vector<double> v_;
  std::vector<double> cum_;  // the increases summed up to each point (before a step at its time)
};

// The rates over consecutive intervals [times[k], times[k+1]] (times sorted ascending) of the
// sum of `counters`, each divided by `divisor` (e.g. the number of cores): times.size() - 1
// values, NaN where no counter is known.
std::vector<double> RatesOver(std::span<const Counter> counters, std::span<const TimeNs> times, double divisor = 1);

// A rate as a step function on the counters' own known points: `t` the union of the known
// points of `counters`, rate[k] the rate over [t[k], t[k+1]] (t.size() - 1 values, NaN where
// no counter is known). For tracks drawn at the resolution of the samples (the Perfetto export).
struct RateSteps {
  std::vector<TimeNs> t;
  std::vector<double> rate;
};
RateSteps RateStepsOf(std::span<const Counter> counters, double divisor = 1);

// The increases over consecutive intervals [times[k], times[k+1]] of one counter (never
// negative; 0 outside its known span): times.size() - 1 values.
std::vector<double> IncreasesOver(const Counter& c, std::span<const TimeNs> times);

// How much `c` grew over its whole known span (the origin counts): the sum of its increases,
// a reset counting 0. 0 for fewer than two known points.
double Increase(const Counter& c);

// The mean rate of `c` over its whole known span (Increase / the span, per second); NaN when
// the span is empty (fewer than two known points, or all at one instant).
double MeanRate(const Counter& c);

// The summed increase of `counters` from times[0] to each of `times` (sorted ascending):
// times.size() values, the first 0, never decreasing (each counter by the rule: its increases
// only, over its known part). The difference of two values is the sum's increase between
// them, so a window over several intervals is two reads. Adds into `into` (resized to
// times.size() if it is smaller), so several groups of counters can share one pass.
void AddCumulativeIncreases(std::span<const Counter> counters, std::span<const TimeNs> times,
                            std::vector<double>& into);

// The sum of `counters` as one counter, on the union of their known points: its value at each
// point is the sum's increase since the first (AddCumulativeIncreases), so it never decreases:
// a reset of one counter counts 0 and is never offset by another's growth. Only differences of
// its values mean anything (it starts at 0). A process sampled at its very start (origin ==
// first sample) steps at that instant: two points at that time. Empty when no counter has a
// sample.
std::vector<model::Sample> SumAsCounter(std::span<const Counter> counters);

}  // namespace grademl::analysis::derived
