// ProcessAccounting: the books of the process tree a run follows, as a state machine fed by
// events. It knows which process belongs to the run and under which parent, when each
// started and ended, its CPU, memory and I/O counters, and who a dead process's unread CPU
// and I/O are charged to (the share-out of a parent's reaped-children counters, exact exit
// records, "unseen children"); it writes phases, resources and samples through the model
// builder. It reads no file, no clock and makes no system call: ProcessTreeMonitor is the
// adapter that reads /proc, pidfds, the kernel's process events and exit records, and feeds
// it (docs/process-accounting.md, "The accounting state machine"). Not thread-safe: the
// monitor calls it under its lock.
//
// The events, in the words of the methods below:
//   Follow        a process joins the tree (launched, found by a pass, or forked)
//   Rename        it exec'd (a new command name and line)
//   ApplyReading  a /proc reading of it (stat, and io, schedstat, status, wchan when read)
//   ApplyFinalIo  its io was read after its exit, but its stat was gone already
//   MarkGone      it exited, or a read found it gone ("not found")
//   ApplyExitEvent / SetPendingExit   the kernel's exit event (how it ended, when)
//   ApplyExitRecord / SetExitRecordsLost   the kernel's per-task exit records, overflows
//   ResolveLiveParent   a live parent reaped these exited children (its counters read after)
//   ResolveDead   an exited process was reaped, with its final inclusive totals
//   Finish        the run ended: every process still open is taken as gone and resolved
#pragma once

#include <sys/types.h>

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "collect/task_exit_stats.h"
#include "core/time.h"
#include "model/run_builder.h"

namespace grademl::collect {

// Shares `total` among claimants: each first gets its `need` (scaled down when the total is
// short), then what is left goes out in proportion to `weight`, never past `cap` (water-
// filling). Returns what nobody could take. Exposed for tests.
struct Claim {
  double need = 0;
  double weight = 0;
  double cap = 0;     // the most this claimant may get beyond its need
  double granted = 0; // out: need + share
};
double ShareOut(double total, std::vector<Claim>& claims);

// A parent's reaped-children CPU that no followed child explains, per pass: user and system
// are decided together. Exposed for tests.
struct UnseenCpuStep {
  double user = 0, system = 0;                      // declared unseen children now
  double unclaimed_user = 0, unclaimed_system = 0;  // left for the next pass to decide
};
// `credit_*`: the parent's reaped-children counters less what was handed to children and
// already declared unseen; `unclaimed_*`: what the pass before left unclaimed. What stays
// unclaimed for a whole pass is unseen.
UnseenCpuStep DecideUnseenCpu(double credit_user, double credit_system, double unclaimed_user,
                              double unclaimed_system);

// One read of a process's /proc files, as the adapter found it. Only stat is always there;
// the other files are read when the adapter's cost rules say so.
struct ProcessReading {
  char state = 'S';  // R, S, D, Z, X, ...
  pid_t ppid = 0;
  uint64_t utime = 0, stime = 0, cutime = 0, cstime = 0;  // clock ticks
  int64_t num_threads = 1;
  double rss_bytes = 0;
  uint64_t minflt = 0, majflt = 0;
  // The process ran since its last read (its CPU moved, it is runnable or in disk wait, the
  // scheduler's run time grew, it is a zombie, or it was never read).
  bool ran = true;
  // io, where it was read (read_bytes, write_bytes, rchar, wchar; its reaped children's
  // included). `io_final`: read after its exit (its pidfd fired): the counters are final.
  // `with_io` false: the read must not change what is known of its I/O at all.
  std::optional<std::array<double, 4>> io;
  bool io_final = false;
  bool with_io = true;
  std::optional<std::array<uint64_t, 2>> sched;  // main thread's run, wait ns (schedstat)
  std::optional<std::array<uint64_t, 2>> ctx;    // voluntary, involuntary switches (status)
  std::optional<bool> on_socket;                 // wchan read: asleep on a socket
};

class ProcessAccounting {
 public:
  // Counters shared out between a parent and its exited children, in this order.
  enum Metric { kUser, kSystem, kReadBytes, kWriteBytes, kReadChars, kWriteChars, kNumMetrics };
  using Totals = std::array<double, kNumMetrics>;
  enum class State { kAlive, kGone, kResolved };

