// SamplingLoop: the monitor thread. Calls every sampler once per interval with one shared
// timestamp, and in between sleeps on the process monitor's exit notifications so that
// process exits are handled the moment they happen.
#pragma once

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

  void Start();
  // Stops after the pass in progress and joins the thread. Idempotent.
  void Stop();
  int passes() const { return passes_; }

 private:
  void Loop();

  DurationNs interval_;
  std::vector<Sampler> samplers_;
  int exit_fd_;
  Sampler on_exit_fd_;
  int stop_fd_ = -1;  // an eventfd
  std::thread thread_;
  int passes_ = 0;
};

}  // namespace grademl::collect
