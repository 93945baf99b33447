// HostMonitor: samples whole-host resource use (per-core CPU time, memory, disks, network
// interfaces) from /proc and declares it under a host resource of the run.
//
// Init() discovers what to watch once; Sample() then costs four pread()s of held files
// (/proc/stat, /proc/meminfo, /proc/diskstats, /proc/net/dev) and allocation-free parsing,
// with every series id precomputed. A CPU, disk or interface that appears after Init() is
// ignored; one that disappears simply stops getting samples. Counters are kept monotonic:
// CPU tick counters that step back (the kernel's iowait/idle accounting can) are held at
// their previous value; a disk or interface counter that drops (a device re-added under the
// same name, a 32-bit wrap) is rebased so that the series keeps growing.
//
// Not thread-safe: Init() and Sample() are called from one sampling thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collect/proc_file.h"
#include "core/status.h"
#include "core/time.h"
#include "model/run_builder.h"

namespace grademl::collect {

class HostMonitor {
 public:
  // proc_root/sys_root let tests point at fixture trees (tests/data/...).
  HostMonitor(model::RunBuilder* builder, model::ResourceId host_resource, std::string host,
              std::string proc_root = "/proc", std::string sys_root = "/sys");

  // Discovers cores (/proc/stat), disks (/sys/block, whole disks only, minus loop*, ram*,
  // zram*, and present in /proc/diskstats) and interfaces (/proc/net/dev, lo included), then
  // declares the resources and series. /proc/stat and /proc/meminfo are required; without
  // /proc/diskstats or /proc/net/dev there are simply no disks or interfaces. Call once.
  Status Init();

  // One sampling pass: adds one sample at `now` to every series whose source line was read.
  // A file that cannot be read, or a line that cannot be parsed, skips its samples.
  void Sample(TimeNs now);

  // What Init() found, for logs.
  size_t num_cores() const { return cores_.size(); }
  size_t num_disks() const { return disks_.size(); }
  size_t num_interfaces() const { return nets_.size(); }

 private:
  // A cumulative counter made monotonic (see the class comment).
  struct Counter {
    model::SeriesId id = 0;
    uint64_t last_raw = 0;  // the last raw value read
    uint64_t offset = 0;    // added to raw values after resets (disk, net)
  };
  struct Core {
    int index = 0;  // N of "cpuN"
    Counter user, system, iowait, steal, idle;
  };
  struct Disk {
    std::string name;
    Counter read_bytes, write_bytes, busy_ms;
  };
  struct Net {
    std::string name;
    Counter rx_bytes, tx_bytes;
  };

  void SampleCpu(TimeNs now);
  void SampleMemory(TimeNs now);
  void SampleDisks(TimeNs now);
  void SampleNet(TimeNs now);
  // Adds a sample of a CPU tick counter, held at its previous value if it stepped back.
  void AddTicks(Counter& c, uint64_t ticks, TimeNs now);
  // Adds a sample of a byte/ms counter scaled by `scale`, rebased if it dropped.
  void AddRebased(Counter& c, uint64_t raw, double scale, TimeNs now);

  model::RunBuilder* builder_;
  model::ResourceId host_resource_;
  std::string host_;
  std::string proc_root_;
  std::string sys_root_;
  double ticks_per_second_ = 100;

  ProcFile stat_;
  ProcFile meminfo_;
  ProcFile diskstats_;
  ProcFile netdev_;

  std::vector<Core> cores_;
  std::vector<int> core_slot_;  // by CPU index: position in cores_, or -1
  model::SeriesId mem_used_ = 0;
  model::SeriesId mem_available_ = 0;
  std::vector<Disk> disks_;     // in /proc/diskstats order
  std::vector<Net> nets_;       // in /proc/net/dev order
};

}  // namespace grademl::collect
