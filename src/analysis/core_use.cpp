#include "analysis/core_use.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "analysis/derived/counter_rate.h"
#include "analysis/series_math.h"
#include "model/metric_names.h"

namespace grademl::analysis {
namespace metric = model::metric;
namespace {

constexpr size_t kMaxWindows = 400;

struct ProcessTrack {
  const model::Resource* resource = nullptr;
  TimeNs start_ns = 0;  // the process phase's time
  TimeNs end_ns = 0;
};

TimeNs EndOf(const model::Phase& p, TimeNs run_end) { return p.end_ns != 0 ? p.end_ns : run_end; }

std::optional<int64_t> TagInt(const model::Phase& p, std::string_view key) {
  for (const auto& [k, v] : p.tags) {
    if (k != key) continue;
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec == std::errc() && ptr == v.data() + v.size() && n >= 0) return n;
  }
  return std::nullopt;
}

void TakeMax(std::optional<int64_t>& into, std::optional<int64_t> v) {
  if (v && (!into || *v > *into)) into = v;
}

// The CPU seconds (user + system + unseen children) a process used from times[0] to each of
// `times`, by the one rule (derived/counter_rate.h: its counters count from 0 at its start, a
// reset counts 0, nothing is known before the first known point).
std::vector<double> CpuSince(const model::Run& run, const model::Resource& r, std::span<const TimeNs> times) {
  std::vector<derived::Counter> counters;
  for (std::string_view name : {metric::kProcCpuUser, metric::kProcCpuSystem, metric::kProcCpuUnseenChildren}) {
    derived::Counter c = derived::CounterOf(run, r, name);
    if (!c.empty()) counters.push_back(c);
  }
  std::vector<double> out(times.size(), 0.0);
  derived::AddCumulativeIncreases(counters, times, out);
  return out;
}

// The smallest positive sample of a gauge, or 0.
double SmallestPositive(SampleSpan s) {
  double best = 0;
  for (const model::Sample& x : s) {
    if (x.v > 0 && (best == 0 || x.v < best)) best = x.v;
  }
  return best;
}

}  // namespace

const PhaseCoreUse* CoreUse::Find(model::PhaseId id) const {
  for (const PhaseCoreUse& p : phases) {
    if (p.phase == id) return &p;
  }
  return nullptr;
}

