// ProcessTreeMonitor: follows every process of the tree that `grademl run` launched, as one
// phase per process under its parent process's phase, with a process resource carrying its
// CPU, memory, I/O, thread, context-switch, scheduling (main thread) and page-fault series.
// It is the adapter between the machine and the books: it reads /proc, pidfds, the kernel's
// process events and exit records, decides what to read when (cost), and feeds what it
// finds as events to ProcessAccounting (collect/process_accounting.h), which keeps the
// accounting below and writes the phases and series.
//
// Discovery: each pass lists /proc and follows any new process whose parent is followed.
// Where the kernel allows it (root or CAP_NET_ADMIN), its process events (ProcessEvents, the
// proc connector) say at once when a followed process forks or execs, so that a process
// that lives less than a pass still becomes a phase with its own name and CPU; otherwise
// such a process is seen only through its parent's counters ("cpu.unseen_children").
// Reading: a followed process's stat and io files stay open and are re-read with pread.
// Exits: a pidfd per process wakes the sampling thread the moment a process exits, so its
// final counters are usually read while it is a zombie and its end time is exact.
//
// No CPU time or I/O vanishes when a process exits between two passes, or lives and dies
// unseen: the kernel adds a reaped child's totals to its parent (cutime/cstime, and the
// parent's /proc/PID/io). When children vanish, the parent is read again and the growth of
// those counters is shared out: each vanished child gets at least what was last seen of
// it, the rest goes to the children's unseen tails in proportion to their recent rates
// (bounded by threads x time), and what nobody can claim for a whole pass becomes the
// parent's "cpu.unseen_children". Processes reaped by grademl itself (the root, orphans
// re-parented to grademl as child subreaper) come with their exact rusage.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "collect/cpu_limits.h"
#include "collect/process_accounting.h"
#include "collect/proc_file.h"
#include "collect/pss_budget.h"
#include "collect/task_exit_stats.h"
#include "model/run_builder.h"

namespace grademl::collect {

class ProcessTreeMonitor {
 public:
  struct Options {
    std::string proc_root = "/proc";
    int slow_every = 10;  // read /proc/PID/status (context switches) every N passes
    PssBudget::Options pss;  // when smaps_rollup is read (memory.pss; see pss_budget.h)
    std::string cgroup_root = "/sys/fs/cgroup";  // where CPU quotas are read (collect/cpu_limits.h)
    // Follow forks and execs through the kernel's process events where allowed.
    bool process_events = true;
    // With them, each process's own CPU and I/O at its end from the kernel's exit records
    // (taskstats, collect/task_exit_stats.h), whoever reaps it; without, they are shared out
    // of the parent's reaped-children counters (the rule above).
    bool exit_records = true;
    // With them: the registration begun earlier by TaskExitStats::StartOpen (its delivery
    // check overlapping the caller's other work), finished here instead of opening anew.
    std::shared_ptr<TaskExitStats::Opening> exit_records_opening;
    // The most processes followed through process events (a fork bomb must not grow
    // memory without bound); beyond it, processes are found by sampling only, and counted
    // in processes_dropped().
    size_t max_event_processes = 20000;
    // Tests only: called at named points of a pass ("reread_parent": a parent whose children
    // were reaped is about to be read again; "parent_read_again": it was, and its children
    // are about to be looked at again; "resolved": every live parent was resolved),
    // under the monitor's lock, so that a test can make a process exit or be reaped exactly
    // there. Must not call into the monitor.
    std::function<void(const char* stage)> test_stage;
  };

  ProcessTreeMonitor(model::RunBuilder* builder, model::PhaseId run_phase, model::ResourceId host_resource,
                     std::string host, Options options);
  ~ProcessTreeMonitor();
  ProcessTreeMonitor(const ProcessTreeMonitor&) = delete;
  ProcessTreeMonitor& operator=(const ProcessTreeMonitor&) = delete;