  // One followed process. The monitor reads it freely; it writes only the PSS fields (its
  // smaps_rollup reads, alive_children), the hold of a launch (start_pending, pending_exit)
  // and `comm` when a rename finds no command line; everything else changes through the
  // events.
  struct Process {
    size_t index = 0;  // its place in the order processes were followed (0, 1, ...)
    pid_t pid = 0;
    pid_t ppid = 0;
    uint64_t starttime = 0;  // /proc's start (ticks after boot): tells a reused pid apart
    Process* parent = nullptr;
    std::vector<Process*> children;
    State state = State::kAlive;
    model::PhaseId phase = 0;
    model::ResourceId resource = 0;
    model::SeriesId s_user = 0, s_system = 0, s_unseen = 0, s_rss = 0, s_rb = 0, s_wb = 0, s_rc = 0, s_wc = 0,
                    s_threads = 0, s_vcsw = 0, s_ivcsw = 0, s_sched_run = 0, s_sched_wait = 0, s_disk_wait = 0,
                    s_minflt = 0, s_majflt = 0, s_net_wait = 0, s_pss = 0, s_affinity = 0, s_quota = 0;
    std::string comm;

    bool never_started = false;  // a launched command whose exec failed: no samples
    // A launched command whose exec is not confirmed yet: no samples, and its exit event
    // (an exec that failed exits at once) kept for then.
    bool start_pending = false;
    std::optional<std::pair<int, TimeNs>> pending_exit;  // exit status, wall time (0: none)
    bool seen = false;        // read at least once
    uint64_t raw_utime = 0, raw_stime = 0, raw_cutime = 0, raw_cstime = 0;  // ticks at the last read
    int idle_passes = 0;      // reads in a row that found no CPU used
    int read_pass = 0;        // the pass of the last read
    bool cpu_final = false;   // stat was read after the exit: CPU counters are final
    bool io_final = false;    // io was read after the exit: I/O counters are final
    TimeNs last_t = 0;        // time of the last successful read
    TimeNs exit_t = 0;        // when the exit was noticed (exact with pidfds); never before start_t
    TimeNs start_t = 0;       // its phase's start
    TimeNs exit_event_t = 0;  // its exit as the kernel's exit event stamped it (0: none read)
    double own_user = 0, own_system = 0;
    double cut_user = 0, cut_system = 0;  // reaped children's CPU as the kernel reports it
    // The kernel's exit records of its threads (TaskExitStats), summed: its own CPU and I/O,
    // exact whoever reaps it. Believed once it is gone (every record of a process is queued
    // before it can be reaped), when no record was lost meanwhile and the run time was there.
    Totals exit_own{};
    int exit_records = 0;
    bool exit_cpu_exact = true;    // every record carried the exact run time
    double leader_elapsed_s = -1;  // its main thread's record: from its start to that record
    uint64_t exits_lost_at_follow = 0;  // the exit records' overflows when it was followed
    std::array<double, 4> reported_io{};  // read, write bytes; read, write chars (incl. reaped children)
    Totals rate{};                        // own rates over the last interval, per second
    int64_t threads = 1;
    double rss = 0;
    uint64_t vcsw = 0, ivcsw = 0;
    uint64_t sched_run_ns = 0, sched_wait_ns = 0;  // main thread, from schedstat
    uint64_t minflt = 0, majflt = 0;
    double disk_wait = 0;     // estimated seconds the main thread spent in state D
    double net_wait = 0;      // estimated seconds the main thread slept on a socket
    bool on_socket = false;   // the last read found it asleep on a socket
    // PSS (pss_budget.h), written by the monitor: the last smaps_rollup read, and whether
    // pages can be shared now.
    bool pss_sharing = false;
    TimeNs pss_t = 0;         // when smaps_rollup was last read (0: never)
    double pss_at_read = 0, rss_at_pss_read = 0;
    int pss_family = 0;       // followed relatives alive at that read
    bool pss_unreadable = false;  // smaps_rollup cannot be opened: RSS stands for PSS
    int alive_children = 0;   // followed children alive, counted at each pass

