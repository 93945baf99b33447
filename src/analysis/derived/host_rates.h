// Host and process rates: the series the reports draw (HTML plots, Perfetto counter tracks),
// derived here so that no report computes a rate. Every counter goes through the one rule of
// counter_rate.h (no rate before the first known point or after the last, decreases count 0,
// a process's counters count from 0 at its start); which disks and interfaces count comes from
// host_devices.h; gauges are read as step functions (series_math.h).
//
// Two shapes:
//  - on a time grid (the HTML report's plots): one value per slice, NaN where unknown;
//  - as steps on the counters' own known points (the Perfetto export): RateSteps.
// Pure functions of the model.
#pragma once

#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "analysis/attribution.h"
#include "analysis/derived/counter_rate.h"
#include "model/run.h"

namespace grademl::analysis::derived {

// The ids of the disks and network interfaces that count towards their host's totals
// (host_devices.h): the ones a report may draw as the host's storage and network.
std::unordered_set<model::ResourceId> CountedDeviceIds(const model::Run& run);

// --- on a time grid (one value per slice) ---------------------------------------------------

// A counter series' mean rate per slice of `grid` (per second; NaN where unknown), or a gauge
// series' level at each slice's middle (0 before its first sample and more than a slice after
// its last).
std::vector<double> SeriesOnGrid(const model::Run& run, const model::Series& series, const TimeGrid& grid);

// One host's devices on a grid.
struct HostGridRates {
  std::string host;
  std::vector<double> busy, iowait;                  // cores (user + system; iowait), summed over the cores
  std::vector<double> mem;                           // bytes used (gauge)
  std::vector<double> disk_read, disk_write;         // bytes/s over the disks that count
  std::vector<double> net_rx, net_tx;                // bytes/s over the interfaces that count
  std::vector<double> other_cpu;                     // cores used by processes outside the run
  double cores = 0;                                  // cores with a user-time series
  double mem_capacity = model::kNoCapacity;          // bytes
  std::vector<std::pair<std::string, std::vector<double>>> gpu_util, gpu_mem;  // per GPU (raw names)
};
// Every host with a device series, in the order its first series appears.
std::vector<HostGridRates> HostRatesOnGrid(const model::Run& run, const TimeGrid& grid);

// An attributed metric's usage of one phase per slice, as a rate (per second for usage in
// unit-seconds: core-s -> cores; for a gauge's level-seconds, its mean level), on the whole
// grid (0 outside the phase's slices); empty when the phase has no series.
std::vector<double> PhaseRateOnGrid(const MetricAttribution& metric, model::PhaseId phase, const TimeGrid& grid);
// What the hosts measured beyond the phases for attributed metric `metric`, per slice, as a
// rate (per second): the sum over the resources attributed as `metric`.
std::vector<double> UnattributedRateOnGrid(const Attribution& attribution, std::string_view metric,
                                           const TimeGrid& grid);

// --- as steps on the samples (Perfetto counter tracks) --------------------------------------

// A process's CPU in cores (cpu.user + cpu.system), from its start.
RateSteps ProcessCpuCores(const model::Run& run, const model::Resource& process);
// The rate of one counter series of a resource (bytes/s of a disk, an interface, a process).
RateSteps SeriesRate(const model::Run& run, const model::Resource& r, std::string_view series);
// The CPU busy fraction of `cores` (one host's): user + system over all of them, divided by
// their number.
RateSteps CpuBusyFraction(const model::Run& run, std::span<const model::Resource* const> cores);

}  // namespace grademl::analysis::derived