namespace {

// Per phase (Run::phases order): whether its subtree holds a process phase or a
// torch_threads / num_workers tag, the only phases CoreUseOf's walk of a subtree reads. A
// phase with either marks itself and its ancestors (up to the first already marked: each
// phase is marked once).
std::vector<char> PhasesWithProcessesOrTags(const model::Run& run) {
  std::vector<char> marked(run.phases.size(), 0);
  for (const model::Phase& p : run.phases) {
    bool wanted = p.leaf_is(model::kPhaseTypeProcess);
    for (const auto& [k, v] : p.tags) wanted = wanted || k == "torch_threads" || k == "num_workers";
    if (!wanted) continue;
    for (const model::Phase* a = &p; a != nullptr;) {
      char& m = marked[static_cast<size_t>(a - run.phases.data())];
      if (m != 0) break;
      m = 1;
      a = a->parent != 0 ? run.FindPhase(a->parent) : nullptr;
    }
  }
  return marked;
}

// CoreUseOf; with `relevant` (PhasesWithProcessesOrTags), the walk of the subtree skips the
// children whose subtrees hold neither a process nor a tag it reads: the same processes in
// the same order, the same tags.
// A host core's idle and iowait counters, indexed once for the windows of every phase read.
struct HostCore {
  const model::Resource* resource;
  derived::IncreaseIndex idle, iowait;
};

std::vector<HostCore> HostCores(const model::Run& run) {
  std::vector<HostCore> out;
  for (const model::Resource& r : run.resources) {
    if (r.kind != model::ResourceKind::kCore) continue;
    auto index = [&](std::string_view name) {
      return derived::IncreaseIndex({SamplesOf(run.FindSeries(r.id, name)), std::nullopt});
    };
    out.push_back({&r, index(metric::kCoreIdle), index(metric::kCoreIowait)});
  }
  return out;
}

PhaseCoreUse CoreUseOfImpl(const model::Run& run, model::PhaseId id, const CoreUseOptions& options,
                           const std::vector<char>* relevant, const std::vector<HostCore>& cores) {
  PhaseCoreUse use;
  use.phase = id;
  const model::Phase* phase = run.FindPhase(id);
  if (phase == nullptr) return use;
  const TimeNs run_end = run.EffectiveEnd();
  const TimeNs start = phase->start_ns;
  const TimeNs end = std::max(EndOf(*phase, run_end), start);
  use.duration_s = NsToSeconds(end - start);

  // The processes: those of the subtree, else the one the phase runs in. Tags on the way.
  std::vector<ProcessTrack> procs;
  std::vector<model::PhaseId> stack{id};
  while (!stack.empty()) {
    const model::Phase* p = run.FindPhase(stack.back());
    stack.pop_back();
    if (p == nullptr) continue;
    TakeMax(use.torch_threads, TagInt(*p, "torch_threads"));
    TakeMax(use.num_workers, TagInt(*p, "num_workers"));
    if (p->leaf_is(model::kPhaseTypeProcess)) {
      if (const model::Resource* r = run.ProcessResourceOf(p->id)) procs.push_back({r, p->start_ns, EndOf(*p, run_end)});
    }
    for (model::PhaseId c : run.ChildrenOf(p->id)) {
      if (relevant != nullptr) {
        const model::Phase* child = run.FindPhase(c);
        if (child == nullptr || (*relevant)[static_cast<size_t>(child - run.phases.data())] == 0) continue;
      }
      stack.push_back(c);
    }
  }
  if (procs.empty()) {
    for (const model::Phase* p = phase; p != nullptr; p = p->parent != 0 ? run.FindPhase(p->parent) : nullptr) {
      if (!p->leaf_is(model::kPhaseTypeProcess)) continue;
      if (const model::Resource* r = run.ProcessResourceOf(p->id)) procs.push_back({r, start, end});
      break;
    }
  }
  use.processes = static_cast<int64_t>(procs.size());

  // The host's cores.
  double idle_s = 0;
  for (const HostCore& core : cores) {
    if (!phase->host.empty() && core.resource->host != phase->host) continue;
    ++use.host_cores;
    idle_s += core.idle.Over(start, end);
    idle_s += core.iowait.Over(start, end);
  }
  if (use.duration_s > 0) use.host_idle_cores = idle_s / use.duration_s;

  // Windows for the peak, and the CPU at their bounds.
  const double interval_s = NsToSeconds(run.info.interval_ns);
  double window_s = std::max({options.window_s, 2 * interval_s, use.duration_s / kMaxWindows});
  size_t windows = use.duration_s > window_s ? static_cast<size_t>(use.duration_s / window_s) : 1;
  std::vector<TimeNs> bounds(windows + 1);
  for (size_t i = 0; i <= windows; ++i) {
    bounds[i] = start + static_cast<DurationNs>(std::llround(static_cast<double>(end - start) * static_cast<double>(i) /
                                                             static_cast<double>(windows)));
  }
  std::vector<double> per_window(windows, 0.0);
  std::vector<double> threads_at(windows, 0.0);
  double quota_limited = 0, affinity_limited = 0;
  double top_cpu = 0;
  for (const ProcessTrack& p : procs) {
    std::vector<TimeNs> clamped(bounds.size());
    for (size_t i = 0; i < bounds.size(); ++i) clamped[i] = std::clamp(bounds[i], p.start_ns, std::max(p.start_ns, p.end_ns));
    std::vector<double> cpu = CpuSince(run, *p.resource, clamped);
    const double own_cpu = cpu.back();
    use.cpu_seconds += own_cpu;
    for (size_t i = 0; i < windows; ++i) per_window[i] += std::max(0.0, cpu[i + 1] - cpu[i]);

    SampleSpan threads = SamplesOf(run.FindSeries(p.resource->id, metric::kProcThreads));
    double own_peak = 0;
    for (const model::Sample& s : threads) {
      if (s.t >= std::max(start, p.start_ns) && s.t <= std::min(end, p.end_ns)) own_peak = std::max(own_peak, s.v);
    }
    use.peak_threads = std::max(use.peak_threads, static_cast<int64_t>(own_peak));
    if (own_cpu > top_cpu) {
      top_cpu = own_cpu;
      use.top_process_threads = static_cast<int64_t>(own_peak);
    }
    for (size_t i = 0; i < windows; ++i) {
      TimeNs mid = bounds[i] + (bounds[i + 1] - bounds[i]) / 2;
      if (mid >= p.start_ns && mid <= p.end_ns) threads_at[i] += GaugeValueAt(threads, mid);
    }

    double affinity = SmallestPositive(SamplesOf(run.FindSeries(p.resource->id, metric::kProcCpuAffinity)));
    double quota = SmallestPositive(SamplesOf(run.FindSeries(p.resource->id, metric::kProcCpuQuota)));
    double available = affinity > 0 && quota > 0 ? std::min(affinity, quota) : std::max(affinity, quota);
    if (available > use.available_cores) {
      use.available_cores = available;
      (quota > 0 && (affinity == 0 || quota < affinity) ? quota_limited : affinity_limited) = available;
    }
  }
  for (size_t i = 0; i < windows; ++i) {
    double w = NsToSeconds(bounds[i + 1] - bounds[i]);
    if (w > 0) use.peak_cores = std::max(use.peak_cores, per_window[i] / w);
    use.peak_threads = std::max(use.peak_threads, static_cast<int64_t>(threads_at[i]));
  }
  if (use.duration_s > 0) use.avg_cores = use.cpu_seconds / use.duration_s;
  if (use.cpu_seconds > 0) use.top_process_share = top_cpu / use.cpu_seconds;
  use.peak_cores = std::max(use.peak_cores, use.avg_cores);
  if (use.available_cores > 0) {
    use.available_from = quota_limited == use.available_cores ? "cgroup quota" : "affinity";
  } else if (use.host_cores > 0) {
    use.available_cores = static_cast<double>(use.host_cores);
    use.available_from = "host";
  }
  return use;
}

}  // namespace

