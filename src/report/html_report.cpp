#include "report/html_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "analysis/derived/host_rates.h"
#include "analysis/series_math.h"
#include "model/metric_names.h"
#include "report/json_report.h"
#include "report/report_assets.h"
#include "report/text_format.h"

namespace grademl::report {

using nlohmann::json;

namespace {

constexpr double kNsPerS = 1e9;
constexpr size_t kNone = std::numeric_limits<size_t>::max();

std::string PageText(std::string_view s) { return ValidUtf8(s); }

// A number rounded to `digits` significant digits, so that the page's JSON stays small
// (nlohmann prints the shortest text that reads back the same double).
double Round(double v, int digits = 4) {
  if (!std::isfinite(v)) return 0;
  if (v == 0) return 0;
  double magnitude = std::floor(std::log10(std::fabs(v)));
  double scale = std::pow(10.0, digits - 1 - magnitude);
  return std::round(v * scale) / scale;
}

// Seconds since the run's start, to the microsecond.
double RelS(TimeNs t, TimeNs t0) { return std::round(static_cast<double>(t - t0) / 1e3) / 1e6; }

// The position of phase `id` in run.phases (from the run's own index), or kNone.
size_t IndexOf(const model::Run& run, model::PhaseId id) {
  const model::Phase* p = run.FindPhase(id);
  return p == nullptr ? kNone : static_cast<size_t>(p - run.phases.data());
}

// The kinds of edge an imported trace's flows become (the others are the run's own).
bool IsTraceFlow(std::string_view kind) { return kind == "launch" || kind == "fwdbwd" || kind == "flow"; }

// Codes of what limited a phase, shared with the page (web/src/labels.js).
constexpr int kBoundWaiting = analysis::kBoundResourceCount;   // 5
constexpr int kBoundUnknown = analysis::kBoundResourceCount + 1;  // 6

// The largest part of a phase's time and its code, or -1 for none.
std::pair<int, double> MainBound(const analysis::PhaseBottlenecks& b) {
  int best = -1;
  double best_s = 0;
  for (int r = 0; r < analysis::kBoundResourceCount; ++r) {
    if (b.bound_s[r] > best_s) best = r, best_s = b.bound_s[r];
  }
  double waiting = b.total_waiting_s();
  if (waiting > best_s) best = kBoundWaiting, best_s = waiting;
  if (b.unknown_s > best_s) best = kBoundUnknown, best_s = b.unknown_s;
  return {best, best_s};
}

json BottleneckBreakdown(const analysis::PhaseBottlenecks& b) {
  json out = json::object();
  for (int r = 0; r < analysis::kBoundResourceCount; ++r) {
    out[std::string(analysis::BoundResourceName(static_cast<analysis::BoundResource>(r)))] = Round(b.bound_s[r]);
  }
  out["waiting"] = Round(b.total_waiting_s());
  out["unknown"] = Round(b.unknown_s);
  json saturated = json::object();
  for (int r = 0; r < analysis::kBoundResourceCount; ++r) {
    saturated[std::string(analysis::BoundResourceName(static_cast<analysis::BoundResource>(r)))] =
        Round(b.saturated_s[r]);
  }
  out["saturated"] = std::move(saturated);
  return out;
}

// Interns strings into one table so that repeated names and types are sent once.
class StringTable {
 public:
  int Intern(std::string_view s) {
    auto it = index_.find(std::string(s));
    if (it != index_.end()) return it->second;
    int id = static_cast<int>(strings_.size());
    strings_.push_back(std::string(s));
    index_.emplace(strings_.back(), id);
    return id;
  }
  json ToJson() const {
    json out = json::array();
    for (const std::string& s : strings_) out.push_back(PageText(s));
    return out;
  }

 private:
  std::vector<std::string> strings_;
  std::unordered_map<std::string, int> index_;
};

// Which phases the timeline shows and where: the level of detail (the shallowest levels up
// to the budget) and a packing of the phase tree into rows in which every phase sits below
// its parent and no two phases of a row overlap in time.
struct TimelineLayout {
  std::vector<size_t> shown;     // indexes into run.phases, by (start, depth)
  std::vector<int> row;          // per shown phase
  std::vector<size_t> parent;    // per shown phase: position in `shown` of its parent, or kNone
  std::vector<int64_t> collapsed;  // per shown phase: its children that are not shown
  std::vector<size_t> position;  // per run.phases index: its position in `shown`, or kNone
  // The bands of the model's tracks (a GPU stream, a thread of an imported trace): the
  // phases of one track under one parent are packed together into a block of rows of their own.
  struct Band {
    model::TrackId track = 0;
    int row = 0, rows = 0;
    TimeNs start_ns = 0, end_ns = 0;  // from its first phase's start to the last end
  };
  std::vector<Band> bands;
  int rows = 0;
  int depth_limit = -1;          // the deepest level shown in full (deeper: only under the longest phases); -1: all
};

TimelineLayout LayoutTimeline(const model::Run& run, const analysis::RunSummary& summary, size_t budget) {
  const size_t n = run.phases.size();
  auto parent_index = [&](size_t i) -> size_t {
    size_t p = IndexOf(run, run.phases[i].parent);
    return p == i ? kNone : p;
  };
  // Depths, walking up with memoisation (a parent may come after its child in the vector).
  std::vector<int> depth(n, -1);
  std::vector<size_t> chain;
  for (size_t i = 0; i < n; ++i) {
    size_t j = i;
    chain.clear();
    while (j != kNone && depth[j] < 0 && chain.size() <= n) {
      chain.push_back(j);
      j = parent_index(j);
    }
    int d = j == kNone ? -1 : depth[j];
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) depth[*it] = ++d;
  }
  int max_depth = n == 0 ? 0 : *std::max_element(depth.begin(), depth.end());
  std::vector<size_t> per_depth(static_cast<size_t>(max_depth) + 1, 0);
  for (int d : depth) ++per_depth[static_cast<size_t>(d)];

