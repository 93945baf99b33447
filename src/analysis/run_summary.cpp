#include "analysis/run_summary.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "analysis/host_devices.h"
#include "analysis/series_math.h"
#include "model/metric_names.h"

namespace grademl::analysis {
namespace metric = model::metric;
using model::Run;
using model::Sample;

const PhaseSummary* RunSummary::FindPhase(model::PhaseId id) const {
  for (const PhaseSummary& p : phases) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

namespace {

// The time after which a process's last RSS value no longer counts: its end, but never
// before its last sample (a sample proves the process was alive at that instant, so the
// last value counts at least at its own time: it stops 1 ns later).
TimeNs RssTrackEnd(std::span<const Sample> samples, TimeNs end_ns) {
  TimeNs last = samples.back().t;
  return end_ns > last ? end_ns : last + 1;
}

// ---------------------------------------------------------------------------------------
// Peak RSS of every subtree at once.
//
// Each process's RSS is a step function made of pieces [t_i, t_i+1) = v_i. Every subtree's
// peak is the maximum over time of the sum of its processes' functions. A segment tree over
// the elementary time intervals (range add, global max) holds the sum for one set of
// processes; the classic "small to large" walk of the tree (keep the heaviest child's
// contents, re-add the lighter children's) adds each piece O(log n) times, so the whole
// walk costs O(n log^2 n) for n pieces instead of O(n * depth).

// Range add / global max over elementary intervals.
class MaxAddTree {
 public:
  explicit MaxAddTree(size_t leaves) : size_(std::max<size_t>(leaves, 1)), max_(4 * size_, 0.0), add_(4 * size_, 0.0) {}

  // Adds v over the elementary intervals [lo, hi).
  void Add(size_t lo, size_t hi, double v) {
    if (lo < hi) Add(1, 0, size_, lo, hi, v);
  }
  // Adds sign * p.v over [p.lo, p.hi) for every piece of one track: pieces sorted by lo,
  // none empty, none overlapping the next. One walk down the tree for all of them: the
  // nodes a track covers are visited once instead of once per piece (about log n times
  // fewer visits for a track of many samples). Each node takes the same additions in the
  // same order as one Add per piece, so the sums are bit for bit the same.
  template <typename PieceT>
  void AddSorted(std::span<const PieceT> pieces, double sign) {
    if (!pieces.empty()) AddSorted(1, 0, size_, pieces, sign);
  }
  double Max() const { return max_[1]; }

 private:
  // Every piece of `pieces` meets [node_lo, node_hi).
  template <typename PieceT>
  void AddSorted(size_t node, size_t node_lo, size_t node_hi, std::span<const PieceT> pieces, double sign) {
    if (pieces.size() == 1 && pieces[0].lo <= node_lo && node_hi <= pieces[0].hi) {
      double v = sign * pieces[0].v;
      add_[node] += v;
      max_[node] += v;
      return;
    }
    size_t mid = node_lo + (node_hi - node_lo) / 2;
    // Sorted and not overlapping, so both lo and hi increase along the pieces: those that
    // meet the left half are a prefix, those that meet the right half a suffix.
    auto left_end = std::partition_point(pieces.begin(), pieces.end(), [&](const PieceT& p) { return p.lo < mid; });
    auto right_begin = std::partition_point(pieces.begin(), pieces.end(), [&](const PieceT& p) { return p.hi <= mid; });
    if (left_end != pieces.begin()) {
      AddSorted(2 * node, node_lo, mid, std::span<const PieceT>(pieces.begin(), left_end), sign);
    }
    if (right_begin != pieces.end()) {
      AddSorted(2 * node + 1, mid, node_hi, std::span<const PieceT>(right_begin, pieces.end()), sign);
    }
    max_[node] = add_[node] + std::max(max_[2 * node], max_[2 * node + 1]);
  }

  void Add(size_t node, size_t node_lo, size_t node_hi, size_t lo, size_t hi, double v) {
    if (lo <= node_lo && node_hi <= hi) {
      add_[node] += v;
      max_[node] += v;
      return;
    }
    size_t mid = node_lo + (node_hi - node_lo) / 2;
    if (lo < mid) Add(2 * node, node_lo, mid, lo, hi, v);
    if (hi > mid) Add(2 * node + 1, mid, node_hi, lo, hi, v);
    max_[node] = add_[node] + std::max(max_[2 * node], max_[2 * node + 1]);
  }

  size_t size_;
  std::vector<double> max_;
  std::vector<double> add_;
};

// One piece of a step function, in elementary-interval indexes.
struct Piece {
  size_t lo = 0;
  size_t hi = 0;
  double v = 0;
};

// The forest of phases as indexes into Run::phases, in a depth-first preorder.
struct PhaseForest {
  std::vector<std::vector<size_t>> children;  // tree edges actually walked
  std::vector<size_t> preorder;
  std::vector<size_t> first;  // preorder position of each phase
  std::vector<size_t> last;   // one past the preorder position of its subtree's last phase
  std::vector<size_t> roots;
};

PhaseForest BuildForest(const Run& run) {
  size_t n = run.phases.size();
  // The index of a phase id: its position when the ids are 1..n in order (as stored),
  // else the first phase with that id.
  bool dense = true;
  for (size_t i = 0; i < n && dense; ++i) dense = run.phases[i].id == static_cast<model::PhaseId>(i) + 1;
  std::unordered_map<model::PhaseId, size_t> index;
  if (!dense) {
    index.reserve(n);
    for (size_t i = 0; i < n; ++i) index.emplace(run.phases[i].id, i);
  }
  auto index_of = [&](model::PhaseId id) -> size_t {
    if (dense) return id >= 1 && static_cast<size_t>(id) <= n ? static_cast<size_t>(id) - 1 : n;
    auto it = index.find(id);
    return it == index.end() ? n : it->second;
  };

  std::vector<std::vector<size_t>> kids(n);
  std::vector<bool> has_parent(n, false);
  for (size_t i = 0; i < n; ++i) {
    const model::Phase& p = run.phases[i];
    size_t parent = p.parent == 0 ? n : index_of(p.parent);
    if (parent != n && parent != i) {
      kids[parent].push_back(i);
      has_parent[i] = true;
    }
  }
  // Children in start order, as the reports show them (lists already in order are only
  // checked).
  auto before = [&](size_t a, size_t b) { return run.phases[a].start_ns < run.phases[b].start_ns; };
  for (auto& k : kids) {
    if (!std::is_sorted(k.begin(), k.end(), before)) std::stable_sort(k.begin(), k.end(), before);
  }

  PhaseForest forest;
  forest.children.resize(n);
  forest.first.assign(n, 0);
  forest.last.assign(n, 0);
  std::vector<bool> visited(n, false);
  auto walk = [&](size_t root) {
    // Iterative DFS: (phase, next child to visit).
    std::vector<std::pair<size_t, size_t>> stack;
    visited[root] = true;
    forest.first[root] = forest.preorder.size();
    forest.preorder.push_back(root);
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      if (next < kids[v].size()) {
        size_t c = kids[v][next++];
        if (visited[c]) continue;
        visited[c] = true;
        forest.children[v].push_back(c);
        forest.first[c] = forest.preorder.size();
        forest.preorder.push_back(c);
        stack.emplace_back(c, 0);
      } else {
        forest.last[v] = forest.preorder.size();
        stack.pop_back();
      }
    }
    forest.roots.push_back(root);
  };
  for (size_t i = 0; i < n; ++i) {
    if (!has_parent[i]) walk(i);
  }
  // Phases on a parent cycle (corrupt input) are reached from nowhere: walk them as roots.
  for (size_t i = 0; i < n; ++i) {
    if (!visited[i]) walk(i);
  }
  return forest;
}

// Fills `peak` (peak_rss_bytes or peak_pss_bytes) of every phase; tracks[i] is phase i's own
// process memory gauge (may be empty).
void ComputeSubtreePeaks(const PhaseForest& forest, const std::vector<RssTrack>& tracks,
                         std::vector<PhaseSummary>& out, double PhaseSummary::*peak) {
  size_t n = tracks.size();
  std::vector<TimeNs> xs;
  for (const RssTrack& track : tracks) {
    if (track.samples.empty()) continue;
    for (const Sample& s : track.samples) xs.push_back(s.t);
    xs.push_back(RssTrackEnd(track.samples, track.end_ns));
  }
  if (xs.empty()) return;
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  auto idx = [&](TimeNs t) { return static_cast<size_t>(std::lower_bound(xs.begin(), xs.end(), t) - xs.begin()); };

  std::vector<std::vector<Piece>> pieces(n);
  std::vector<size_t> weight(n, 0);
  // Whether a phase's pieces are sorted and disjoint (samples sorted by time, as the model
  // promises), so that they can be added in one walk down the tree.
  std::vector<bool> sorted(n, true);
  for (size_t i = 0; i < n; ++i) {
    const auto& samples = tracks[i].samples;
    for (size_t k = 0; k < samples.size(); ++k) {
      TimeNs to = k + 1 < samples.size() ? samples[k + 1].t : RssTrackEnd(samples, tracks[i].end_ns);
      if (to <= samples[k].t || samples[k].v == 0) continue;
      Piece piece{idx(samples[k].t), idx(to), samples[k].v};
      if (!pieces[i].empty() && piece.lo < pieces[i].back().hi) sorted[i] = false;
      pieces[i].push_back(piece);
    }
    weight[i] = pieces[i].size();
  }
  for (auto it = forest.preorder.rbegin(); it != forest.preorder.rend(); ++it) {
    for (size_t c : forest.children[*it]) weight[*it] += weight[c];
  }
  std::vector<size_t> heavy(n, n);
  for (size_t v = 0; v < n; ++v) {
    for (size_t c : forest.children[v]) {
      if (heavy[v] == n || weight[c] > weight[heavy[v]]) heavy[v] = c;
    }
  }

  MaxAddTree tree(xs.size() - 1);
  auto apply = [&](size_t phase, double sign) {
    if (sorted[phase]) {
      tree.AddSorted(std::span<const Piece>(pieces[phase]), sign);
    } else {
      for (const Piece& p : pieces[phase]) tree.Add(p.lo, p.hi, sign * p.v);
    }
  };
  auto apply_subtree = [&](size_t phase, double sign) {
    for (size_t pos = forest.first[phase]; pos < forest.last[phase]; ++pos) apply(forest.preorder[pos], sign);
  };

  // One pending visit of the small-to-large walk.
  struct Frame {
    size_t v;
    bool keep;
    bool expanded;
  };
  std::vector<Frame> stack;
  for (size_t root : forest.roots) {
    stack.push_back({root, false, false});
    while (!stack.empty()) {
      Frame& top = stack.back();
      size_t v = top.v;
      if (weight[v] == 0) {
        // Nothing in the subtree: every peak in it is 0 (PhaseSummary's default).
        stack.pop_back();
        continue;
      }
      if (weight[v] == pieces[v].size() && sorted[v]) {
        // Only the phase's own track, whose pieces do not overlap: its peak is its largest
        // piece (exactly what the tree would give), its subtree's other peaks are 0, and a
        // phase its parent does not keep never needs to enter the tree.
        double own = 0;
        for (const Piece& p : pieces[v]) own = std::max(own, p.v);
        out[v].*peak = own;
        if (top.keep) apply(v, 1.0);
        stack.pop_back();
        continue;
      }
      if (!top.expanded) {
        top.expanded = true;
        // Lighter children first (each leaves the tree empty), then the heavy one (kept).
        if (heavy[v] != n) stack.push_back({heavy[v], true, false});
        for (size_t c : forest.children[v]) {
          if (c != heavy[v]) stack.push_back({c, false, false});
        }
        continue;
      }
      bool keep = top.keep;
      stack.pop_back();
      apply(v, 1.0);
      for (size_t c : forest.children[v]) {
        if (c != heavy[v]) apply_subtree(c, 1.0);
      }
      out[v].*peak = std::max(0.0, tree.Max());
      if (!keep) apply_subtree(v, -1.0);
    }
  }
}

// --- host resources -----------------------------------------------------------------------

// The series of one resource by name.
const model::Series* SeriesOf(const Run& run, const model::Resource& r, std::string_view name) {
  return run.FindSeries(r.id, name);
}

// The peak is taken over windows of at least min_interval_ns: shorter sampling intervals
// (a last sample taken just after the previous one) are merged with the following ones, and
// a too-short tail is left out, so that the clock-tick granularity of /proc/stat cannot make
// a 3 ms stub look 100% busy.
std::optional<CpuSummary> SummarizeCpu(const Run& run, const std::vector<const model::Resource*>& cores,
                                       DurationNs min_interval_ns) {
  // The five time counters of one core.
  struct CoreSeries {
    const model::Resource* core;
    SampleSpan busy[2];
    SampleSpan other[3];
  };
  std::vector<CoreSeries> all;
  for (const model::Resource* core : cores) {
    auto of = [&](std::string_view name) { return SamplesOf(SeriesOf(run, *core, name)); };
    CoreSeries cs{core,
                  {of(metric::kCoreUser), of(metric::kCoreSystem)},
                  {of(metric::kCoreIowait), of(metric::kCoreSteal), of(metric::kCoreIdle)}};
    bool any = false;
    for (auto s : cs.busy) any = any || !s.empty();
    for (auto s : cs.other) any = any || !s.empty();
    if (any) all.push_back(cs);
  }
  if (all.empty()) return std::nullopt;

  CpuSummary cpu;
  cpu.cores = static_cast<int64_t>(all.size());
  double busy = 0, total = 0, iowait = 0, steal = 0;
  std::vector<TimeNs> grid;
  for (const CoreSeries& cs : all) {
    double core_busy = CounterIncrease(cs.busy[0]) + CounterIncrease(cs.busy[1]);
    double core_iowait = CounterIncrease(cs.other[0]);
    double core_steal = CounterIncrease(cs.other[1]);
    double core_total = core_busy + core_iowait + core_steal + CounterIncrease(cs.other[2]);
    cpu.per_core.push_back({cs.core->name, core_total > 0 ? core_busy / core_total : 0.0});
    busy += core_busy;
    total += core_total;
    iowait += core_iowait;
    steal += core_steal;
    for (auto s : cs.busy)
      for (const Sample& x : s) grid.push_back(x.t);
    for (auto s : cs.other)
      for (const Sample& x : s) grid.push_back(x.t);
  }
  cpu.sampled_s = total / static_cast<double>(all.size());
  cpu.busy_s = busy;
  if (total > 0) {
    cpu.avg_busy = busy / total;
    cpu.avg_iowait = iowait / total;
    cpu.avg_steal = steal / total;
  }

  // Peak: the busy fraction of all cores together over each sampling interval.
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  std::vector<double> busy_at(grid.size(), 0.0), total_at(grid.size(), 0.0);
  for (const CoreSeries& cs : all) {
    for (auto s : cs.busy) {
      auto values = CounterValuesAt(s, grid);
      for (size_t k = 0; k < grid.size(); ++k) {
        busy_at[k] += values[k];
        total_at[k] += values[k];
      }
    }
    for (auto s : cs.other) {
      auto values = CounterValuesAt(s, grid);
      for (size_t k = 0; k < grid.size(); ++k) total_at[k] += values[k];
    }
  }
  auto window = [&](size_t from, size_t to) {
    double d_total = total_at[to] - total_at[from];
    if (d_total <= 0) return;
    double fraction = (busy_at[to] - busy_at[from]) / d_total;
    cpu.peak_busy = std::max(cpu.peak_busy, std::clamp(fraction, 0.0, 1.0));
  };
  size_t from = 0;
  bool any_window = false;
  for (size_t k = 1; k < grid.size(); ++k) {
    if (grid[k] - grid[from] < min_interval_ns) continue;
    window(from, k);
    from = k;
    any_window = true;
  }
  if (!any_window && grid.size() >= 2) window(0, grid.size() - 1);
  return cpu;
}

HostSummary SummarizeHost(const Run& run, const model::Resource& host,
                          const std::unordered_map<model::ResourceId, std::vector<size_t>>& children) {
  HostSummary out;
  out.name = host.name.empty() ? host.host : host.name;
  out.resource = host.id;
  // Which disks and interfaces count: one rule for every analysis and report.
  HostDevices devices = DevicesOfHost(run, host.host.empty() ? host.name : host.host);
  std::vector<const model::Resource*> cores;
  // Breadth-first over the host's resource subtree; processes are not host resources.
  std::vector<const model::Resource*> queue{&host};
  for (size_t q = 0; q < queue.size(); ++q) {
    const model::Resource& r = *queue[q];
    auto it = children.find(r.id);
    if (it != children.end()) {
      for (size_t i : it->second) {
        model::ResourceKind kind = run.resources[i].kind;
        if (kind != model::ResourceKind::kProcess && kind != model::ResourceKind::kHost) {
          queue.push_back(&run.resources[i]);
        }
      }
    }
    switch (r.kind) {
      case model::ResourceKind::kCore:
        cores.push_back(&r);
        break;
      case model::ResourceKind::kMemory: {
        const model::Series* used = SeriesOf(run, r, metric::kMemUsed);
        if (used == nullptr || used->samples.empty()) break;
        MemorySummary mem;
        mem.capacity_bytes = used->info.capacity;
        mem.peak_used_bytes = GaugeMax(used->samples);
        mem.avg_used_bytes = GaugeMean(used->samples);
        out.memory = mem;
        break;
      }
      case model::ResourceKind::kDisk: {
        SampleSpan read = SamplesOf(SeriesOf(run, r, metric::kDiskReadBytes));
        SampleSpan write = SamplesOf(SeriesOf(run, r, metric::kDiskWriteBytes));
        SampleSpan busy = SamplesOf(SeriesOf(run, r, metric::kDiskBusy));
        if (read.empty() && write.empty() && busy.empty()) break;
        DiskSummary disk{.name = r.name, .read_bytes = CounterIncrease(read), .write_bytes = CounterIncrease(write)};
        disk.counted = devices.Counts(r);
        DurationNs span = SampledSpan(busy);
        if (span > 0) disk.avg_busy = std::clamp(CounterIncrease(busy) / NsToSeconds(span), 0.0, 1.0);
        out.disks.push_back(disk);
        break;
      }
      case model::ResourceKind::kNet: {
        const model::Series* rx = SeriesOf(run, r, metric::kNetRxBytes);
        const model::Series* tx = SeriesOf(run, r, metric::kNetTxBytes);
        if (SamplesOf(rx).empty() && SamplesOf(tx).empty()) break;
        NetSummary net{.name = r.name,
                       .rx_bytes = CounterIncrease(SamplesOf(rx)),
                       .tx_bytes = CounterIncrease(SamplesOf(tx))};
        net.counted = devices.Counts(r);
        if (rx != nullptr && rx->info.has_capacity()) net.capacity_bytes_per_s = rx->info.capacity;
        else if (tx != nullptr && tx->info.has_capacity()) net.capacity_bytes_per_s = tx->info.capacity;
        out.nets.push_back(net);
        break;
      }
      case model::ResourceKind::kGpu: {
        const model::Series* util = SeriesOf(run, r, metric::kGpuUtilization);
        const model::Series* mem = SeriesOf(run, r, metric::kGpuMemoryUsed);
        const model::Series* power = SeriesOf(run, r, metric::kGpuPower);
        GpuSummary gpu{.name = r.name};
        gpu.has_utilization = !SamplesOf(util).empty();
        gpu.has_memory = !SamplesOf(mem).empty();
        gpu.has_power = !SamplesOf(power).empty();
        if (!gpu.has_utilization && !gpu.has_memory && !gpu.has_power) break;
        gpu.avg_utilization = GaugeMean(SamplesOf(util));
        gpu.peak_utilization = GaugeMax(SamplesOf(util));
        gpu.peak_memory_used_bytes = GaugeMax(SamplesOf(mem));
        if (mem != nullptr) gpu.memory_capacity_bytes = mem->info.capacity;
        gpu.avg_power_w = GaugeMean(SamplesOf(power));
        if (power != nullptr) gpu.power_limit_w = power->info.capacity;
        out.gpus.push_back(gpu);
        break;
      }
      default:
        break;
    }
  }
  out.cpu = SummarizeCpu(run, cores, run.info.interval_ns / 2);
  return out;
}

}  // namespace

double PeakOfSum(const std::vector<RssTrack>& tracks) {
  std::vector<std::pair<TimeNs, double>> events;
  for (const RssTrack& track : tracks) {
    if (track.samples.empty()) continue;
    double prev = 0;
    for (const Sample& s : track.samples) {
      events.emplace_back(s.t, s.v - prev);
      prev = s.v;
    }
    events.emplace_back(RssTrackEnd(track.samples, track.end_ns), -prev);
  }
  std::stable_sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  double sum = 0, peak = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    sum += events[i].second;
    if (i + 1 == events.size() || events[i + 1].first != events[i].first) peak = std::max(peak, sum);
  }
  return peak;
}

