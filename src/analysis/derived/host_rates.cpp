#include "analysis/derived/host_rates.h"

#include <cmath>
#include <unordered_map>

#include "analysis/derived/host_devices.h"
#include "model/metric_names.h"

namespace grademl::analysis::derived {

namespace metric = model::metric;

namespace {

// Adds `v` into `sum` slice by slice, unknown (NaN) values adding nothing: a slice is unknown
// only when every addend is.
void AddKnown(std::vector<double>& sum, const std::vector<double>& v) {
  if (sum.empty()) {
    sum = v;
    return;
  }
  for (size_t k = 0; k < v.size() && k < sum.size(); ++k) {
    if (std::isnan(v[k])) continue;
    sum[k] = std::isnan(sum[k]) ? v[k] : sum[k] + v[k];
  }
}

std::vector<TimeNs> SliceBounds(const TimeGrid& grid) {
  std::vector<TimeNs> times(grid.slices + 1);
  for (size_t k = 0; k <= grid.slices; ++k) times[k] = grid.SliceStart(k);
  return times;
}

double SliceSeconds(const TimeGrid& grid) { return static_cast<double>(grid.slice_ns) * 1e-9; }

}  // namespace

std::unordered_set<model::ResourceId> CountedDeviceIds(const model::Run& run) {
  std::unordered_set<model::ResourceId> counted;
  for (const HostDevices& d : ListHostDevices(run)) {
    for (const model::Resource* r : d.disks) counted.insert(r->id);
    for (const model::Resource* r : d.nets) counted.insert(r->id);
  }
  return counted;
}

std::vector<double> SeriesOnGrid(const model::Run& run, const model::Series& series, const TimeGrid& grid) {
  SampleSpan samples(series.samples);
  if (series.info.kind == model::SeriesKind::kCounter) {
    Counter c{samples, std::nullopt};
    if (const model::Resource* r = run.FindResource(series.info.resource)) c = CounterOf(run, *r, series.info.name);
    std::vector<TimeNs> times = SliceBounds(grid);
    return RatesOver(std::span<const Counter>(&c, 1), times);
  }
  std::vector<double> out(grid.slices, 0);
  if (samples.empty()) return out;
  TimeNs first = samples.front().t, last = samples.back().t;
  for (size_t k = 0; k < grid.slices; ++k) {
    TimeNs mid = grid.SliceStart(k) + grid.slice_ns / 2;
    if (mid < first || mid > last + grid.slice_ns) continue;
    out[k] = GaugeValueAt(samples, mid);
  }
  return out;
}

std::vector<HostGridRates> HostRatesOnGrid(const model::Run& run, const TimeGrid& grid) {
  std::vector<HostGridRates> hosts;
  std::unordered_map<std::string, size_t> index;
  auto host_of = [&](const std::string& h) -> HostGridRates& {
    auto [it, added] = index.try_emplace(h, hosts.size());
    if (added) hosts.push_back(HostGridRates{.host = h});
    return hosts[it->second];
  };
  // Which disks and interfaces count (no dm-* over recorded disks, no partitions, no
  // loopback): the same rule as every analysis.
  std::unordered_set<model::ResourceId> counted = CountedDeviceIds(run);
  for (const model::Series& s : run.series) {
    const model::Resource* r = run.FindResource(s.info.resource);
    if (r == nullptr || r->kind == model::ResourceKind::kProcess) continue;
    bool device = r->kind == model::ResourceKind::kDisk || r->kind == model::ResourceKind::kNet;
    if (device && counted.count(r->id) == 0) continue;
    const std::string& name = s.info.name;
    switch (r->kind) {
      case model::ResourceKind::kCore: {
        HostGridRates& h = host_of(r->host);
        if (name == metric::kCoreUser || name == metric::kCoreSystem) {
          AddKnown(h.busy, SeriesOnGrid(run, s, grid));
          if (name == metric::kCoreUser) h.cores += 1;
        } else if (name == metric::kCoreIowait) {
          AddKnown(h.iowait, SeriesOnGrid(run, s, grid));
        }
        break;
      }
      case model::ResourceKind::kMemory:
        if (name == metric::kMemUsed) {
          HostGridRates& h = host_of(r->host);
          h.mem = SeriesOnGrid(run, s, grid);
          h.mem_capacity = s.info.capacity;
        }
        break;
      case model::ResourceKind::kDisk:
        if (name == metric::kDiskReadBytes) AddKnown(host_of(r->host).disk_read, SeriesOnGrid(run, s, grid));
        if (name == metric::kDiskWriteBytes) AddKnown(host_of(r->host).disk_write, SeriesOnGrid(run, s, grid));
        break;
      case model::ResourceKind::kNet:
        if (name == metric::kNetRxBytes) AddKnown(host_of(r->host).net_rx, SeriesOnGrid(run, s, grid));
        if (name == metric::kNetTxBytes) AddKnown(host_of(r->host).net_tx, SeriesOnGrid(run, s, grid));
        break;
      case model::ResourceKind::kHost:
        if (name == metric::kOtherCpu) host_of(r->host).other_cpu = SeriesOnGrid(run, s, grid);
        break;
      case model::ResourceKind::kGpu:
        if (name == metric::kGpuUtilization) host_of(r->host).gpu_util.emplace_back(r->name, SeriesOnGrid(run, s, grid));
        if (name == metric::kGpuMemoryUsed) host_of(r->host).gpu_mem.emplace_back(r->name, SeriesOnGrid(run, s, grid));
        break;
      default:
        break;
    }
  }
  return hosts;
}

std::vector<double> PhaseRateOnGrid(const MetricAttribution& metric, model::PhaseId phase, const TimeGrid& grid) {
  for (const PhaseSeries& s : metric.series) {
    if (s.phase != phase) continue;
    std::vector<double> out(grid.slices, 0);
    double slice_s = SliceSeconds(grid);
    for (size_t k = 0; k < s.usage.size() && s.first_slice + k < grid.slices; ++k) {
      out[s.first_slice + k] = s.usage[k] / slice_s;
    }
    return out;
  }
  return {};
}

std::vector<double> UnattributedRateOnGrid(const Attribution& attribution, std::string_view metric,
                                           const TimeGrid& grid) {
  std::vector<double> other(grid.slices, 0);
  double slice_s = SliceSeconds(grid);
  for (const ResourceAttribution& r : attribution.resources) {
    if (r.attributed_as != metric || r.unattributed_slices.size() != grid.slices) continue;
    for (size_t k = 0; k < grid.slices; ++k) other[k] += r.unattributed_slices[k] / slice_s;
  }
  return other;
}

RateSteps ProcessCpuCores(const model::Run& run, const model::Resource& process) {
  Counter cpu[2] = {CounterOf(run, process, metric::kProcCpuUser), CounterOf(run, process, metric::kProcCpuSystem)};
  return RateStepsOf(cpu);
}

RateSteps SeriesRate(const model::Run& run, const model::Resource& r, std::string_view series) {
  Counter c = CounterOf(run, r, series);
  return RateStepsOf(std::span<const Counter>(&c, 1));
}

RateSteps CpuBusyFraction(const model::Run& run, std::span<const model::Resource* const> cores) {
  std::vector<Counter> busy;
  for (const model::Resource* core : cores) {
    for (std::string_view name : {metric::kCoreUser, metric::kCoreSystem}) {
      Counter c = CounterOf(run, *core, name);
      if (!c.empty()) busy.push_back(c);
    }
  }
  if (busy.empty() || cores.empty()) return {};
  return RateStepsOf(busy, static_cast<double>(cores.size()));
}

}  // namespace grademl::analysis::derived