  auto start_of = [&](size_t i) { return i < summary.phases.size() ? summary.phases[i].start_ns : run.phases[i].start_ns; };
  auto end_of = [&](size_t i) {
    TimeNs e = i < summary.phases.size() ? summary.phases[i].end_ns : run.phases[i].end_ns;
    return std::max(e, start_of(i));
  };
  TimelineLayout layout;
  int limit = max_depth;
  size_t total = 0;
  for (int d = 0; d <= max_depth; ++d) {
    if (total + per_depth[d] > budget && d > 1) {
      limit = d - 1;
      break;
    }
    total += per_depth[d];
  }
  if (limit < max_depth) layout.depth_limit = limit;

  std::vector<char> show(n, 0);
  for (size_t i = 0; i < n; ++i) show[i] = depth[i] <= limit;
  // The budget left after the cut goes to the next level, one whole family at a time, under the
  // longest phases of the last full level first: zooming into them shows their children.
  if (limit < max_depth) {
    std::vector<std::vector<size_t>> children_at_cut(n);
    for (size_t i = 0; i < n; ++i) {
      size_t p = parent_index(i);
      if (depth[i] == limit + 1 && p != kNone) children_at_cut[p].push_back(i);
    }
    std::vector<size_t> parents;
    for (size_t i = 0; i < n; ++i) {
      if (depth[i] == limit && !children_at_cut[i].empty()) parents.push_back(i);
    }
    std::stable_sort(parents.begin(), parents.end(),
                     [&](size_t a, size_t b) { return end_of(a) - start_of(a) > end_of(b) - start_of(b); });
    size_t left = budget > total ? budget - total : 0;
    for (size_t p : parents) {
      if (children_at_cut[p].size() > left) continue;
      left -= children_at_cut[p].size();
      for (size_t c : children_at_cut[p]) show[c] = 1;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (show[i]) layout.shown.push_back(i);
  }
  std::sort(layout.shown.begin(), layout.shown.end(), [&](size_t a, size_t b) {
    if (start_of(a) != start_of(b)) return start_of(a) < start_of(b);
    if (depth[a] != depth[b]) return depth[a] < depth[b];
    return a < b;
  });
  // Two levels alone can exceed the budget (a million steps): keep the first ones in time.
  if (layout.shown.size() > budget) {
    std::stable_partition(layout.shown.begin(), layout.shown.end(), [&](size_t i) { return depth[i] == 0; });
    layout.shown.resize(std::max<size_t>(budget, 1));
    std::sort(layout.shown.begin(), layout.shown.end(), [&](size_t a, size_t b) {
      return start_of(a) != start_of(b) ? start_of(a) < start_of(b) : depth[a] < depth[b];
    });
    layout.depth_limit = std::min(limit, 1);
  }
  const size_t m = layout.shown.size();
  std::vector<size_t>& pos = layout.position;
  pos.assign(n, kNone);
  for (size_t k = 0; k < m; ++k) pos[layout.shown[k]] = k;
  layout.parent.assign(m, kNone);
  layout.collapsed.assign(m, 0);
  for (size_t i = 0; i < n; ++i) {
    size_t p = parent_index(i);
    if (p == kNone || pos[p] == kNone) continue;
    if (pos[i] == kNone) {
      ++layout.collapsed[pos[p]];
    } else {
      layout.parent[pos[i]] = pos[p];
    }
  }
  // The nodes packed into rows: the shown phases (0..m-1), a virtual root (m), and a band per
  // (parent, model track) (m+1..): the phases of a track whose parent is not on that track
  // (kernels of a GPU stream under their process, the top-level phases of an imported
  // thread) form one block of rows, so that a track is one band on the timeline.
  const size_t root = m;
  std::vector<size_t> node_parent(m + 1, kNone);
  std::vector<TimeNs> node_start(m + 1, 0), node_end(m + 1, 0);
  std::vector<int> node_key(m + 1, -1);  // packing order: deepest first; a band between its phases and their parent
  std::map<std::pair<size_t, model::TrackId>, size_t> band_of;
  std::vector<model::TrackId> band_track;
  std::vector<std::vector<size_t>> kids(m + 1);
  for (size_t k = 0; k < m; ++k) {
    const model::Phase& p = run.phases[layout.shown[k]];
    size_t parent = layout.parent[k] == kNone ? root : layout.parent[k];
    node_start[k] = start_of(layout.shown[k]);
    node_end[k] = end_of(layout.shown[k]);
    node_key[k] = 2 * depth[layout.shown[k]] + 2;
    bool parent_on_track = parent != root && run.phases[layout.shown[parent]].track == p.track;
    if (p.track != 0 && !parent_on_track) {
      auto [it, added] = band_of.emplace(std::make_pair(parent, p.track), node_parent.size());
      size_t band = it->second;
      if (added) {
        node_parent.push_back(parent);
        node_start.push_back(node_start[k]);
        node_end.push_back(node_end[k]);
        node_key.push_back(node_key[k] - 1);
        band_track.push_back(p.track);
        kids.emplace_back();
        kids[parent].push_back(band);  // shown is in start order: so are the kids
      }
      node_end[band] = std::max(node_end[band], node_end[k]);
      node_parent[k] = band;
      kids[band].push_back(k);
    } else {
      node_parent[k] = parent;
      kids[parent].push_back(k);
    }
  }
  const size_t nodes = node_parent.size();
  // Heights bottom-up (deepest first), packing each node's children blocks greedily: a block
  // goes to the first offset where all its rows are free at its start.
  std::vector<size_t> order(nodes);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return node_key[a] > node_key[b]; });
  std::vector<int> height(nodes, 1), offset(nodes, 0);
  std::vector<TimeNs> row_end;
  auto pack = [&](size_t node) {
    row_end.clear();
    for (size_t c : kids[node]) {
      TimeNs s = node_start[c], e = node_end[c];
      int h = height[c];
      size_t r = 0;
      for (;; ++r) {
        bool free = true;
        for (size_t q = r; q < r + static_cast<size_t>(h) && q < row_end.size(); ++q) {
          if (row_end[q] > s) {
            free = false;
            break;
          }
        }
        if (free) break;
      }
      if (row_end.size() < r + h) row_end.resize(r + h, std::numeric_limits<TimeNs>::min());
      for (size_t q = r; q < r + static_cast<size_t>(h); ++q) row_end[q] = std::max(row_end[q], e);
      offset[c] = static_cast<int>(r);
    }
    return static_cast<int>(row_end.size());
  };
  for (size_t node : order) {
    if (node == root) continue;
    height[node] = (node < m ? 1 : 0) + pack(node);
  }
  layout.rows = pack(root);  // the top-level blocks
  // Absolute rows top-down (parents first): a phase's children start on the row below it, a
  // band's phases on its own first row.
  std::vector<int> top(nodes, 0);
  auto base = [&](size_t node) { return node == root ? 0 : node < m ? top[node] + 1 : top[node]; };
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (*it == root) continue;
    top[*it] = base(node_parent[*it]) + offset[*it];
  }
  layout.row.assign(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(m));
  for (size_t b = m + 1; b < nodes; ++b) {
    layout.bands.push_back({band_track[b - m - 1], top[b], height[b], node_start[b], node_end[b]});
  }
  return layout;
}

