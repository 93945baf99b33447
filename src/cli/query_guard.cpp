#include "cli/query_guard.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "report/text_format.h"

namespace grademl::cli {

QueryGuard::QueryGuard(DurationNs timeout) : timeout_(timeout) {
  sigemptyset(&signals_);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals_, s);
  pthread_sigmask(SIG_BLOCK, &signals_, &previous_mask_);
  signal_fd_ = signalfd(-1, &signals_, SFD_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (signal_fd_ < 0) {
    // No descriptor left (ulimit -n): the signals keep their default action, which ends
    // the process at once; the deadline still holds.
    pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
  }
  if (wake_fd_ >= 0) thread_ = std::thread([this] { Loop(); });
}

QueryGuard::~QueryGuard() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    ssize_t n = write(wake_fd_, &one, sizeof one);
    (void)n;
    thread_.join();
  }
  if (signal_fd_ >= 0) close(signal_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  // A signal that came after the thread stopped is delivered now, with its default action.
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
}

void QueryGuard::RemoveOnExit(std::string dir) {
  std::lock_guard lock(mu_);
  private_dir_ = std::move(dir);
}

void QueryGuard::Watch(store::QuerySession* session) {
  std::lock_guard lock(mu_);
  session_ = session;
  if (session_ != nullptr && stopped_) session_->Interrupt(reason_);
}

void QueryGuard::Finish() {
  std::lock_guard lock(mu_);  // held for good by a guard that is exiting the process
  finished_ = true;
}

bool QueryGuard::stopped() const {
  std::lock_guard lock(mu_);
  return stopped_;
}

Status QueryGuard::reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

int QueryGuard::exit_code() const {
  std::lock_guard lock(mu_);
  return exit_code_;
}

void QueryGuard::Fire(const Status& reason, int exit_code) {
  std::lock_guard lock(mu_);
  if (stopped_) return;
  stopped_ = true;
  reason_ = reason;
  exit_code_ = exit_code;
  if (session_ != nullptr) session_->Interrupt(reason_);
}

void QueryGuard::ExitNow() {
  mu_.lock();  // never unlocked: the command's own end (Finish) waits for the exit
  if (finished_) {
    mu_.unlock();
    return;
  }
  // Not PrintError: the command's thread may hold stdio's locks, stuck in a write.
  std::string line = "grademl: " + reason_.message() + "\n";
  ssize_t n = write(STDERR_FILENO, line.data(), line.size());
  (void)n;
  if (!private_dir_.empty()) {
    std::error_code ec;
    // The command may still be writing into it: whatever appeared meanwhile goes too.
    for (int attempt = 0; attempt < 3 && std::filesystem::exists(private_dir_, ec); ++attempt) {
      std::filesystem::remove_all(private_dir_, ec);
    }
  }
  // The exit system call itself: _exit is intercepted by the sanitizers, whose flush of
  // stdio would wait for the stdout lock a command stuck in a write holds.
  syscall(SYS_exit_group, exit_code_);
  _exit(exit_code_);  // not reached
}

void QueryGuard::Loop() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::nanoseconds(timeout_);
  bool fired = false;
  bool waiting = false;  // for the command to end, until grace_end
  Clock::time_point grace_end = deadline;
  auto fire = [&](const Status& reason, int code) {
    Fire(reason, code);
    fired = waiting = true;
    grace_end = Clock::now() + std::chrono::nanoseconds(kGrace);
  };
  while (true) {
    int wait_ms = -1;
    if (waiting || (!fired && timeout_ > 0)) {
      Clock::time_point until = waiting ? grace_end : deadline;
      auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
      wait_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 1'000'000));
    }
    pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int r = poll(fds, 2, wait_ms);
    if (r < 0 && errno != EINTR) return;  // cannot happen with valid descriptors
    if (r > 0 && (fds[1].revents & POLLIN)) return;
    if (r > 0 && (fds[0].revents & POLLIN)) {
      signalfd_siginfo info{};
      if (read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        int sig = static_cast<int>(info.ssi_signo);
        if (!fired) {
          fire(Status(StatusCode::kFailedPrecondition, "query: stopped by " + report::SignalName(sig)), 128 + sig);
        } else {
          ExitNow();  // a second signal: no more waiting
          waiting = false;
        }
      }
      continue;
    }
    const Clock::time_point now = Clock::now();
    if (waiting && now >= grace_end) {
      ExitNow();  // returns when the command finished meanwhile: then only the wake-up is left
      waiting = false;
    } else if (!fired && timeout_ > 0 && now >= deadline) {
      fire(FailedPrecondition("query: stopped after the {} s timeout (--timeout SECONDS sets it, 0 for none)",
                              static_cast<double>(timeout_) / kNsPerSec),
           1);
    }
  }
}

}  // namespace grademl::cli
