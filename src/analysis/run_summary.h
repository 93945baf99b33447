// The run summary: what each phase used (CPU, memory, I/O, inclusive of its subtree) and
// how busy each host's CPUs, memory, disks, network and GPUs were over the run.
//
// SummarizeRun is a pure function of the model: it never prints and never fails; missing
// series simply count as zero / absent sections.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "analysis/outside_load.h"
#include "core/time.h"
#include "model/run.h"

namespace grademl::analysis {

// What one phase used. "Self" values are the phase's own process; the others are
// inclusive of the phase's whole subtree (the root's are the run's totals).
struct PhaseSummary {
  model::PhaseId id = 0;
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;             // the phase's end, or the run's effective end while open
  bool open = false;             // the phase had not ended when recording stopped
  double duration_s = 0;
  double self_cpu_seconds = 0;   // user + system + unseen children of the own process
  double cpu_seconds = 0;        // inclusive
  double avg_cores = 0;          // cpu_seconds / duration_s
  // cpu_seconds split into user and system (kernel) time, own and inclusive. CPU of unseen
  // children (cpu.unseen_children) has no such split: it is in neither.
  double self_user_cpu_seconds = 0;
  double self_system_cpu_seconds = 0;
  double user_cpu_seconds = 0;
  double system_cpu_seconds = 0;
  double self_read_bytes = 0;    // io.read_bytes of the own process
  double self_write_bytes = 0;   // io.write_bytes of the own process
  double read_bytes = 0;         // inclusive
  double write_bytes = 0;        // inclusive
  double self_peak_rss_bytes = 0;  // the own process's highest RSS
  double peak_rss_bytes = 0;     // the most RSS the subtree's processes held at once (counts
                                 // pages shared between them once per process)
  double self_peak_pss_bytes = 0;  // the own process's highest PSS
  // The most memory the subtree's processes held at once: the peak over time of the sum of
  // their PSS (memory.pss; RSS for runs recorded without it), so shared pages count once.
  double peak_pss_bytes = 0;
  int64_t process_count = 0;     // processes in the subtree, this phase's own included
  int64_t subtree_phases = 0;    // phases in the subtree, this phase included
};

// One core's share of the host CPU summary.
struct CoreSummary {
  std::string name;
  double avg_busy = 0;  // fraction of the core's time in user + system
};

// The host's CPUs over the run. Fractions are of all cores' time together.
struct CpuSummary {
  int64_t cores = 0;
  double avg_busy = 0;    // (user + system) / (user + system + iowait + steal + idle)
  double peak_busy = 0;   // the highest busy fraction over one sampling interval
  double avg_iowait = 0;
  double avg_steal = 0;
  double sampled_s = 0;   // the time the counters covered, per core (0: too short to tell)
  double busy_s = 0;      // core-seconds of user + system time over all cores
  std::vector<CoreSummary> per_core;
};

// The host's memory over the run.
struct MemorySummary {
  double capacity_bytes = model::kNoCapacity;  // total memory, when known
  double peak_used_bytes = 0;
  double avg_used_bytes = 0;
};

// One disk over the run.
struct DiskSummary {
  std::string name;
  double read_bytes = 0;
  double write_bytes = 0;
  double avg_busy = 0;  // fraction of the time the disk had I/O in flight
  // Whether it counts towards the host's storage totals (analysis/derived/host_devices.h): false for
  // dm-*/md* on top of recorded disks, partitions of recorded disks, loop/ram devices.
  bool counted = true;
};

// One network interface over the run.
struct NetSummary {
  std::string name;
  double rx_bytes = 0;
  double tx_bytes = 0;
  double capacity_bytes_per_s = model::kNoCapacity;  // the link speed, when known
  bool counted = true;  // false for loopback, whose traffic never leaves the host (analysis/derived/host_devices.h)
};

// One GPU over the run.
struct GpuSummary {
  std::string name;
  double avg_utilization = 0;  // fraction 0..1, time-weighted
  double peak_utilization = 0;
  double peak_memory_used_bytes = 0;
  double memory_capacity_bytes = model::kNoCapacity;
  double avg_power_w = 0;      // time-weighted
  double power_limit_w = model::kNoCapacity;
  bool has_utilization = false;
  bool has_memory = false;
  bool has_power = false;
};

// One host's resources; a section is absent (nullopt / empty) when nothing was recorded.
struct HostSummary {
  std::string name;
  model::ResourceId resource = 0;  // the host resource
  std::optional<CpuSummary> cpu;
  std::optional<MemorySummary> memory;
  std::vector<DiskSummary> disks;
  std::vector<NetSummary> nets;
  std::vector<GpuSummary> gpus;
  // What processes outside the run used meanwhile (absent in runs recorded before it was measured).
  std::optional<OutsideLoad> other_processes;
};

// Everything a report shows about a run, besides the model itself.
struct RunSummary {
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;        // Run::EffectiveEnd()
  double duration_s = 0;
  std::vector<PhaseSummary> phases;  // same order as Run::phases
  std::vector<HostSummary> hosts;    // in the order of the host resources
  // Load from outside the run was significant (analysis/outside_load.h: JudgeNoise).
  bool noisy = false;
  std::string noisy_reason;          // empty when not noisy
  // The most memory all the run's processes held at once: by PSS (shared pages once), and
  // by RSS (shared pages once per process that maps them).
  double peak_pss_bytes = 0;
  double peak_rss_bytes = 0;

  // The summary of a phase, or nullptr.
  const PhaseSummary* FindPhase(model::PhaseId id) const;
};

// Summarises a run. The run must be indexed (Run::Index()).
RunSummary SummarizeRun(const model::Run& run);

// One process's RSS as a step function: each sample's value holds until the next; the last
// holds until end_ns (and at least at its own instant, even when end_ns is not later).
struct RssTrack {
  std::span<const model::Sample> samples;  // sorted by t; not owned
  TimeNs end_ns = 0;
};

// The peak over time of the sum of the tracks, by a plain sweep: O(n log n) for one set of
// processes. SummarizeRun gets every subtree's peak at once without it; this is the
// reference its tests compare against.
double PeakOfSum(const std::vector<RssTrack>& tracks);

}  // namespace grademl::analysis
