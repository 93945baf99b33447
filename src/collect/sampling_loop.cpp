#include "collect/sampling_loop.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdint>
#include <ctime>

#include "core/status.h"

namespace grademl::collect {

SamplingLoop::SamplingLoop(DurationNs interval, std::vector<Sampler> samplers, int exit_fd, Sampler on_exit_fd)
    : interval_(interval), samplers_(std::move(samplers)), exit_fd_(exit_fd), on_exit_fd_(std::move(on_exit_fd)) {
  GRADEML_CHECK(interval_ > 0);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  GRADEML_CHECK_MSG(stop_fd_ >= 0, "eventfd failed");
  current_interval_ = interval_;
  longest_interval_ = interval_;
}

void SamplingLoop::SetBackOff(double cpu_budget, std::function<bool()> may_back_off, DurationNs max_interval) {
  GRADEML_CHECK(!thread_.joinable());
  cpu_budget_ = cpu_budget;
  may_back_off_ = std::move(may_back_off);
  max_interval_ = std::max(max_interval, interval_);
}

namespace {
int64_t SamplingLoopThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}
}  // namespace

SamplingLoop::~SamplingLoop() {
  Stop();
  close(stop_fd_);
}

void SamplingLoop::Start() {
  GRADEML_CHECK(!thread_.joinable());
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void SamplingLoop::Stop() {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  ssize_t n = write(stop_fd_, &one, sizeof one);
  (void)n;
  thread_.join();
}

void SamplingLoop::Loop() {
  int64_t next = WallClock::MonotonicNow();
  while (true) {
    TimeNs now = WallClock::Now();
    int64_t cpu_before = cpu_budget_ > 0 ? SamplingLoopThreadCpuNs() : 0;
    for (auto& sampler : samplers_) sampler(now);
    ++passes_;
    DurationNs interval = interval_;
    if (cpu_budget_ > 0) {
      double cost = test_pass_cost_ns_ >= 0 ? static_cast<double>(test_pass_cost_ns_)
                                            : static_cast<double>(SamplingLoopThreadCpuNs() - cpu_before);
      pass_cost_ns_ = passes_ == 1 ? cost : 0.7 * pass_cost_ns_ + 0.3 * cost;
      if (may_back_off_ && may_back_off_()) {
        double wanted = pass_cost_ns_ / cpu_budget_;
        interval = static_cast<DurationNs>(std::clamp(wanted, static_cast<double>(interval_),
                                                      static_cast<double>(max_interval_)));
      }
      current_interval_.store(interval, std::memory_order_relaxed);
      if (interval > longest_interval_.load(std::memory_order_relaxed)) {
        longest_interval_.store(interval, std::memory_order_relaxed);
      }
    }
    next += interval;
    int64_t mono = WallClock::MonotonicNow();
    if (next < mono) next = mono + interval / 2;  // fell behind: do not try to catch up in a burst
    // Sleep until the next tick, waking early for process exits or a stop request. The
    // stop fd is looked at once per pass even when sampling took longer than the interval.
    while (true) {
      int64_t left_ns = next - WallClock::MonotonicNow();
      pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {exit_fd_, POLLIN, 0}};
      int nfds = exit_fd_ >= 0 ? 2 : 1;
      int timeout_ms = left_ns <= 0 ? 0 : static_cast<int>((left_ns + kNsPerMs - 1) / kNsPerMs);
      int ready = poll(fds, nfds, timeout_ms);
      if (ready < 0 && errno != EINTR) break;
      if (ready > 0) {
        if (fds[0].revents & POLLIN) return;
        if (nfds == 2 && (fds[1].revents & POLLIN) && on_exit_fd_) on_exit_fd_(WallClock::Now());
      }
      if (left_ns <= 0) break;
    }
  }
}

}  // namespace grademl::collect
