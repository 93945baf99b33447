// ProcessEvents: the kernel's process events (the proc connector: a NETLINK_CONNECTOR socket
// subscribed to CN_IDX_PROC), so that the process monitor learns of every fork, exec and
// exit of the machine as it happens, however short the process. Subscribing needs root or
// CAP_NET_ADMIN; without it Open says why and the monitor finds processes by sampling /proc.
//
// The socket is non-blocking: Drain reads what is waiting and never waits. Events of
// threads (clone with CLONE_THREAD, a non-leader thread's exit) are dropped here; what
// comes out is per process (thread group). When the socket's buffer overflowed, some
// events were lost (`lost()` counts the overflows): the monitor's /proc scans still find
// every process that lives across a pass.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace grademl::collect {

class ProcessEvents {
 public:
  struct Event {
    enum class Kind { kFork, kExec, kExit };
    Kind kind = Kind::kFork;
    pid_t pid = 0;     // the process (thread group id)
    pid_t parent = 0;  // kFork: the parent process
    int exit_status = 0;  // kExit: as wait() reports it (exit code << 8, or the signal)
    int64_t monotonic_ns = 0;  // when it happened, as the kernel stamped it (CLOCK_MONOTONIC)
  };

  // Subscribes; null with `*error` set when the kernel refuses (no CAP_NET_ADMIN, no
  // connector in the kernel, ...).
  static std::unique_ptr<ProcessEvents> Open(std::string* error);
  ~ProcessEvents();
  ProcessEvents(const ProcessEvents&) = delete;
  ProcessEvents& operator=(const ProcessEvents&) = delete;

  // Readable when events wait.
  int fd() const { return fd_; }
  // Appends the events waiting, at most `max` of them.
  void Drain(std::vector<Event>* out, size_t max = 4096);
  // How many times the socket's buffer overflowed (events were lost).
  uint64_t lost() const { return lost_; }

 private:
  explicit ProcessEvents(int fd) : fd_(fd) {}
  int fd_ = -1;
  uint64_t lost_ = 0;
};

// Parses one datagram from the proc connector into `out` (threads' events dropped).
// Exposed for tests; never reads past `size`.
void ParseProcessEventDatagram(const char* data, size_t size, std::vector<ProcessEvents::Event>* out);

}  // namespace grademl::collect