PhaseCoreUse CoreUseOf(const model::Run& run, model::PhaseId id, const CoreUseOptions& options) {
  return CoreUseOfImpl(run, id, options, nullptr, HostCores(run));
}

CoreUse FindCoreUse(const model::Run& run, const CoreUseOptions& options) {
  CoreUse out;
  const model::Phase* root = run.Root();
  if (root == nullptr) return out;
  const TimeNs run_end = run.EffectiveEnd();
  std::vector<const model::Phase*> picked;
  for (const model::Phase& p : run.phases) {
    if (&p == root) continue;
    std::string_view leaf = p.leaf_type();
    if (leaf == "step" || leaf == model::kPhaseTypeProcess) picked.push_back(&p);
  }
  if (picked.size() > options.max_phases) {
    std::stable_sort(picked.begin(), picked.end(), [&](const model::Phase* a, const model::Phase* b) {
      return EndOf(*a, run_end) - a->start_ns > EndOf(*b, run_end) - b->start_ns;
    });
    picked.resize(options.max_phases);
    std::sort(picked.begin(), picked.end());  // back to run order
  }
  // Each picked phase walks its subtree: only the parts that hold processes or tags.
  const std::vector<char> relevant = PhasesWithProcessesOrTags(run);
  const std::vector<HostCore> cores = HostCores(run);
  out.phases.push_back(CoreUseOfImpl(run, root->id, options, &relevant, cores));
  for (const model::Phase* p : picked) out.phases.push_back(CoreUseOfImpl(run, p->id, options, &relevant, cores));
  return out;
}

double CoresUsedWhileCpuBound(const PhaseCoreUse& use, double cpu_bound_s) {
  if (cpu_bound_s <= 0 || use.cpu_seconds <= 0) return 0;
  double used = use.cpu_seconds / cpu_bound_s;
  return std::clamp(used, std::min(use.avg_cores, use.peak_cores), std::max(use.peak_cores, use.avg_cores));
}

}  // namespace grademl::analysis
