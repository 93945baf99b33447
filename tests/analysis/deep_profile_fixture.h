// A training run profiled at the operator level on 3 of its 15 iterations (`grademl run
// --deep`; analysis/deep_profile.h), for the analysis and report tests. All times in ms.
//
// One process (pid 7), one train epoch; iteration k is preceded by its data_wait. Iterations
// 4, 8 and 12 (and their data_waits) are tagged deep=ops.
//   unprofiled iterations: 0-2: 50 (warm-up), 3: 9, 5: 9.5, 6: 10, 7: 10, 9: 10, 10: 10.5,
//     11: 11, 13: 11, 14: 12. 12 unprofiled > 10: the first 3 left out; the median of the 9
//     others is 10 (with the warm-up it would be (10.5 + 11) / 2 = 10.75).
//   The cheapest operator kind, per call over every profiled phase (iterations and data
//   waits), raw self times: addmm (1 + 1 + 0.5) / 3, mm 6.5 / 3, relu 4 / 5 = 0.8, dropout 1,
//   copy_ 0.25 / 1, collate 1.5 / 3, stack 1.3 / 3: copy_, 0.25 ms inside each operator at most.
//   iteration 4, 12 ms: addmm 3 (mm 2 inside), relu 1, relu 1. D = 2, 4 ops, e = 0.5, r = 0.25.
//     t: addmm 1, mm 2, relu 2 (2 calls). c: addmm 0.75, mm 1.75, relu 2 - 2 x 0.25 = 1.5.
//     not in operators: 12 - 2 - 4 = 6
//   iteration 8, 13 ms: addmm 4 (mm 3 inside), relu 1, dropout 1, copy_ 0.25. D = 3, 5 ops,
//     e = 0.6, r = 0.25. c: addmm 0.75, mm 2.75, relu 0.75, dropout 0.75, copy_ 0.
//     not in operators: 13 - 3 - 5 = 5
//   iteration 12, 9 ms (faster than the baseline): D = 0, r = 0. addmm 2 (mm 1.5 inside),
//     relu 0.5, relu 0.5. c = t: addmm 0.5, mm 1.5, relu 1.0. not in operators: 9 - 0 - 3 = 6
//   n = 3, t(0.975, 2) = 4.30265273, N = 15 iterations:
//     mm:      1.75, 2.75, 1.5: mean 2.0, squares 0.0625 + 0.5625 + 0.25 = 0.875, sd
//              sqrt(0.4375) = 0.6614378, half 4.30265273 x 0.6614378 / sqrt(3) = 1.6431027;
//              total 30 +- 24.64654; calls 1; share 0.2
//     relu:    1.5, 0.75, 1.0: mean 3.25 / 3, squares 0.2916667, sd 0.3818813, half 0.9486458;
//              total 16.25 +- 14.229686; calls 5/3
//     addmm:   0.75, 0.75, 0.5: mean 2 / 3, sd 0.1443376, half 4.30265 x 0.0833333 = 0.3585544;
//              total 10
//     dropout: 0, 0.75, 0: mean 0.25, sd 0.4330127, half 4.30265 x 0.25 = 1.0756632; total 3.75;
//              calls 1/3
//     copy_:   0, 0, 0: mean 0, half 0 (its own 0.25 was all profiler)
//   mean D = 5/3; cost per op = 5 / 13 ops; not in operators: (6 + 5 + 6) / 3 = 17 / 3
// data_wait phases: unprofiled 0-2: 5 (warm-up), the 9 others 1: median 1.
//   before 4, 2 ms: collate 1.4 (stack 0.6 inside): D 1, 2 ops, e 0.5, r 0.25: collate
//     0.8 - 0.25 = 0.55, stack 0.35
//   before 8, 1.5 ms: collate 0.8 (stack 0.4): D 0.5, e 0.25, r 0.25: collate 0.15, stack 0.15
//   before 12, 1 ms: collate 0.6 (stack 0.3): D 0: collate 0.3, stack 0.3
//   collate: mean 1 / 3, squares 0.0816667, sd 0.2020726, half 4.30265 x 0.1166667 = 0.5019762,
//            total 5 +- 7.529642, share of 1: 1 / 3
//   stack:   mean 0.8 / 3, squares 0.0216667, sd 0.1040833, half 0.2585573, total 4
// removed: iterations 2 + 3 + 0 = 5, data_wait 1 + 0.5 + 0 = 1.5: 6.5 ms.
// Two eval iterations without deep=ops follow: no group of their own.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "analysis/run_fixture.h"

