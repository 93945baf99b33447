// Puts every host of a run on one clock, the recording host's (RunInfo::host): the
// timestamps another host recorded (phases, samples, log lines, process start times) are
// shifted by that host's measured offset to the store's clock (model::ClockEstimate, measured
// by the agent or `grademl run --join` on each host), interpolated between measurements, and
// back by the recording host's own offset to the store when it measured one. The recording
// host's timestamps never move. Called by the store when it loads a run; hosts without estimates keep
// their timestamps (and their Host::clock_offset_ns, applied by the analyses that need it).
#pragma once

#include <string_view>
#include <vector>

#include "core/time.h"
#include "model/run.h"

namespace grademl::model {

// The offset to add to host time `t`, from that host's estimates sorted by t: linear
// between the two estimates around t, the nearest one outside them. 0 when there is none.
DurationNs OffsetAt(const std::vector<ClockEstimate>& estimates, TimeNs t);

// Converts the timestamps of every other host that has clock estimates; afterwards that host's
// Host::clock_offset_ns is 0 (already applied) and its clock_uncertainty_ns the largest
// uncertainty among its estimates. Sorts run.clock_estimates by (host, t). Index() after.
void ConvertHostClocks(Run& run);

}  // namespace grademl::model
