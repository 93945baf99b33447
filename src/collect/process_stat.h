// Parsers for the per-process files of /proc: stat, io and status. Pure functions over
// text, so they are tested on fixed strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace grademl::collect {

// The fields of /proc/PID/stat that GradeML uses. Times are in clock ticks.
struct ProcessStat {
  int32_t pid = 0;
  std::string_view comm;  // points into the parsed text
  char state = '?';       // R, S, D, Z, ...
  int32_t ppid = 0;
  uint64_t minflt = 0, majflt = 0;  // page faults of this process's threads (not children's)
  uint64_t utime = 0, stime = 0;    // this process's threads, ticks
  uint64_t cutime = 0, cstime = 0;  // reaped children (and their reaped children), ticks
  int64_t num_threads = 0;
  uint64_t starttime = 0;  // ticks after boot
  uint64_t rss_pages = 0;
};

// Parses a /proc/PID/stat line. The command name may contain spaces and parentheses;
// it runs to the LAST ')' of the line. False when the text is not a stat line.
bool ParseProcessStat(std::string_view text, ProcessStat* out);

// /proc/PID/io. read_bytes/write_bytes are storage I/O; rchar/wchar count every byte
// passed to read()/write()-like calls. Includes the I/O of reaped children.
struct ProcessIo {
  uint64_t rchar = 0, wchar = 0, read_bytes = 0, write_bytes = 0;
};
bool ParseProcessIo(std::string_view text, ProcessIo* out);

// Whether a wait channel (/proc/PID/wchan: the kernel function a sleeping task waits in)
// is a wait on a socket: receiving, or sending into a full buffer.
bool IsSocketWaitChannel(std::string_view wchan);

// /proc/PID/schedstat: the scheduler's figures for the process's MAIN THREAD only (the
// thread whose tid is the pid): time on a CPU, time runnable but waiting on a run queue
// (ns), and the number of timeslices run. Needs CONFIG_SCHED_INFO, not delay accounting.
struct ProcessSchedStat {
  uint64_t run_ns = 0, wait_ns = 0, timeslices = 0;
};
bool ParseProcessSchedStat(std::string_view text, ProcessSchedStat* out);

// Context switches from /proc/PID/status.
struct ProcessContextSwitches {
  uint64_t voluntary = 0, involuntary = 0;
};
bool ParseProcessContextSwitches(std::string_view text, ProcessContextSwitches* out);

// /proc/PID/smaps_rollup: the process's resident memory (Rss) and its proportional set size
// (Pss: each resident page divided by the number of processes mapping it), in bytes.
struct ProcessMemoryRollup {
  uint64_t rss_bytes = 0, pss_bytes = 0;
};
bool ParseSmapsRollup(std::string_view text, ProcessMemoryRollup* out);

// argv from /proc/PID/cmdline (NUL-separated) joined with spaces, at most max_len bytes
// ("..." marks a cut). Empty for kernel threads and zombies.
std::string FormatCmdline(std::string_view raw, size_t max_len = 400);

}  // namespace grademl::collect