    // What has been handed to exited children out of this process's reaped-children counters.
    Totals children_explained{};
    double unseen_user = 0, unseen_system = 0;
    double unclaimed_user = 0, unclaimed_system = 0;  // left over last pass, unseen if it stays
    // The largest values emitted, so counters never go backwards, and the rate of the own
    // I/O emitted over the previous interval (reported I/O includes reaped children's).
    std::array<double, 4> emitted_io{};
    std::array<double, 4> own_io_rate{};
    TimeNs emitted_t = 0;

    double inclusive(Metric m) const {
      switch (m) {
        case kUser: return own_user + cut_user;
        case kSystem: return own_system + cut_system;
        default: return reported_io[m - kReadBytes];
      }
    }
  };

  struct Options {
    model::PhaseId run_phase = 0;
    model::ResourceId host_resource = 0;
    std::string host;
    double seconds_per_tick = 0.01;  // of /proc's CPU counters (1 / sysconf(_SC_CLK_TCK))
    // The kernel's exit records are used (TaskExitStats): gone processes may be exact.
    bool exit_records = false;
    // Keep resolved processes findable by pid for a while (their exit event may come late).
    bool keep_resolved = false;
    // Told when a process is taken as gone and when it is resolved (the monitor closes its
    // files there). Must not call back into the accounting.
    std::function<void(Process*)> on_gone;
    std::function<void(Process*)> on_resolved;
  };

  ProcessAccounting(model::RunBuilder* builder, Options options);
  ProcessAccounting(const ProcessAccounting&) = delete;
  ProcessAccounting& operator=(const ProcessAccounting&) = delete;

  // --- the tree ---
  struct FollowSpec {
    pid_t pid = 0;
    Process* parent = nullptr;  // null: a root (a launched command or an adopted orphan)
    std::string name;           // its phase's name
    TimeNs start = 0;           // its start where known (0: now)
    TimeNs now = 0;
    uint64_t starttime = 0;     // from /proc (0: not read)
    pid_t ppid = 0;             // from /proc (0: the parent's pid)
    std::string comm;
    model::PhaseId root_phase = 0;  // for a root: the phase it goes under (0: the run)
    bool root = false;              // listed among the roots (the passes walk from them)
  };
  // A process joins the tree: its phase (never before its parent's), resource and series.
  // Exit records read before it was followed are applied to it now.
  Process* Follow(const FollowSpec& spec);
  // Marks an already followed process as a root of its own (re-parented to grademl).
  void AddRoot(Process* p) { roots_.push_back(p); }
  const std::vector<Process*>& roots() const { return roots_; }
  // Followed processes, top-down from the roots (a parent before its children).
  std::vector<Process*> Order() const;
  Process* FindAlive(pid_t pid) const;
  Process* FindGone(pid_t pid) const;
  Process* FindRecentlyResolved(pid_t pid) const;
  // The latest followed process with this pid (any state; or not resolved), null if none.
  Process* FindLatest(pid_t pid, bool unresolved_only = false) const;
  const std::unordered_map<pid_t, Process*>& alive() const { return alive_; }
  const std::vector<std::unique_ptr<Process>>& processes() const { return procs_; }

  // --- passes ---
  // A sampling pass begins at `now`: its number is pass().
  void BeginPass(TimeNs now);
  int pass() const { return pass_; }

