// OutsideProcessMonitor: measures the load that processes NOT in the run put on the host
// while it is recorded, so that a run slowed by another program says so (and names it).
//
// A pass lists /proc (one getdents walk) when a pid was allocated since the last pass (read
// from /proc/loadavg), when a process it reads vanished or reaped a child, and at least every
// `list_every` passes; it reads /proc/PID/stat of the processes outside the run: grademl itself and every descendant of it (the run's processes, orphans re-parented
// to grademl) are left out; grademl's own CPU is RunInfo::monitor_cpu_seconds. A process that
// used no CPU for kIdleAfterReads reads in a row is read only every `idle_every` passes
// (counters are cumulative, so nothing is lost but its RSS's freshness).
//
// What counts: the CPU each outside process used since the run started (processes that
// existed before count from their first sight). No CPU vanishes with a process that exits
// between reads: the kernel adds a reaped child's totals to its parent's cutime/cstime, so
// when a child vanishes its parent is read in the same pass and the growth beyond what was
// seen of the child is the child's unread tail (bounded by its threads x the time since its
// last read); growth that no vanished child claims for a whole pass came from children too
// short-lived to be seen, and is the parent's.
//
// Writes the host series other.cpu (counter) and other.rss (gauge); Finish() declares the
// processes that used the most CPU as outside_process resources (src/model/metric_names.h).
//
// Privacy (docs/privacy.md): another user's process is kept as its executable's base name and
// its owner's name, never its command line (which may hold that user's arguments, paths and
// secrets), unless Options::details (--outside-details); the recording user's own processes
// keep their command line (redacted by the builder like every other text).
//
// Not thread-safe: Sample() and Finish() are called from one thread at a time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "collect/proc_file.h"
#include "core/time.h"
#include "model/run_builder.h"

namespace grademl::collect {

class OutsideProcessMonitor {
 public:
  struct Options {
    std::string proc_root = "/proc";
    pid_t self_pid = 0;   // grademl: it and its descendants are not outside (0: getpid())
    size_t top = 5;       // outside_process resources declared by Finish()
    int idle_every = 50;  // an idle process is read every this many passes (5 s at 10 Hz)
    // /proc is listed when a pid was allocated since the last pass, when a process vanished
    // or reaped a child, and at least every this many passes.
    int list_every = 10;
    // Processes that used less CPU than this are never declared as top offenders.
    double min_top_cpu_seconds = 0.01;
    // Whose command lines are kept: processes of this user (-1: getuid()), or everyone's
    // with `details`.
    int64_t self_uid = -1;
    bool details = false;
  };

  // One outside process, as measured so far.
  struct Offender {
    pid_t pid = 0;
    std::string user;          // its owner's name (or uid); "" when it was gone before it was read
    std::string command;       // argv joined with spaces, or "[comm]"; another user's: its
                               // executable's base name (raw: escape to print)
    double cpu_seconds = 0;    // since the run started (or since first seen)
    double peak_rss_bytes = 0;
    TimeNs first_t = 0;        // the read before its CPU first grew
    TimeNs last_t = 0;         // the read after its CPU last grew
    TimeNs peak_t = 0;         // when its RSS peaked
  };

  // What the monitor itself costs.
  struct Stats {
    int64_t passes = 0;
    int64_t stat_reads = 0;      // /proc/PID/stat reads in all
    int64_t listings = 0;        // walks of /proc
    int64_t followed = 0;        // outside processes alive at the last pass
    int64_t listed = 0;          // /proc entries at the last pass
    DurationNs cpu_ns = 0;       // the sampling thread's CPU time inside Sample()
  };

  OutsideProcessMonitor(model::RunBuilder* builder, model::ResourceId host_resource, std::string host,
                        Options options);
  ~OutsideProcessMonitor();
  OutsideProcessMonitor(const OutsideProcessMonitor&) = delete;
  OutsideProcessMonitor& operator=(const OutsideProcessMonitor&) = delete;

  // One pass. The first one sets the baseline (processes that were already running count
  // from there).
  void Sample(TimeNs now);
  // A last pass at `end`, then the top offenders go to the builder. Idempotent.
  void Finish(TimeNs end);

  // Outside CPU since the first pass, and the highest sum of outside RSS seen at one pass.
  double cpu_seconds() const { return total_cpu_; }
  double peak_rss_bytes() const { return peak_rss_; }
  // The `n` outside processes that used the most CPU, the most first.
  std::vector<Offender> Top(size_t n) const;
  const Stats& stats() const { return stats_; }

  static constexpr int kIdleAfterReads = 3;

 private:
  struct Entry;
  struct Pending;

  void List(TimeNs now);
  bool ReadDue(TimeNs now);  // true when a listing is called for
  bool ReadStat(Entry& e, TimeNs now);
  void ReadCommand(Entry& e);
  void Vanish(std::vector<std::shared_ptr<Entry>> gone);
  double Seen(const Entry& e, int depth) const;
  void Claim(Entry& parent, TimeNs now);
  bool IsOurs(pid_t ppid) const;
  // The owner of /proc/PID (its uid; -1 when gone), and a uid's name.
  int64_t OwnerOf(pid_t pid) const;
  std::string UserName(int64_t uid);
  std::unordered_map<int64_t, std::string> user_names_;

  model::RunBuilder* builder_;
  model::ResourceId host_resource_;
  std::string host_;
  Options options_;
  double seconds_per_tick_;
  double page_size_;
  int proc_fd_ = -1;
  void* proc_dir_ = nullptr;  // DIR* over proc_fd_'s directory
  std::string buffer_;

  int64_t pass_ = 0;
  int64_t listed_pass_ = 0;
  PidAllocationWatch pid_watch_{options_.proc_root};  // after options_
  bool finished_ = false;
  std::unordered_map<pid_t, std::shared_ptr<Entry>> entries_;   // listed at the last pass
  std::vector<std::shared_ptr<Entry>> dead_;                    // outside, exited, used CPU
  std::unordered_map<pid_t, std::vector<std::shared_ptr<Entry>>> pending_;  // vanished, by parent
  double dead_cpu_ = 0;
  double total_cpu_ = 0;
  double peak_rss_ = 0;
  model::SeriesId s_cpu_ = 0, s_rss_ = 0;
  Stats stats_;
};

}  // namespace grademl::collect
