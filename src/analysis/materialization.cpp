#include "analysis/materialization.h"

#include <algorithm>
#include <deque>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/time.h"

namespace grademl::analysis {
namespace {

// The experiment graph's indexes over its non-failed executions.
class MaterializationIndex {
 public:
  explicit MaterializationIndex(const model::ExperimentGraph& graph) : graph_(graph) {
    for (size_t i = 0; i < graph.executions.size(); ++i) {
      const model::StepExecution& e = graph.executions[i].execution;
      if (e.outcome == "failed") continue;
      for (const model::StepArtifact& o : e.outputs) {
        if (o.hash.empty()) continue;
        origin_[o.hash] = i;  // in graph order: the latest wins
        if (e.outcome == "ran") producer_[o.hash] = i;
        AddTouch(o.hash, i);
      }
      for (const model::StepArtifact& in : e.inputs) {
        if (in.hash.empty()) continue;
        AddTouch(in.hash, i);
        // A step that reads what it writes back unchanged does not derive anything from it.
        const bool writes_back = std::any_of(e.outputs.begin(), e.outputs.end(),
                                             [&](const model::StepArtifact& o) { return o.hash == in.hash; });
        if (!writes_back) {
          auto& r = readers_[in.hash];
          if (r.empty() || r.back() != i) r.push_back(i);
        }
      }
    }
    // A hash no execution ran to produce: the latest that restored it stands in (its cost is
    // that of the execution restored).
    for (const auto& [hash, i] : origin_) producer_.try_emplace(hash, i);
  }

  bool Known(const std::string& hash) const { return touched_.count(hash) != 0; }

  // The execution that output `hash` last, or nullptr.
  const model::StoredStepExecution* Origin(const std::string& hash) const {
    auto it = origin_.find(hash);
    return it == origin_.end() ? nullptr : &graph_.executions[it->second];
  }

  // Its producing step and every step that one transitively needs, each key once.
  double RecreationSeconds(const std::string& hash) const {
    auto it = producer_.find(hash);
    if (it == producer_.end()) return 0;
    std::unordered_set<std::string> keys;
    std::unordered_set<size_t> seen;
    std::vector<size_t> stack = {it->second};
    DurationNs total = 0;
    while (!stack.empty()) {
      const size_t i = stack.back();
      stack.pop_back();
      if (!seen.insert(i).second) continue;
      const model::StepExecution& e = graph_.executions[i].execution;
      const std::string key = e.key.empty() ? "#" + std::to_string(i) : e.key;
      if (!keys.insert(key).second) continue;
      total += e.cost_ns;
      for (const model::StepArtifact& in : e.inputs) {
        if (in.hash.empty()) continue;
        auto p = producer_.find(in.hash);
        if (p != producer_.end()) stack.push_back(p->second);
      }
    }
    return NsToSeconds(total);
  }

  // Distinct runs that output or read `hash` or an artifact derived from it.
  int Uses(const std::string& hash) const {
    std::unordered_set<std::string> derived = {hash};
    std::deque<std::string> queue = {hash};
    while (!queue.empty()) {
      const std::string h = queue.front();
      queue.pop_front();
      auto r = readers_.find(h);
      if (r == readers_.end()) continue;
      for (size_t i : r->second) {
        for (const model::StepArtifact& o : graph_.executions[i].execution.outputs) {
          if (!o.hash.empty() && derived.insert(o.hash).second) queue.push_back(o.hash);
        }
      }
    }
    std::set<model::RunId> runs;
    for (const std::string& h : derived) {
      auto t = touched_.find(h);
      if (t == touched_.end()) continue;
      for (size_t i : t->second) runs.insert(graph_.executions[i].run);
    }
    return static_cast<int>(runs.size());
  }

  // The fewest steps from `hash` to a final artifact (an output nothing reads); when every
  // path loops back without reaching one, one more than the longest path walked.
  int DistanceToFinal(const std::string& hash) const {
    std::unordered_map<std::string, int> depth = {{hash, 0}};
    std::deque<std::string> queue = {hash};
    int deepest = 0;
    while (!queue.empty()) {
      const std::string h = queue.front();
      queue.pop_front();
      const int d = depth[h];
      deepest = std::max(deepest, d);
      auto r = readers_.find(h);
      if (r == readers_.end()) {
        if (origin_.count(h) != 0) return d;  // an output no execution reads
        continue;
      }
      for (size_t i : r->second) {
        for (const model::StepArtifact& o : graph_.executions[i].execution.outputs) {
          if (!o.hash.empty() && depth.emplace(o.hash, d + 1).second) queue.push_back(o.hash);
        }
      }
    }
    return deepest + 1;
  }

 private:
  void AddTouch(const std::string& hash, size_t i) {
    auto& t = touched_[hash];
    if (t.empty() || t.back() != i) t.push_back(i);
  }

  const model::ExperimentGraph& graph_;
  std::unordered_map<std::string, size_t> producer_;  // hash -> the latest execution that ran to output it
  std::unordered_map<std::string, size_t> origin_;    // hash -> the latest execution that output it
  std::unordered_map<std::string, std::vector<size_t>> readers_;  // hash -> executions that read it
  std::unordered_map<std::string, std::vector<size_t>> touched_;  // hash -> executions that read or output it
};

}  // namespace

MaterializationPlan PlanMaterialization(const model::ExperimentGraph& graph,
                                        const std::vector<std::pair<std::string, int64_t>>& candidates,
                                        int64_t budget_bytes) {
  MaterializationPlan plan;
  plan.budget_bytes = std::max<int64_t>(budget_bytes, 0);
  MaterializationIndex index(graph);
  std::unordered_set<std::string> listed;
  for (const auto& [hash, size] : candidates) {
    if (!listed.insert(hash).second) continue;
    ArtifactUtility a;
    a.hash = hash;
    a.size = std::max<int64_t>(size, 0);
    if (!hash.empty() && index.Known(hash)) {
      a.recreation_s = index.RecreationSeconds(hash);
      a.uses = index.Uses(hash);
      a.distance_to_final = index.DistanceToFinal(hash);
      a.utility = a.recreation_s * a.uses / (1.0 + a.distance_to_final);
      if (const model::StoredStepExecution* o = index.Origin(hash)) {
        a.run = o->run;
        a.step = o->execution.step;
        for (const model::StepArtifact& out : o->execution.outputs) {
          if (out.hash == hash) {
            a.path = out.path;
            break;
          }
        }
      }
    }
    a.utility_per_byte = a.utility / static_cast<double>(std::max<int64_t>(a.size, 1));
    plan.artifacts.push_back(std::move(a));
  }
  std::sort(plan.artifacts.begin(), plan.artifacts.end(), [](const ArtifactUtility& x, const ArtifactUtility& y) {
    if (x.utility_per_byte != y.utility_per_byte) return x.utility_per_byte > y.utility_per_byte;
    if (x.utility != y.utility) return x.utility > y.utility;
    return x.hash < y.hash;
  });
  for (ArtifactUtility& a : plan.artifacts) {
    if (a.size <= plan.budget_bytes - plan.kept_bytes) {
      a.kept = true;
      plan.kept_bytes += a.size;
    }
  }
  return plan;
}

}  // namespace grademl::analysis
