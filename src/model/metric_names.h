// The names, units and kinds of the metric series GradeML collects: the contract between
// collectors (which write them), analyses (which read them) and docs/metrics.md.
//
// Counters are cumulative since the start of the resource (a process's CPU seconds, a
// disk's bytes written since boot); gauges are instantaneous values.
#pragma once

#include <string_view>

namespace grademl::model::metric {

// --- process[pid] (ResourceKind::kProcess) ---
inline constexpr std::string_view kProcCpuUser = "cpu.user";            // counter, s (own threads only)
inline constexpr std::string_view kProcCpuSystem = "cpu.system";        // counter, s
// CPU of descendants that were reaped before GradeML ever sampled them (short-lived
// children); counted here so that no CPU time vanishes.
inline constexpr std::string_view kProcCpuUnseenChildren = "cpu.unseen_children";  // counter, s
inline constexpr std::string_view kProcRss = "memory.rss";              // gauge, bytes
// Proportional set size: resident pages, each divided by the number of processes mapping
// it, so that the PSS of processes sharing pages (forked workers) adds up to their real
// footprint. Read from smaps_rollup within a CPU budget and estimated from RSS between
// reads; a process with no followed relative reports its RSS (collect/pss_budget.h).
inline constexpr std::string_view kProcPss = "memory.pss";              // gauge, bytes
inline constexpr std::string_view kProcReadBytes = "io.read_bytes";     // counter, bytes from storage
inline constexpr std::string_view kProcWriteBytes = "io.write_bytes";   // counter, bytes to storage
inline constexpr std::string_view kProcReadChars = "io.read_chars";     // counter, bytes via read()-like calls
inline constexpr std::string_view kProcWriteChars = "io.write_chars";   // counter, bytes via write()-like calls
inline constexpr std::string_view kProcThreads = "threads";             // gauge, count
// The cores the kernel lets the process use (collect/cpu_limits.h): its CPU affinity, and its
// cgroup's CPU quota (cores = quota / period; the series is empty when there is none). Read
// when the process is first seen and again every few seconds.
inline constexpr std::string_view kProcCpuAffinity = "cpu.affinity";  // gauge, count (CPUs)
inline constexpr std::string_view kProcCpuQuota = "cpu.quota";        // gauge, cores
inline constexpr std::string_view kProcCtxVoluntary = "ctx.voluntary";      // counter, count
inline constexpr std::string_view kProcCtxInvoluntary = "ctx.involuntary";  // counter, count
// The MAIN THREAD's scheduling (/proc/PID/schedstat): time on a CPU, and time runnable but
// waiting for one (CPU contention, or a CPU quota).
inline constexpr std::string_view kProcSchedRun = "sched.run";    // counter, s
inline constexpr std::string_view kProcSchedWait = "sched.wait";  // counter, s
// An estimate, by sampling: the main thread's state letter is read at every sample, and
// when it is D (uninterruptible sleep, usually disk I/O) the time since the previous
// sampling pass is added.
inline constexpr std::string_view kProcStateDiskWait = "state.disk_wait";  // counter, s
// The same kind of estimate for sockets: when the main thread is asleep and its wait
// channel (/proc/PID/wchan) is a socket wait (wait_woken, sk_wait_data, ...), the time
// since its previous read is added: blocked receiving from or sending to a peer.
inline constexpr std::string_view kProcStateNetWait = "state.net_wait";  // counter, s
inline constexpr std::string_view kProcMinorFaults = "memory.minor_faults";  // counter, count (own threads)
inline constexpr std::string_view kProcMajorFaults = "memory.major_faults";  // counter, count (own threads)

// --- host core (ResourceKind::kCore, one per CPU, capacity 1 core-second per second) ---
inline constexpr std::string_view kCoreUser = "cpu.user";       // counter, s (user + nice)
inline constexpr std::string_view kCoreSystem = "cpu.system";   // counter, s (system + irq + softirq)
inline constexpr std::string_view kCoreIowait = "cpu.iowait";   // counter, s
inline constexpr std::string_view kCoreSteal = "cpu.steal";     // counter, s
inline constexpr std::string_view kCoreIdle = "cpu.idle";       // counter, s

// --- host memory (ResourceKind::kMemory, capacity = MemTotal bytes) ---
inline constexpr std::string_view kMemUsed = "memory.used";            // gauge, bytes (total - available)
inline constexpr std::string_view kMemAvailable = "memory.available";  // gauge, bytes

// --- disk[device] (ResourceKind::kDisk) ---
inline constexpr std::string_view kDiskReadBytes = "disk.read_bytes";    // counter, bytes
inline constexpr std::string_view kDiskWriteBytes = "disk.write_bytes";  // counter, bytes
inline constexpr std::string_view kDiskBusy = "disk.busy";               // counter, s (capacity 1)

// --- net[interface] (ResourceKind::kNet; capacity = link speed in bytes/s when known) ---
inline constexpr std::string_view kNetRxBytes = "net.rx_bytes";  // counter, bytes
inline constexpr std::string_view kNetTxBytes = "net.tx_bytes";  // counter, bytes

// --- host (ResourceKind::kHost): load from processes NOT in the run (grademl itself excluded:
// its own CPU is RunInfo::monitor_cpu_seconds). Seen by listing /proc at every pass. ---
// CPU of those processes since the run started, their reaped children's included.
inline constexpr std::string_view kOtherCpu = "other.cpu";  // counter, s
// The sum of their RSS (shared pages counted once per process).
inline constexpr std::string_view kOtherRss = "other.rss";  // gauge, bytes
// The same two series on each outside_process resource (the top CPU users outside the
// run): other.cpu is 0 when it was first seen using CPU and its total at its last use;
// other.rss is one sample, its peak RSS, at the time of that peak.

// --- gpu[index] (ResourceKind::kGpu) ---
inline constexpr std::string_view kGpuUtilization = "gpu.utilization";    // gauge, fraction 0..1 (capacity 1)
inline constexpr std::string_view kGpuMemoryUsed = "gpu.memory_used";     // gauge, bytes (capacity = total)
inline constexpr std::string_view kGpuPower = "gpu.power";                // gauge, W (capacity = power limit)

// --- a Spark executor (ResourceKind::kProcess named "executor N" or "driver", no pid; from an
// imported Spark event log, docs/engines.md): counters built from its task ends, each a
// sample at a task's finish (series whose values are all 0 are left out), and the tasks
// running on it. ---
inline constexpr std::string_view kSparkTasks = "spark.tasks";                          // counter, count (task attempts ended)
inline constexpr std::string_view kSparkRunTime = "spark.run_time";                     // counter, s (executor run time)
inline constexpr std::string_view kSparkCpuTime = "spark.cpu_time";                     // counter, s (executor CPU time)
inline constexpr std::string_view kSparkGcTime = "spark.gc_time";                       // counter, s (JVM GC time)
inline constexpr std::string_view kSparkShuffleReadBytes = "spark.shuffle_read_bytes";  // counter, bytes
inline constexpr std::string_view kSparkShuffleWriteBytes = "spark.shuffle_write_bytes";  // counter, bytes
inline constexpr std::string_view kSparkInputBytes = "spark.input_bytes";               // counter, bytes
inline constexpr std::string_view kSparkOutputBytes = "spark.output_bytes";             // counter, bytes
inline constexpr std::string_view kSparkDiskSpillBytes = "spark.disk_spill_bytes";      // counter, bytes
inline constexpr std::string_view kSparkRunningTasks = "spark.running_tasks";           // gauge, count (capacity: its cores)

// Units.
inline constexpr std::string_view kUnitSeconds = "s";
inline constexpr std::string_view kUnitBytes = "bytes";
inline constexpr std::string_view kUnitCount = "count";
inline constexpr std::string_view kUnitCores = "cores";
inline constexpr std::string_view kUnitFraction = "fraction";
inline constexpr std::string_view kUnitWatts = "W";

}  // namespace grademl::model::metric
