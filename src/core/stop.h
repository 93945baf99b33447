// Stop requests: how the work grademl does besides waiting on the workload (matching log
// rules, hashing, restoring, importing, uploading, writing the last of a run, building a
// report) learns that grademl was asked to stop (SIGINT, SIGTERM, SIGHUP, SIGQUIT), so that
// it can end early, between two units of work, and grademl acts on the signal within a
// second whatever it is doing (docs/reliability.md, "Signals are acted on within a second").
//
// Two ways a signal becomes a stop request:
// - A loop that reads the signals (a signalfd: Recording, the agent) calls RequestStop when
//   it reads one. Until then the signal is pending and blocked; StopCheck sees it as well
//   (sigpending), so work on any thread notices a signal the loop has not read yet.
// - A command that reads no signals installs StopSignalHandlers: a handler that calls
//   RequestStop, so that the default action (death) does not cut its work off mid-write.
//
// Everything here is thread-safe; RequestStop is also async-signal-safe.
#pragma once

#include <signal.h>

#include <cstdint>

namespace grademl {

// SIGINT, SIGTERM, SIGHUP or SIGQUIT: the signals grademl treats as "stop".
bool IsStopSignal(int signo);

// Counts a stop request (signal `signo`).
void RequestStop(int signo);
// Stop requests counted so far in this process.
uint64_t StopRequests();
// The signal of the latest stop request (0: none yet).
int LastStopSignal();
// Whether a stop signal is pending for this process or thread (blocked and not read yet).
// Its number goes to *signo when given.
bool StopSignalPending(int* signo = nullptr);

// "Has grademl been asked to stop since I began?": true once a stop request was counted
// after construction, or while a stop signal is pending. Cheap enough to ask between units
// of work: an atomic load and one sigpending(2) call (well under a microsecond).
class StopCheck {
 public:
  // Requests counted before construction do not count (pending signals do).
  StopCheck() : since_(StopRequests()) {}
  // Every request counts, however old.
  static StopCheck Any() { return StopCheck(0); }
  // Requests counted after StopRequests() returned `requests` count.
  static StopCheck Since(uint64_t requests) { return StopCheck(requests); }

  bool operator()() const;
  // The signal that stopped (0 when not stopped, or not known).
  int signo() const;

 private:
  explicit StopCheck(uint64_t since) : since_(since) {}
  uint64_t since_;
};

// Installs a handler that calls RequestStop for SIGINT, SIGTERM, SIGHUP and SIGQUIT, for as
// long as the object lives (the previous dispositions come back after). The `kill_after`-th
// signal (default: the third) gets the default action instead: a grademl whose stop takes
// too long can still be killed from the keyboard.
class StopSignalHandlers {
 public:
  explicit StopSignalHandlers(int kill_after = 3);
  ~StopSignalHandlers();
  StopSignalHandlers(const StopSignalHandlers&) = delete;
  StopSignalHandlers& operator=(const StopSignalHandlers&) = delete;

  // From now on a stop signal ends the process at once with `exit_code`, after writing
  // `message` (a line, kept by the caller) to stderr: for the last stretch of a command whose
  // work is done and stored (the report after a run), where stopping means exiting.
  static void ExitOnStop(int exit_code, const char* message);

 private:
  struct sigaction previous_[4] {};
};

}  // namespace grademl