// The shared time grid of every plot: the attribution's grid when it has one, else an even
// grid of `max_points` over the run.
analysis::TimeGrid PlotGrid(const model::Run& run, const analysis::Attribution& attribution, size_t max_points) {
  if (attribution.grid.slices > 0 && attribution.grid.slices <= max_points) return attribution.grid;
  analysis::TimeGrid grid;
  grid.start_ns = run.info.start_ns;
  TimeNs end = run.EffectiveEnd();
  grid.slices = std::max<size_t>(1, max_points);
  grid.slice_ns = std::max<DurationNs>(1, (end - grid.start_ns + static_cast<DurationNs>(grid.slices) - 1) /
                                              static_cast<DurationNs>(grid.slices));
  return grid;
}

void AddInto(std::vector<double>& sum, const std::vector<double>& v) {
  if (sum.empty()) sum.assign(v.size(), 0);
  for (size_t k = 0; k < v.size() && k < sum.size(); ++k) sum[k] += v[k];
}

// A series' values for the page: null where the value is unknown (before a counter's first
// sample or after its last: analysis/derived/counter_rate.h), drawn as a gap.
json Values(const std::vector<double>& v) {
  json out = json::array();
  for (double x : v) {
    if (std::isfinite(x)) out.push_back(Round(x, 3));
    else out.push_back(nullptr);
  }
  return out;
}

bool AnyPositive(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return x > 0; });
}

