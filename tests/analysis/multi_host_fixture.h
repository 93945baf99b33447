// A hand-built workflow run across three hosts, for the hosts analysis and the reports'
// host sections. Every figure the tests expect is worked out in the comments here.
//
//   node1 (the reference: RunInfo::host, no clock estimates)
//     wf (root, run) 0-30 s; prep (step) 0-6 with `python prep.py` (pid 101) 0-6
//   node2 (3 clock estimates: offsets 250, 252, 249 ms -> median 250 ms; uncertainties 0.2,
//          0.4, 0.3 ms -> max 0.4 ms)
//     the agent's phase `node2` (run/host) 5-22: not part of the span
//     train_a (step) 6-20 with `python train.py --a` (201) 6-20 holding save_model 18-20,
//     and `python loader.py` (202) 7-12
//   node3 (2 estimates: -100 and -102 ms -> median -101 ms; 1 and 0.5 ms -> max 1 ms)
//     train_b (step) 6-28 with `python train.py --b` (301) 6-28 holding load_model 17-19
//     (load_model has no host of its own: it is on its parent's), eval_a (step)
//     19.9995-23 with `python eval.py` (302) 20-23
//
// Spans: node1 0-6 (6 s), node2 6-20 (14 s), node3 6-28 (22 s); processes 1, 2, 2.
// Straggler: node3 ends at 28, the others' median is (6 + 20) / 2 = 13: margin 15 s >
// max(10% of 30 s, 1 s) = 3 s. Finishing with them, the run ends when node2 did (20):
// saving = 28 - 20 = 8 s.
// CPU: node1 2 cores, busy (10 + 2) + 4 = 16 core-s of 60 (26.7%); node2 1 core, 18 of
// 30 (60%); node3 1 core, 27 of 30 (90%).
// Net (interfaces that count): node1 none; node2 eth0 received 2001000 - 1000 = 2 MB, sent
// 500 kB (its lo is left out); node3 eth0 received 3 + 1 = 4 MB (a counter reset at 20 s),
// sent 1 MB.
// Critical path: the root ends with train_b (28), which followed prep (its `data` edge);
// links prep 0-6 > `python prep.py` 0-6; train_b 6-28 > `python train.py --b` 6-28 >
// load_model 17-19. Own time: node1 6 s (the process), node3 20 + 2 = 22 s, node2 0.
// Edges between hosts: prep -> train_a, prep -> train_b (in order, gap 0); train_a ->
// eval_a (eval_a starts 0.5 ms before train_a ends: within node2's 0.4 + node3's 1 ms);
// save_model -> load_model (load_model starts 3 s before save_model ends: a violation,
// tolerance 1.4 ms). train_b -> eval_a (`after`, reversed) is on one host: not checked.
#pragma once

#include <string>

#include "analysis/run_fixture.h"
#include "model/metric_names.h"
#include "model/run.h"

