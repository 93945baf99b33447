#include "analysis/dask_tasks.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <string_view>

#include "core/time.h"
#include "analysis/phase_tags.h"

namespace grademl::analysis {
namespace {

double PhaseSeconds(const model::Phase& p) { return p.end_ns > p.start_ns ? NsToSeconds(p.end_ns - p.start_ns) : 0.0; }

double Median(std::vector<double>& v) {
  if (v.empty()) return 0;
  size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

// One task's startstops, from its child phases.
struct TaskCost {
  double compute = 0, transfer = 0, disk = 0, deserialize = 0;
  int64_t transfers = 0, transfer_bytes = 0;
};

TaskCost CostOf(const model::Run& run, const model::Phase& task) {
  TaskCost c;
  for (model::PhaseId id : run.ChildrenOf(task.id)) {
    const model::Phase* child = run.FindPhase(id);
    if (child == nullptr) continue;
    std::string_view type = child->leaf_type();
    double s = PhaseSeconds(*child);
    if (type == "compute") {
      c.compute += s;
    } else if (type == "transfer") {
      c.transfer += s;
      ++c.transfers;
      c.transfer_bytes += IntTag(*child, "bytes");
    } else if (type == "disk-read" || type == "disk-write") {
      c.disk += s;
    } else if (type == "deserialize") {
      c.deserialize += s;
    }
  }
  return c;
}

}  // namespace

DaskAnalysis AnalyzeDask(const model::Run& run) {
  DaskAnalysis a;
  struct PrefixAcc {
    DaskPrefix p;
    std::vector<double> compute;
    std::set<std::string_view> workers;
  };
  std::map<std::string, PrefixAcc> prefixes;
  std::map<std::string, DaskWorker> workers;
  for (const model::Phase& task : run.phases) {
    if (!task.leaf_is("task") || TagOf(task, "engine") != "dask") continue;
    TaskCost c = CostOf(run, task);
    std::string_view state = TagOf(task, "state");
    bool erred = state == "erred";
    bool cancelled = state == "cancelled";
    int64_t nbytes = IntTag(task, "nbytes");
    std::string_view worker = TagOf(task, "worker");
    ++a.tasks;
    a.erred += erred ? 1 : 0;
    a.cancelled += cancelled ? 1 : 0;
    a.transfers += c.transfers;
    a.transfer_bytes += c.transfer_bytes;
    a.compute_s += c.compute;
    a.transfer_s += c.transfer;
    a.disk_s += c.disk;
    a.deserialize_s += c.deserialize;

    PrefixAcc& acc = prefixes[std::string(TagOf(task, "prefix"))];
    DaskPrefix& p = acc.p;
    ++p.tasks;
    p.erred += erred ? 1 : 0;
    p.cancelled += cancelled ? 1 : 0;
    p.compute_s += c.compute;
    p.transfer_s += c.transfer;
    p.disk_s += c.disk;
    p.deserialize_s += c.deserialize;
    p.nbytes += nbytes;
    acc.workers.insert(worker);
    if (!cancelled) {  // cut short, it computed nothing the log knows of
      acc.compute.push_back(c.compute);
      if (p.slowest_task == 0 || c.compute > p.max_task_s) {
        p.max_task_s = c.compute;
        p.slowest_task = task.id;
      }
    }

    DaskWorker& w = workers[std::string(worker)];
    if (w.tasks == 0) {
      w.worker = std::string(worker);
      w.host = task.host;
      w.pid = task.pid;
      w.phase = task.parent;
      const model::Phase* parent = run.FindPhase(task.parent);
      if (parent != nullptr && parent->leaf_is(model::kPhaseTypeProcess)) w.process = parent->id;
    }
    ++w.tasks;
    w.erred += erred ? 1 : 0;
    w.cancelled += cancelled ? 1 : 0;
    w.compute_s += c.compute;
    w.transfer_s += c.transfer;
    w.disk_s += c.disk;
    w.deserialize_s += c.deserialize;
    w.nbytes += nbytes;
    w.transfers_in += c.transfers;
    w.transfer_bytes_in += c.transfer_bytes;
  }
  if (a.tasks == 0) return a;
  for (const model::Edge& e : run.edges) {
    if (e.kind == "dask") ++a.edges;
  }
  for (auto& [name, acc] : prefixes) {
    acc.p.prefix = name;
    acc.p.workers = static_cast<int64_t>(acc.workers.size());
    acc.p.median_task_s = Median(acc.compute);
    a.prefixes.push_back(std::move(acc.p));
  }
  std::stable_sort(a.prefixes.begin(), a.prefixes.end(),
                   [](const DaskPrefix& x, const DaskPrefix& y) { return x.total_s() > y.total_s(); });
  for (auto& [name, w] : workers) a.workers.push_back(std::move(w));
  return a;
}

}  // namespace grademl::analysis
