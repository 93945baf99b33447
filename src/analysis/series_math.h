// Arithmetic on metric series: the one place that knows how counters and gauges are read.
//
// Samples are run-length compressed (a flat stretch keeps only its first and last point), so:
//  - a gauge is a step function: a sample's value holds until the next sample;
//  - a counter is read by linear interpolation between samples, which reproduces every
//    sampled value exactly (points dropped by the compression lie on flat stretches).
// No function assumes a fixed sampling interval. All take samples sorted by time.
#pragma once

#include <span>
#include <vector>

#include "core/time.h"
#include "model/run.h"

namespace grademl::analysis {

using SampleSpan = std::span<const model::Sample>;

// The samples of a series, or an empty span for a missing (nullptr) series.
SampleSpan SamplesOf(const model::Series* series);

// The last sample's value, or 0 when there are none. A process's counters are cumulative
// since that process started, so this is the process's own total.
double LastValue(SampleSpan samples);

// How much a counter grew from its first to its last sample, summing only increases so
// that a counter reset (a reboot, a wrap) does not make the total negative.
double CounterIncrease(SampleSpan samples);

// A counter's value at t, interpolated linearly; clamped to the first/last value outside
// the sampled span. 0 for no samples.
double CounterValueAt(SampleSpan samples, TimeNs t);

// A gauge's value at t: the value of the last sample at or before t; 0 before the first.
double GaugeValueAt(SampleSpan samples, TimeNs t);

// The largest sample value (0 for no samples).
double GaugeMax(SampleSpan samples);

// The time-weighted mean of a gauge over [first sample, last sample]; a single sample's
// value when the span is empty; 0 for no samples.
double GaugeMean(SampleSpan samples);

// A counter's values at each of `times` (sorted ascending), as CounterValueAt, in one pass.
std::vector<double> CounterValuesAt(SampleSpan samples, std::span<const TimeNs> times);

// The distinct times of all samples of `spans`, sorted, into `out` (replacing its contents).
// Series sorted by time (as the model promises) are merged one after the other, a series
// sampled at the times already held (the cores of one host, sampled together) costing one
// comparison a sample; otherwise all the times are sorted. The same times either way.
void DistinctTimes(std::span<const SampleSpan> spans, std::vector<TimeNs>& out);

// The time between the first and the last sample (0 for fewer than two).
DurationNs SampledSpan(SampleSpan samples);

}  // namespace grademl::analysis