namespace grademl::testing {

struct ThreeHostIds {
  model::PhaseId root, prep, train_a, train_b, eval_a, node2_phase, save, load;
};

inline model::Run ThreeHostRun(ThreeHostIds* ids = nullptr) {
  namespace metric = model::metric;
  using model::ResourceKind;
  RunFixture f;
  f.run.info.host = "node1";
  f.run.info.start_ns = 0;
  f.run.info.end_ns = Sec(30);
  f.run.info.complete = true;
  f.run.info.command = {"grademl", "run", "pipeline.yaml"};
  ThreeHostIds id{};
  auto phase = [&](model::PhaseId parent, const char* name, const char* type, double s, double e, const char* host,
                   int32_t pid = 0) { return f.AddPhase(parent, name, type, Sec(s), Sec(e), pid, host); };
  id.root = phase(0, "wf", "run", 0, 30, "node1");
  id.prep = phase(id.root, "prep", "run/step", 0, 6, "node1");
  id.train_a = phase(id.root, "train_a", "run/step", 6, 20, "node2");
  id.train_b = phase(id.root, "train_b", "run/step", 6, 28, "node3");
  id.eval_a = phase(id.root, "eval_a", "run/step", 19.9995, 23, "node3");
  id.node2_phase = phase(id.root, "node2", "run/host", 5, 22, "node2");
  phase(id.prep, "python prep.py", "run/step/process", 0, 6, "node1", 101);
  auto p201 = phase(id.train_a, "python train.py --a", "run/step/process", 6, 20, "node2", 201);
  phase(id.train_a, "python loader.py", "run/step/process", 7, 12, "node2", 202);
  id.save = phase(p201, "save_model", "run/step/process/save", 18, 20, "node2", 201);
  auto p301 = phase(id.train_b, "python train.py --b", "run/step/process", 6, 28, "node3", 301);
  id.load = phase(p301, "load_model", "run/step/process/load", 17, 19, "", 301);
  phase(id.eval_a, "python eval.py", "run/step/process", 20, 23, "node3", 302);

  f.run.edges = {{id.prep, id.train_a, "data"},
                 {id.prep, id.train_b, "data"},
                 {id.train_a, id.eval_a, "data"},
                 {id.save, id.load, "data"},
                 {id.train_b, id.eval_a, "after"}};

  f.run.clock_estimates = {
      {.host = "node2", .t = Sec(5), .offset_ns = 250'000'000, .uncertainty_ns = 200'000},
      {.host = "node2", .t = Sec(15), .offset_ns = 252'000'000, .uncertainty_ns = 400'000},
      {.host = "node2", .t = Sec(25), .offset_ns = 249'000'000, .uncertainty_ns = 300'000},
      {.host = "node3", .t = Sec(5), .offset_ns = -100'000'000, .uncertainty_ns = 1'000'000},
      {.host = "node3", .t = Sec(25), .offset_ns = -102'000'000, .uncertainty_ns = 500'000},
  };
  // As the store leaves them after converting the hosts' clocks.
  f.run.hosts = {{.name = "node1"},
                 {.name = "node2", .clock_uncertainty_ns = 400'000},
                 {.name = "node3", .clock_uncertainty_ns = 1'000'000}};

  auto counter = [&](model::ResourceId r, std::string_view name, std::vector<model::Sample> s) {
    f.Counter(r, name, std::move(s));
  };
  // node1: two cores, no network.
  auto h1 = f.AddResource(0, ResourceKind::kHost, "node1", 0, 0, "node1");
  auto c10 = f.AddResource(h1, ResourceKind::kCore, "cpu0", 0, 0, "node1");
  counter(c10, metric::kCoreUser, {{0, 0}, {Sec(30), 10}});
  counter(c10, metric::kCoreSystem, {{0, 0}, {Sec(30), 2}});
  counter(c10, metric::kCoreIdle, {{0, 0}, {Sec(30), 18}});
  auto c11 = f.AddResource(h1, ResourceKind::kCore, "cpu1", 0, 0, "node1");
  counter(c11, metric::kCoreUser, {{0, 0}, {Sec(30), 4}});
  counter(c11, metric::kCoreIdle, {{0, 0}, {Sec(30), 26}});
  // node2: one core, eth0 and lo.
  auto h2 = f.AddResource(0, ResourceKind::kHost, "node2", 0, 0, "node2");
  auto c20 = f.AddResource(h2, ResourceKind::kCore, "cpu0", 0, 0, "node2");
  counter(c20, metric::kCoreUser, {{0, 0}, {Sec(30), 15}});
  counter(c20, metric::kCoreSystem, {{0, 0}, {Sec(30), 3}});
  counter(c20, metric::kCoreIdle, {{0, 0}, {Sec(30), 12}});
  auto eth2 = f.AddResource(h2, ResourceKind::kNet, "eth0", 0, 0, "node2");
  counter(eth2, metric::kNetRxBytes, {{0, 1000}, {Sec(30), 2001000}});
  counter(eth2, metric::kNetTxBytes, {{0, 0}, {Sec(30), 500000}});
  auto lo2 = f.AddResource(h2, ResourceKind::kNet, "lo", 0, 0, "node2");
  counter(lo2, metric::kNetRxBytes, {{0, 0}, {Sec(30), 1e9}});
  counter(lo2, metric::kNetTxBytes, {{0, 0}, {Sec(30), 1e9}});
  // node3: one core; eth0's receive counter was reset at 20 s.
  auto h3 = f.AddResource(0, ResourceKind::kHost, "node3", 0, 0, "node3");
  auto c30 = f.AddResource(h3, ResourceKind::kCore, "cpu0", 0, 0, "node3");
  counter(c30, metric::kCoreUser, {{0, 0}, {Sec(15), 12}, {Sec(30), 27}});
  counter(c30, metric::kCoreIdle, {{0, 0}, {Sec(15), 3}, {Sec(30), 3}});
  auto eth3 = f.AddResource(h3, ResourceKind::kNet, "eth0", 0, 0, "node3");
  counter(eth3, metric::kNetRxBytes, {{0, 0}, {Sec(10), 3e6}, {Sec(20), 1e6}, {Sec(30), 2e6}});
  counter(eth3, metric::kNetTxBytes, {{0, 0}, {Sec(30), 1e6}});
  if (ids != nullptr) *ids = id;
  return std::move(f.Build());
}

}  // namespace grademl::testing
