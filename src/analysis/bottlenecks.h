// Bottlenecks: for every phase of a run, how much of its duration was bound by each
// resource (CPU, memory, disk, network, GPU), how much it waited on child processes that
// were themselves bound by nothing measured, and how much it simply waited.
//
// FindBottlenecks is a pure function of the model. It classifies, per process and per
// sampling interval, what the process's main thread did (on a CPU, waiting for one, in disk
// wait, asleep: from the sched.* and state.disk_wait series), refines it with the process's
// other threads, page faults, I/O, its child processes and the host's devices, and then
// answers every phase from per-process prefix sums. docs/bottlenecks.md describes the
// method, the thresholds and the limitations.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include "model/run.h"

namespace grademl::analysis {

// A resource a phase can be bound by.
enum class BoundResource { kCpu, kMemory, kDisk, kNet, kGpu };
inline constexpr int kBoundResourceCount = 5;
// "cpu", "memory", "disk", "network", "gpu".
std::string_view BoundResourceName(BoundResource resource);

// What limited one phase, in seconds of its duration. bound_s, waiting_child_s, waiting_s
// and unknown_s add up to duration_s; saturated_s[r] is the part of bound_s[r] during which
// the whole machine's resource was saturated (a global bottleneck); the rest of bound_s[r]
// is local: the phase's own share was full (one thread on one core, its own disk requests).
struct PhaseBottlenecks {
  model::PhaseId phase = 0;
  double duration_s = 0;
  std::array<double, kBoundResourceCount> bound_s{};      // time bound by each resource
  std::array<double, kBoundResourceCount> saturated_s{};  // of which the machine's resource was saturated
  double waiting_child_s = 0;  // waiting on a child process that was itself not bound by anything measured
  double waiting_s = 0;        // sleeping / locks / idle: bound by nothing measured
  double unknown_s = 0;        // not covered by samples (or by any process)
  // Of bound_s[cpu], the part the kernel spent on the process's behalf (system CPU time)
  // on work other than storage or socket I/O and page faults, which go to disk, network and
  // memory: system calls, scheduling, locks. The rest of bound_s[cpu] is user time or
  // waiting for a CPU. Not a category of its own: it does not add to duration_s.
  double cpu_system_s = 0;

  double bound(BoundResource r) const { return bound_s[static_cast<int>(r)]; }
  double saturated(BoundResource r) const { return saturated_s[static_cast<int>(r)]; }
  // All the time bound by nothing measured, its own or a child's: what reports call "waiting".
  double total_waiting_s() const { return waiting_s + waiting_child_s; }
  // The resource with the most bound time, or nullopt when nothing was bound or waiting
  // (total_waiting_s()) is at least as long as that resource's time.
  std::optional<BoundResource> main_resource() const;
};

// The bottlenecks of every phase of a run.
struct Bottlenecks {
  std::vector<PhaseBottlenecks> phases;  // same order as run.phases

  // The entry of a phase, or nullptr.
  const PhaseBottlenecks* Find(model::PhaseId id) const;
};

// The thresholds of the classification, named and documented in docs/bottlenecks.md.
struct BottleneckOptions {
  // A machine resource at or above this fraction of its capacity over an interval is
  // saturated: host CPU busy (user + system of all cores), the busiest disk's busy time,
  // the busiest network link (when its speed is known), the busiest GPU, memory used.
  double saturation = 0.95;
  // The main thread asleep while the process's other threads use at least this many cores:
  // the process is bound by CPU (worker or intra-op threads), not waiting.
  double other_threads_min_cores = 0.5;
  // Page faults (minor + major) per CPU-second at or above which the system part of the
  // CPU time (what storage and socket I/O do not explain) is counted as memory: the kernel
  // populating or reclaiming pages. User time is never memory.
  double fault_rate_per_cpu_s = 50000;
  // Bytes of storage or socket I/O that justify one second of system CPU as work for the
  // disk or the network (the write path, fsync, socket copies): a process's system time
  // counts as disk up to its storage bytes / this, as network up to its socket bytes / this.
  // 50 MB per CPU-second is 10-20x what this project's VM spends per byte of buffered
  // writes with fsync (about 0.5-1 GB per system CPU-second), so the I/O that really
  // happened explains the kernel time, and a process making other system calls while it
  // writes a trickle of logs keeps them as CPU.
  double io_bytes_per_kernel_s = 50e6;
  // The busiest GPU at or above this utilisation while a process sleeps: it waits on the GPU.
  double gpu_active = 0.5;
  // A sleeping process moving at least this many bytes per second through read()/write()
  // beyond storage I/O (sockets, pipes), while the host's network (not loopback) moves at
  // least as much: it waits on the network.
  double net_min_bytes_per_s = 1e6;
  // A sleeping process whose own storage I/O (io.read_bytes + io.write_bytes) moves at
  // least this fast waits on the disk: this catches disk waits that the sampled
  // state.disk_wait missed, and runs recorded before it existed.
  double disk_min_bytes_per_s = 1e6;
};

// Classifies every phase of a run. The run must be indexed (Run::Index()).
Bottlenecks FindBottlenecks(const model::Run& run, const BottleneckOptions& options = {});

}  // namespace grademl::analysis