json Chart(std::string title, std::string unit, json series, double max = model::kNoCapacity) {
  json chart = {{"title", std::move(title)}, {"unit", std::move(unit)}, {"series", std::move(series)}};
  if (!std::isnan(max)) chart["max"] = Round(max);
  return chart;
}

// Host plots: CPU (busy and iowait cores), memory used, disk and network throughput, GPUs.
json HostCharts(const model::Run& run, const analysis::TimeGrid& grid) {
  json groups = json::array();
  for (const analysis::derived::HostGridRates& h : analysis::derived::HostRatesOnGrid(run, grid)) {
    const std::string& name = h.host;
    json charts = json::array();
    if (!h.busy.empty()) {
      json series = json::array({{{"label", "busy"}, {"values", Values(h.busy)}}});
      if (AnyPositive(h.iowait)) series.push_back({{"label", "iowait"}, {"values", Values(h.iowait)}});
      charts.push_back(Chart("CPU", "cores", std::move(series), h.cores > 0 ? h.cores : model::kNoCapacity));
    }
    if (!h.mem.empty()) {
      charts.push_back(Chart("Memory", "bytes", json::array({{{"label", "used"}, {"values", Values(h.mem)}}}),
                             h.mem_capacity));
    }
    // Throughput plots only when something moved (an idle disk or network says nothing).
    if (AnyPositive(h.disk_read) || AnyPositive(h.disk_write)) {
      json series = json::array();
      if (!h.disk_read.empty()) series.push_back({{"label", "read"}, {"values", Values(h.disk_read)}});
      if (!h.disk_write.empty()) series.push_back({{"label", "write"}, {"values", Values(h.disk_write)}});
      charts.push_back(Chart("Disk", "bytes/s", std::move(series)));
    }
    if (AnyPositive(h.net_rx) || AnyPositive(h.net_tx)) {
      json series = json::array();
      if (!h.net_rx.empty()) series.push_back({{"label", "received"}, {"values", Values(h.net_rx)}});
      if (!h.net_tx.empty()) series.push_back({{"label", "sent"}, {"values", Values(h.net_tx)}});
      charts.push_back(Chart("Network", "bytes/s", std::move(series)));
    }
    if (AnyPositive(h.other_cpu)) {
      charts.push_back(Chart("CPU of processes outside the run", "cores",
                             json::array({{{"label", "outside the run"}, {"values", Values(h.other_cpu)}}}),
                             h.cores > 0 ? h.cores : model::kNoCapacity));
    }
    if (!h.gpu_util.empty()) {
      json series = json::array();
      for (auto& [gpu, v] : h.gpu_util) series.push_back({{"label", PageText(gpu)}, {"values", Values(v)}});
      charts.push_back(Chart("GPU utilisation", "fraction", std::move(series), 1.0));
    }
    if (!h.gpu_mem.empty()) {
      json series = json::array();
      for (auto& [gpu, v] : h.gpu_mem) series.push_back({{"label", PageText(gpu)}, {"values", Values(v)}});
      charts.push_back(Chart("GPU memory", "bytes", std::move(series)));
    }
    if (!charts.empty()) groups.push_back({{"title", "Host " + PageText(name)}, {"charts", std::move(charts)}});
  }
  return groups;
}

struct AttributedPlot {
  std::string_view metric;
  const char* title;
  const char* unit;
};
constexpr AttributedPlot kAttributedPlots[] = {
    {analysis::attributed::kCpu, "CPU", "cores"},
    {analysis::attributed::kRss, "Memory (PSS)", "bytes"},
    {analysis::attributed::kReadBytes, "Storage read", "bytes/s"},
    {analysis::attributed::kWriteBytes, "Storage write", "bytes/s"},
    {analysis::attributed::kGpuUtilization, "GPU utilisation", "fraction"},
};

// The phases whose usage is stacked: the steps (children of the root), or for a run of one
// command whose process has several children, those children.
std::vector<model::PhaseId> StackedPhases(const model::Run& run) {
  const model::Phase* root = run.Root();
  if (root == nullptr) return {};
  std::vector<model::PhaseId> level = run.ChildrenOf(root->id);
  if (level.size() == 1 && run.ChildrenOf(level[0]).size() > 1) level = run.ChildrenOf(level[0]);
  return level;
}

std::string PhaseLabel(const model::Phase& p) { return PageText(p.name.empty() ? std::string(p.leaf_type()) : p.name); }

