#include "analysis/issues.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "analysis/outside_load.h"
#include "analysis/schedule_graph.h"
#include "analysis/whatif.h"

namespace grademl::analysis {
namespace {

double DurationS(const model::Phase& p, TimeNs run_end) {
  TimeNs end = p.end_ns != 0 ? p.end_ns : run_end;
  return end > p.start_ns ? NsToSeconds(end - p.start_ns) : 0.0;
}

std::string Shorten(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  return std::string(s.substr(0, max - 3)) + "...";
}

// "Step train_cnn", "Process python3 train.py", "Phase epoch (epoch)".
std::string Label(const model::Phase& p) {
  std::string_view leaf = p.leaf_type();
  if (leaf == "step") return fmt::format("Step {}", Shorten(p.name, 60));
  if (leaf == model::kPhaseTypeProcess) return fmt::format("Process '{}'", Shorten(p.name, 60));
  if (leaf == model::kPhaseTypeRun) return "The run";
  if (leaf == p.name) return fmt::format("Phase {}", Shorten(p.name, 60));
  return fmt::format("Phase {} ({})", Shorten(p.name, 60), leaf);
}

std::string DurationText(double s) { return FormatDuration(static_cast<DurationNs>(std::llround(s * 1e9))); }

std::string Percent(double fraction) { return fmt::format("{:.0f}%", 100.0 * fraction); }

std::string_view BoundAdjective(BoundResource r) {
  switch (r) {
    case BoundResource::kCpu: return "CPU-bound";
    case BoundResource::kMemory: return "memory-bound";
    case BoundResource::kDisk: return "disk-bound";
    case BoundResource::kNet: return "network-bound";
    case BoundResource::kGpu: return "GPU-bound";
  }
  return "bound";
}

std::string_view WorkNoun(BoundResource r) {
  switch (r) {
    case BoundResource::kCpu: return "its CPU work";
    case BoundResource::kMemory: return "its memory allocation (page faults)";
    case BoundResource::kDisk: return "its disk I/O";
    case BoundResource::kNet: return "its network transfers";
    case BoundResource::kGpu: return "its GPU work";
  }
  return "it";
}

std::string_view MachinePart(BoundResource r) {
  switch (r) {
    case BoundResource::kCpu: return "CPUs";
    case BoundResource::kMemory: return "memory";
    case BoundResource::kDisk: return "disk";
    case BoundResource::kNet: return "network link";
    case BoundResource::kGpu: return "GPU";
  }
  return "resource";
}

// Asks the what-if engine; 0 when the change cannot be simulated. The schedule graph and
// its unchanged replay are the caller's when given, else built and replayed once, on the
// first question; each question then replays the changed schedule only.
class ImpactEstimator {
 public:
  ImpactEstimator(const model::Run& run, const Bottlenecks& bottlenecks, const CoreUse* core_use,
                  const ScheduleGraph* graph, const Replay* baseline)
      : run_(run), graph_(graph), baseline_(graph != nullptr ? baseline : nullptr) {
    options_.bound_seconds = BoundSecondsOf(bottlenecks);
    options_.core_use = CoreUseOfRun(run, core_use);
    options_.critical_path.max_links = 0;
    options_.critical_path.max_depth = 0;
    options_.durations_only = true;
  }

  // The seconds `changes` would save, or a negative value when they could not be simulated.
  double Saving(const std::vector<std::string>& texts) {
    std::vector<WhatifChange> changes;
    for (const std::string& t : texts) {
      auto c = ParseWhatifChange(t);
      if (!c.ok()) return -1;
      changes.push_back(std::move(*c));
    }
    if (graph_ == nullptr) {
      owned_graph_.emplace(ScheduleGraph::Build(run_));
      graph_ = &*owned_graph_;
    }
    if (baseline_ == nullptr && !graph_->empty()) {
      owned_baseline_.emplace(ReplaySchedule(*graph_));
      baseline_ = &*owned_baseline_;
    }
    options_.baseline = baseline_;
    auto r = SimulateWhatif(run_, *graph_, changes, options_);
    if (!r.ok()) return -1;
    if (baseline_s_ == 0) baseline_s_ = r->baseline_s;
    return r->saving_s();
  }

  double baseline_s() const { return baseline_s_; }