  // Starts following `pid`, a command grademl just forked, as a phase under `parent_phase`
  // (0: the run phase).
  void AddRoot(pid_t pid, const std::vector<std::string>& argv, TimeNs start_ns, model::PhaseId parent_phase = 0);
  // Calls `launch` (which forks and returns the child's pid, or -1) and follows the child as
  // AddRoot does, with no pass in between. `launch` must not call into this monitor.
  // `started` (optional) is called with the child's pid and says whether the command really
  // started (its exec succeeded): a child that could not start is grademl's own copy, so
  // none of its counters are recorded as samples, and the analyses call its time unknown
  // instead of guessing what bound it. Passes and the kernel's events go on while it waits
  // (the children of a command that did start are followed meanwhile), but no sample or
  // exit tag of the child is recorded before its answer. `started` must not call into this
  // monitor either.
  pid_t LaunchRoot(const std::function<pid_t()>& launch, const std::vector<std::string>& argv, TimeNs start_ns,
                   model::PhaseId parent_phase, const std::function<bool(pid_t)>& started = nullptr);
  // One sampling pass over the tree.
  void Sample(TimeNs now);
  // An fd that becomes readable when a followed process exits (-1 if pidfds are unsupported),
  // and, where the kernel's process events are used, when any process of the machine forks,
  // execs or exits (so that a short process is named while its command line can be read).
  int exit_notification_fd() const { return epoll_fd_; }
  // Reads the final counters of processes that just exited, while they are zombies.
  void HandleExitNotifications(TimeNs now);
  // A followed process exited and is a zombie that grademl is about to reap (the root, or
  // an orphan re-parented to it): reads its final counters, its own CPU apart from its
  // reaped children's, which the rusage of the reaping cannot tell apart.
  void OnExited(pid_t pid, TimeNs t);
  // A followed process was reaped by grademl (the root, or an orphan re-parented to it).
  void OnReaped(pid_t pid, TimeNs t, const struct rusage& usage);
  // A last pass: resolves every exit and ends every open phase at `end`.
  void Finish(TimeNs end);
  // Processes followed and alive.
  size_t alive() const;
  // Sends `signo` to every followed process that is still running and whose process group
  // is not one of `skip_groups` (those reach it through kill(-group)): processes that left
  // their command's group (setsid, setpgid) are signalled one by one, through their pidfd
  // so that a reused pid is never hit. Looks for new processes first. Returns how many.
  int SignalOutsideGroups(int signo, const std::vector<pid_t>& skip_groups);
  // Whether a followed process is still running, checked now (not as of the last pass);
  // processes forked since the last pass are looked for first. Zombies do not count.
  bool AnyRunning();
  // The phase and resource of the latest followed process with this pid, and when it ended
  // (0 while alive); all 0 if no such process is followed.
  struct ProcessRef {
    model::PhaseId phase = 0;
    model::ResourceId resource = 0;
    TimeNs end_ns = 0;
  };
  ProcessRef Lookup(pid_t pid) const;
  // smaps_rollup reads so far and the CPU time they were charged (for tests and benchmarks).
  uint64_t pss_reads() const;
  DurationNs pss_spent_ns() const;

  // How processes are found: "proc_connector" (the kernel's process events) or "sampling"
  // (/proc scans only: processes shorter than a pass may be missing).
  std::string process_events() const { return events_ ? "proc_connector" : "sampling"; }
  // Why the kernel's process events are not used ("" when they are).
  const std::string& process_events_error() const { return events_error_; }
  // Processes forked in the tree that process events did not follow (the cap was reached);
  // and how many times the kernel's event buffer overflowed.
  uint64_t processes_dropped() const;
  uint64_t process_events_lost() const;
  // How the CPU and I/O of processes that ended are known: "exit_records" (the kernel's
  // per-task exit records: exact) or "share_out" (shared out of their parents' reaped-
  // children counters by rule: exact only for a process read as a zombie), and why not the
  // records ("" when used). And how often the records' buffer overflowed (records lost:
  // those processes fell back to the share-out).
  std::string process_accounting() const;
  const std::string& process_accounting_error() const { return exits_error_; }
  uint64_t exit_records_lost() const;

 private:
  using Proc = ProcessAccounting::Process;
  using State = ProcessAccounting::State;
  // What the adapter holds of a followed process: its open /proc files, its pidfd, when its
  // CPU limits are read again. By Process::index.
  struct ProcIo {
    ProcFile stat_file, io_file, status_file, schedstat_file, wchan_file, smaps_rollup_file;
    int pidfd = -1;
    TimeNs limits_due = 0;
  };