// Stacked layers of the "who used what" plots: repeated phases (100 epochs of one process,
// 50 identical workers) are one layer and one legend entry, "epoch ×100", instead of one
// each. Processes group by name (their command line), other phases by their type (epochs
// named "epoch 1", "epoch 2"... are still epochs). Groups keep the order of their first phase.
struct LayerGroup {
  std::string label;
  std::vector<model::PhaseId> phases;
};
std::vector<LayerGroup> GroupLayers(const model::Run& run, const std::vector<model::PhaseId>& ids) {
  std::vector<LayerGroup> groups;
  std::map<std::string, size_t> index;
  for (model::PhaseId id : ids) {
    const model::Phase* p = run.FindPhase(id);
    if (p == nullptr) continue;
    bool process = p->leaf_is(model::kPhaseTypeProcess);
    std::string key = process ? "p:" + p->name : "t:" + std::string(p->leaf_type());
    auto [it, added] = index.emplace(key, groups.size());
    if (added) groups.push_back({process ? PhaseLabel(*p) : PageText(std::string(p->leaf_type())), {}});
    groups[it->second].phases.push_back(id);
  }
  // A phase alone in its group keeps its own name.
  for (LayerGroup& g : groups) {
    if (g.phases.size() == 1) g.label = PhaseLabel(*run.FindPhase(g.phases[0]));
  }
  return groups;
}

// Per-step plots (from the attribution's per-phase series) and the stacked usage per phase.
void AttributionCharts(const model::Run& run, const analysis::Attribution& attribution, const analysis::TimeGrid& grid,
                       size_t max_step_charts, json& groups, json& stacked) {
  const model::Phase* root = run.Root();
  if (root == nullptr) return;
  size_t charted = 0;
  for (model::PhaseId step : run.ChildrenOf(root->id)) {
    if (charted >= max_step_charts) break;
    const model::Phase* p = run.FindPhase(step);
    json charts = json::array();
    for (const AttributedPlot& plot : kAttributedPlots) {
      const analysis::MetricAttribution* m = attribution.Find(plot.metric);
      if (m == nullptr) continue;
      std::vector<double> v = analysis::derived::PhaseRateOnGrid(*m, step, grid);
      if (!AnyPositive(v)) continue;
      charts.push_back(Chart(plot.title, plot.unit, json::array({{{"label", PhaseLabel(*p)}, {"values", Values(v)}}})));
    }
    if (charts.empty()) continue;
    ++charted;
    groups.push_back({{"title", "Step " + PhaseLabel(*p)}, {"phase", step}, {"charts", std::move(charts)}});
  }
  std::vector<LayerGroup> layers = GroupLayers(run, StackedPhases(run));
  for (const AttributedPlot& plot : kAttributedPlots) {
    const analysis::MetricAttribution* m = attribution.Find(plot.metric);
    if (m == nullptr) continue;
    json series = json::array();
    for (const LayerGroup& group : layers) {
      std::vector<double> v(grid.slices, 0);
      size_t used = 0;
      for (model::PhaseId id : group.phases) {
        std::vector<double> one = analysis::derived::PhaseRateOnGrid(*m, id, grid);
        if (!AnyPositive(one)) continue;
        AddInto(v, one);
        ++used;
      }
      if (used == 0) continue;
      json layer = {{"label", used > 1 ? group.label + " \u00d7" + std::to_string(used) : group.label}};
      if (group.phases.size() == 1) layer["phase"] = group.phases[0];
      else layer["count"] = used;
      layer["values"] = Values(v);
      series.push_back(std::move(layer));
    }
    // What the host measured beyond the phases (other load), from the host resources.
    std::vector<double> other = analysis::derived::UnattributedRateOnGrid(attribution, plot.metric, grid);
    if (AnyPositive(other)) series.push_back({{"label", "not in any phase"}, {"values", Values(other)}});
    if (series.empty()) continue;
    stacked.push_back({{"metric", std::string(plot.metric)},
                       {"title", plot.title},
                       {"unit", plot.unit},
                       {"series", std::move(series)}});
  }
}

