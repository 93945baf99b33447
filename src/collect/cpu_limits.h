// CpuLimits: how many cores one process may use, as the kernel limits it — its CPU affinity
// (/proc/PID/status Cpus_allowed_list) and the CPU quota of its cgroup and the cgroup's
// ancestors (cgroup v2 cpu.max; v1 cpu.cfs_quota_us / cpu.cfs_period_us) — not the machine's
// core count. Read by the process tree monitor when it starts following a process.
//
// CpuLimitsReader caches quotas per cgroup (children usually share their parent's), so a
// process costs two small reads (status, cgroup) once the quota of its cgroup is known.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/time.h"

namespace grademl::collect {

struct CpuLimits {
  int affinity_cores = 0;   // CPUs the process may run on (0: unknown)
  double quota_cores = 0;   // the tightest cgroup quota on its way to the root, in cores (0: none)
  // The cores the process can use: the smaller of the known limits (0: none known).
  double available() const;
};

// Counts the CPUs of a cpu list ("0-3,8,10-11" -> 7). nullopt when it is malformed.
std::optional<int> CountCpuList(std::string_view list);
// Parses cgroup v2 cpu.max ("150000 100000" -> 1.5 cores; "max 100000" -> 0, no quota).
// nullopt when malformed.
std::optional<double> ParseCpuMax(std::string_view text);

class CpuLimitsReader {
 public:
  struct Paths {
    std::string proc_root = "/proc";
    std::string cgroup_root = "/sys/fs/cgroup";
  };
  explicit CpuLimitsReader(Paths paths) : paths_(std::move(paths)) {}
  CpuLimitsReader() : CpuLimitsReader(Paths{}) {}

  // The limits of `pid` now; a quota cached for its cgroup is reused for kQuotaTtlNs.
  // Never fails: what cannot be read is unknown (0).
  CpuLimits Read(pid_t pid, TimeNs now);

  static constexpr DurationNs kQuotaTtlNs = 10 * kNsPerSec;

 private:
  struct CachedQuota {
    double cores = 0;
    TimeNs read_at = 0;
  };
  // The quota for the contents of /proc/PID/cgroup.
  double QuotaOf(std::string_view cgroup_file);
  double ReadV2Quota(std::string_view path);
  double ReadV1Quota(std::string_view controllers, std::string_view path);

  Paths paths_;
  std::unordered_map<std::string, CachedQuota> quota_cache_;
};

}  // namespace grademl::collect
