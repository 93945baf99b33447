#include "record/output_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace grademl::record {
namespace {

constexpr int kTapPipeBytes = 1 << 20;  // grademl's copy may lag by this much before it drops

// Writes all of `n` bytes to a blocking fd; false when the fd is dead (EPIPE, closed...).
bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// The relay's loop: copies each input to its output and its tap until every input ends.
[[noreturn]] void RelayMain(int in[2], int out[2], int tap[2]) {
  bool tap_alive[2] = {tap[0] >= 0, tap[1] >= 0};
  bool out_alive[2] = {true, true};
  char buf[65536];
  while (in[0] >= 0 || in[1] >= 0) {
    pollfd fds[2];
    int map[2], n = 0;
    for (int k = 0; k < 2; ++k) {
      if (in[k] < 0) continue;
      fds[n] = {in[k], POLLIN, 0};
      map[n++] = k;
    }
    if (poll(fds, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR) continue;
      _exit(1);
    }
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      int k = map[i];
      ssize_t got = read(in[k], buf, sizeof buf);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        close(in[k]);
        in[k] = -1;
        continue;
      }
      size_t len = static_cast<size_t>(got);
      // The command's output first and whole; a dead destination (a closed pager) drops
      // it, as it would have failed for the command, but the pipe is still drained.
      if (out_alive[k] && !WriteAll(out[k], buf, len)) out_alive[k] = false;
      if (tap_alive[k]) {
        ssize_t w = write(tap[k], buf, len);  // non-blocking: a full tap drops grademl's copy
        if (w < 0 && errno == EPIPE) {
          tap_alive[k] = false;  // grademl is gone
          close(tap[k]);
        }
      }
    }
  }
  _exit(0);
}

}  // namespace

StatusOr<std::unique_ptr<OutputRelay>> OutputRelay::Start() {
  std::unique_ptr<OutputRelay> relay(new OutputRelay());
  int in[2][2] = {{-1, -1}, {-1, -1}}, tap[2][2] = {{-1, -1}, {-1, -1}}, done[2] = {-1, -1};
  bool any = false;
  for (int k = 0; k < 2; ++k) {
    int fd = k + 1;
    if (fcntl(fd, F_GETFD) < 0 || isatty(fd)) continue;  // closed, or a terminal: untouched
    if (pipe2(in[k], O_CLOEXEC) != 0 || pipe2(tap[k], O_CLOEXEC) != 0) {
      return Status(StatusCode::kInternal, std::string("cannot create a pipe: ") + strerror(errno));
    }
    fcntl(tap[k][1], F_SETPIPE_SZ, kTapPipeBytes);
    relay->saved_[k] = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    any = true;
  }
  if (!any) return relay;
  if (pipe2(done, O_CLOEXEC) != 0) return Status(StatusCode::kInternal, "cannot create a pipe");
  pid_t middle = fork();
  if (middle < 0) return Status(StatusCode::kInternal, std::string("cannot fork: ") + strerror(errno));
  if (middle == 0) {
    // Double fork: the relay is nobody's child in grademl's tree (grademl is not a
    // subreaper yet), and a session of its own keeps terminal signals off it.
    if (fork() != 0) _exit(0);
    setsid();
    for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTOU, SIGTTIN}) signal(s, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int rin[2] = {in[0][0], in[1][0]}, rout[2] = {relay->saved_[0], relay->saved_[1]},
        rtap[2] = {tap[0][1], tap[1][1]};
    for (int k = 0; k < 2; ++k) {
      if (rtap[k] >= 0) fcntl(rtap[k], F_SETFL, O_NONBLOCK);
    }
    // Keep only what the relay needs: its inputs, outputs, taps and `done`.
    long max_fd = sysconf(_SC_OPEN_MAX);
    if (max_fd < 0 || max_fd > 65536) max_fd = 65536;
    for (int fd = 0; fd < max_fd; ++fd) {
      bool keep = fd == done[1];
      for (int k = 0; k < 2; ++k) keep = keep || fd == rin[k] || fd == rout[k] || fd == rtap[k];
      if (!keep) close(fd);
    }
    RelayMain(rin, rout, rtap);
  }
  int status = 0;
  while (waitpid(middle, &status, 0) < 0 && errno == EINTR) {
  }
  close(done[1]);
  relay->done_ = done[0];
  for (int k = 0; k < 2; ++k) {
    if (in[k][0] < 0) continue;
    dup2(in[k][1], k + 1);  // grademl and the command write into the relay from now on
    close(in[k][1]);
    close(in[k][0]);
    close(tap[k][1]);
    fcntl(tap[k][0], F_SETFL, O_NONBLOCK);
    relay->tap_[k] = tap[k][0];
  }
  return relay;
}

size_t OutputRelay::Unread() const {
  size_t total = 0;
  for (int k = 0; k < 2; ++k) {
    int queued = 0;
    // fds 1 and 2 are the write ends of the relay's input pipes (FIONREAD counts a pipe's
    // unread bytes from either end).
    if (saved_[k] >= 0 && ioctl(k + 1, FIONREAD, &queued) == 0 && queued > 0) total += static_cast<size_t>(queued);
  }
  return total;
}

void OutputRelay::Finish(DurationNs wait) {
  for (int k = 0; k < 2; ++k) {
    if (saved_[k] < 0) continue;
    dup2(saved_[k], k + 1);
    close(saved_[k]);
    saved_[k] = -1;
  }
  if (done_ >= 0) {
    TimeNs until = WallClock::Now() + wait;
    char c;
    while (true) {
      TimeNs now = WallClock::Now();
      if (now >= until) break;
      pollfd fd{done_, POLLIN, 0};
      int ready = poll(&fd, 1, static_cast<int>((until - now) / kNsPerMs) + 1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) break;
      ssize_t r = read(done_, &c, 1);
      if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) break;  // EOF: the relay ended
    }
    close(done_);
    done_ = -1;
  }
}

OutputRelay::~OutputRelay() {
  Finish(0);
  for (int& t : tap_) {
    if (t >= 0) close(t);
    t = -1;
  }
}

}  // namespace grademl::record
