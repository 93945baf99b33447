// OutputRelay: lets grademl read a single command's stdout and stderr (for log rules) while
// passing them through unchanged, in a way that cannot harm the command if grademl dies.
//
// Each of grademl's stdout and stderr that is NOT a terminal is replaced by a pipe (in
// grademl, so that the command and grademl's own messages inherit it) whose read end only a
// relay process holds. The relay copies every byte, as it comes, to the original stdout or
// stderr, and a copy into a "tap" pipe that grademl reads. The relay is a process of its own
// (double-forked, in its own session, ignoring SIGPIPE and terminal signals), not grademl's
// child, so that:
// - if grademl is killed, the relay keeps copying: the command's next write neither blocks
//   nor gets SIGPIPE/EPIPE, and the relay ends when the last writer closes the pipe;
// - a tap that grademl does not read fast enough (or no longer reads) only loses grademl's
//   copy (counted), never the command's output.
// A stream that IS a terminal stays the terminal, untouched (the command still sees a
// terminal); its lines are not read, and log rules see only the other stream.
#pragma once

#include <sys/types.h>

#include <memory>

#include "core/status.h"
#include "core/time.h"

namespace grademl::record {

class OutputRelay {
 public:
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  // Starts the relay for fds 1 and 2 (those not terminals). Call before anything else
  // forks or opens files (the relay closes every other fd it inherits).
  static StatusOr<std::unique_ptr<OutputRelay>> Start();

  // The tap of stream 1 (stdout) or 2 (stderr): non-blocking, EOF once the relay ends; -1
  // when that stream is not relayed.
  int tap_fd(int stream) const { return tap_[stream - 1]; }
  bool relaying() const { return tap_[0] >= 0 || tap_[1] >= 0; }
  // Bytes written into the relay (by the command or grademl) that it has not read yet, over
  // both streams: 0 once it has taken everything written so far.
  size_t Unread() const;

  // Gives fds 1 and 2 back their original files (closing grademl's write ends) and waits up
  // to `wait` for the relay to copy what is left and end (it outlives the wait when a
  // process that outlived the command still holds the pipe).
  void Finish(DurationNs wait);

 private:
  OutputRelay() = default;
  int saved_[2] = {-1, -1};  // the original stdout, stderr (relayed streams only)
  int tap_[2] = {-1, -1};
  int done_ = -1;            // EOF when the relay has ended
};

}  // namespace grademl::record