  // --- events ---
  // It exec'd: a new command name (and command line, "" when unread).
  void Rename(Process* p, const std::string& comm, const std::string& cmdline_name);
  // A /proc reading of a live (or zombie) process at `now`.
  void ApplyReading(Process* p, const ProcessReading& r, TimeNs now);
  // Its io was read after its exit, and then its stat was gone: the io is final.
  void ApplyFinalIo(Process* p, const std::array<double, 4>& io);
  // Its io was read after its exit, but nothing else of the read can be believed.
  void MarkIoFinal(Process* p) { p->io_final = true; }
  // It exited, or a read found it gone, at `t` (its end: when its exit was noted, else `t`;
  // never before what was seen of it alive). False if it was not alive.
  bool MarkGone(Process* p, TimeNs t);
  // Noticed that it exited at `t` (its pidfd fired or grademl is about to reap it): the
  // moment its exit is stamped with, before any final reading.
  void NoteExit(Process* p, TimeNs t) { p->exit_t = t; }
  // The kernel's exit event: how it ended (a tag) and when (wall time, 0: unknown).
  void ApplyExitEvent(Process* p, int exit_status, TimeNs t);
  // The exec of a launched command is confirmed (or not): its held exit event applies.
  void ConfirmStart(Process* p, bool started);
  // One exit record of the machine: to the followed process it belongs to, or kept (its
  // fork may be read after it) among the latest few.
  void ApplyExitRecord(const TaskExitStats::Record& r);
  // The exit records' overflows so far (records of processes alive then may be missing).
  void SetExitRecordsLost(uint64_t lost) { exit_records_lost_ = lost; }
  // The cores it may use (0: unknown), recorded at `t`.
  void RecordCpuLimits(Process* p, TimeNs t, double affinity_cores, double quota_cores);

  // --- resolution ---
  // A live parent's reaped-children counters not explained by children or unseen yet.
  bool HasUnexplainedChildCpu(const Process* parent) const;
  // A live parent, read after it reaped the exited children `reaped` (all of them in its
  // counters now): their CPU and I/O are shared out of its counters, they are resolved,
  // and what no child claimed for a whole pass becomes its "unseen children".
  void ResolveLiveParent(Process* parent, const std::vector<Process*>& reaped, TimeNs now);
  // An exited process is resolved from `inclusive_final`, what its parent's counters grant
  // it (its reaped children included), with its exited descendants. Returns the user and
  // system CPU its subtree was given in all, for its parent's books.
  std::array<double, 2> ResolveDead(Process* p, const Totals& inclusive_final);
  // Reaped by grademl itself, with the exact rusage totals (CPU seconds; storage I/O bytes
  // from 512-byte blocks): resolves it.
  void ResolveReaped(Process* p, TimeNs t, double user_s, double system_s, double in_bytes, double out_bytes);
  // The run ended at `end`: every process still alive is taken as gone and every gone one
  // resolved from what was last seen of it.
  void Finish(TimeNs end);
  // Samples of a process at `t` (counters never go backwards).
  void EmitSamples(Process* p, TimeNs t);
  // Drops resolved leaves from under `p`, so that passes do not walk the dead.
  static void PruneResolved(Process* p);

 private:
  model::RunBuilder* builder_;
  Options options_;
  std::vector<std::unique_ptr<Process>> procs_;  // every process ever followed
  std::unordered_map<pid_t, Process*> alive_;    // followed and not known to be gone
  std::unordered_map<pid_t, Process*> gone_;     // exited, not resolved yet (zombies among them)
  std::unordered_map<pid_t, Process*> recently_resolved_;  // for exit events that come late
  std::vector<Process*> roots_;
  int pass_ = 0;
  TimeNs last_pass_t_ = 0;
  DurationNs pass_dt_ = 0;
  uint64_t exit_records_lost_ = 0;
  static constexpr size_t kRecentExitRecords = 4096;
  std::deque<TaskExitStats::Record> recent_exit_records_;  // of no followed process, the latest

  void ApplyExitRecordTo(Process* p, const TaskExitStats::Record& r);
  void ClaimRecentExitRecords(Process* p);
  bool ExitRecordsExact(const Process* p, Metric m) const;
  double AfterRecordWindow(const Process* p) const;
  static std::array<double, 2> ExactOwnCpu(const Process* p);
  Claim TailClaim(const Process* c, Metric m) const;
  Claim OwnTailClaim(const Process* c, Metric m) const;
  void EndPhase(Process* p);
};

}  // namespace grademl::collect
