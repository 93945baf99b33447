// HTA's four GPU analyses, kernel launch statistics and the CPU-only collective overlap over
// a neutral row table (gpu_breakdown.h). The definitions, rule by rule, are those of
// HolisticTraceAnalysis f4d0062 as docs/gpu.md states them: ns rounding of float traces,
// alignment, correlation pairing, the iteration filter, MERGE (interval union in ts order)
// and SWEEP (labelled segments of a +bit/-bit point sweep).
#include "analysis/gpu_breakdown.h"
#include "core/strings.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

namespace grademl::analysis {
namespace {

constexpr double kNoFigure = std::numeric_limits<double>::quiet_NaN();

bool Contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Python's re.match(r"ProfilerStep#\d+", s): anchored at the start only.
bool IsProfilerStep(std::string_view s) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  return StartsWith(s, kPrefix) && s.size() > kPrefix.size() && s[kPrefix.size()] >= '0' && s[kPrefix.size()] <= '9';
}

// HTA counts these as GPU rows whatever their stream and correlation.
bool IsSyncName(std::string_view name) { return name == "Event Sync" || name == "Context Sync"; }

bool IsGpuRow(const GpuTraceRow& r) { return (r.stream >= 0 && r.correlation >= 0) || IsSyncName(r.name); }

// Categories the idle-time breakdown counts (cuda_sync rows excluded).
bool IsIdleKernelCat(std::string_view cat) {
  return cat == "kernel" || cat == "Kernel" || cat == "gpu_memcpy" || cat == "Memcpy" || cat == "gpu_memset" ||
         cat == "Memset" || cat == "mtia_ccp_events";
}

// Collectives run on the host (gloo, or the c10d op that wraps any backend's collective).
bool IsCpuCollective(std::string_view name) {
  return StartsWith(name, "gloo:") || StartsWith(name, "c10d::") || Contains(name, "ProcessGroupGloo") ||
         name == "record_param_comms";
}

// A row as the analyses use it after rounding, alignment and the iteration filter.
struct WorkRow {
  double ts = 0, dur = 0;
  int64_t index = 0;
  int64_t stream = -1;
  KernelClass cls = KernelClass::kOther;
  const GpuTraceRow* src = nullptr;
  double launch_ts = kNoFigure;             // the paired host row's (or HTA's index-0 fallback's) start
  const GpuTraceRow* launch = nullptr; // the paired host row (no fallback)
  double launch_dur = kNoFigure;
};

struct Interval {
  double ts = 0, end = 0;
};

// MERGE: rows in (ts, index) order; a row starts a new group only when its ts is strictly
// greater than the largest end of all earlier rows. Groups as [min ts, max end].
std::vector<Interval> Merge(std::vector<WorkRow const*> rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const WorkRow* a, const WorkRow* b) {
    return a->ts != b->ts ? a->ts < b->ts : a->index < b->index;
  });
  std::vector<Interval> groups;
  double running_end = -std::numeric_limits<double>::infinity();
  for (const WorkRow* r : rows) {
    double end = r->ts + r->dur;
    if (groups.empty() || r->ts > running_end) {
      groups.push_back({r->ts, end});
    } else {
      groups.back().end = std::max(groups.back().end, end);
    }
    running_end = std::max(running_end, end);
  }
  return groups;
}

double Len(const std::vector<Interval>& groups) {
  double total = 0;
  for (const auto& g : groups) total += g.end - g.ts;
  return total;
}

// SWEEP: +bit at each group's start, -bit at its end; segments between consecutive points
// labelled by the running sum after the first of them. Calls on_segment(running, start, length).
template <typename F>
void Sweep(const std::vector<std::pair<int, const std::vector<Interval>*>>& classes, F&& on_segment) {
  std::vector<std::pair<double, int>> points;
  for (const auto& [bit, groups] : classes) {
    for (const auto& g : *groups) {
      points.push_back({g.ts, bit});
      points.push_back({g.end, -bit});
    }
  }
  // Ties only make zero-length segments, so the order among equal times changes no sum.
  std::stable_sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  int running = 0;
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    running += points[i].second;
    if (running > 0) on_segment(running, points[i].first, points[i + 1].first - points[i].first);
  }
}

