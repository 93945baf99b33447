#include "core/stop.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <iterator>

namespace grademl {
namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

std::atomic<uint64_t> g_requests{0};
std::atomic<int> g_last_signal{0};
// StopSignalHandlers: signals its handler saw, when the default action takes over, and the
// exit that ExitOnStop asked for (-1: none).
std::atomic<int> g_handled{0};
std::atomic<int> g_kill_after{3};
std::atomic<int> g_exit_code{-1};
std::atomic<const char*> g_exit_message{nullptr};

void OnStopSignal(int signo) {
  const int saved_errno = errno;
  RequestStop(signo);
  if (int code = g_exit_code.load(); code >= 0) {
    if (const char* message = g_exit_message.load(); message != nullptr) {
      ssize_t w = write(STDERR_FILENO, message, strlen(message));
      (void)w;
    }
    _exit(code);
  }
  if (g_handled.fetch_add(1) + 1 >= g_kill_after.load()) {
    signal(signo, SIG_DFL);
    raise(signo);  // delivered when the handler returns
  }
  errno = saved_errno;
}

}  // namespace

bool IsStopSignal(int signo) {
  for (int s : kStopSignals) {
    if (s == signo) return true;
  }
  return false;
}

void RequestStop(int signo) {
  g_last_signal.store(signo);
  g_requests.fetch_add(1);
}

uint64_t StopRequests() { return g_requests.load(); }

int LastStopSignal() { return g_last_signal.load(); }

bool StopSignalPending(int* signo) {
  sigset_t pending;
  sigemptyset(&pending);
  if (sigpending(&pending) != 0) return false;
  for (int s : kStopSignals) {
    if (sigismember(&pending, s) == 1) {
      if (signo != nullptr) *signo = s;
      return true;
    }
  }
  return false;
}

bool StopCheck::operator()() const { return StopRequests() > since_ || StopSignalPending(); }

int StopCheck::signo() const {
  int pending = 0;
  if (StopRequests() > since_) return LastStopSignal();
  return StopSignalPending(&pending) ? pending : 0;
}

StopSignalHandlers::StopSignalHandlers(int kill_after) {
  g_handled.store(0);
  g_kill_after.store(kill_after);
  g_exit_code.store(-1);
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (size_t i = 0; i < std::size(kStopSignals); ++i) sigaction(kStopSignals[i], &sa, &previous_[i]);
}

StopSignalHandlers::~StopSignalHandlers() {
  g_exit_code.store(-1);
  for (size_t i = 0; i < std::size(kStopSignals); ++i) sigaction(kStopSignals[i], &previous_[i], nullptr);
}

void StopSignalHandlers::ExitOnStop(int exit_code, const char* message) {
  g_exit_message.store(message);
  g_exit_code.store(exit_code);
}

}  // namespace grademl