namespace grademl::testing {

inline TimeNs DeepMs(double ms) { return static_cast<TimeNs>(std::llround(ms * 1e6)); }

inline model::Run DeepProfiledRun() {
  RunFixture f;
  auto root = f.AddPhase(0, "python train.py", "run", 0, DeepMs(1000));
  auto proc = f.AddPhase(root, "python train.py", "run/process", 0, DeepMs(1000), 7);
  auto tag = [&](model::PhaseId id, std::string k, std::string v) {
    f.run.phases[static_cast<size_t>(id - 1)].tags.emplace_back(std::move(k), std::move(v));
  };
  auto epoch = f.AddPhase(proc, "epoch 0", "run/process/epoch", DeepMs(1), DeepMs(500), 7);
  tag(epoch, "epoch", "0");
  tag(epoch, "mode", "train");
  const std::vector<double> it_ms = {50, 50, 50, 9, 12, 9.5, 10, 10, 13, 10, 10.5, 11, 9, 11, 12};
  // An op with one op nested inside it at its start, both under `parent`, starting at t.
  auto op = [&](model::PhaseId parent, const char* name, TimeNs t, double ms) {
    return f.AddPhase(parent, name, "op", t, t + DeepMs(ms), 7);
  };
  TimeNs t = DeepMs(1);
  for (int k = 0; k < 15; ++k) {
    const bool deep = k == 4 || k == 8 || k == 12;
    const double dw_ms = k < 3 ? 5 : k == 4 ? 2 : k == 8 ? 1.5 : 1;
    auto dw = f.AddPhase(epoch, "dataloader.next", "data_wait", t, t + DeepMs(dw_ms), 7);
    if (deep) {
      tag(dw, "deep", "ops");
      const double collate = k == 4 ? 1.4 : k == 8 ? 0.8 : 0.6;
      auto c = op(dw, "collate", t, collate);
      op(c, "stack", t, collate == 1.4 ? 0.6 : collate / 2);
    }
    t += DeepMs(dw_ms);
    auto it = f.AddPhase(epoch, "iteration", "iteration", t, t + DeepMs(it_ms[k]), 7);
    tag(it, "mode", "train");
    if (deep) {
      tag(it, "deep", "ops");
      auto fwd = f.AddPhase(it, "forward", "forward", t, t + DeepMs(6), 7);
      const double addmm = k == 4 ? 3 : k == 8 ? 4 : 2;
      auto a = op(fwd, "addmm", t, addmm);
      op(a, "mm", t, k == 4 ? 2 : k == 8 ? 3 : 1.5);
      TimeNs u = t + DeepMs(addmm);
      if (k == 8) {
        op(fwd, "relu", u, 1);
        op(fwd, "dropout", u + DeepMs(1), 1);
        op(fwd, "copy_", u + DeepMs(2), 0.25);
      } else {
        const double relu = k == 4 ? 1 : 0.5;
        op(fwd, "relu", u, relu);
        op(fwd, "relu", u + DeepMs(relu), relu);
      }
    }
    t += DeepMs(it_ms[k]);
  }
  auto eval = f.AddPhase(proc, "epoch 0", "run/process/epoch", DeepMs(600), DeepMs(700), 7);
  tag(eval, "mode", "eval");
  for (int k = 0; k < 2; ++k) f.AddPhase(eval, "iteration", "iteration", DeepMs(600 + 10 * k), DeepMs(605 + 10 * k), 7);
  f.run.info.end_ns = DeepMs(1000);
  f.run.info.complete = true;
  return f.Build();
}

}  // namespace grademl::testing
