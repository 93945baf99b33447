// Host devices: the ONE place that decides which of a host's disks and network interfaces
// count towards its totals, used by every analysis and report that adds devices up
// (bottlenecks, attribution, the run summary, the HTML plots, the trace export).
//
// Disks. HostMonitor records every block device of /sys/block (whole devices) minus loop,
// RAM and zram devices; imported or older runs may hold anything. Of those:
//  - physical disks (sda, vda, nvme0n1, mmcblk0, ...) count;
//  - stacked devices, dm-* (LVM, dm-crypt) and md* (software RAID), repeat the traffic of the
//    disks beneath them: they count only on a host that has no physical disk;
//  - partitions (sda1, nvme0n1p1, mmcblk0p2) repeat their disk's traffic: they count only
//    when their whole disk is not recorded;
//  - loop*, ram*, zram* are not storage and never count.
// Network. Loopback (`lo`) never counts as network throughput or link use: none of its bytes
// leave the host, and each shows twice (sent and received). It is kept apart, as evidence
// that a process moved bytes through a socket (the bottleneck rule for a process sleeping
// on a socket: a local service is waited on like a remote one).
//
// Rates of these devices: counter_rate.h (the one counter -> rate rule) and host_rates.h.
// Pure functions of the model.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/series_math.h"
#include "model/run.h"

namespace grademl::analysis {

enum class DiskRole { kPhysical, kStacked, kPartition, kVirtual };
std::string_view DiskRoleName(DiskRole role);

// The role of disk `name` on a host that recorded the disks `host_disks` (name included).
DiskRole ClassifyDisk(std::string_view name, std::span<const std::string> host_disks);
// Whether a network interface is the loopback.
bool IsLoopback(std::string_view interface);

// One host's devices, sorted by what counts.
struct HostDevices {
  std::string host;                                   // the host's name
  const model::Resource* host_resource = nullptr;     // nullptr when the run has none for it
  std::vector<const model::Resource*> cores;
  const model::Resource* memory = nullptr;
  std::vector<const model::Resource*> disks;          // the disks that count (see above)
  std::vector<const model::Resource*> uncounted_disks;  // stacked, partitions, virtual
  std::vector<const model::Resource*> nets;           // interfaces whose traffic leaves the host
  std::vector<const model::Resource*> loopback;       // lo
  std::vector<const model::Resource*> gpus;

  bool Counts(const model::Resource& r) const;  // a disk or interface that counts
};

// Every host's devices, grouped by host name (Resource::host, or a host resource's name), in
// the order the hosts first appear among the resources.
std::vector<HostDevices> ListHostDevices(const model::Run& run);
// The devices of one host (empty lists when it has none).
HostDevices DevicesOfHost(const model::Run& run, const std::string& host);

// The sum of counter `series` over `devices`, as one counter on the union of their sample
// times (derived::SumAsCounter: each device by the one rule of counter_rate.h, its value the
// summed increase since the first time, so a reset on one disk counts 0 and is never offset by
// another disk's growth): e.g. the bytes written to all counted disks.
std::vector<model::Sample> SumOfCounters(const model::Run& run, std::span<const model::Resource* const> devices,
                                         std::string_view series);

}  // namespace grademl::analysis
