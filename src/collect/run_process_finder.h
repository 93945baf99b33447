// Finds the processes on this host that belong to a run: those whose environment carries
// GRADEML_RUN=<run uuid> (set by `grademl run` for everything it starts, and by hand, or by
// an engine's launcher, for processes of that run started on other hosts). Used by
// `grademl agent`. Each pass lists /proc; a process's stat and environment are read when it
// is first seen, and its stat again every 20th pass (a pid reused by another process is then
// read again), so a pass over a few hundred known processes is one directory listing.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace grademl::collect {

class RunProcessFinder {
 public:
  explicit RunProcessFinder(std::string proc_root = "/proc") : proc_root_(std::move(proc_root)) {}

  struct Found {
    pid_t pid = 0;
    uint64_t starttime = 0;  // ticks after boot, as /proc/PID/stat says
  };
  // The run's top processes now, by run uuid: those of a run whose parent is not of the
  // same run (their descendants are followed by the process monitor).
  std::map<std::string, std::vector<Found>> Scan();

  // The value of variable `name` (e.g. GRADEML_RUN) in an environment block (NUL-separated),
  // "" when absent.
  static std::string ValueInEnvironment(std::string_view environ_block, std::string_view name);
  static std::string RunOfEnvironment(std::string_view environ_block) {
    return ValueInEnvironment(environ_block, "GRADEML_RUN");
  }
  // Processes whose GRADEML_RECORDER is `host` are left out: a `grademl run` on this host
  // records them itself.
  void set_skip_recorder(std::string host) { skip_recorder_ = std::move(host); }

 private:
  struct Known {
    uint64_t starttime = 0;
    int32_t ppid = 0;
    std::string run;  // "" when not of a run
    bool seen = false;
    bool env_read = false;
  };
  std::string proc_root_;
  std::unordered_map<pid_t, Known> known_;
  uint64_t scans_ = 0;
  std::string skip_recorder_;
};

}  // namespace grademl::collect
