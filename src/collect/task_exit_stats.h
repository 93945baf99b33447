// TaskExitStats: the kernel's per-task exit records (taskstats, over generic netlink), so
// that each process's own CPU time and I/O at its end are known exactly, whoever reaps it
// and however soon. The kernel sends one record per exiting task (thread) to every socket
// registered for the CPU the task exits on; Open registers for all possible CPUs, which
// needs root or CAP_NET_ADMIN (the same privilege as ProcessEvents), the initial user and
// PID namespaces (the kernel refuses a listener elsewhere) and the initial network namespace
// (the kernel accepts a listener elsewhere but sends there only: Open checks that a record
// reaches it). Without them Open says why and returns null.
//
// Registration is machine-wide: the records of every task of the machine arrive, so Drain
// is cheap (a few system calls per batch of records, no allocation per record beyond `out`
// and a command name longer than 15 bytes). The socket is non-blocking: Drain never waits.
// When its buffer overflows the kernel drops records until the queue has been emptied, and
// says so once (ENOBUFS): `lost()` counts those overflows, `dropped_records()` the records
// the kernel dropped; loss is counted, never silent.
//
// What a record is, as the kernel fills it (kernel/taskstats.c, kernel/tsacct.c):
// - CPU and I/O are the task's own: a thread's, not its process's total, and never its
//   children's. A process's own CPU is the sum of its threads' records. The kernel's
//   thread-group aggregate (TASKSTATS_TYPE_AGGR_TGID) has no ac_utime/ac_stime and no I/O
//   (fill_tgid_exit adds delay accounting only, whose run-time sum may miss a sibling
//   exiting at the same instant), so it is not parsed: its presence marks the group's end.
// - The record is sent in do_exit before the task's memory and files are released, so CPU
//   spent tearing down a large address space after it is in wait4's rusage, not here.
// - The I/O counts (rchar, wchar, read_bytes, write_bytes, cancelled_write_bytes) are
//   rounded down to a multiple of 1024 by the kernel (KB_MASK in xacct_add_tsk).
// - Ids are those of the initial PID namespace; the parent is the one at exit, before the
//   task's own children are re-parented.
// - Records of different CPUs arrive in no particular order: the record that closes a
//   thread group (`group_exit`) may come before a sibling thread's. All of a process's
//   records are queued before its parent can reap it (do_exit sends them before
//   exit_notify), unless the buffer overflowed.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace grademl::collect {

class TaskExitStats {
 public:
  // One task (thread) that exited.
  struct Record {
    pid_t tid = 0;   // ac_pid
    pid_t tgid = 0;  // ac_tgid; 0 (unknown) from kernels whose struct predates version 12
    pid_t ppid = 0;  // ac_ppid: the parent process at exit
    // The last task of its thread group: the process is gone. From AGROUP in ac_flag
    // (version >= 12, every process) or, on any version, the message also carrying the
    // thread-group aggregate (only processes that ever had a second thread).
    bool group_exit = false;
    int exit_status = 0;  // ac_exitcode, as wait() reports it (exit code << 8, or the signal)
    // The task's own CPU time as wait4 and /proc/PID/stat count it: the scheduler's exact run
    // time (cpu_run_virtual_total, its sum_exec_runtime in ns) split between user and system
    // in the ratio of the kernel's tick samples ac_utime:ac_stime (the kernel's
    // cputime_adjust). The samples alone can be far off: on a virtual machine, ticks stolen
    // by the hypervisor are charged to no task (25% less than wait4 measured here).
    double utime_s = 0;
    double stime_s = 0;
    // Whether the run time was there. The kernel fills it whenever it is built with
    // CONFIG_TASK_DELAY_ACCT (since 5.14 whatever kernel.task_delayacct says; before, unless
    // booted with nodelayacct); without it, utime_s and stime_s are the tick samples.
    bool exact_cpu = false;
    double elapsed_s = 0;     // ac_etime: from the task's start to its exit
    int64_t start_epoch_s = 0;  // ac_btime64 (ac_btime before version 10): start, in whole seconds
    uint64_t read_chars = 0;    // rchar: bytes read by read-like system calls (KiB-rounded)
    uint64_t write_chars = 0;   // wchar: bytes written by write-like system calls (KiB-rounded)
    uint64_t read_bytes = 0;    // storage I/O: bytes brought in from storage (KiB-rounded)
    uint64_t write_bytes = 0;   // storage I/O: bytes dirtied in the page cache (KiB-rounded)
    uint64_t cancelled_write_bytes = 0;  // of those, dirty bytes truncated before writeback
    uint64_t max_rss_kb = 0;    // hiwater_rss of the task's memory (shared by its threads)
    uint64_t minor_faults = 0, major_faults = 0;
    uint64_t voluntary_switches = 0, involuntary_switches = 0;
    uint16_t version = 0;  // the kernel's TASKSTATS_VERSION
    std::string comm;      // ac_comm: the task's command name (at most 15 bytes on Linux today)
  };

