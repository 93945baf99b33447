#include "analysis/reuse.h"

#include <algorithm>
#include <tuple>

#include "core/time.h"

namespace grademl::analysis {
namespace {

// Whether a stored execution belongs to a run before `info`: another run (not the same uuid
// or id) with a smaller id or an earlier start.
bool RanBefore(const model::StoredStepExecution& s, const model::RunInfo& info) {
  if (!info.uuid.empty() && s.run_uuid == info.uuid) return false;
  if (info.id != 0 && s.run == info.id) return false;
  return (info.id != 0 && s.run != 0 && s.run < info.id) || s.run_start_ns < info.start_ns;
}

// Every output of `a` has the hash of the output of `b` at the same path, and they have as many.
bool SameOutputs(const model::StepExecution& a, const model::StepExecution& b) {
  if (a.outputs.size() != b.outputs.size() || a.outputs.empty()) return false;
  for (const model::StepArtifact& o : a.outputs) {
    auto it = std::find_if(b.outputs.begin(), b.outputs.end(),
                           [&](const model::StepArtifact& x) { return x.path == o.path; });
    if (o.hash.empty() || it == b.outputs.end() || it->hash != o.hash) return false;
  }
  return true;
}

}  // namespace

const model::StoredStepExecution* EarlierExecution(const model::ExperimentGraph& graph, const model::RunInfo& run,
                                                   std::string_view key) {
  if (key.empty()) return nullptr;
  const model::StoredStepExecution* earlier = nullptr;
  for (const model::StoredStepExecution& g : graph.executions) {
    if (g.execution.key != key || (g.execution.outcome != "ran" && g.execution.outcome != "reused")) continue;
    if (!RanBefore(g, run)) continue;
    // The latest: by run id, then start (the graph is in that order; a tie keeps the last).
    if (earlier == nullptr || std::tie(g.run, g.run_start_ns) >= std::tie(earlier->run, earlier->run_start_ns)) {
      earlier = &g;
    }
  }
  return earlier;
}

const StepReuse* ReuseAnalysis::Find(model::PhaseId phase) const {
  for (const StepReuse& s : steps) {
    if (s.phase == phase) return &s;
  }
  return nullptr;
}

double RestoreReadBytesPerSecond(const model::Run& run, bool* measured) {
  int64_t bytes = 0;
  DurationNs ns = 0;
  for (const model::StepExecution& e : run.step_executions) {
    bytes += std::max<int64_t>(e.hashed_bytes, 0);
    ns += std::max<DurationNs>(e.hash_ns, 0);
  }
  const bool ok = bytes >= kMinMeasuredReadBytes && ns > 0;
  if (measured != nullptr) *measured = ok;
  return ok ? static_cast<double>(bytes) / NsToSeconds(ns) : kAssumedReadBytesPerS;
}

ReuseAnalysis AnalyzeReuse(const model::Run& run, const model::ExperimentGraph& graph) {
  ReuseAnalysis a;
  a.read_bytes_per_s = RestoreReadBytesPerSecond(run, &a.read_speed_measured);
  std::vector<const model::StepExecution*> executions;
  for (const model::StepExecution& e : run.step_executions) executions.push_back(&e);
  std::stable_sort(executions.begin(), executions.end(),
                   [](const model::StepExecution* x, const model::StepExecution* y) { return x->phase < y->phase; });
  for (const model::StepExecution* e : executions) {
    StepReuse s;
    s.phase = e->phase;
    s.step = e->step;
    s.outcome = e->outcome;
    s.cost_s = NsToSeconds(e->cost_ns);
    s.not_reusable = e->not_reusable;
    for (const model::StepArtifact& o : e->outputs) {
      s.outputs.push_back(o.path);
      s.output_bytes += std::max<int64_t>(o.size, 0);
    }
    if (e->outcome == "reused") {
      s.restore_s = NsToSeconds(e->restore_ns);
      s.reused_from = e->reused_from;
      ++a.reused;
      a.restore_s += s.restore_s;
      a.saved_s += s.cost_s - s.restore_s;
    } else if (e->outcome == "ran" && !e->key.empty() && e->not_reusable.empty()) {
      // A step reuse never skips (no outs, opted out, undeclared inputs) recomputed nothing
      // that could have been restored: it is not redundant, whatever its key.
      const model::StoredStepExecution* earlier = EarlierExecution(graph, run.info, e->key);
      if (earlier != nullptr) {
        s.redundant = true;
        s.earlier_run = earlier->run;
        s.earlier_uuid = earlier->run_uuid;
        s.earlier_step = earlier->execution.step;
        s.outputs_identical = SameOutputs(*e, earlier->execution);
        ++a.redundant;
        a.redundant_s += s.cost_s;
      }
    }
    a.steps.push_back(std::move(s));
  }
  return a;
}

}  // namespace grademl::analysis