// The attribution table: the longest phases of the top levels, with their totals per metric
// and how much of what they could have had they used.
json AttributionTable(const model::Run& run, const analysis::RunAnalysis& analysis,
                      const analysis::Attribution& attribution, size_t max_rows) {
  // The run and the top three levels below it, in tree order (children by start): a parent
  // comes before its children.
  struct TreeRow {
    size_t index;
    int depth;
  };
  std::vector<TreeRow> tree;
  if (const model::Phase* root = run.Root()) {
    std::vector<TreeRow> stack = {{IndexOf(run, root->id), 0}};
    while (!stack.empty()) {
      TreeRow r = stack.back();
      stack.pop_back();
      tree.push_back(r);
      if (r.depth >= 3) continue;
      std::vector<model::PhaseId> kids = run.ChildrenOf(run.phases[r.index].id);
      std::sort(kids.begin(), kids.end(), [&](model::PhaseId a, model::PhaseId b) {
        TimeNs sa = run.FindPhase(a)->start_ns, sb = run.FindPhase(b)->start_ns;
        return sa != sb ? sa > sb : a > b;  // reversed: popped from a stack
      });
      for (model::PhaseId k : kids) stack.push_back({IndexOf(run, k), r.depth + 1});
    }
  }
  auto duration = [&](size_t i) {
    return i < analysis.summary.phases.size() ? analysis.summary.phases[i].duration_s : 0.0;
  };
  // The run and its steps, then the longest of the rest; shown in tree order.
  std::vector<size_t> shown(tree.size());
  std::iota(shown.begin(), shown.end(), 0);
  std::stable_sort(shown.begin(), shown.end(), [&](size_t a, size_t b) {
    bool ta = tree[a].depth <= 1, tb = tree[b].depth <= 1;
    if (ta != tb) return ta;
    return duration(tree[a].index) > duration(tree[b].index);
  });
  if (shown.size() > max_rows) shown.resize(max_rows);
  std::sort(shown.begin(), shown.end());
  json metrics = json::array();
  for (const analysis::MetricAttribution& m : attribution.metrics) {
    metrics.push_back({{"name", m.name}, {"unit", m.unit}, {"gauge", m.gauge}, {"measured", Round(m.measured)},
                       {"unattributed", Round(m.unattributed)}});
  }
  json rows = json::array();
  for (size_t k : shown) {
    const size_t i = tree[k].index;
    const model::Phase& p = run.phases[i];
    json usage = json::object(), utilization = json::object();
    for (const analysis::MetricAttribution& m : attribution.metrics) {
      if (i >= m.usage.size()) continue;
      usage[m.name] = Round(m.usage[i]);
      double u = m.Utilization(i);
      if (std::isfinite(u)) utilization[m.name] = Round(u, 3);
    }
    rows.push_back({{"phase", p.id},
                    {"name", PhaseLabel(p)},
                    {"type", PageText(p.type)},
                    {"depth", tree[k].depth},
                    {"duration_s", Round(duration(i))},
                    {"usage", std::move(usage)},
                    {"utilization", std::move(utilization)}});
  }
  return {{"metrics", std::move(metrics)}, {"rows", std::move(rows)}};
}

}  // namespace

std::string EscapeJsonForScript(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 64);
  for (char c : text) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

analysis::AttributionOptions HtmlAttributionOptions(const HtmlReportOptions& options) {
  analysis::AttributionOptions aopts;
  aopts.slices = options.max_points;
  return aopts;
}

