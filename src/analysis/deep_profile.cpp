#include "analysis/deep_profile.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "analysis/phase_tags.h"

namespace grademl::analysis {

const char* const kDeepProfileMethod =
    "profiling cost of a profiled iteration = max(0, its duration - the median unprofiled iteration of the same "
    "mode and process, first 3 left out as warm-up when more than 10), a constant per operator call; of it, at "
    "most the mean self time per call of the cheapest operator kind lies inside an operator and is removed from "
    "each operator's self time (clamped at 0), the rest from the time between operators; data_wait phases the "
    "same against the median unprofiled data_wait; means per iteration over the profiled iterations (0 where an "
    "operator did not run), 95% intervals with Student's t, totals = mean x the iterations of the mode";

namespace {

constexpr size_t kDeepWarmupSkip = 3;
constexpr size_t kDeepWarmupMin = 10;  // skip the warm-up only with more unprofiled phases than this

TimeNs DeepEndOf(const model::Phase& p, TimeNs run_end) { return p.ended() ? p.end_ns : std::max(p.start_ns, run_end); }
double DeepDurationS(const model::Phase& p, TimeNs run_end) {
  return NsToSeconds(std::max<DurationNs>(0, DeepEndOf(p, run_end) - p.start_ns));
}

bool IsDeep(const model::Phase& p) { return TagOf(p, "deep") == "ops"; }

// The median of the unprofiled durations (in time order), the warm-up left out; nullopt when none.
std::optional<double> DeepBaseline(std::vector<double> unprofiled, int64_t* used) {
  if (unprofiled.size() > kDeepWarmupMin) unprofiled.erase(unprofiled.begin(), unprofiled.begin() + kDeepWarmupSkip);
  *used = static_cast<int64_t>(unprofiled.size());
  if (unprofiled.empty()) return std::nullopt;
  std::sort(unprofiled.begin(), unprofiled.end());
  const size_t m = unprofiled.size() / 2;
  return unprofiled.size() % 2 == 1 ? unprofiled[m] : (unprofiled[m - 1] + unprofiled[m]) / 2;
}

// The op phases under a phase: per name the self time and calls; the number of op phases.
struct DeepOps {
  std::map<std::string, std::pair<double, int64_t>> by_name;  // name -> (self s, calls)
  int64_t count = 0;
};

DeepOps DeepOpsUnder(const model::Run& run, const model::Phase& top, TimeNs run_end) {
  DeepOps out;
  struct Visit {
    model::PhaseId id;
    const model::Phase* owner;  // the nearest op above, nullptr: none
  };
  std::vector<Visit> stack;
  for (model::PhaseId c : run.ChildrenOf(top.id)) stack.push_back({c, nullptr});
  size_t steps = 0;
  while (!stack.empty() && steps++ <= run.phases.size()) {
    Visit v = stack.back();
    stack.pop_back();
    const model::Phase* p = run.FindPhase(v.id);
    if (p == nullptr) continue;
    const model::Phase* owner = v.owner;
    if (p->leaf_is("op")) {
      const double d = DeepDurationS(*p, run_end);
      auto& mine = out.by_name[p->name];
      mine.first += d;
      ++mine.second;
      if (owner != nullptr) out.by_name[owner->name].first -= d;
      ++out.count;
      owner = p;
    }
    for (model::PhaseId c : run.ChildrenOf(v.id)) stack.push_back({c, owner});
  }
  return out;
}

// The operators of profiled phases: per name, c_oi and n_oi per profiled phase.
struct DeepOpSamples {
  std::vector<double> corrected;  // one per profiled phase, 0 where absent
  std::vector<double> raw;
  int64_t calls = 0;
};

void DeepSummarize(const std::map<std::string, DeepOpSamples>& samples, size_t n, bool data_wait, double baseline,
                   int64_t iterations, std::vector<DeepOperator>* out) {
  if (n == 0) return;
  const double nn = static_cast<double>(n);
  for (const auto& [name, s] : samples) {
    DeepOperator op;
    op.name = name;
    op.data_wait = data_wait;
    op.calls_per_iteration = static_cast<double>(s.calls) / nn;
    double sum = 0, raw = 0;
    for (size_t i = 0; i < n; ++i) {
      sum += s.corrected[i];
      raw += s.raw[i];
    }
    op.mean_s = sum / nn;
    op.raw_mean_s = raw / nn;
    if (n >= 2) {
      double ss = 0;
      for (size_t i = 0; i < n; ++i) ss += (s.corrected[i] - op.mean_s) * (s.corrected[i] - op.mean_s);
      op.sd_s = std::sqrt(ss / (nn - 1));
      op.half_interval_s = StudentT975(static_cast<int64_t>(n) - 1) * op.sd_s / std::sqrt(nn);
      op.total_half_interval_s = *op.half_interval_s * static_cast<double>(iterations);
    }
    op.share = baseline > 0 ? op.mean_s / baseline : 0;
    op.total_s = op.mean_s * static_cast<double>(iterations);
    out->push_back(std::move(op));
  }
}

// Profiled phases of one kind (iterations or data_wait) against their baseline: the costs,
// and each operator's corrected self times. Returns sum D_i.
struct DeepKindResult {
  double removed_s = 0;
  double mean_cost_s = 0;
  int64_t ops = 0;
  double unattributed_sum_s = 0;
};

// What profiling adds inside an operator's own bracket, per call: the mean self time per
// call of the cheapest operator kind of these profiled phases (a view, a detach: next to no
// work of their own, so what they measure is mostly the profiler's). An upper bound on that
// cost, since no operator can take less than nothing.
double DeepCostInsideOperator(std::initializer_list<const std::vector<DeepOps>*> kinds) {
  std::map<std::string, std::pair<double, int64_t>> per_name;  // self time, calls
  for (const std::vector<DeepOps>* ops : kinds) {
    for (const DeepOps& phase_ops : *ops) {
      for (const auto& [name, self_calls] : phase_ops.by_name) {
        auto& [self, calls] = per_name[name];
        self += std::max(0.0, self_calls.first);
        calls += self_calls.second;
      }
    }
  }
  double cheapest = std::numeric_limits<double>::infinity();
  for (const auto& [name, self_calls] : per_name) {
    if (self_calls.second > 0) cheapest = std::min(cheapest, self_calls.first / static_cast<double>(self_calls.second));
  }
  return std::isfinite(cheapest) ? cheapest : 0.0;
}

// The op phases under each of `profiled`, in that order.
std::vector<DeepOps> DeepOpsOfEach(const model::Run& run, const std::vector<const model::Phase*>& profiled,
                                   TimeNs run_end) {
  std::vector<DeepOps> out;
  out.reserve(profiled.size());
  for (const model::Phase* p : profiled) out.push_back(DeepOpsUnder(run, *p, run_end));
  return out;
}

// `ops[i]`: the op phases under `profiled[i]` (DeepOpsOfEach).
DeepKindResult DeepCorrect(const std::vector<const model::Phase*>& profiled, const std::vector<DeepOps>& ops_of,
                           std::optional<double> baseline, double cost_inside_op, TimeNs run_end,
                           std::map<std::string, DeepOpSamples>* samples) {
  DeepKindResult r;
  const size_t n = profiled.size();
  for (size_t i = 0; i < n; ++i) {
    const double dur = DeepDurationS(*profiled[i], run_end);
    const double cost = baseline ? std::max(0.0, dur - *baseline) : 0.0;
    const DeepOps& ops = ops_of[i];
    // The phase's cost per operator call, of which at most cost_inside_op lies inside the
    // operator's own bracket; the rest is between operators (taken off what they do not cover).
    const double per_op = std::min(ops.count > 0 ? cost / static_cast<double>(ops.count) : 0.0, cost_inside_op);
    double covered = 0;
    for (const auto& [name, self_calls] : ops.by_name) {
      DeepOpSamples& s = (*samples)[name];
      s.corrected.resize(n, 0.0);
      s.raw.resize(n, 0.0);
      const double self = std::max(0.0, self_calls.first);
      s.raw[i] = self;
      s.corrected[i] = std::max(0.0, self - static_cast<double>(self_calls.second) * per_op);
      s.calls += self_calls.second;
      covered += s.corrected[i];
    }
    r.removed_s += cost;
    r.ops += ops.count;
    r.unattributed_sum_s += std::max(0.0, dur - cost - covered);
  }
  for (auto& [name, s] : *samples) {
    s.corrected.resize(n, 0.0);
    s.raw.resize(n, 0.0);
  }
  r.mean_cost_s = n > 0 ? r.removed_s / static_cast<double>(n) : 0;
  return r;
}

}  // namespace

double StudentT975(int64_t df) {
  static constexpr double kT[] = {12.7062047, 4.30265273, 3.18244631, 2.77644511, 2.57058184, 2.44691185,
                                  2.36462425, 2.30600414, 2.26215716, 2.22813885, 2.20098516, 2.17881283,
                                  2.16036866, 2.14478669, 2.13144955, 2.11990530, 2.10981558, 2.10092204,
                                  2.09302405, 2.08596345, 2.07961384, 2.07387307, 2.06865761, 2.06389856,
                                  2.05953855, 2.05552944, 2.05183052, 2.04840714, 2.04522964, 2.04227246};
  if (df < 1) return std::nan("");
  if (df <= 30) return kT[df - 1];
  if (df < 40) return kT[29];
  if (df < 60) return 2.02107539;
  if (df < 120) return 2.00029782;
  return 1.97993050;
}

DeepProfile AnalyzeDeepProfile(const model::Run& run) {
  DeepProfile out;
  const TimeNs run_end = run.EffectiveEnd();
  bool any_deep = false;
  for (const model::Phase& p : run.phases) {
    const std::string_view leaf = p.leaf_type();
    if ((leaf == "iteration" || leaf == "data_wait") && IsDeep(p)) any_deep = true;
  }
  if (!any_deep) return out;

  // Iterations and data_wait phases by (process, host, pid, mode), in time order.
  using Key = std::tuple<model::PhaseId, std::string, int32_t, std::string>;
  struct Bucket {
    std::vector<const model::Phase*> iterations, data_waits;
    const model::Phase* process = nullptr;
  };
  std::map<Key, Bucket> buckets;
  for (const model::Phase& p : run.phases) {
    const std::string_view leaf = p.leaf_type();
    if (leaf != "iteration" && leaf != "data_wait") continue;
    const model::Phase* process = nullptr;
    std::string mode(TagOf(p, "mode"));
    size_t steps = 0;
    for (const model::Phase* up = run.FindPhase(p.parent); up != nullptr && steps <= run.phases.size();
         up = run.FindPhase(up->parent), ++steps) {
      if (mode.empty() && up->leaf_is("epoch")) mode = std::string(TagOf(*up, "mode"));
      if (up->leaf_is(model::kPhaseTypeProcess)) {
        process = up;
        break;
      }
    }
    Key key = process != nullptr ? Key{process->id, "", 0, mode} : Key{0, p.host, p.pid, mode};
    Bucket& b = buckets[key];
    b.process = process;
    (leaf == "iteration" ? b.iterations : b.data_waits).push_back(&p);
  }

  for (auto& [key, b] : buckets) {
    auto by_start = [](const model::Phase* x, const model::Phase* y) {
      return x->start_ns != y->start_ns ? x->start_ns < y->start_ns : x->id < y->id;
    };
    std::stable_sort(b.iterations.begin(), b.iterations.end(), by_start);
    std::stable_sort(b.data_waits.begin(), b.data_waits.end(), by_start);
    DeepProfileGroup g;
    g.mode = std::get<3>(key);
    g.process = std::get<0>(key);
    if (b.process != nullptr) {
      g.host = b.process->host;
      g.pid = b.process->pid;
      g.process_name = b.process->name;
    } else {
      g.host = std::get<1>(key);
      g.pid = std::get<2>(key);
    }
    g.iterations = static_cast<int64_t>(b.iterations.size());

    std::vector<const model::Phase*> profiled, profiled_dw;
    std::vector<double> unprofiled, unprofiled_dw;
    for (size_t i = 0; i < b.iterations.size(); ++i) {
      if (IsDeep(*b.iterations[i])) {
        profiled.push_back(b.iterations[i]);
        g.profiled_indices.push_back(static_cast<int64_t>(i));
        g.profiled_phases.push_back(b.iterations[i]->id);
      } else {
        unprofiled.push_back(DeepDurationS(*b.iterations[i], run_end));
      }
    }
    for (const model::Phase* p : b.data_waits) {
      if (IsDeep(*p)) {
        profiled_dw.push_back(p);
      } else {
        unprofiled_dw.push_back(DeepDurationS(*p, run_end));
      }
    }
    if (profiled.empty() && profiled_dw.empty()) continue;
    g.profiled = static_cast<int64_t>(profiled.size());
    g.data_waits_profiled = static_cast<int64_t>(profiled_dw.size());

    std::optional<double> baseline = DeepBaseline(std::move(unprofiled), &g.baseline_iterations);
    g.baseline_known = baseline.has_value();
    g.baseline_s = baseline.value_or(0);
    const std::vector<DeepOps> ops = DeepOpsOfEach(run, profiled, run_end);
    const std::vector<DeepOps> dw_ops = DeepOpsOfEach(run, profiled_dw, run_end);
    g.cost_inside_op_s = DeepCostInsideOperator({&ops, &dw_ops});
    std::map<std::string, DeepOpSamples> samples;
    DeepKindResult it = DeepCorrect(profiled, ops, baseline, g.cost_inside_op_s, run_end, &samples);
    g.mean_cost_s = it.mean_cost_s;
    g.cost_fraction = g.baseline_s > 0 ? g.mean_cost_s / g.baseline_s : 0;
    g.ops_per_iteration = g.profiled > 0 ? static_cast<double>(it.ops) / static_cast<double>(g.profiled) : 0;
    g.cost_per_op_s = it.ops > 0 ? it.removed_s / static_cast<double>(it.ops) : 0;
    g.unattributed_s = g.profiled > 0 ? it.unattributed_sum_s / static_cast<double>(g.profiled) : 0;
    g.unattributed_fraction = g.baseline_s > 0 ? g.unattributed_s / g.baseline_s : 0;
    DeepSummarize(samples, profiled.size(), false, g.baseline_s, g.iterations, &g.operators);

    int64_t dw_used = 0;
    std::optional<double> dw_baseline = DeepBaseline(std::move(unprofiled_dw), &dw_used);
    g.data_wait_baseline_known = dw_baseline.has_value();
    g.data_wait_baseline_s = dw_baseline.value_or(0);
    std::map<std::string, DeepOpSamples> dw_samples;
    DeepKindResult dw = DeepCorrect(profiled_dw, dw_ops, dw_baseline, g.cost_inside_op_s, run_end, &dw_samples);
    g.data_wait_mean_cost_s = dw.mean_cost_s;
    DeepSummarize(dw_samples, profiled_dw.size(), true, g.data_wait_baseline_s, g.iterations, &g.operators);

    g.removed_s = it.removed_s + dw.removed_s;
    std::stable_sort(g.operators.begin(), g.operators.end(),
                     [](const DeepOperator& x, const DeepOperator& y) { return x.total_s > y.total_s; });
    out.removed_s += g.removed_s;
    out.groups.push_back(std::move(g));
  }
  return out;
}

}  // namespace grademl::analysis
