// A small experiment graph worked out by hand, shared by the reuse and materialisation tests
// (tests/analysis/materialization_test.cpp has the arithmetic) and the report tests.
//
// Five steps, a chain with a branch: ingest (raw -> A) -> featurize (A -> B) -> train (B, lr ->
// model) -> evaluate (model, B -> metrics); plot (A -> P) branches off after ingest.
//
//   run 1: ingest ran 10 s, featurize ran 20 s, train (lr1) ran 60 s -> M1, evaluate ran 5 s -> S1,
//          plot ran 2 s -> P
//   run 2: ingest and featurize reused (restored from run 1: 0.5 s and 1 s), train with
//          another lr (a new key) ran 80 s -> M2, evaluate ran 5 s -> S2
//   run 3: ingest ran again 12 s (the same key as runs 1 and 2: redundant), featurize failed
//          after 3 s (its stale output X is not trusted)
#pragma once

#include <string>
#include <vector>

#include "analysis/run_fixture.h"
#include "model/experiment_graph.h"

namespace grademl::testing {

// Artifact sizes are in MB (10^6 bytes).
inline constexpr int64_t kReuseMB = 1'000'000;

inline model::StepArtifact ReuseArtifact(std::string path, std::string hash, int64_t size = 0) {
  return {.path = std::move(path), .hash = std::move(hash), .size = size, .directory = false};
}

inline model::StepExecution ReuseExecution(model::PhaseId phase, std::string step, std::string key,
                                           std::string outcome, double cost_s, std::vector<model::StepArtifact> in,
                                           std::vector<model::StepArtifact> out) {
  model::StepExecution e;
  e.phase = phase;
  e.step = std::move(step);
  e.workflow = "pipeline";
  e.key = std::move(key);
  e.outcome = std::move(outcome);
  e.cost_ns = Sec(cost_s);
  e.inputs = std::move(in);
  e.outputs = std::move(out);
  return e;
}

inline std::string ReuseRunUuid(model::RunId run) { return "uuid-run-" + std::to_string(run); }
inline TimeNs ReuseRunStart(model::RunId run) { return Sec(1000.0 * static_cast<double>(run)); }

// The executions of run `run` as they were recorded.
inline std::vector<model::StepExecution> ReuseRunExecutions(model::RunId run) {
  const auto raw = ReuseArtifact("data/raw.csv", "hash-raw", 5000 * kReuseMB);
  const auto a = ReuseArtifact("data/clean.csv", "hash-A", 200 * kReuseMB);
  const auto b = ReuseArtifact("data/feat.npy", "hash-B", 400 * kReuseMB);
  const auto m1 = ReuseArtifact("model.pt", "hash-M1", 2300 * kReuseMB);
  const auto m2 = ReuseArtifact("model.pt", "hash-M2", 1400 * kReuseMB);
  const auto s1 = ReuseArtifact("metrics.json", "hash-S1", 100 * kReuseMB);
  const auto s2 = ReuseArtifact("metrics.json", "hash-S2", 1000 * kReuseMB);
  const auto p = ReuseArtifact("plot.png", "hash-P", 50 * kReuseMB);
  const auto lr1 = ReuseArtifact("params.yaml:train.lr", "hash-lr1", 4);
  const auto lr2 = ReuseArtifact("params.yaml:train.lr", "hash-lr2", 4);
  std::vector<model::StepExecution> out;
  if (run == 1) {
    out.push_back(ReuseExecution(2, "ingest", "key-ingest", "ran", 10, {raw}, {a}));
    out.push_back(ReuseExecution(3, "featurize", "key-featurize", "ran", 20, {a}, {b}));
    out.push_back(ReuseExecution(4, "train", "key-train-1", "ran", 60, {b, lr1}, {m1}));
    out.push_back(ReuseExecution(5, "evaluate", "key-evaluate-1", "ran", 5, {m1, b}, {s1}));
    out.push_back(ReuseExecution(6, "plot", "key-plot", "ran", 2, {a}, {p}));
  } else if (run == 2) {
    out.push_back(ReuseExecution(2, "ingest", "key-ingest", "reused", 10, {raw}, {a}));
    out.back().restore_ns = Sec(0.5);
    out.back().reused_from = ReuseRunUuid(1);
    out.push_back(ReuseExecution(3, "featurize", "key-featurize", "reused", 20, {a}, {b}));
    out.back().restore_ns = Sec(1);
    out.back().reused_from = ReuseRunUuid(1);
    out.push_back(ReuseExecution(4, "train", "key-train-2", "ran", 80, {b, lr2}, {m2}));
    out.push_back(ReuseExecution(5, "evaluate", "key-evaluate-2", "ran", 5, {m2, b}, {s2}));
  } else if (run == 3) {
    out.push_back(ReuseExecution(2, "ingest", "key-ingest", "ran", 12, {raw}, {a}));
    out.push_back(ReuseExecution(3, "featurize", "key-featurize", "failed", 3, {a}, {}));
    out.back().outputs.push_back(ReuseArtifact("data/feat.npy", "hash-X", 10 * kReuseMB));
  }
  return out;
}

// Runs 1 to `last` as the store's experiment graph holds them (by run id, then phase id).
inline model::ExperimentGraph ReuseGraph(model::RunId last = 3) {
  model::ExperimentGraph g;
  for (model::RunId run = 1; run <= last; ++run) {
    for (model::StepExecution& e : ReuseRunExecutions(run)) {
      g.executions.push_back({.run = run, .run_uuid = ReuseRunUuid(run), .run_start_ns = ReuseRunStart(run),
                              .execution = std::move(e)});
    }
  }
  return g;
}

// A recorded workflow run of the graph: its root "pipeline" and one step phase per execution
// (ids 2, 3, ... as in ReuseRunExecutions), back to back from `ends` (seconds from the start).
inline model::Run ReuseWorkflowRun(model::RunId id, const std::vector<std::pair<std::string, double>>& steps) {
  RunFixture f;
  f.run.info.id = id;
  f.run.info.uuid = ReuseRunUuid(id);
  f.run.info.command = {"grademl", "run", "pipeline.yaml"};
  f.run.info.host = "node1";
  f.run.info.start_ns = ReuseRunStart(id);
  f.run.info.complete = true;
  f.run.info.exit_code = 0;
  const TimeNs t0 = ReuseRunStart(id);
  const double end = steps.empty() ? 0 : steps.back().second;
  f.run.info.end_ns = t0 + Sec(end);
  const model::PhaseId root = f.AddPhase(0, "pipeline", "run", t0, t0 + Sec(end));
  double at = 0;
  model::PhaseId prev = 0;
  for (const auto& [name, until] : steps) {
    const model::PhaseId p = f.AddPhase(root, name, "run/step", t0 + Sec(at), t0 + Sec(until));
    if (prev != 0) f.run.edges.push_back({prev, p, "after"});
    prev = p;
    at = until;
  }
  f.run.step_executions = ReuseRunExecutions(id);
  return f.Build();
}

// Run 3 (15 s): ingest [0, 12] ran again (redundant: run 2 had its key), featurize [12, 15]
// failed. Its hashing read 100 MB in 1 s: restoring A (200 MB) is predicted at 2 s.
inline model::Run ReuseRun3() {
  model::Run run = ReuseWorkflowRun(3, {{"ingest", 12}, {"featurize", 15}});
  run.step_executions[0].hashed_bytes = 100 * kReuseMB;
  run.step_executions[0].hash_ns = Sec(1);
  for (model::Phase& p : run.phases) {
    if (p.name == "featurize") p.tags.push_back({"exit_code", "1"});
  }
  return run;
}

// Run 2 (86.5 s): ingest [0, 0.5] and featurize [0.5, 1.5] restored from run 1, train
// [1.5, 81.5] and evaluate [81.5, 86.5] ran. It hashed nothing it did not know.
inline model::Run ReuseRun2() {
  model::Run run = ReuseWorkflowRun(2, {{"ingest", 0.5}, {"featurize", 1.5}, {"train", 81.5}, {"evaluate", 86.5}});
  for (model::Phase& p : run.phases) {
    if (p.name == "ingest" || p.name == "featurize") {
      p.tags = {{"reused", "true"}, {"reuse.restore_s", p.name == "ingest" ? "0.5" : "1"}, {"reuse.from", ReuseRunUuid(1)}};
    }
  }
  return run;
}

}  // namespace grademl::testing