json RenderHtmlReportData(const model::Run& run, const analysis::RunAnalysis& analysis,
                          const analysis::Attribution& attribution, const HtmlReportOptions& options) {
  const TimeNs t0 = run.info.start_ns;
  json run_json = RunInfoJson(run.info);
  run_json["duration_s"] = Round(analysis.summary.duration_s, 6);
  run_json["command_line"] = PageText(JoinCommand(run.info.command));
  run_json["phase_count"] = run.phases.size();
  // Load from outside the run: the noisy flag, and per host the processes that used most CPU.
  run_json["noisy"] = analysis.summary.noisy;
  run_json["noisy_reason"] = analysis.summary.noisy ? json(PageText(analysis.summary.noisy_reason)) : json(nullptr);
  json other = json::array();
  for (const analysis::HostSummary& h : analysis.summary.hosts) {
    if (!h.other_processes) continue;
    json top = json::array();
    for (const analysis::OutsideProcess& p : h.other_processes->top) {
      top.push_back({{"pid", p.pid},
                     {"user", PageText(p.user)},
                     {"command", PageText(p.command)},
                     {"cpu_seconds", Round(p.cpu_seconds)}});
    }
    other.push_back({{"host", PageText(h.name)},
                     {"cpu_seconds", Round(h.other_processes->cpu_seconds)},
                     {"avg_cores", Round(h.other_processes->avg_cores, 3)},
                     {"top", std::move(top)}});
  }
  run_json["other_processes"] = std::move(other);
  run_json["sources"] = SourcesJson(run);

  // Timeline.
  TimelineLayout layout = LayoutTimeline(run, analysis.summary, std::max<size_t>(options.max_timeline_phases, 1));
  std::unordered_set<model::PhaseId> critical;
  for (const analysis::CriticalLink& l : analysis.critical_path.path.links) critical.insert(l.id);
  StringTable strings;
  json ids = json::array(), parents = json::array(), names = json::array(), types = json::array(),
       starts = json::array(), ends = json::array(), rows = json::array(), crit = json::array(),
       open = json::array(), collapsed = json::array(), bound = json::array(), bound_s = json::array(),
       hosts = json::array(), pids = json::array(), track_col = json::array();
  // The model's tracks the timeline shows (imported threads, GPU streams, async tracks), in
  // order of first use.
  json tracks = json::array();
  std::unordered_map<model::TrackId, int> track_index;
  auto track_of = [&](model::TrackId id) -> int {
    if (id == 0) return -1;
    auto [it, added] = track_index.emplace(id, static_cast<int>(tracks.size()));
    if (added) {
      const model::Track* t = run.FindTrack(id);
      json entry = {{"id", id}, {"kind", t ? json(std::string(model::TrackKindName(t->kind))) : json(nullptr)},
                    {"label", t ? json(PageText(TrackLabel(*t))) : json("track " + std::to_string(id))}};
      if (t != nullptr) {
        entry["host"] = PageText(t->host);
        entry["pid"] = t->pid;
        if (t->kind == model::TrackKind::kThread) entry["tid"] = t->tid;
        if (t->kind == model::TrackKind::kDevice) entry["device"] = t->device;
        if (t->kind != model::TrackKind::kThread) entry["stream"] = t->stream;
        const model::Source* source = t->source != 0 ? run.FindSource(t->source) : nullptr;
        entry["source"] = source ? json(PageText(source->path)) : json(nullptr);
        std::string rank = source ? SourceTag(*source, "rank") : std::string();
        entry["rank"] = rank.empty() ? json(nullptr) : json(PageText(rank));
      }
      tracks.push_back(std::move(entry));
    }
    return it->second;
  };
  for (size_t k = 0; k < layout.shown.size(); ++k) {
    size_t i = layout.shown[k];
    const model::Phase& p = run.phases[i];
    const analysis::PhaseSummary* ps = i < analysis.summary.phases.size() ? &analysis.summary.phases[i] : nullptr;
    ids.push_back(p.id);
    parents.push_back(layout.parent[k] == kNone ? -1 : static_cast<int64_t>(layout.parent[k]));
    names.push_back(strings.Intern(p.name));
    types.push_back(strings.Intern(p.type));
    TimeNs s = ps ? ps->start_ns : p.start_ns;
    TimeNs e = ps ? ps->end_ns : p.end_ns;
    starts.push_back(RelS(s, t0));
    ends.push_back(RelS(std::max(s, e), t0));
    rows.push_back(layout.row[k]);
    crit.push_back(critical.count(p.id) ? 1 : 0);
    open.push_back(p.ended() ? 0 : 1);
    collapsed.push_back(layout.collapsed[k]);
    const analysis::PhaseBottlenecks* b =
        i < analysis.bottlenecks.phases.size() ? &analysis.bottlenecks.phases[i] : nullptr;
    auto [code, secs] = b ? MainBound(*b) : std::pair<int, double>{-1, 0.0};
    bound.push_back(code);
    bound_s.push_back(Round(secs, 3));
    hosts.push_back(strings.Intern(p.host));
    pids.push_back(p.pid);
    track_col.push_back(track_of(p.track));
  }
  json bands = json::array();
  for (const TimelineLayout::Band& b : layout.bands) {
    bands.push_back({{"track", track_of(b.track)},
                     {"row", b.row},
                     {"rows", b.rows},
                     {"start", RelS(b.start_ns, t0)},
                     {"end", RelS(b.end_ns, t0)}});
  }
  // The run's own edges (dataflow between steps) first, then the flows of imported traces
  // (launches, fwdbwd), which can be many more.
  json edges = json::array();
  for (int pass = 0; pass < 2 && edges.size() < 5000; ++pass) {
    for (const model::Edge& e : run.edges) {
      if (IsTraceFlow(e.kind) != (pass == 1)) continue;
      size_t from = IndexOf(run, e.from), to = IndexOf(run, e.to);
      if (from == kNone || to == kNone) continue;
      from = layout.position[from];
      to = layout.position[to];
      if (from == kNone || to == kNone) continue;
      edges.push_back(json::array({from, to, PageText(e.kind)}));
      if (edges.size() >= 5000) break;
    }
  }
  json timeline = {{"total_phases", run.phases.size()},
                   {"shown_phases", layout.shown.size()},
                   {"depth_limit", layout.depth_limit < 0 ? json(nullptr) : json(layout.depth_limit)},
                   {"rows", layout.rows},
                   {"strings", strings.ToJson()},
                   {"id", std::move(ids)},
                   {"parent", std::move(parents)},
                   {"name", std::move(names)},
                   {"type", std::move(types)},
                   {"start", std::move(starts)},
                   {"end", std::move(ends)},
                   {"row", std::move(rows)},
                   {"critical", std::move(crit)},
                   {"open", std::move(open)},
                   {"collapsed", std::move(collapsed)},
                   {"bound", std::move(bound)},
                   {"bound_s", std::move(bound_s)},
                   {"host", std::move(hosts)},
                   {"pid", std::move(pids)},
                   {"track", std::move(track_col)},
                   {"tracks", std::move(tracks)},
                   {"bands", std::move(bands)},
                   {"edges", std::move(edges)}};

  // Steps: what limited each, slack, critical.
  json steps = json::array();
  if (const model::Phase* root = run.Root()) {
    std::unordered_map<model::PhaseId, const analysis::StepSlack*> slack;
    for (const analysis::StepSlack& s : analysis.critical_path.slack) slack[s.id] = &s;
    for (model::PhaseId id : run.ChildrenOf(root->id)) {
      const model::Phase* p = run.FindPhase(id);
      const analysis::PhaseBottlenecks* b = analysis.bottlenecks.Find(id);
      json step = {{"phase", id}, {"name", PhaseLabel(*p)}, {"type", PageText(p->type)}};
      step["start_s"] = RelS(p->start_ns, t0);
      step["duration_s"] = b ? Round(b->duration_s, 6) : 0.0;
      step["bottlenecks"] = b ? BottleneckBreakdown(*b) : json::object();
      auto it = slack.find(id);
      step["slack_s"] = it == slack.end() ? json(nullptr) : json(Round(it->second->slack_s));
      step["critical"] = critical.count(id) > 0;
      steps.push_back(std::move(step));
    }
  }
  json root_bottlenecks = json::object();
  if (const model::Phase* root = run.Root()) {
    if (const analysis::PhaseBottlenecks* b = analysis.bottlenecks.Find(root->id)) {
      root_bottlenecks = BottleneckBreakdown(*b);
    }
  }

  // Issues and the what-if rows of the top ones.
  json issues = json::array(), whatif = json::array();
  double makespan = analysis.critical_path.makespan_s > 0 ? analysis.critical_path.makespan_s : analysis.summary.duration_s;
  for (const analysis::Issue& i : analysis.issues) {
    const model::Phase* p = i.phase == 0 ? nullptr : run.FindPhase(i.phase);
    issues.push_back({{"phase", i.phase == 0 ? json(nullptr) : json(i.phase)},
                      {"phase_name", p ? json(PhaseLabel(*p)) : json(nullptr)},
                      {"kind", i.kind},
                      {"impact_s", Round(i.impact_s)},
                      {"impact_fraction", Round(i.impact_fraction, 3)},
                      {"change", PageText(i.change)},
                      {"text", PageText(i.text)}});
    if (whatif.size() < 5 && !i.change.empty()) {
      whatif.push_back({{"change", PageText(i.change)},
                        {"kind", i.kind},
                        {"makespan_s", Round(makespan)},
                        {"predicted_s", Round(std::max(0.0, makespan - i.impact_s))},
                        {"saved_s", Round(i.impact_s)},
                        {"saved_fraction", Round(i.impact_fraction, 3)}});
    }
  }

  // Plots.
  analysis::TimeGrid grid = PlotGrid(run, attribution, std::max<size_t>(options.max_points, 2));
  json times = json::array();
  for (size_t k = 0; k < grid.slices; ++k) times.push_back(RelS(grid.SliceStart(k) + grid.slice_ns / 2, t0));
  json groups = HostCharts(run, grid);
  json stacked = json::array();
  AttributionCharts(run, attribution, grid, options.max_step_charts, groups, stacked);

  return {{"schema", kHtmlDataSchema},
          {"run", std::move(run_json)},
          {"run_bottlenecks", std::move(root_bottlenecks)},
          {"steps", std::move(steps)},
          {"timeline", std::move(timeline)},
          {"plots", {{"t", std::move(times)}, {"slice_s", Round(static_cast<double>(grid.slice_ns) / kNsPerS, 6)},
                     {"groups", std::move(groups)}}},
          {"stacked", std::move(stacked)},
          {"attribution", AttributionTable(run, analysis, attribution, options.max_table_phases)},
          {"critical_path", {{"makespan_s", Round(makespan, 6)}, {"truncated", analysis.critical_path.path.truncated}}},
          {"issues", std::move(issues)},
          {"whatif", std::move(whatif)},
          {"gpu", GpuReportJson(analysis.gpu)},
          {"spark", SparkReportJson(analysis.spark)},
          {"dask", DaskReportJson(run, analysis.dask)},
          {"communication", CommunicationJson(analysis.communication)},
          {"communication_summary", CommunicationSummaryJson(analysis.communication)},
          {"multi_host", MultiHostJson(run, analysis.hosts)},
          {"fine_sampling", FineSamplingJson(analysis.fine_sampling)},
          {"deep_profile", DeepProfileJson(analysis.deep_profile)},
          {"reuse", ReuseJson(analysis.reuse)}};
}

std::string RenderHtmlReport(const model::Run& run, const analysis::RunAnalysis& analysis,
                             const analysis::Attribution& attribution, const HtmlReportOptions& options) {
  std::string data = EscapeJsonForScript(RenderHtmlReportData(run, analysis, attribution, options).dump());
  std::string title = "GradeML run " + std::to_string(run.info.id);
  if (!run.info.command.empty()) title += ": " + Sanitize(JoinCommand(run.info.command));
  std::string page(kReportPageTemplate);
  auto replace = [&page](std::string_view marker, std::string_view with) {
    size_t at = page.find(marker);
    if (at != std::string::npos) page.replace(at, marker.size(), with);
  };
  // The data goes in last so that a marker-like text inside it is never replaced.
  replace(kReportTitleMarker, EscapeHtml(TruncateToWidth(title, 200)));
  replace(kReportDataMarker, data);
  return page;
}

}  // namespace grademl::report
