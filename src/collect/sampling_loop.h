// SamplingLoop: the monitor thread. Calls every sampler once per interval with one shared
// timestamp, and in between sleeps on the process monitor's exit notifications so that
// process exits are handled the moment they happen.
//
// Back-off (SetBackOff): while `may_back_off()` says so (a many-process tree), the interval
// grows so that a pass's CPU time stays within `cpu_budget` of the interval (a fraction of
// one core), up to `max_interval`, and comes back as passes get cheaper. Counters are
// cumulative, and exits still wake the loop at once, so nothing is lost: samples are fewer.
#pragma once

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "core/time.h"

namespace grademl::collect {

class SamplingLoop {
 public:
  using Sampler = std::function<void(TimeNs now)>;

  // `exit_fd` (may be -1) is polled between ticks; `on_exit_fd` runs when it is readable.
  SamplingLoop(DurationNs interval, std::vector<Sampler> samplers, int exit_fd, Sampler on_exit_fd);
  ~SamplingLoop();
  SamplingLoop(const SamplingLoop&) = delete;
  SamplingLoop& operator=(const SamplingLoop&) = delete;

  // Before Start(). `cpu_budget`: the most of one core the passes may use (e.g. 0.01).
  void SetBackOff(double cpu_budget, std::function<bool()> may_back_off, DurationNs max_interval);
  // Tests only: a pass's measured CPU time is taken to be this (ns) instead.
  void SetTestPassCost(DurationNs cost_ns) { test_pass_cost_ns_ = cost_ns; }

  void Start();
  // Start() was called (the thread may have stopped since).
  bool started() const { return started_; }
  // Stops after the pass in progress and joins the thread. Idempotent.
  void Stop();
  int passes() const { return passes_; }
  // The interval in use now, and the longest used (both `interval` without back-off).
  DurationNs current_interval() const { return current_interval_.load(std::memory_order_relaxed); }
  DurationNs longest_interval() const { return longest_interval_.load(std::memory_order_relaxed); }

 private:
  void Loop();
  bool started_ = false;

  DurationNs interval_;
  std::vector<Sampler> samplers_;
  int exit_fd_;
  Sampler on_exit_fd_;
  int stop_fd_ = -1;  // an eventfd
  std::thread thread_;
  int passes_ = 0;
  double cpu_budget_ = 0;
  std::function<bool()> may_back_off_;
  DurationNs max_interval_ = 0;
  DurationNs test_pass_cost_ns_ = -1;
  double pass_cost_ns_ = 0;  // a pass's CPU time, smoothed
  std::atomic<DurationNs> current_interval_{0};
  std::atomic<DurationNs> longest_interval_{0};
};

}  // namespace grademl::collect
