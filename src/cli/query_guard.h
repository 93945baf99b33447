// Keeps `grademl query` within its time limit and stops it at SIGINT, SIGTERM or SIGHUP,
// whatever it is doing. A thread waits for the deadline or one of those signals (blocked in
// every other thread) and interrupts the running statement (QuerySession::Interrupt), which
// then ends with the one-line error; when the command has not ended a moment later (a step
// SQLite cannot interrupt: the copy of a PostgreSQL run, the analyses, one long LIKE, a write
// to an output nobody reads), the thread removes the command's private directory, writes
// the error itself and exits the process.
#pragma once

#include <signal.h>

#include <mutex>
#include <string>
#include <thread>

#include "core/status.h"
#include "core/time.h"
#include "store/query_session.h"

namespace grademl::cli {

class QueryGuard {
 public:
  // How long the thread waits, after interrupting, for the command to end by itself.
  static constexpr DurationNs kGrace = 500 * kNsPerMs;

  // Starts watching: the deadline is `timeout` from now (0: none). Blocks SIGINT, SIGTERM
  // and SIGHUP in the calling thread, so construct it before any other thread starts (they
  // inherit the mask), and before anything it must clean up exists.
  explicit QueryGuard(DurationNs timeout);
  ~QueryGuard();  // stops the thread; the signals are unblocked again
  QueryGuard(const QueryGuard&) = delete;
  QueryGuard& operator=(const QueryGuard&) = delete;

  // A directory the guard removes should it end the process (the command's private one,
  // made after the guard started, so that no signal can end the process between the two).
  void RemoveOnExit(std::string dir);

  // The session whose statement to interrupt, or nullptr before it closes. A session
  // watched after the guard fired is interrupted at once.
  void Watch(store::QuerySession* session);

  // Called when the command has written everything and is about to print its last error
  // (if any) and return: from then on the guard never exits the process. When the guard has
  // already begun to, this never returns (the process ends).
  void Finish();

  // Whether a deadline or a signal stopped the command, and with what: the one-line error
  // and the exit code (1 for the timeout, 128 + N for signal N).
  bool stopped() const;
  Status reason() const;
  int exit_code() const;

 private:
  void Loop();
  void Fire(const Status& reason, int exit_code);
  // Writes the error, removes the private directory and ends the process, unless the
  // command finished (then it returns).
  void ExitNow();

  const DurationNs timeout_;
  sigset_t signals_;
  sigset_t previous_mask_;
  int signal_fd_ = -1;
  int wake_fd_ = -1;

  mutable std::mutex mu_;
  std::string private_dir_;                 // guarded by mu_
  store::QuerySession* session_ = nullptr;  // guarded by mu_
  bool stopped_ = false;                    // guarded by mu_
  Status reason_;                           // guarded by mu_
  int exit_code_ = 0;                       // guarded by mu_
  bool finished_ = false;                   // guarded by mu_
  std::thread thread_;
};

}  // namespace grademl::cli