  model::RunBuilder* builder_;
  model::PhaseId run_phase_;
  std::string host_;
  Options options_;
  double seconds_per_tick_;
  double page_size_;
  pid_t self_pid_;

  mutable std::mutex mu_;
  std::unique_ptr<ProcessAccounting> acc_;            // the books (created once events are known)
  std::vector<std::unique_ptr<ProcIo>> io_;           // by Process::index
  std::unordered_map<pid_t, uint64_t> foreign_;        // pid -> start time, not in the tree
  bool launched_before_ = false;  // LaunchRoot was called (the first call marks the host's processes foreign)
  int epoll_fd_ = -1;
  std::unique_ptr<class ProcDirectory> proc_dir_;
  PidAllocationWatch pid_watch_;
  PssBudget pss_budget_;
  std::unique_ptr<CpuLimitsReader> cpu_limits_;
  std::unique_ptr<class ProcessEvents> events_;
  std::string events_error_;
  std::unique_ptr<TaskExitStats> exits_;
  std::string exits_error_;
  std::vector<TaskExitStats::Record> exit_batch_;  // DrainExitRecords's buffer
  size_t followed_by_events_ = 0;
  uint64_t processes_dropped_ = 0;

  ProcIo& io(const Proc* p) { return *io_[p->index]; }
  // `now` for work done under the lock: never before the moment the lock was taken
  // (LaunchRoot holds it through a fork; a time read before waiting for it could
  // stamp an exit before it happened, or a phase's end before its start).
  static TimeNs AfterLock(TimeNs now);
  void SampleLocked(TimeNs now);
  void HandleExitNotificationsLocked(TimeNs now);
  // Opens a process's files, reads its start and name, and has the books follow it.
  Proc* Follow(pid_t pid, Proc* parent, TimeNs now, const std::string& fallback_name, TimeNs start_hint,
               model::PhaseId root_phase, bool root);
  void AddRootLocked(pid_t pid, const std::vector<std::string>& argv, TimeNs start_ns, model::PhaseId parent_phase);
  void Discover(TimeNs now);
  // Follows the forks and execs the kernel reported since the last call.
  void DrainProcessEvents(TimeNs now);
  // Names a process's phase after its command line, read now (after an exec).
  void RenameFromCmdline(Proc* p);
  // Reads a process's counters and hands them to the books; false when it is gone.
  // `exited`: its pidfd said it exited, so whatever can still be read is final. `with_io`
  // false: I/O is not read (a read that no check of reaped children follows: the parent's
  // I/O may then hold a child's that nobody has handed out yet, and would be emitted as the
  // parent's own).
  bool ReadProc(Proc* p, TimeNs now, bool slow, bool exited, bool with_io = true);
  // Reads PSS where pages can be shared and the budget allows (pss_budget.h).
  void SamplePss(const std::vector<Proc*>& order, TimeNs now);
  static int PssFamily(const Proc* p);
  // Reads the cores the process may use (affinity, cgroup quota) when due, and records them.
  void RecordCpuLimits(Proc* p, TimeNs t);
  // The books say it is gone: its pidfd and files but stat are closed (stat reads until its
  // parent reaps it).
  void OnGone(Proc* p);
  // Reads an exited process's final counters (while it is a zombie) and marks it gone.
  void ReadFinal(Proc* p, TimeNs now);
  // True once an exited process has been reaped by its parent.
  bool Reaped(Proc* p);
  // Finds the exited children a live parent reaped, reads it again until the read holds
  // exactly those, and has the books share out its counters.
  void ResolveLiveParent(Proc* parent, TimeNs now);
  // Reads the exit records waiting into the books.
  void DrainExitRecords();
  // Reads again the descendants of an exited process that are still thought alive, so that
  // those that died with it are known as exited before its counters are shared out.
  void SettleExitedSubtree(Proc* p, TimeNs t);
  void Unwatch(Proc* p);
};


}  // namespace grademl::collect