// GPU-wide host wait: the gaps between MERGE groups of all streams' rows after which the
// rows starting the next group were all launched after the previous group had ended.
double HostWaitIdle(std::vector<const WorkRow*> rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const WorkRow* a, const WorkRow* b) {
    return a->ts != b->ts ? a->ts < b->ts : a->index < b->index;
  });
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double total = 0;
  double running_end = -kInf;
  for (size_t i = 0; i < rows.size();) {
    const double ts = rows[i]->ts;
    const double previous_end = running_end;
    double earliest_launch = kInf;  // a row with no launch event counts as launched early
    size_t j = i;
    for (; j < rows.size() && rows[j]->ts == ts; ++j) {
      earliest_launch = std::min(earliest_launch, rows[j]->launch != nullptr ? rows[j]->launch_ts : -kInf);
      running_end = std::max(running_end, rows[j]->ts + rows[j]->dur);
    }
    if (i > 0 && ts > previous_end && earliest_launch > previous_end) total += ts - previous_end;
    i = j;
  }
  return total;
}

double Percentile(std::vector<double> v, double q) {  // numpy's linear interpolation
  if (v.empty()) return kNoFigure;
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string KernelTypeLabel(int bits) {
  static constexpr std::string_view kNames[] = {"COMPUTATION", "COMMUNICATION", "MEMORY"};
  std::string label;
  for (int i = 0; i < 3; ++i) {
    if (bits & (1 << i)) {
      if (!label.empty()) label += " overlapping ";
      label += kNames[i];
    }
  }
  return label;
}

// One rank after rounding and alignment: the rows and the pairing of host and GPU rows.
struct PreparedRank {
  int64_t rank = 0;
  model::PhaseId phase = 0;
  std::vector<WorkRow> rows;  // after the iteration filter; GPU rows repeated per matching host row
};

}  // namespace

KernelClass ClassifyKernel(std::string_view name) {
  if (StartsWith(name, "nccl") || StartsWith(name, "hip") || StartsWith(name, "hccl") || Contains(name, "ncclKernel")) {
    return KernelClass::kCommunication;
  }
  if (StartsWith(name, "Memcpy") || StartsWith(name, "Memset") || StartsWith(name, "dma")) return KernelClass::kMemory;
  static constexpr std::string_view kExcludedPrefixes[] = {
      "nccl", "hip", "hccl", "Stream Wait Event", "runFunction", "job_exe", "packet", "pe_exe",
      "cpum_exe_subgraph", "collective_subgraph_execution"};
  bool excluded = false;
  for (auto p : kExcludedPrefixes) excluded = excluded || StartsWith(name, p);
  excluded = excluded || (StartsWith(name, "cuda") && Contains(name.substr(4), "LaunchKernel"));
  excluded = excluded || Contains(name, "Memcpy") || Contains(name, "Memset") || Contains(name, "dma") ||
             Contains(name, "Sync");
  return excluded ? KernelClass::kOther : KernelClass::kComputation;
}

std::string_view KernelClassName(KernelClass k) {
  switch (k) {
    case KernelClass::kCommunication: return "COMMUNICATION";
    case KernelClass::kMemory: return "MEMORY";
    case KernelClass::kComputation: return "COMPUTATION";
    case KernelClass::kOther: return "OTHER";
  }
  return "OTHER";
}

double RoundHalfEven(double x, int decimals) {
  if (!std::isfinite(x)) return x;
  double scale = std::pow(10.0, decimals);
  return std::nearbyint(x * scale) / scale;
}

