#include "analysis/level_breakdown.h"

#include <algorithm>
#include <map>
#include <unordered_set>

namespace grademl::analysis {
namespace {

DurationNs LevelDurationOf(const model::Phase& p, TimeNs run_end) {
  const TimeNs end = p.ended() ? p.end_ns : std::max(p.start_ns, run_end);
  return std::max<DurationNs>(0, end - p.start_ns);
}

}  // namespace

StatusOr<LevelBreakdown> BreakDownByLevel(const model::Run& run, model::PhaseLevel level,
                                          const PhaseSelector* selector) {
  LevelBreakdown out;
  out.level = level;
  const TimeNs run_end = run.EffectiveEnd();
  // The selection: the matches (or the roots) not nested in another one.
  std::unordered_set<model::PhaseId> matched;
  for (const model::Phase& p : run.phases) {
    const bool root = p.parent == 0 || run.FindPhase(p.parent) == nullptr;
    if (selector != nullptr ? selector->Matches(p) : root) matched.insert(p.id);
  }
  if (selector != nullptr) out.selector = selector->text;
  for (const model::Phase& p : run.phases) {
    if (!matched.count(p.id)) continue;
    bool nested = false;
    size_t steps = 0;
    for (const model::Phase* up = run.FindPhase(p.parent); up != nullptr && steps <= run.phases.size();
         up = run.FindPhase(up->parent), ++steps) {
      if (matched.count(up->id)) {
        nested = true;
        break;
      }
    }
    if (!nested) out.phases.push_back(p.id);
  }
  if (out.phases.empty()) {
    if (selector != nullptr) return NotFound("no phase matches {}", selector->text);
    return out;
  }

  // Each phase at the level: its duration less that of the nearest phases at the level inside it.
  struct Instance {
    const model::Phase* phase;
    DurationNs self_ns;
  };
  std::vector<Instance> instances;
  struct Visit {
    model::PhaseId id;
    long owner;  // index into instances of the nearest phase at the level above, -1: none
  };
  std::vector<Visit> stack;
  std::unordered_set<model::PhaseId> seen;  // against cycles in a damaged model
  DurationNs covered_ns = 0;
  for (model::PhaseId id : out.phases) {
    const model::Phase* top = run.FindPhase(id);
    out.duration_s += NsToSeconds(LevelDurationOf(*top, run_end));
    stack.push_back({id, -1});
    while (!stack.empty()) {
      Visit v = stack.back();
      stack.pop_back();
      if (!seen.insert(v.id).second) continue;
      const model::Phase* p = run.FindPhase(v.id);
      if (p == nullptr) continue;
      long owner = v.owner;
      if (model::LevelOf(*p) == level) {
        const DurationNs d = LevelDurationOf(*p, run_end);
        if (owner >= 0) {
          instances[static_cast<size_t>(owner)].self_ns -= d;
        } else {
          covered_ns += d;
        }
        instances.push_back({p, d});
        owner = static_cast<long>(instances.size()) - 1;
      }
      for (model::PhaseId c : run.ChildrenOf(v.id)) stack.push_back({c, owner});
    }
  }
  out.covered_s = NsToSeconds(covered_ns);
  out.count = static_cast<int64_t>(instances.size());

  std::map<std::string, LevelRow> by_name;
  for (const Instance& in : instances) {
    LevelRow& row = by_name[in.phase->name];
    row.name = in.phase->name;
    ++row.count;
    row.total_s += NsToSeconds(std::max<DurationNs>(0, in.self_ns));
  }
  for (auto& [name, row] : by_name) {
    row.share = out.duration_s > 0 ? row.total_s / out.duration_s : 0;
    out.rows.push_back(std::move(row));
  }
  std::stable_sort(out.rows.begin(), out.rows.end(),
                   [](const LevelRow& a, const LevelRow& b) { return a.total_s > b.total_s; });
  return out;
}

}  // namespace grademl::analysis