RunSummary SummarizeRun(const Run& run) {
  RunSummary summary;
  summary.start_ns = run.info.start_ns;
  summary.end_ns = run.EffectiveEnd();
  if (const model::Phase* root = run.Root(); root != nullptr && summary.start_ns == 0) {
    summary.start_ns = root->start_ns;
  }
  summary.duration_s = std::max(0.0, NsToSeconds(summary.end_ns - summary.start_ns));

  size_t n = run.phases.size();
  summary.phases.resize(n);
  std::vector<RssTrack> tracks(n), pss_tracks(n);
  for (size_t i = 0; i < n; ++i) {
    const model::Phase& phase = run.phases[i];
    PhaseSummary& ps = summary.phases[i];
    ps.id = phase.id;
    ps.start_ns = phase.start_ns;
    ps.open = !phase.ended();
    ps.end_ns = phase.ended() ? phase.end_ns : std::max(phase.start_ns, summary.end_ns);
    ps.duration_s = std::max(0.0, NsToSeconds(ps.end_ns - ps.start_ns));
    ps.subtree_phases = 1;
    const model::Resource* proc = run.ProcessResourceOf(phase.id);
    if (proc == nullptr) continue;
    ps.process_count = 1;
    ps.self_user_cpu_seconds = LastValue(SamplesOf(run.FindSeries(proc->id, metric::kProcCpuUser)));
    ps.self_system_cpu_seconds = LastValue(SamplesOf(run.FindSeries(proc->id, metric::kProcCpuSystem)));
    ps.self_cpu_seconds = ps.self_user_cpu_seconds + ps.self_system_cpu_seconds +
                          LastValue(SamplesOf(run.FindSeries(proc->id, metric::kProcCpuUnseenChildren)));
    ps.self_read_bytes = LastValue(SamplesOf(run.FindSeries(proc->id, metric::kProcReadBytes)));
    ps.self_write_bytes = LastValue(SamplesOf(run.FindSeries(proc->id, metric::kProcWriteBytes)));
    const model::Series* rss = run.FindSeries(proc->id, metric::kProcRss);
    if (rss != nullptr && !rss->samples.empty()) {
      ps.self_peak_rss_bytes = GaugeMax(rss->samples);
      tracks[i] = RssTrack{.samples = rss->samples, .end_ns = ps.end_ns};
    }
    const model::Series* pss = run.FindSeries(proc->id, metric::kProcPss);
    if (pss == nullptr || pss->samples.empty()) pss = rss;  // recorded before memory.pss
    if (pss != nullptr && !pss->samples.empty()) {
      ps.self_peak_pss_bytes = GaugeMax(pss->samples);
      pss_tracks[i] = RssTrack{.samples = pss->samples, .end_ns = ps.end_ns};
    }
  }

  // Inclusive sums, children before parents.
  PhaseForest forest = BuildForest(run);
  for (size_t i = 0; i < n; ++i) {
    PhaseSummary& ps = summary.phases[i];
    ps.cpu_seconds = ps.self_cpu_seconds;
    ps.user_cpu_seconds = ps.self_user_cpu_seconds;
    ps.system_cpu_seconds = ps.self_system_cpu_seconds;
    ps.read_bytes = ps.self_read_bytes;
    ps.write_bytes = ps.self_write_bytes;
  }
  for (auto it = forest.preorder.rbegin(); it != forest.preorder.rend(); ++it) {
    PhaseSummary& ps = summary.phases[*it];
    for (size_t c : forest.children[*it]) {
      const PhaseSummary& cs = summary.phases[c];
      ps.cpu_seconds += cs.cpu_seconds;
      ps.user_cpu_seconds += cs.user_cpu_seconds;
      ps.system_cpu_seconds += cs.system_cpu_seconds;
      ps.read_bytes += cs.read_bytes;
      ps.write_bytes += cs.write_bytes;
      ps.process_count += cs.process_count;
      ps.subtree_phases += cs.subtree_phases;
    }
    ps.avg_cores = ps.duration_s > 0 ? ps.cpu_seconds / ps.duration_s : 0.0;
  }
  auto non_empty = [](std::vector<RssTrack> all) {
    std::erase_if(all, [](const RssTrack& t) { return t.samples.empty(); });
    return all;
  };
  ComputeSubtreePeaks(forest, tracks, summary.phases, &PhaseSummary::peak_rss_bytes);
  summary.peak_rss_bytes = PeakOfSum(non_empty(tracks));
  // A run recorded without memory.pss has the RSS tracks as its PSS tracks: the same
  // samples give the same peaks, so they are copied rather than computed again.
  bool pss_is_rss = std::equal(tracks.begin(), tracks.end(), pss_tracks.begin(), [](const RssTrack& a, const RssTrack& b) {
    return a.samples.data() == b.samples.data() && a.samples.size() == b.samples.size() && a.end_ns == b.end_ns;
  });
  if (pss_is_rss) {
    for (PhaseSummary& ps : summary.phases) ps.peak_pss_bytes = ps.peak_rss_bytes;
    summary.peak_pss_bytes = summary.peak_rss_bytes;
  } else {
    ComputeSubtreePeaks(forest, pss_tracks, summary.phases, &PhaseSummary::peak_pss_bytes);
    summary.peak_pss_bytes = PeakOfSum(non_empty(pss_tracks));
  }

  std::unordered_map<model::ResourceId, std::vector<size_t>> children;
  for (size_t i = 0; i < run.resources.size(); ++i) children[run.resources[i].parent].push_back(i);
  for (const model::Resource& r : run.resources) {
    if (r.kind == model::ResourceKind::kHost) summary.hosts.push_back(SummarizeHost(run, r, children));
  }
  // Load from outside the run, and whether it makes the run noisy.
  std::vector<OutsideLoad> outside = MeasureOutsideLoad(run);
  for (HostSummary& h : summary.hosts) {
    for (const OutsideLoad& o : outside) {
      if (o.host_resource == h.resource) h.other_processes = o;
    }
  }
  NoiseVerdict noise = JudgeNoise(outside);
  summary.noisy = noise.noisy;
  summary.noisy_reason = noise.reason;
  return summary;
}

}  // namespace grademl::analysis
