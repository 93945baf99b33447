#include "analysis/derived/host_devices.h"
#include "analysis/derived/counter_rate.h"
#include "core/strings.h"

#include <algorithm>
#include <unordered_map>

namespace grademl::analysis {

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The whole disk a partition name belongs to: "sda1" -> "sda", "nvme0n1p2" -> "nvme0n1",
// "mmcblk0p1" -> "mmcblk0"; "" when the name does not look like a partition. A disk whose
// name ends in a digit numbers its partitions after a 'p'; one ending in a letter, directly.
std::string_view PartitionParent(std::string_view name) {
  size_t digits = name.size();
  while (digits > 0 && IsDigit(name[digits - 1])) --digits;
  if (digits == name.size() || digits == 0) return {};
  std::string_view base = name.substr(0, digits);
  if (IsDigit(base.back())) return {};
  if (base.back() == 'p' && base.size() >= 2 && IsDigit(base[base.size() - 2])) return base.substr(0, base.size() - 1);
  return base;
}

std::string HostOf(const model::Resource& r) {
  if (r.kind == model::ResourceKind::kHost) return r.host.empty() ? r.name : r.host;
  return r.host;
}

}  // namespace

std::string_view DiskRoleName(DiskRole role) {
  switch (role) {
    case DiskRole::kPhysical: return "physical";
    case DiskRole::kStacked: return "stacked";
    case DiskRole::kPartition: return "partition";
    case DiskRole::kVirtual: return "virtual";
  }
  return "physical";
}

DiskRole ClassifyDisk(std::string_view name, std::span<const std::string> host_disks) {
  if (StartsWith(name, "loop") || StartsWith(name, "ram") || StartsWith(name, "zram")) return DiskRole::kVirtual;
  if (StartsWith(name, "dm-") || StartsWith(name, "md")) return DiskRole::kStacked;
  std::string_view parent = PartitionParent(name);
  if (!parent.empty() && std::find(host_disks.begin(), host_disks.end(), parent) != host_disks.end()) {
    return DiskRole::kPartition;
  }
  return DiskRole::kPhysical;
}

bool IsLoopback(std::string_view interface) { return interface == "lo"; }

bool HostDevices::Counts(const model::Resource& r) const {
  auto in = [&](const std::vector<const model::Resource*>& v) { return std::find(v.begin(), v.end(), &r) != v.end(); };
  return in(disks) || in(nets);
}

std::vector<HostDevices> ListHostDevices(const model::Run& run) {
  std::vector<HostDevices> hosts;
  std::unordered_map<std::string, size_t> index;
  auto of = [&](const std::string& host) -> HostDevices& {
    auto [it, added] = index.try_emplace(host, hosts.size());
    if (added) hosts.push_back(HostDevices{.host = host});
    return hosts[it->second];
  };
  std::unordered_map<std::string, std::vector<const model::Resource*>> disks;
  for (const model::Resource& r : run.resources) {
    switch (r.kind) {
      case model::ResourceKind::kHost: {
        HostDevices& h = of(HostOf(r));
        if (h.host_resource == nullptr) h.host_resource = &r;
        break;
      }
      case model::ResourceKind::kCore: of(r.host).cores.push_back(&r); break;
      case model::ResourceKind::kMemory:
        if (of(r.host).memory == nullptr) of(r.host).memory = &r;
        break;
      case model::ResourceKind::kDisk:
        of(r.host);
        disks[r.host].push_back(&r);
        break;
      case model::ResourceKind::kNet:
        (IsLoopback(r.name) ? of(r.host).loopback : of(r.host).nets).push_back(&r);
        break;
      case model::ResourceKind::kGpu: of(r.host).gpus.push_back(&r); break;
      default: break;
    }
  }
  for (HostDevices& h : hosts) {
    auto it = disks.find(h.host);
    if (it == disks.end()) continue;
    std::vector<std::string> names;
    for (const model::Resource* d : it->second) names.push_back(d->name);
    std::vector<const model::Resource*> stacked;
    for (const model::Resource* d : it->second) {
      switch (ClassifyDisk(d->name, names)) {
        case DiskRole::kPhysical: h.disks.push_back(d); break;
        case DiskRole::kStacked: stacked.push_back(d); break;
        default: h.uncounted_disks.push_back(d); break;
      }
    }
    // Stacked devices stand for the storage only where nothing beneath them was recorded.
    auto& to = h.disks.empty() ? h.disks : h.uncounted_disks;
    to.insert(to.end(), stacked.begin(), stacked.end());
  }
  return hosts;
}

HostDevices DevicesOfHost(const model::Run& run, const std::string& host) {
  for (HostDevices& h : ListHostDevices(run)) {
    if (h.host == host) return std::move(h);
  }
  return HostDevices{.host = host};
}

std::vector<model::Sample> SumOfCounters(const model::Run& run, std::span<const model::Resource* const> devices,
                                         std::string_view series) {
  std::vector<derived::Counter> counters;
  for (const model::Resource* d : devices) {
    SampleSpan s = SamplesOf(run.FindSeries(d->id, series));
    if (!s.empty()) counters.push_back({s, std::nullopt});
  }
  return derived::SumAsCounter(counters);
}

}  // namespace grademl::analysis