 private:
  const model::Run& run_;
  const ScheduleGraph* graph_;               // the caller's, or owned_graph_
  const Replay* baseline_;                   // the caller's, or owned_baseline_
  std::optional<ScheduleGraph> owned_graph_;
  std::optional<Replay> owned_baseline_;
  WhatifOptions options_;
  double baseline_s_ = 0;
};

// The phases worth an issue of their own: a workflow's steps; otherwise the top-level
// processes, looking through wrappers (a shell whose one child is most of it).
std::vector<const model::Phase*> Candidates(const model::Run& run, double run_s, size_t max) {
  std::vector<const model::Phase*> out;
  const model::Phase* root = run.Root();
  if (root == nullptr) return out;
  TimeNs end = run.EffectiveEnd();
  const auto& top = run.ChildrenOf(root->id);
  bool workflow = false;
  for (model::PhaseId id : top) {
    const model::Phase* p = run.FindPhase(id);
    if (p != nullptr && p->leaf_is("step")) workflow = true;
  }
  if (workflow) {
    for (model::PhaseId id : top) {
      const model::Phase* p = run.FindPhase(id);
      if (p != nullptr && p->leaf_is("step")) out.push_back(p);
    }
  } else {
    // Breadth-first, three levels: phases of at least 10% of the run; a phase whose one
    // child covers 90% of it is represented by that child.
    std::vector<const model::Phase*> level;
    for (model::PhaseId id : top) {
      if (const model::Phase* p = run.FindPhase(id)) level.push_back(p);
    }
    for (int depth = 0; depth < 3 && !level.empty(); ++depth) {
      std::vector<const model::Phase*> next;
      for (const model::Phase* p : level) {
        double d = DurationS(*p, end);
        if (d < 0.1 * run_s) continue;
        const auto& kids = run.ChildrenOf(p->id);
        const model::Phase* only = nullptr;
        if (kids.size() == 1) only = run.FindPhase(kids[0]);
        if (only != nullptr && DurationS(*only, end) >= 0.9 * d) {
          next.push_back(only);
          continue;
        }
        out.push_back(p);
        for (model::PhaseId k : kids) {
          const model::Phase* c = run.FindPhase(k);
          if (c != nullptr && c->leaf_is(model::kPhaseTypeProcess)) next.push_back(c);
        }
      }
      level = std::move(next);
    }
  }
  std::stable_sort(out.begin(), out.end(), [&](const model::Phase* a, const model::Phase* b) {
    return DurationS(*a, end) > DurationS(*b, end);
  });
  if (out.size() > max) out.resize(max);
  return out;
}

}  // namespace

std::function<double(model::PhaseId, std::string_view)> BoundSecondsOf(const Bottlenecks& bottlenecks) {
  return [&bottlenecks](model::PhaseId id, std::string_view resource) -> double {
    const PhaseBottlenecks* b = bottlenecks.Find(id);
    if (b == nullptr) return 0.0;
    if (resource == "waiting") return b->total_waiting_s();
    for (int r = 0; r < kBoundResourceCount; ++r) {
      if (BoundResourceName(static_cast<BoundResource>(r)) == resource) return b->bound_s[r];
    }
    return 0.0;
  };
}

std::function<double(model::PhaseId, std::string_view)> BoundSecondsOf(const Bottlenecks& bottlenecks,
                                                                        const model::Run& run,
                                                                        const GpuAnalysis* gpu) {
  auto base = BoundSecondsOf(bottlenecks);
  return [base, &run, gpu](model::PhaseId id, std::string_view resource) -> double {
    if (resource != "communication") return base(id, resource);
    if (gpu == nullptr) return 0.0;
    const model::Phase* p = run.FindPhase(id);
    if (p == nullptr) return 0.0;
    double best = 0;
    for (const GpuRankSummary& r : gpu->ranks) {
      if (r.phase == 0) continue;
      // The rank's process phase or one of its ancestors: all of the rank's exposed time.
      bool above = false;
      for (const model::Phase* q = run.FindPhase(r.phase); q != nullptr; q = q->parent != 0 ? run.FindPhase(q->parent) : nullptr) {
        if (q->id == id) {
          above = true;
          break;
        }
      }
      double s = 0;
      if (above) {
        s = r.exposed_comm_us / 1e6;
      } else if (const model::Phase* proc = run.FindPhase(r.phase);
                 proc != nullptr && p->pid == proc->pid && p->host == proc->host && p->pid != 0) {
        // A phase of that process (an iteration, an op, a communication kernel on its stream):
        // the exposed time within its window. Only communication kernels overlap exposed time
        // on the device tracks, so shrinking them moves the GPU work after them in the replay.
        const double start_us = static_cast<double>(p->start_ns) / 1e3;
        const double end_us = static_cast<double>(p->end_ns) / 1e3;
        for (const auto& [a, b] : r.exposed_comm_intervals_us) s += std::max(0.0, std::min(b, end_us) - std::max(a, start_us));
        s /= 1e6;
      }
      best = std::max(best, s);
    }
    return best;
  };
}

std::function<PhaseCoreUse(model::PhaseId)> CoreUseOfRun(const model::Run& run, const CoreUse* core_use) {
  return [&run, core_use](model::PhaseId id) {
    if (core_use != nullptr) {
      if (const PhaseCoreUse* u = core_use->Find(id)) return *u;
    }
    return CoreUseOf(run, id);
  };
}

namespace {
std::string Cores(double n) { return fmt::format("{:.1f}", n); }
std::string CoreCount(double n) {
  std::string s = fmt::format("{:.1f}", n);
  if (s.ends_with(".0")) s.resize(s.size() - 2);
  return s == "1" ? "1 core" : s + " cores";
}
}  // namespace

std::vector<Issue> RankIssues(const model::Run& run, const Bottlenecks& bottlenecks,
                              const std::vector<Imbalance>& imbalance, const CriticalPathResult& critical_path,
                              const IssueOptions& options, const CoreUse* core_use, const GpuAnalysis* gpu,
                              const SparkAnalysis* spark, const CommunicationAnalysis* communication,
                              const HostsAnalysis* hosts, const ReuseAnalysis* reuse, const ScheduleGraph* schedule,
                              const Replay* baseline) {
  std::vector<Issue> issues;
  const model::Phase* root = run.Root();
  if (root == nullptr) return issues;
  TimeNs run_end = run.EffectiveEnd();
  double run_s = critical_path.makespan_s > 0 ? critical_path.makespan_s : DurationS(*root, run_end);
  if (run_s <= 0) return issues;

  CoreUse computed;
  if (core_use == nullptr) {
    computed = FindCoreUse(run);
    core_use = &computed;
  }
  ImpactEstimator estimate(run, bottlenecks, core_use, schedule, baseline);
  auto use_of = CoreUseOfRun(run, core_use);
  std::unordered_set<model::PhaseId> on_path;
  for (const CriticalLink& l : critical_path.path.links) on_path.insert(l.id);
  std::unordered_map<model::PhaseId, double> slack;
  for (const StepSlack& s : critical_path.slack) slack[s.id] = s.slack_s;

  auto add = [&](model::PhaseId phase, std::string kind, std::vector<std::string> changes, double saving,
                 std::string text) {
    if (saving < options.min_impact_s || saving < options.min_impact_fraction * run_s) return;
    Issue issue;
    issue.phase = phase;
    issue.kind = std::move(kind);
    issue.impact_s = saving;
    issue.impact_fraction = saving / run_s;
    for (const std::string& c : changes) issue.change += (issue.change.empty() ? "" : " ") + c;
    issue.text = std::move(text);
    issues.push_back(std::move(issue));
  };
  auto saving_text = [&](double saving) { return fmt::format("{} ({} of the run)", DurationText(saving), Percent(saving / run_s)); };

  // 1. Phases bound by one resource, or mostly waiting.
  const double factor = 1.0 / options.speedup;
  for (const model::Phase* p : Candidates(run, run_s, options.max_candidates)) {
    const PhaseBottlenecks* b = bottlenecks.Find(p->id);
    if (b == nullptr || b->duration_s <= 0) continue;
    const double d = b->duration_s;
    auto it = slack.find(p->id);
    const double step_slack = it == slack.end() ? 0.0 : it->second;
    const bool critical = on_path.count(p->id) != 0;
    std::string where = critical ? " and on the critical path" : "";
    // Under-used cores: CPU-bound on fewer cores than it may use while the host's idle.
    bool underused = false;
    if (const double cpu = b->bound(BoundResource::kCpu); d >= options.underused_min_s && cpu >= options.min_share * d) {
      PhaseCoreUse use = use_of(p->id);
      const double used = CoresUsedWhileCpuBound(use, cpu);
      const double spare = use.available_cores - std::max(used, 1.0);  // as the threads lever counts it
      if (used > 0 && spare >= options.underused_min_spare_cores && use.host_cores > 0 &&
          use.host_idle_cores >= options.underused_min_idle_cores && (critical || step_slack < cpu * spare / use.available_cores)) {
        const int n = std::max(2, static_cast<int>(std::floor(use.available_cores + 1e-9)));
        std::string change = fmt::format("#{}:threads={}", p->id, n);
        double saving = estimate.Saving({change});
        std::string lever;
        if (use.torch_threads) {
          lever = fmt::format("torch used {} thread{} (torch.set_num_threads({}))", *use.torch_threads,
                              *use.torch_threads == 1 ? "" : "s", n);
        } else if ((use.peak_threads <= 1 && use.processes <= 1) ||
                   (use.top_process_threads == 1 && use.top_process_share >= 0.9)) {
          lever = fmt::format("its work ran in one thread: split it among {} threads or processes", n);
        } else {
          lever = fmt::format("it ran {} thread{} in {} process{} but kept {} busy: more of them must do CPU work",
                              use.peak_threads, use.peak_threads == 1 ? "" : "s", use.processes,
                              use.processes == 1 ? "" : "es", CoreCount(used));
        }
        add(p->id, "underused_cores", {change}, saving,
            fmt::format("{} used {} of {} ({}) for {}{} while {} of the host's {} cores sat idle; at most {} could "
                        "be saved if it used {} ({}; assumes its CPU work scales perfectly).",
                        Label(*p), Cores(used), CoreCount(use.available_cores),
                        use.available_from == "host" ? "the host's" : use.available_from, DurationText(cpu),
                        critical ? " on the critical path" : "", Cores(use.host_idle_cores), use.host_cores,
                        saving_text(saving), n >= use.available_cores ? "all of them" : CoreCount(n), lever));
        underused = saving >= options.min_impact_s && saving >= options.min_impact_fraction * run_s;
      }
    }
    for (int r = 0; r < kBoundResourceCount; ++r) {
      const double bound = b->bound_s[r];
      if (bound < options.min_share * d) continue;
      // The under-used cores issue names the concrete lever for this CPU time.
      if (underused && r == static_cast<int>(BoundResource::kCpu)) continue;
      // Saving at most (1 - factor) * bound; a step whose slack covers that cannot save anything.
      if (!critical && step_slack >= (1 - factor) * bound) continue;
      auto res = static_cast<BoundResource>(r);
      std::string change = fmt::format("#{}:{}*{}", p->id, BoundResourceName(res), factor);
      double saving = estimate.Saving({change});
      std::string saturated;
      if (b->saturated_s[r] >= 0.05 * bound) {
        saturated = fmt::format("the machine's {} {} full for {} of that", MachinePart(res),
                                res == BoundResource::kCpu ? "were" : "was", Percent(b->saturated_s[r] / bound));
      }
      // Contention for the CPU from outside the run: name who held it.
      if (res == BoundResource::kCpu) {
        std::string outside = OutsideContentionClause(run, p->host, p->start_ns, p->end_ns != 0 ? p->end_ns : run_end);
        if (!outside.empty()) saturated += (saturated.empty() ? "" : "; ") + outside;
      }
      if (!saturated.empty()) saturated = " (" + saturated + ")";
      add(p->id, std::string(BoundResourceName(res)), {change}, saving,
          fmt::format("{} is {} {} of its time{}{}; making {} {:g}x faster would save {}.", Label(*p),
                      BoundAdjective(res), Percent(bound / d), saturated, where, WorkNoun(res), options.speedup,
                      saving_text(saving)));
    }
    const double waiting = b->total_waiting_s();
    if (waiting >= options.min_share * d && (critical || step_slack < waiting)) {
      std::string change = fmt::format("#{}:waiting=0", p->id);
      double saving = estimate.Saving({change});
      add(p->id, "waiting", {change}, saving,
          fmt::format("{} waits {} of its time on nothing GradeML measures (sleep, a lock, a remote service, "
                      "another program){}; without that wait the run would be {} shorter.",
                      Label(*p), Percent(waiting / d), where, saving_text(saving)));
    }
  }

  // 2. Imbalance: parallel siblings waiting for the slowest; repeated phases with stragglers.
  size_t concurrent = 0, sequential = 0;
  for (const Imbalance& g : imbalance) {
    const model::Phase* parent = run.FindPhase(g.parent);
    const model::Phase* straggler = run.FindPhase(g.straggler);
    if (parent == nullptr || straggler == nullptr) continue;
    std::string_view leaf = straggler->leaf_type();
    if (g.kind == ImbalanceKind::kConcurrent) {
      if (++concurrent > 5) continue;
      std::string change = fmt::format("balance:type:{}", g.type);
      double saving = estimate.Saving({change});
      add(g.straggler, "imbalance", {change}, saving,
          fmt::format("{} parallel '{}' phases under {} are imbalanced: the slowest, {}, took {} against a mean "
                      "of {}; balancing them would save {}.",
                      g.count, leaf, Label(*parent), Shorten(straggler->name, 40), DurationText(g.straggler_s),
                      DurationText(g.mean_s), saving_text(saving)));
    } else {
      if (++sequential > 3) continue;
      // Every listed straggler of the group brought to the median.
      std::vector<std::string> changes;
      for (model::PhaseId k : g.stragglers) {
        const model::Phase* c = run.FindPhase(k);
        double dur = c != nullptr ? DurationS(*c, run_end) : 0;
        if (dur > 0) changes.push_back(fmt::format("#{}*{:.6g}", c->id, g.median_s / dur));
      }
      if (changes.empty()) continue;
      double saving = estimate.Saving(changes);
      add(g.straggler, "straggler", changes, saving,
          fmt::format("{} of {} '{}' phases under {} took over {:g}x the median of {} (the slowest {}); were they "
                      "as fast as the median, the run would be {} shorter.",
                      g.straggler_count, g.count, leaf, Label(*parent), ImbalanceOptions{}.straggler_factor,
                      DurationText(g.median_s), DurationText(g.straggler_s), saving_text(saving)));
    }
  }

  // 3. Training waiting for its DataLoader.
  {
    double total = 0;
    std::unordered_map<int32_t, double> by_pid;
    for (const model::Phase& p : run.phases) {
      if (!p.leaf_is("data_wait")) continue;
      double d = DurationS(p, run_end);
      total += d;
      by_pid[p.pid] += d;
    }
    if (total >= options.min_impact_s) {
      int32_t pid = 0;
      double most = -1;
      for (const auto& [k, v] : by_pid) {
        if (v > most) most = v, pid = k;
      }
      model::PhaseId process = 0;
      for (const model::Resource& r : run.resources) {
        if (r.kind == model::ResourceKind::kProcess && r.pid == pid) process = r.phase;
      }
      const model::Phase* p = run.FindPhase(process);
      // Loading in the main process (num_workers=0, or no worker processes): the lever is workers.
      bool main_process_loading = false;
      int n = 1;
      if (p != nullptr) {
        PhaseCoreUse use = use_of(process);
        bool has_children = false;
        for (model::PhaseId c : run.ChildrenOf(process)) {
          const model::Phase* k = run.FindPhase(c);
          if (k != nullptr && k->leaf_is(model::kPhaseTypeProcess)) has_children = true;
        }
        main_process_loading = use.num_workers ? *use.num_workers == 0 : !has_children;
        n = std::clamp(static_cast<int>(std::lround(use.available_cores)) - 1, 1, 4);
      }
      if (main_process_loading) {
        std::string change = fmt::format("#{}:num_workers={}", process, n);
        double saving = estimate.Saving({change});
        add(process, "data_wait", {change}, saving,
            fmt::format("Training waited {} in total for batches its DataLoader loaded in the main process "
                        "(num_workers=0){}; with num_workers={} loading would overlap compute: at most {} could be "
                        "saved (assumes the workers get cores of their own).",
                        DurationText(total), p != nullptr ? " in " + Label(*p) : std::string(), n, saving_text(saving)));
      }
      std::string change = "type:data_wait*0";
      double saving = main_process_loading ? 0 : estimate.Saving({change});
      add(process, "data_wait", {change}, saving,
          fmt::format("Training waited {} in total for the next batch from its DataLoader{}; with batches always "
                      "ready (more workers, prefetching) the run would be {} shorter.",
                      DurationText(total), p != nullptr ? " in " + Label(*p) : std::string(), saving_text(saving)));
    }
  }

  // 4. A step concurrency limit that held ready steps back.
  if (critical_path.jobs > 0 && critical_path.slack.size() > static_cast<size_t>(critical_path.jobs)) {
    int more = critical_path.jobs * 2;
    std::string change = fmt::format("jobs={}", more);
    double saving = estimate.Saving({change});
    // The step that waited longest with its inputs ready, and one that held a slot then.
    std::string example;
    {
      std::unordered_map<model::PhaseId, TimeNs> ready;
      for (const model::Edge& e : run.edges) {
        const model::Phase* from = run.FindPhase(e.from);
        if (from != nullptr) ready[e.to] = std::max(ready[e.to], from->end_ns != 0 ? from->end_ns : run_end);
      }
      const model::Phase* waiter = nullptr;
      TimeNs longest = 0, ready_at = 0;
      for (model::PhaseId id : run.ChildrenOf(root->id)) {
        const model::Phase* st = run.FindPhase(id);
        if (st == nullptr || !st->leaf_is("step")) continue;
        TimeNs r = std::max(root->start_ns, ready.count(id) ? ready[id] : root->start_ns);
        if (st->start_ns - r > longest) longest = st->start_ns - r, waiter = st, ready_at = r;
      }
      if (waiter != nullptr && NsToSeconds(longest) >= 0.1) {
        const model::Phase* holder = nullptr;
        for (model::PhaseId id : run.ChildrenOf(root->id)) {
          const model::Phase* st = run.FindPhase(id);
          if (st != nullptr && st != waiter && st->leaf_is("step") && st->start_ns <= ready_at &&
              (st->end_ns == 0 || st->end_ns > ready_at)) {
            holder = st;
            break;
          }
        }
        example = fmt::format(" ({} waited {} with its inputs ready{})", Shorten(waiter->name, 40),
                              DurationText(NsToSeconds(longest)),
                              holder != nullptr ? "; it could have run alongside " + Shorten(holder->name, 40) : "");
      }
    }
    add(root->id, "concurrency", {change}, saving,
        fmt::format("Steps ran at most {} at a time (-j {}) and ready steps waited for a free slot{}; with -j {} "
                    "the run would be {} shorter.",
                    critical_path.jobs, critical_path.jobs, example, more, saving_text(saving)));
  }

  // 5. Workflow steps that recomputed what an earlier run had (the same key): restoring their
  // recorded outputs instead, replayed.
  if (reuse != nullptr) {
    for (const StepReuse& st : reuse->steps) {
      if (!st.redundant) continue;
      const model::Phase* p = run.FindPhase(st.phase);
      if (p == nullptr) continue;
      std::string change = fmt::format("reuse:#{}", st.phase);
      double saving = estimate.Saving({change});
      std::string outputs;
      const size_t shown = std::min<size_t>(st.outputs.size(), 2);
      for (size_t i = 0; i < shown; ++i) {
        outputs += (i == 0 ? "" : st.outputs.size() == 2 ? " and " : ", ") + Shorten(st.outputs[i], 60);
      }
      if (st.outputs.size() > shown) outputs += fmt::format(" and {} more", st.outputs.size() - shown);
      std::string how = st.outputs_identical ? fmt::format("exactly as run {} had", st.earlier_run)
                                             : fmt::format("as run {} had (its outputs differed: the step is not "
                                                           "deterministic)",
                                                           st.earlier_run);
      add(st.phase, "redundant_step", {change}, saving,
          fmt::format("{} recomputed {} {}; {} could have been saved by restoring its outputs (grademl run --reuse).",
                      Label(*p), outputs, how, saving_text(saving)));
    }
  }

  // 6. Spark stages whose tasks lost time to a problem with a lever: that time halved in
  // every task of the stage (the stage scaled by 1 - share/2), replayed. The costliest few.
  if (spark != nullptr) {
    struct Candidate {
      const SparkApplication* app;
      const SparkStage* stage;
      double potential_s;
    };
    std::vector<Candidate> candidates;
    for (const SparkApplication& app : spark->applications) {
      for (const SparkStage& st : app.stages_detail) {
        const std::string& b = st.bottleneck;
        if (b != "gc" && b != "shuffle_wait" && b != "scheduler_delay" && b != "deserialize" && b != "spill") continue;
        candidates.push_back({&app, &st, st.duration_s * st.bottleneck_fraction / 2});
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& a, const Candidate& b) { return a.potential_s > b.potential_s; });
    if (candidates.size() > 5) candidates.resize(5);
    for (const Candidate& c : candidates) {
      if (c.potential_s < options.min_impact_s || c.potential_s < options.min_impact_fraction * run_s) continue;
      const SparkStage& st = *c.stage;
      std::string change = fmt::format("#{}*{:.4g}", st.phase, 1.0 - st.bottleneck_fraction / 2);
      double saving = estimate.Saving({change});
      add(st.phase, "spark_" + st.bottleneck, {change}, saving,
          fmt::format("Spark {} of application '{}': {} Halving that time would save {}.", Shorten(st.name, 60),
                      Shorten(c.app->name, 40), st.advice, saving_text(saving)));
    }
  }

  if (gpu != nullptr) {
    for (Issue& i : GpuIssues(*gpu, run_s)) issues.push_back(std::move(i));
  }
  if (communication != nullptr) {
    for (Issue& i : CommunicationIssues(run, *communication, run_s)) {
      if (i.impact_s >= options.min_impact_s && i.impact_s >= options.min_impact_fraction * run_s) {
        issues.push_back(std::move(i));
      }
    }
  }

  // A run across hosts: the straggler host competes on its saving; the clock warning saves
  // nothing and is always listed, last.
  std::vector<Issue> warnings;
  if (hosts != nullptr) {
    for (Issue& i : HostIssues(run, *hosts, run_s)) {
      if (i.kind == "clock_causality") {
        warnings.push_back(std::move(i));
      } else if (i.impact_s >= options.min_impact_s && i.impact_s >= options.min_impact_fraction * run_s) {
        issues.push_back(std::move(i));
      }
    }
  }

  std::stable_sort(issues.begin(), issues.end(),
                   [](const Issue& a, const Issue& b) { return a.impact_s > b.impact_s; });
  if (issues.size() > options.max_issues) issues.resize(options.max_issues);
  for (Issue& w : warnings) issues.push_back(std::move(w));
  return issues;
}

std::vector<Issue> HostIssues(const model::Run& run, const HostsAnalysis& hosts, double run_s) {
  std::vector<Issue> out;
  if (hosts.empty()) return out;
  if (hosts.straggler && hosts.straggler->host < hosts.hosts.size()) {
    const HostStraggler& s = *hosts.straggler;
    const HostPart& h = hosts.hosts[s.host];
    // The phase to show: the agent's phase of that host, else its part's last phase.
    model::PhaseId phase = 0;
    TimeNs last_end = 0;
    const model::Phase* root = run.Root();
    for (const model::Phase& p : run.phases) {
      if (p.host != h.name || (root != nullptr && p.id == root->id)) continue;
      if (p.leaf_is("host")) {
        phase = p.id;
        break;
      }
      TimeNs end = p.ended() ? p.end_ns : run.EffectiveEnd();
      if (phase == 0 || end > last_end) phase = p.id, last_end = end;
    }
    const std::string* next = nullptr;
    for (const HostPart& o : hosts.hosts) {
      if (&o != &h && o.has_phases && o.end_ns == s.next_end_ns) next = &o.name;
    }
    const size_t others = std::count_if(hosts.hosts.begin(), hosts.hosts.end(),
                                         [&](const HostPart& o) { return &o != &h && o.has_phases; });
    Issue issue;
    issue.phase = phase;
    issue.kind = "host_straggler";
    issue.impact_s = s.saving_s;
    issue.impact_fraction = run_s > 0 ? std::min(1.0, s.saving_s / run_s) : 0;
    std::string uncertain;
    if (s.within_uncertainty) {
      uncertain = fmt::format(" (within clock uncertainty: the hosts' clocks may be off by up to {} together, "
                              "enough to change this verdict)",
                              DurationText(NsToSeconds(s.uncertainty_ns)));
    }
    std::string critical;
    if (h.critical_path_s > 0) critical = fmt::format("; {} of the critical path ran on it", DurationText(h.critical_path_s));
    issue.text = fmt::format(
        "Host {} was the straggler: its part of the run ended last, {} after the median end of the other {}{}{}; "
        "had it finished by then, the run would end {} ({} of the run) sooner, when {} finished.",
        Shorten(h.name, 60), DurationText(s.margin_s), others == 1 ? std::string("host") : fmt::format("{} hosts", others),
        uncertain, critical, DurationText(s.saving_s), Percent(issue.impact_fraction),
        next != nullptr ? "host " + Shorten(*next, 60) : std::string("the next host"));
    out.push_back(std::move(issue));
  }
  if (hosts.violation_count > 0 && !hosts.violations.empty()) {
    const CausalityViolation& v = hosts.violations.front();
    const model::Phase* a = run.FindPhase(v.from);
    const model::Phase* b = run.FindPhase(v.to);
    auto name = [](const model::Phase* p) { return p != nullptr ? "'" + Shorten(p->name, 40) + "'" : std::string("?"); };
    std::string order;
    if (v.rule == "end_to_start") {
      order = fmt::format("{} on {} started {} before {} on {} ended", name(b), Shorten(v.to_host, 40),
                          DurationText(NsToSeconds(v.gap_ns)), name(a), Shorten(v.from_host, 40));
    } else if (v.rule == "start_to_start") {
      order = fmt::format("{} on {} started {} before {} on {} started", name(b), Shorten(v.to_host, 40),
                          DurationText(NsToSeconds(v.gap_ns)), name(a), Shorten(v.from_host, 40));
    } else {
      order = fmt::format("{} on {} ended {} before {} on {} started", name(b), Shorten(v.to_host, 40),
                          DurationText(NsToSeconds(v.gap_ns)), name(a), Shorten(v.from_host, 40));
    }
    std::vector<std::string> unmeasured;
    for (const HostPart& h : hosts.hosts) {
      if (h.clock.state == "not measured") unmeasured.push_back(Shorten(h.name, 40));
    }
    std::string note;
    if (!unmeasured.empty()) {
      std::string list;
      for (const std::string& u : unmeasured) list += (list.empty() ? "" : ", ") + u;
      note = fmt::format(" The clock of {} {} was not measured (no grademl agent estimates).",
                         unmeasured.size() == 1 ? "host" : "hosts", list);
    }
    Issue issue;
    issue.phase = v.to;
    issue.kind = "clock_causality";
    issue.text = fmt::format(
        "{} of {} edges between hosts {} backwards in time by more than the clocks' measured uncertainty "
        "(the largest: {} edge, {}; {}): the hosts' clocks may be misaligned beyond the measured "
        "uncertainty, so times compared across hosts are suspect.{}",
        hosts.violation_count, hosts.cross_host_edges, hosts.violation_count == 1 ? "goes" : "go",
        Shorten(v.kind, 40), order,
        v.tolerance_ns > 0 ? "allowed: " + DurationText(NsToSeconds(v.tolerance_ns)) : std::string("no uncertainty allowed"),
        note);
    out.push_back(std::move(issue));
  }
  return out;
}

std::vector<Issue> CommunicationIssues(const model::Run& run, const CommunicationAnalysis& communication, double run_s) {
  std::vector<Issue> out;
  for (const CommunicationJob& job : communication.jobs) {
    if (job.straggler_rank < 0 || job.straggler_cost_s <= 0) continue;
    const model::Phase* p = run.FindPhase(job.straggler_process);
    int64_t others = std::max<int64_t>(job.ranks - 1, 1);
    Issue issue;
    issue.phase = job.straggler_process;
    issue.kind = "rank_straggler";
    issue.impact_s = job.straggler_cost_s;
    issue.impact_fraction = run_s > 0 ? std::min(1.0, issue.impact_s / run_s) : 0;
    std::string tail =
        job.straggler_never_joined > 0
            ? fmt::format("; it never entered {} collective{} the others were still waiting in when the job stopped "
                          "(a hang: look at what rank {} was doing instead).",
                          job.straggler_never_joined, job.straggler_never_joined == 1 ? "" : "s", job.straggler_rank)
            : fmt::format("; were it as fast as them, the job would finish up to {} sooner.",
                          DurationText(job.straggler_cost_s));
    issue.text = fmt::format(
        "Rank {}{} was the straggler of its distributed job: the other {} waited {} on average in collectives "
        "for it to arrive ({} in all){}",
        job.straggler_rank, p != nullptr ? fmt::format(" ({})", Label(*p)) : std::string(),
        others == 1 ? std::string("rank") : fmt::format("{} ranks", others), DurationText(job.straggler_cost_s),
        DurationText(job.straggler_total_s), tail);
    out.push_back(std::move(issue));
  }
  return out;
}

std::vector<Issue> GpuIssues(const GpuAnalysis& gpu, double run_s, const GpuAnalysisOptions& options) {
  std::vector<Issue> out;
  auto add = [&](const GpuRankSummary& r, std::string kind, double us, std::string change, std::string text) {
    Issue issue;
    issue.phase = r.phase;
    issue.kind = std::move(kind);
    issue.impact_s = us / 1e6;
    issue.impact_fraction = run_s > 0 ? std::min(1.0, issue.impact_s / run_s) : 0;
    issue.change = std::move(change);
    issue.text = std::move(text);
    out.push_back(std::move(issue));
  };
  const bool several = gpu.ranks.size() > 1;
  for (const GpuRankSummary& r : gpu.ranks) {
    const std::string who = several ? fmt::format("Rank {}'s GPU", r.rank) : std::string("The GPU");
    const std::string span = DurationText(r.kernel_us / 1e6);
    if (r.host_wait_pct() >= options.issue_min_pct) {
      add(r, "gpu_host_wait", r.host_wait_us,  "",
          fmt::format("{} sat idle {:.0f}% of the profiled steps ({} of {}) waiting on the host: the next kernel was "
                      "launched only after the GPU had drained (host-bound; fewer, larger kernels, CUDA graphs or "
                      "less Python per step would feed it).",
                      who, r.host_wait_pct(), DurationText(r.host_wait_us / 1e6), span));
    }
    if (r.exposed_comm_pct() >= options.issue_min_pct) {
      add(r, "gpu_exposed_communication", r.exposed_comm_us,
          r.phase != 0 ? fmt::format("#{}:communication=0", r.phase) : std::string(),
          fmt::format("{} ran communication with nothing beside it {:.0f}% of the profiled steps ({} of {}); "
                      "overlapping it fully with computation would save up to that.",
                      who, r.exposed_comm_pct(), DurationText(r.exposed_comm_us / 1e6), span));
    }
  }
  return out;
}

}  // namespace grademl::analysis