  // The receive buffer asked for by default: room for several thousand records.
  static constexpr int kDefaultReceiveBuffer = 8 << 20;

  // Registers for every possible CPU's exit records; null with `*error` set (one line) when
  // the kernel has no taskstats or refuses. `receive_buffer` is the socket's buffer in bytes
  // (SO_RCVBUFFORCE where allowed, else SO_RCVBUF within net.core.rmem_max).
  static std::unique_ptr<TaskExitStats> Open(std::string* error, int receive_buffer = kDefaultReceiveBuffer);
  // Open in two steps, so that the wait for the delivery check's probe thread overlaps
  // other work: StartOpen registers and starts the probe, FinishOpen checks that its
  // record came (Open is both at once). An Opening dropped unfinished deregisters.
  struct Opening {
    ~Opening();
    int fd = -1;  // -1: failed, see error
    uint16_t family = 0;
    std::string cpus;
    std::string error;
    std::vector<Record> pending;
    uint64_t overflows = 0;
    pthread_t probe{};
    pid_t probe_tid = 0;
    bool probe_started = false;
  };
  static std::unique_ptr<Opening> StartOpen(int receive_buffer = kDefaultReceiveBuffer);
  static std::unique_ptr<TaskExitStats> FinishOpen(std::shared_ptr<Opening> opening, std::string* error);
  // Deregisters and closes.
  ~TaskExitStats();
  TaskExitStats(const TaskExitStats&) = delete;
  TaskExitStats& operator=(const TaskExitStats&) = delete;

  // Readable when records wait.
  int fd() const { return fd_; }
  // Appends the records waiting, at most about `max` of them (a read's batch may go past it).
  void Drain(std::vector<Record>* out, size_t max = 4096);
  // How many times the socket's buffer overflowed (records were lost: the kernel drops every
  // record from the overflow until the queue has been read empty).
  uint64_t lost() const { return lost_; }
  // How many records the kernel dropped for this socket (its drop counter, read from
  // /proc/net/netlink after each overflow); at least lost() once an overflow was seen.
  uint64_t dropped_records() const { return dropped_records_; }
  // Datagrams longer than the read buffer (a future kernel's much larger struct): dropped,
  // counted.
  uint64_t truncated() const { return truncated_; }

 private:
  TaskExitStats(int fd, uint16_t family_id, std::string cpumask);
  void ReadDrops();

  int fd_ = -1;
  uint16_t family_id_ = 0;
  std::string cpumask_;  // as registered, to deregister the same CPUs
  uint64_t lost_ = 0;
  uint64_t dropped_records_ = 0;
  uint64_t truncated_ = 0;
  uint64_t inode_ = 0;  // the socket's, to find its line in /proc/net/netlink
  std::vector<Record> pending_;  // records that arrived while Open waited for the kernel's answer
  std::unique_ptr<char[]> buffer_;  // Drain's batch of datagrams
};

// Parses one datagram from the taskstats family `family_id` into `out`: one record per
// TASKSTATS_TYPE_AGGR_PID whose struct is complete. Other families, other commands, errors
// and truncated or malformed messages yield nothing. Exposed for tests; never reads past
// `size`, whatever the bytes.
void ParseTaskstatsDatagram(const char* data, size_t size, uint16_t family_id, std::vector<TaskExitStats::Record>* out);

}  // namespace grademl::collect