GpuAnalysis AnalyzeGpuRows(const GpuRowTable& table, const GpuAnalysisOptions& options) {
  GpuAnalysis out;
  // Loading: ns rounding per rank (float traces), then alignment to the earliest ts of all ranks.
  std::vector<std::vector<GpuTraceRow>> loaded(table.size());
  double min_ts = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < table.size(); ++k) {
    loaded[k] = table[k].rows;
    for (auto& r : loaded[k]) {
      if (table[k].ts_float && options.ns_rounding) {
        double end = std::floor(r.ts_us + r.dur_us);
        r.ts_us = std::ceil(r.ts_us);
        r.dur_us = end - r.ts_us;
      }
      min_ts = std::min(min_ts, r.ts_us);
    }
  }
  for (auto& rows : loaded) {
    for (auto& r : rows) r.ts_us -= min_ts;
  }
  // The iteration filter runs when all ranks' names and categories hold 2+ ProfilerStep#N.
  std::set<std::string_view> steps;
  for (const auto& rows : loaded) {
    for (const auto& r : rows) {
      if (IsProfilerStep(r.name)) steps.insert(r.name);
      if (IsProfilerStep(r.cat)) steps.insert(r.cat);
    }
  }
  bool filter = options.iteration_filter && steps.size() >= 2;

  std::vector<PreparedRank> ranks;
  for (size_t k = 0; k < table.size(); ++k) {
    const auto& rows = loaded[k];
    PreparedRank pr{.rank = table[k].rank, .phase = table[k].phase};
    // Correlation pairing: the last host row with a GPU row's correlation is its launch.
    std::unordered_map<int64_t, const GpuTraceRow*> host_by_corr;
    const GpuTraceRow* index0 = nullptr;
    for (const auto& r : rows) {
      if (r.index == 0) index0 = &r;
      if (!IsGpuRow(r) && r.correlation != -1) host_by_corr[r.correlation] = &r;
    }
    auto make = [&](const GpuTraceRow& r) {
      WorkRow w{.ts = r.ts_us, .dur = r.dur_us, .index = r.index, .stream = r.stream, .src = &r};
      if (r.stream != -1) w.cls = ClassifyKernel(r.name);
      if (IsGpuRow(r) && r.correlation != -1) {
        auto it = host_by_corr.find(r.correlation);
        if (it != host_by_corr.end()) {
          w.launch = it->second;
          w.launch_ts = it->second->ts_us;
          w.launch_dur = it->second->dur_us;
        } else if (r.correlation >= 0 && index0 != nullptr) {
          w.launch_ts = index0->ts_us;  // HTA's index_correlation 0 looks up the file's first event
        }
      }
      return w;
    };
    if (!filter) {
      for (const auto& r : rows) pr.rows.push_back(make(r));
    } else {
      double last_step = -std::numeric_limits<double>::infinity();
      double min_cpu = std::numeric_limits<double>::infinity();
      bool has_step = false;
      for (const auto& r : rows) {
        if (IsGpuRow(r)) continue;
        min_cpu = std::min(min_cpu, r.ts_us);
        if (IsProfilerStep(r.name)) {
          has_step = true;
          last_step = std::max(last_step, r.ts_us);
        }
      }
      double limit = has_step ? last_step : min_cpu;
      std::unordered_map<int64_t, int64_t> kept_corr;
      for (const auto& r : rows) {
        if (!IsGpuRow(r) && r.ts_us < limit) ++kept_corr[r.correlation];
      }
      // Inner join: a GPU row once per kept host row with its correlation.
      for (const auto& r : rows) {
        if (!IsGpuRow(r)) continue;
        auto it = kept_corr.find(r.correlation);
        if (it == kept_corr.end()) continue;
        int64_t times = r.correlation >= 0 ? it->second : 1;
        for (int64_t i = 0; i < times; ++i) pr.rows.push_back(make(r));
      }
      for (const auto& r : rows) {
        if (!IsGpuRow(r) && r.ts_us < limit) pr.rows.push_back(make(r));
      }
    }
    ranks.push_back(std::move(pr));
  }
  std::sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });

  std::map<int, double> type_sums;  // kernel-type label bits -> µs over all ranks
  for (const auto& pr : ranks) {
    std::vector<const WorkRow*> kernels, comp, comm, mem;
    for (const auto& w : pr.rows) {
      if (w.stream == -1) continue;
      kernels.push_back(&w);
      if (w.cls == KernelClass::kComputation) comp.push_back(&w);
      if (w.cls == KernelClass::kCommunication) comm.push_back(&w);
      if (w.cls == KernelClass::kMemory) mem.push_back(&w);
    }
    // CPU-only collectives, where no communication kernel shows them.
    if (comm.empty()) {
      std::map<int64_t, std::vector<const WorkRow*>> comm_by_tid;
      std::vector<const WorkRow*> cpu_comm;
      for (const auto& w : pr.rows) {
        if (w.stream == -1 && IsCpuCollective(w.src->name)) {
          comm_by_tid[w.src->tid].push_back(&w);
          cpu_comm.push_back(&w);
        }
      }
      if (!cpu_comm.empty()) {
        std::map<int64_t, std::vector<Interval>> merged_by_tid;
        for (auto& [tid, v] : comm_by_tid) merged_by_tid[tid] = Merge(v);
        std::vector<const WorkRow*> cpu_comp;
        for (const auto& w : pr.rows) {
          if (w.stream != -1 || IsCpuCollective(w.src->name)) continue;
          if (w.src->cat != "cpu_op" && w.src->cat != "operator" && w.src->cat != "Operator") continue;
          auto it = merged_by_tid.find(w.src->tid);
          bool touches = false;
          if (it != merged_by_tid.end()) {
            const auto& groups = it->second;
            double end = w.ts + w.dur;
            auto g = std::partition_point(groups.begin(), groups.end(), [&](const Interval& x) { return x.ts < end; });
            touches = g != groups.begin() && std::prev(g)->end > w.ts;
          }
          if (!touches) cpu_comp.push_back(&w);
        }
        auto c = Merge(cpu_comm), p = Merge(cpu_comp);
        double overlap = 0;
        Sweep({{1, &c}, {2, &p}}, [&](int running, double, double len) {
          if (running == 3) overlap += len;
        });
        CpuCommOverlap co{.rank = pr.rank, .phase = pr.phase, .collectives = static_cast<int64_t>(cpu_comm.size()), .comm_us = Len(c),
                          .comp_us = Len(p), .overlap_us = overlap};
        co.comm_comp_overlap_pct = co.comm_us == 0 ? kNoFigure : 100.0 * overlap / co.comm_us;
        out.cpu_overlap.push_back(co);
      }
    }
    if (kernels.empty()) {
      if (!pr.rows.empty()) out.ranks_without_kernels.push_back(pr.rank);
      continue;
    }
    // Temporal breakdown.
    auto all = Merge(kernels);
    GpuTemporal t{.rank = pr.rank};
    t.kernel_us = all.back().end - all.front().ts;
    t.idle_us = t.kernel_us - Len(all);
    t.compute_us = Len(Merge(comp));
    t.non_compute_us = t.kernel_us - t.compute_us - t.idle_us;
    t.idle_pct = 100.0 * t.idle_us / t.kernel_us;
    t.compute_pct = 100.0 * t.compute_us / t.kernel_us;
    t.non_compute_pct = 100.0 * t.non_compute_us / t.kernel_us;
    out.temporal.push_back(t);
    // Communication-computation overlap.
    auto comm_groups = Merge(comm), comp_groups = Merge(comp), mem_groups = Merge(mem);
    double overlap = 0;
    Sweep({{1, &comm_groups}, {2, &comp_groups}}, [&](int running, double, double len) {
      if (running == 3) overlap += len;
    });
    out.overlap.push_back({.rank = pr.rank, .comm_comp_overlap_pct = 100.0 * overlap / Len(comm_groups)});
    // What limited the GPU, and the communication nothing else ran beside.
    GpuRankSummary rs{.rank = pr.rank, .phase = pr.phase, .kernel_us = t.kernel_us, .idle_us = t.idle_us, .comm_us = Len(comm_groups)};
    rs.host_wait_us = HostWaitIdle(kernels);
    rs.comm_kernels = static_cast<int64_t>(comm.size());
    std::vector<const WorkRow*> not_comm;
    for (const WorkRow* w : kernels) {
      if (w->cls != KernelClass::kCommunication) not_comm.push_back(w);
    }
    auto rest = Merge(not_comm);
    Sweep({{1, &comm_groups}, {2, &rest}}, [&](int running, double start, double len) {
      if (running != 1 || len <= 0) return;
      rs.exposed_comm_us += len;
      auto& v = rs.exposed_comm_intervals_us;
      if (!v.empty() && v.back().second == start + min_ts) {
        v.back().second += len;
      } else {
        v.push_back({start + min_ts, start + min_ts + len});
      }
    });
    double idle_pct = 100.0 * rs.idle_us / rs.kernel_us;
    if (idle_pct <= options.gpu_bound_max_idle_pct) {
      rs.bound = "gpu";
    } else if (rs.host_wait_pct() >= options.host_bound_min_wait_pct) {
      rs.bound = "host";
    } else {
      rs.bound = "mixed";
    }
    out.ranks.push_back(rs);
    // Kernel types: COMPUTATION 1, COMMUNICATION 2, MEMORY 4; segments truncated to whole µs.
    std::vector<std::pair<int, const std::vector<Interval>*>> classes = {{1, &comp_groups}, {2, &comm_groups}};
    if (options.include_memory_kernels) classes.push_back({4, &mem_groups});
    Sweep(classes, [&](int running, double, double len) {
      if (running <= 7) type_sums[running] += std::trunc(len);
    });
    // Idle time per stream, by stream number (HTA lists them in order of first appearance,
    // which depends on the order the rows come in).
    std::vector<int64_t> stream_order;
    std::map<int64_t, std::vector<const WorkRow*>> by_stream;
    for (const WorkRow* w : kernels) {
      if (!IsIdleKernelCat(w->src->cat)) continue;
      auto& v = by_stream[w->stream];
      if (v.empty()) stream_order.push_back(w->stream);
      v.push_back(w);
    }
    std::sort(stream_order.begin(), stream_order.end());
    GpuLaunchStats ls{.rank = pr.rank};
    std::vector<double> delays;
    for (int64_t stream : stream_order) {
      auto& v = by_stream[stream];
      std::stable_sort(v.begin(), v.end(), [](const WorkRow* a, const WorkRow* b) {
        return a->ts != b->ts ? a->ts < b->ts : a->index < b->index;
      });
      double host_wait = 0, kernel_wait = 0, other = 0;
      bool has_host = false, has_kernel = false;
      for (size_t i = 0; i < v.size(); ++i) {
        const WorkRow& k = *v[i];
        ++ls.kernels;
        if (k.launch != nullptr) {
          ++ls.launched;
          double delay = k.ts - k.launch_ts;
          delays.push_back(delay);
          if (delay > options.launch_delay_outlier_us) ++ls.delay_outliers;
          if (k.launch_dur > options.runtime_outlier_us) ++ls.runtime_outliers;
          if (k.dur < k.launch_dur) {
            ++ls.short_kernels;
            ls.short_kernel_us += k.dur;
          }
        }
        if (i == 0) continue;
        double prev_end = v[i - 1]->ts + v[i - 1]->dur;
        double gap = k.ts - prev_end;
        if (k.launch_ts > prev_end) {
          host_wait += gap;
          has_host = true;
        } else if (gap < options.consecutive_kernel_delay_us) {
          kernel_wait += gap;
          has_kernel = true;
        } else {
          other += gap;
        }
      }
      double total = host_wait + kernel_wait + other;
      auto add = [&](const char* category, double us) {
        out.idle.push_back({.rank = pr.rank, .stream = stream, .category = category, .us = us,
                            .ratio = total == 0 ? kNoFigure : us / total});
      };
      if (has_host) add("host_wait", host_wait);
      if (has_kernel) add("kernel_wait", kernel_wait);
      add("other", other);
    }
    if (!delays.empty()) {
      double sum = 0;
      for (double d : delays) sum += d;
      ls.delay_mean_us = sum / static_cast<double>(delays.size());
      ls.delay_p50_us = Percentile(delays, 0.5);
      ls.delay_p95_us = Percentile(delays, 0.95);
      ls.delay_max_us = *std::max_element(delays.begin(), delays.end());
    }
    out.launch.push_back(ls);
  }
  double total = 0;
  for (const auto& [bits, us] : type_sums) total += us;
  for (const auto& [bits, us] : type_sums) {
    if (us == 0) continue;  // labels seen only in zero-length tie transients
    out.kernel_types.push_back({.type = KernelTypeLabel(bits), .us = us, .pct = 100.0 * us / total});
  }
  std::stable_sort(out.kernel_types.begin(), out.kernel_types.end(),
                   [](const GpuKernelType& a, const GpuKernelType& b) { return a.us > b.us; });
  return out;
}

}  // namespace grademl::analysis
