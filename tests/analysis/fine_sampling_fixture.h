// A training run whose fine phases were recorded on a sample of the iterations (issue 16; the
// epoch tags of analysis/fine_sampling.h), for the analysis and report tests. Worked out by hand:
//
//   epoch 0 [0, 40 s]: fine.every=4, 8 iterations, 2 recorded; recorded: 2 x forward 0.5 s,
//     2 x backward 1.0 s, 2 x data_wait 0.2 s; unrecorded: forward 6 (3 s), backward 6 (6 s),
//     data_wait 6 (1.2 s); overhead 0.2 s, budget "0.01"
//   epoch 1 [50, 90 s]: fine.every=2, 4 iterations, 2 recorded; recorded: 2 x forward 0.5 s;
//     unrecorded: forward 2 (1 s); overhead 0.1 s, budget "0.02"
//
//   forward:   recorded 4, 2.0 s; unrecorded 8, 4.0 s; total 12, 6.0 s
//   backward:  recorded 2, 2.0 s; unrecorded 6, 6.0 s; total 8, 8.0 s
//   data_wait: recorded 2, 0.4 s; unrecorded 6, 1.2 s; total 8, 1.6 s
//   loss, optimizer_step: none
//   iterations 12, recorded 4; every 2 to 4; budget 0.02 (the largest); overhead 0.3 s over
//   the epochs' 80 s: 0.00375
#pragma once

#include <string>

#include "analysis/run_fixture.h"

namespace grademl::testing {

inline model::Run FineSampledRun() {
  RunFixture f;
  auto root = f.AddPhase(0, "python train.py", "run", 0, Sec(100));
  auto proc = f.AddPhase(root, "python", "run/process", 0, Sec(100), 7);
  auto tag = [&](model::PhaseId id, std::string k, std::string v) {
    f.run.phases[static_cast<size_t>(id - 1)].tags.emplace_back(std::move(k), std::move(v));
  };
  auto e0 = f.AddPhase(proc, "epoch 0", "run/process/epoch", 0, Sec(40), 7);
  for (auto [k, v] : {std::pair{"epoch", "0"}, {"mode", "train"}, {"fine.every", "4"}, {"fine.iterations", "8"},
                      {"fine.recorded_iterations", "2"}, {"unrecorded.forward.count", "6"},
                      {"unrecorded.forward.ns", "3000000000"}, {"unrecorded.backward.count", "6"},
                      {"unrecorded.backward.ns", "6000000000"}, {"unrecorded.data_wait.count", "6"},
                      {"unrecorded.data_wait.ns", "1200000000"}, {"unrecorded.loss.count", "0"},
                      {"unrecorded.loss.ns", "0"}, {"overhead.ns", "200000000"}, {"overhead.budget", "0.01"}}) {
    tag(e0, k, v);
  }
  for (int i = 0; i < 2; ++i) {
    const double t = 10.0 * i;
    f.AddPhase(e0, "dataloader.next", "data_wait", Sec(t), Sec(t + 0.2), 7);
    auto it = f.AddPhase(e0, "iteration", "iteration", Sec(t + 0.2), Sec(t + 2.0), 7);
    f.AddPhase(it, "forward", "forward", Sec(t + 0.2), Sec(t + 0.7), 7);
    f.AddPhase(it, "backward", "backward", Sec(t + 0.7), Sec(t + 1.7), 7);
  }
  auto e1 = f.AddPhase(proc, "epoch 1", "run/process/epoch", Sec(50), Sec(90), 7);
  for (auto [k, v] : {std::pair{"epoch", "1"}, {"mode", "train"}, {"fine.every", "2"}, {"fine.iterations", "4"},
                      {"fine.recorded_iterations", "2"}, {"unrecorded.forward.count", "2"},
                      {"unrecorded.forward.ns", "1000000000"}, {"overhead.ns", "100000000"},
                      {"overhead.budget", "0.02"}}) {
    tag(e1, k, v);
  }
  for (int i = 0; i < 2; ++i) {
    const double t = 50.0 + 10.0 * i;
    auto it = f.AddPhase(e1, "iteration", "iteration", Sec(t), Sec(t + 1.0), 7);
    f.AddPhase(it, "forward", "forward", Sec(t), Sec(t + 0.5), 7);
  }
  f.run.info.end_ns = Sec(100);
  f.run.info.complete = true;
  return f.Build();
}

}  // namespace grademl::testing
