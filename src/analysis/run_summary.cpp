#include "analysis/run_summary.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <span>
#include <unordered_map>
#include <utility>

#include "analysis/derived/counter_rate.h"
#include "analysis/derived/host_devices.h"
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

// Range add / global max over elementary intervals. A node's sum of the additions that
// cover it whole and its subtree's maximum sit side by side (one cache line holds a node
// and its sibling), in memory that is zero until first touched (calloc: the pages of nodes
// no track reaches are never written).
class MaxAddTree {
 public:
  explicit MaxAddTree(size_t leaves)
      : size_(std::max<size_t>(leaves, 1)),
        // The halving below makes a tree ceil(log2(size)) deep: its node numbers stay under
        // twice the next power of two.
        nodes_(static_cast<Node*>(std::calloc(2 * std::bit_ceil(size_), sizeof(Node)))) {
    if (nodes_ == nullptr) throw std::bad_alloc();
  }
  MaxAddTree(const MaxAddTree&) = delete;
  MaxAddTree& operator=(const MaxAddTree&) = delete;
  ~MaxAddTree() { std::free(nodes_); }

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
    if (!pieces.empty()) AddSorted(1, 0, size_, pieces.data(), pieces.data() + pieces.size(), sign);
  }
  double Max() const { return nodes_[1].max; }

 private:
  struct Node {
    double max;  // add + the larger of the children's max
    double add;  // the additions covering the whole node
  };

  // Every piece of [first, last) meets [node_lo, node_hi).
  template <typename PieceT>
  void AddSorted(size_t node, size_t node_lo, size_t node_hi, const PieceT* first, const PieceT* last, double sign) {
    if (last - first == 1 && first->lo <= node_lo && node_hi <= first->hi) {
      double v = sign * first->v;
      nodes_[node].add += v;
      nodes_[node].max += v;
      return;
    }
    size_t mid = node_lo + (node_hi - node_lo) / 2;
    // Sorted and not overlapping, so both lo and hi increase along the pieces: those that
    // meet the left half are a prefix, those that meet the right half a suffix.
    const PieceT* left_end = std::partition_point(first, last, [&](const PieceT& p) { return p.lo < mid; });
    const PieceT* right_begin =
        left_end == first ? first : std::partition_point(first, left_end, [&](const PieceT& p) { return p.hi <= mid; });
    if (left_end != first) AddSorted(2 * node, node_lo, mid, first, left_end, sign);
    if (right_begin != last) AddSorted(2 * node + 1, mid, node_hi, right_begin, last, sign);
    nodes_[node].max = nodes_[node].add + std::max(nodes_[2 * node].max, nodes_[2 * node + 1].max);
  }

  void Add(size_t node, size_t node_lo, size_t node_hi, size_t lo, size_t hi, double v) {
    if (lo <= node_lo && node_hi <= hi) {
      nodes_[node].add += v;
      nodes_[node].max += v;
      return;
    }
    size_t mid = node_lo + (node_hi - node_lo) / 2;
    if (lo < mid) Add(2 * node, node_lo, mid, lo, hi, v);
    if (hi > mid) Add(2 * node + 1, mid, node_hi, lo, hi, v);
    nodes_[node].max = nodes_[node].add + std::max(nodes_[2 * node].max, nodes_[2 * node + 1].max);
  }

  size_t size_;
  Node* nodes_;
};

// One piece of a step function, in elementary-interval indexes.
struct Piece {
  size_t lo = 0;
  size_t hi = 0;
  double v = 0;
};

// The forest of phases as indexes into Run::phases, in a depth-first preorder. The tree
// edges actually walked are kept as one array of children, phase by phase (CSR), rather
// than a vector per phase (a million allocations for a million phases).
struct PhaseForest {
  std::vector<uint32_t> child_offset;  // children of i: child_list[child_offset[i] .. child_offset[i + 1])
  std::vector<uint32_t> child_list;
  std::vector<uint32_t> preorder;
  std::vector<uint32_t> first;  // preorder position of each phase
  std::vector<uint32_t> last;   // one past the preorder position of its subtree's last phase
  std::vector<uint32_t> roots;

  std::span<const uint32_t> Children(size_t i) const {
    return {child_list.data() + child_offset[i], child_list.data() + child_offset[i + 1]};
  }
};

PhaseForest BuildForest(const Run& run) {
  size_t n = run.phases.size();
  // Each phase's declared parent (kNoParent: none), then the children of each phase in index
  // order (a counting sort by parent). A parent id is its position when the ids are 1..n in
  // order (as stored), else the first phase with that id: the first pass assumes the former,
  // checks it as it goes and is redone with a map when it does not hold.
  constexpr uint32_t kNoParent = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> parent(n, kNoParent);
  std::vector<TimeNs> start(n);
  PhaseForest forest;
  std::vector<uint32_t>& offset = forest.child_offset;
  offset.assign(n + 1, 0);
  bool dense = true;
  for (size_t i = 0; i < n; ++i) {
    const model::Phase& p = run.phases[i];
    dense = dense && p.id == static_cast<model::PhaseId>(i) + 1;
    start[i] = p.start_ns;
    size_t pa = p.parent >= 1 && static_cast<size_t>(p.parent) <= n ? static_cast<size_t>(p.parent) - 1 : n;
    if (pa != n && pa != i) {
      parent[i] = static_cast<uint32_t>(pa);
      ++offset[pa + 1];
    }
  }
  if (!dense) {
    std::unordered_map<model::PhaseId, size_t> index;
    index.reserve(n);
    for (size_t i = 0; i < n; ++i) index.emplace(run.phases[i].id, i);
    std::fill(parent.begin(), parent.end(), kNoParent);
    std::fill(offset.begin(), offset.end(), 0);
    for (size_t i = 0; i < n; ++i) {
      const model::Phase& p = run.phases[i];
      if (p.parent == 0) continue;
      auto it = index.find(p.parent);
      size_t pa = it == index.end() ? n : it->second;
      if (pa != n && pa != i) {
        parent[i] = static_cast<uint32_t>(pa);
        ++offset[pa + 1];
      }
    }
  }
  for (size_t i = 0; i < n; ++i) offset[i + 1] += offset[i];
  std::vector<uint32_t> kids(offset[n]);
  {
    std::vector<uint32_t> fill(offset.begin(), offset.end() - 1);
    for (size_t i = 0; i < n; ++i) {
      if (parent[i] != kNoParent) kids[fill[parent[i]]++] = static_cast<uint32_t>(i);
    }
  }
  // Children in start order, as the reports show them (lists already in order are only
  // checked).
  auto before = [&](uint32_t a, uint32_t b) { return start[a] < start[b]; };
  for (size_t i = 0; i < n; ++i) {
    auto b = kids.begin() + offset[i], e = kids.begin() + offset[i + 1];
    if (!std::is_sorted(b, e, before)) std::stable_sort(b, e, before);
  }

  forest.first.assign(n, 0);
  forest.last.assign(n, 0);
  forest.preorder.reserve(n);
  // The parent each phase was reached from (kNoParent: a root of the walk).
  std::vector<uint32_t> walked_from(n, kNoParent);
  std::vector<bool> visited(n, false);
  std::vector<std::pair<uint32_t, uint32_t>> stack;
  auto walk = [&](uint32_t root) {
    // Iterative DFS: (phase, next child to visit).
    visited[root] = true;
    forest.first[root] = static_cast<uint32_t>(forest.preorder.size());
    forest.preorder.push_back(root);
    stack.emplace_back(root, offset[root]);
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      if (next < offset[v + 1]) {
        uint32_t c = kids[next++];
        if (visited[c]) continue;
        visited[c] = true;
        walked_from[c] = v;
        forest.first[c] = static_cast<uint32_t>(forest.preorder.size());
        forest.preorder.push_back(c);
        stack.emplace_back(c, offset[c]);
      } else {
        forest.last[v] = static_cast<uint32_t>(forest.preorder.size());
        stack.pop_back();
      }
    }
    forest.roots.push_back(root);
  };
  for (size_t i = 0; i < n; ++i) {
    if (parent[i] == kNoParent) walk(static_cast<uint32_t>(i));
  }
  // Phases on a parent cycle (corrupt input) are reached from nowhere: walk them as roots.
  for (size_t i = 0; i < n; ++i) {
    if (!visited[i]) walk(static_cast<uint32_t>(i));
  }
  // The tree edges walked: a phase is in one parent's list only, so it was walked from
  // there unless it became a root (a cycle). Kept in the same order, compacted in place.
  size_t out = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t from = offset[i];
    offset[i] = static_cast<uint32_t>(out);
    for (uint32_t k = from; k < offset[i + 1]; ++k) {
      if (walked_from[kids[k]] == i) kids[out++] = kids[k];
    }
  }
  offset[n] = static_cast<uint32_t>(out);
  kids.resize(out);
  forest.child_list = std::move(kids);
  return forest;
}

// One phase's own process memory gauge.
struct PhaseTrack {
  size_t phase = 0;
  RssTrack track;
};

// The subtree peaks computed exactly, when the values allow it: every value is a whole
// multiple of the lowest set bit of any of them (true of any finite doubles), so in that
// unit the values are integers, and while their magnitudes sum below 2^62 every sum
// of them is exact in 64 bits. Each subtree's memory is then a list of (elementary interval,
// change) sorted by interval, its peak the largest running sum, each converted to a double
// once (rounded to nearest). Lists are merged bottom-up, a subtree whose memory is one
// child's taking that child's list and peak as they are; the cost is the pieces of the
// subtrees that join two or more tracks. Returns false (nothing written) when the values
// do not allow it (not finite, or too far apart in magnitude) or when the joins would cost
// more than `max_cost` list entries (tracks nested many levels deep): the caller then uses
// the max-add tree. For whole numbers below 2^53 (bytes, as recorded) both give the same
// values, exact; for fractions the tree's additions round, this does not.
bool ExactSubtreePeaks(const PhaseForest& forest, std::span<const size_t> track_of, std::span<const size_t> piece_offset,
                       std::span<const Piece> all_pieces, std::span<const size_t> weight, size_t max_cost,
                       std::vector<PhaseSummary>& out, double PhaseSummary::*peak) {
  constexpr size_t kNoTrack = std::numeric_limits<size_t>::max();
  size_t n = out.size();
  // The unit: 2^min_exp, the lowest set bit of any value (1 for whole numbers, 4096 for
  // whole pages).
  int min_exp = std::numeric_limits<int>::max();
  for (const Piece& p : all_pieces) {
    if (!std::isfinite(p.v) || std::fpclassify(p.v) == FP_SUBNORMAL) return false;
    int e = 0;
    double m = std::frexp(std::fabs(p.v), &e);  // |v| = m * 2^e, m in [0.5, 1)
    auto mantissa = static_cast<uint64_t>(std::ldexp(m, std::numeric_limits<double>::digits));
    min_exp = std::min(min_exp, e - std::numeric_limits<double>::digits + std::countr_zero(mantissa));
  }
  if (all_pieces.empty()) return false;
  // A bound on every running sum, in units (rounded up a little): along a merged list each
  // track's part of the sum is one of its levels (its largest |v|) when its pieces do not
  // overlap (a level ends before the next starts at the same interval), else at most the
  // sum of its |v|.
  double magnitude = 0;
  for (size_t k = 0; k + 1 < piece_offset.size(); ++k) {
    double largest = 0, sum = 0;
    bool disjoint = true;
    for (size_t i = piece_offset[k]; i < piece_offset[k + 1]; ++i) {
      double u = std::fabs(std::ldexp(all_pieces[i].v, -min_exp));
      largest = std::max(largest, u);
      sum += u;
      if (i > piece_offset[k] && all_pieces[i].lo < all_pieces[i - 1].hi) disjoint = false;
    }
    magnitude += disjoint ? largest : sum;
  }
  if (!(magnitude * (1 + 1e-9) < 0x1p62)) return false;
  // The cost of the joins: the pieces of every subtree with two or more parts that hold
  // pieces (its own track, children with tracks).
  size_t cost = 0;
  for (size_t v = 0; v < n; ++v) {
    if (weight[v] == 0) continue;
    size_t parts = track_of[v] != kNoTrack && piece_offset[track_of[v] + 1] > piece_offset[track_of[v]] ? 1 : 0;
    for (uint32_t c : forest.Children(v)) parts += weight[c] > 0 ? 1 : 0;
    if (parts >= 2) cost += weight[v];
  }
  if (cost > max_cost) return false;

  struct Change {
    size_t x;       // the elementary interval it starts at
    int64_t delta;  // in units
  };
  auto by_x = [](const Change& a, const Change& b) { return a.x < b.x; };
  auto to_units = [&](double v) { return static_cast<int64_t>(std::ldexp(v, -min_exp)); };

  // The finished subtrees' lists lie one after the other in `pool` (a stack: a phase's
  // children's lists are its top ranges when it finishes), merged in place through
  // `scratch`: no allocation per phase or per merge once both have grown.
  std::vector<Change> pool, scratch;
  struct Range {
    size_t begin, end;
  };
  std::vector<Range> ranges;
  std::vector<size_t> bounds, next_bounds;
  // Merges the sorted runs pool[bounds[i] .. bounds[i + 1]) into one sorted run in place,
  // pairwise (log of their number passes, ping-ponging with scratch).
  auto merge_runs = [&]() {
    size_t base = bounds.front(), total = bounds.back() - base;
    if (scratch.size() < total) scratch.resize(total);
    Change* src = pool.data() + base;
    Change* dst = scratch.data();
    for (size_t& b : bounds) b -= base;
    while (bounds.size() > 2) {
      next_bounds.clear();
      size_t i = 0;
      for (; i + 2 < bounds.size(); i += 2) {
        std::merge(src + bounds[i], src + bounds[i + 1], src + bounds[i + 1], src + bounds[i + 2], dst + bounds[i], by_x);
        next_bounds.push_back(bounds[i]);
      }
      if (i + 1 < bounds.size()) {
        std::copy(src + bounds[i], src + bounds[i + 1], dst + bounds[i]);
        next_bounds.push_back(bounds[i]);
      }
      next_bounds.push_back(total);
      bounds.swap(next_bounds);
      std::swap(src, dst);
    }
    if (src != pool.data() + base) std::copy(src, src + total, pool.data() + base);
  };
  // The largest running sum of a sorted list (over its intervals; 0 where nothing is held).
  auto peak_of = [&](Range r) {
    int64_t sum = 0, best = 0;
    for (size_t i = r.begin; i < r.end; ++i) {
      sum += pool[i].delta;
      if (i + 1 == r.end || pool[i + 1].x != pool[i].x) best = std::max(best, sum);
    }
    return std::ldexp(static_cast<double>(best), min_exp);
  };
  // Appends the phase's own track to the pool as a sorted list; false when it has none.
  auto push_own = [&](size_t v) {
    size_t k = track_of[v];
    if (k == kNoTrack || piece_offset[k + 1] == piece_offset[k]) return false;
    size_t begin = pool.size();
    bool in_order = true;
    for (size_t i = piece_offset[k]; i < piece_offset[k + 1]; ++i) {
      const Piece& p = all_pieces[i];
      int64_t u = to_units(p.v);
      if (in_order && pool.size() > begin && pool.back().x == p.lo) {
        // A level that starts where the previous one ends: one change of the two (each
        // running sum is still one of the track's levels, within the bound above).
        pool.back().delta += u;
      } else {
        if (pool.size() > begin && p.lo < pool.back().x) in_order = false;
        pool.push_back({p.lo, u});
      }
      pool.push_back({p.hi, -u});
    }
    if (!in_order) std::stable_sort(pool.begin() + static_cast<std::ptrdiff_t>(begin), pool.end(), by_x);
    return true;
  };

  // A post-order walk; each finished subtree with pieces leaves its list's range on `ranges`.
  struct Frame {
    uint32_t v;
    uint32_t next;      // the next child position to visit
    size_t range_base;  // ranges.size() when the phase was entered
  };
  std::vector<Frame> stack;
  for (uint32_t root : forest.roots) {
    if (weight[root] == 0) continue;
    stack.push_back({root, forest.child_offset[root], ranges.size()});
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next < forest.child_offset[top.v + 1]) {
        uint32_t c = forest.child_list[top.next++];
        if (weight[c] > 0) stack.push_back({c, forest.child_offset[c], ranges.size()});
        continue;
      }
      uint32_t v = top.v;
      size_t base = top.range_base;
      stack.pop_back();
      // The parts: the children's lists, then the own track's.
      size_t parts = ranges.size() - base;
      size_t begin = parts > 0 ? ranges[base].begin : pool.size();
      size_t own_begin = pool.size();
      bool has_own = push_own(v);
      if (has_own) ++parts;
      if (parts == 1 && !has_own) {
        // One child holds all of it: the same memory, the same peak, the same list.
        size_t only = n;
        for (uint32_t c : forest.Children(v)) {
          if (weight[c] > 0) only = c;
        }
        out[v].*peak = out[only].*peak;
        continue;
      }
      if (parts > 1) {
        bounds.clear();
        for (size_t i = base; i < ranges.size(); ++i) bounds.push_back(ranges[i].begin);
        if (has_own) bounds.push_back(own_begin);
        bounds.push_back(pool.size());
        merge_runs();
      }
      ranges.resize(base);
      ranges.push_back({begin, pool.size()});
      out[v].*peak = parts == 0 ? 0.0 : peak_of(ranges.back());
    }
    pool.clear();
    ranges.clear();
  }
  return true;
}

// Fills `peak` (peak_rss_bytes or peak_pss_bytes) of every phase; `tracks` are the phases'
// own process memory gauges (the phases without one are left out), in phase order.
void ComputeSubtreePeaks(const PhaseForest& forest, const std::vector<PhaseTrack>& tracks,
                         std::vector<PhaseSummary>& out, double PhaseSummary::*peak) {
  size_t n = out.size();
  std::vector<TimeNs> xs;
  {
    size_t count = 0;
    for (const PhaseTrack& pt : tracks) count += pt.track.samples.size() + 1;
    xs.reserve(count);
  }
  // Each track's times are a sorted run (samples in time order, then the end after the last):
  // the runs are merged pairwise, which orders them as a sort would with a fraction of the
  // comparisons. Any run out of order: sorted.
  std::vector<size_t> runs{0};
  bool runs_sorted = true;
  for (const PhaseTrack& pt : tracks) {
    size_t from = xs.size();
    for (const Sample& s : pt.track.samples) xs.push_back(s.t);
    xs.push_back(RssTrackEnd(pt.track.samples, pt.track.end_ns));
    runs_sorted = runs_sorted && std::is_sorted(xs.begin() + static_cast<std::ptrdiff_t>(from), xs.end());
    runs.push_back(xs.size());
  }
  if (xs.empty()) return;
  if (!runs_sorted) {
    std::sort(xs.begin(), xs.end());
  } else {
    std::vector<TimeNs> scratch(xs.size());
    while (runs.size() > 2) {
      std::vector<size_t> merged{0};
      for (size_t r = 0; r + 1 < runs.size(); r += 2) {
        auto at = [&](size_t k) { return xs.begin() + static_cast<std::ptrdiff_t>(runs[k]); };
        if (r + 2 < runs.size()) {
          std::merge(at(r), at(r + 1), at(r + 1), at(r + 2), scratch.begin() + static_cast<std::ptrdiff_t>(runs[r]));
          merged.push_back(runs[r + 2]);
        } else {
          std::copy(at(r), at(r + 1), scratch.begin() + static_cast<std::ptrdiff_t>(runs[r]));
          merged.push_back(runs[r + 1]);
        }
      }
      xs.swap(scratch);
      runs.swap(merged);
    }
  }
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  // The index of t in xs: searched from `from` onwards when t is known to be at or after
  // xs[from] (a galloping search: a track's times come in order, close together), else in
  // all of xs. The same index as a lower_bound over all of xs either way.
  auto idx = [&](TimeNs t, size_t from) {
    if (from >= xs.size() || xs[from] > t) from = 0;
    size_t step = 1, hi = from;
    while (hi < xs.size() && xs[hi] < t) {
      from = hi;
      hi = from + step;
      step *= 2;
    }
    hi = std::min(hi, xs.size());
    return static_cast<size_t>(std::lower_bound(xs.begin() + static_cast<std::ptrdiff_t>(from),
                                                xs.begin() + static_cast<std::ptrdiff_t>(hi), t) -
                               xs.begin());
  };

  // Each track's pieces, one array (CSR by track); the phase's track number.
  constexpr size_t kNoTrack = std::numeric_limits<size_t>::max();
  std::vector<size_t> track_of(n, kNoTrack);
  std::vector<size_t> piece_offset(tracks.size() + 1, 0);
  std::vector<Piece> all_pieces;
  all_pieces.reserve(xs.size());
  // Whether a track's pieces are sorted and disjoint (samples sorted by time, as the model
  // promises), so that they can be added in one walk down the tree.
  std::vector<bool> sorted(tracks.size(), true);
  for (size_t k = 0; k < tracks.size(); ++k) {
    const auto& samples = tracks[k].track.samples;
    track_of[tracks[k].phase] = k;
    size_t at = 0;  // the index of the last time looked up
    for (size_t j = 0; j < samples.size(); ++j) {
      TimeNs to = j + 1 < samples.size() ? samples[j + 1].t : RssTrackEnd(samples, tracks[k].track.end_ns);
      if (to <= samples[j].t || samples[j].v == 0) continue;
      size_t lo = idx(samples[j].t, at);
      size_t hi = idx(to, lo);
      at = hi;
      Piece piece{lo, hi, samples[j].v};
      if (all_pieces.size() > piece_offset[k] && piece.lo < all_pieces.back().hi) sorted[k] = false;
      all_pieces.push_back(piece);
    }
    piece_offset[k + 1] = all_pieces.size();
  }
  auto pieces_of = [&](size_t phase) {
    size_t k = track_of[phase];
    if (k == kNoTrack) return std::span<const Piece>();
    return std::span<const Piece>(all_pieces.data() + piece_offset[k], all_pieces.data() + piece_offset[k + 1]);
  };
  auto is_sorted = [&](size_t phase) { return track_of[phase] == kNoTrack || sorted[track_of[phase]]; };

  std::vector<size_t> weight(n, 0);
  for (size_t k = 0; k < tracks.size(); ++k) weight[tracks[k].phase] = piece_offset[k + 1] - piece_offset[k];
  for (auto it = forest.preorder.rbegin(); it != forest.preorder.rend(); ++it) {
    for (uint32_t c : forest.Children(*it)) weight[*it] += weight[c];
  }
  auto heavy_of = [&](size_t v) {
    size_t heavy = n;
    for (uint32_t c : forest.Children(v)) {
      if (heavy == n || weight[c] > weight[heavy]) heavy = c;
    }
    return heavy;
  };

  // Exactly, by merging sorted lists, when the values allow it and the joins cost at most
  // 16 list entries per piece; else the max-add tree.
  if (ExactSubtreePeaks(forest, track_of, piece_offset, all_pieces, weight, 16 * all_pieces.size() + 1024, out,
                        peak)) {
    return;
  }
  MaxAddTree tree(xs.size() - 1);
  auto apply = [&](size_t phase, double sign) {
    std::span<const Piece> pieces = pieces_of(phase);
    if (pieces.empty()) return;
    if (is_sorted(phase)) {
      tree.AddSorted(pieces, sign);
    } else {
      for (const Piece& p : pieces) tree.Add(p.lo, p.hi, sign * p.v);
    }
  };
  auto apply_subtree = [&](size_t phase, double sign) {
    for (size_t pos = forest.first[phase]; pos < forest.last[phase]; ++pos) apply(forest.preorder[pos], sign);
  };

  // One pending visit of the small-to-large walk.
  struct Frame {
    size_t v;
    size_t heavy;
    bool keep;
    bool expanded;
  };
  std::vector<Frame> stack;
  for (uint32_t root : forest.roots) {
    stack.push_back({root, n, false, false});
    while (!stack.empty()) {
      Frame& top = stack.back();
      size_t v = top.v;
      if (weight[v] == 0) {
        // Nothing in the subtree: every peak in it is 0 (PhaseSummary's default).
        stack.pop_back();
        continue;
      }
      std::span<const Piece> own_pieces = pieces_of(v);
      if (weight[v] == own_pieces.size() && is_sorted(v)) {
        // Only the phase's own track, whose pieces do not overlap: its peak is its largest
        // piece (exactly what the tree would give), its subtree's other peaks are 0, and a
        // phase its parent does not keep never needs to enter the tree.
        double own = 0;
        for (const Piece& p : own_pieces) own = std::max(own, p.v);
        out[v].*peak = own;
        if (top.keep) apply(v, 1.0);
        stack.pop_back();
        continue;
      }
      if (!top.expanded) {
        top.expanded = true;
        size_t heavy = top.heavy = heavy_of(v);
        // Lighter children first (each leaves the tree empty), then the heavy one (kept).
        // (`top` is not used after the pushes, which may move it.)
        if (heavy != n) stack.push_back({heavy, n, true, false});
        for (uint32_t c : forest.Children(v)) {
          if (c != heavy) stack.push_back({c, n, false, false});
        }
        continue;
      }
      bool keep = top.keep;
      size_t heavy = top.heavy;
      stack.pop_back();
      apply(v, 1.0);
      for (uint32_t c : forest.Children(v)) {
        if (c != heavy) apply_subtree(c, 1.0);
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
  // Every core time counter by the one rule (derived/counter_rate.h): increases only, a reset
  // counting 0; host counters have no origin.
  auto counter = [](SampleSpan s) { return derived::Counter{s, std::nullopt}; };
  double busy = 0, total = 0, iowait = 0, steal = 0;
  std::vector<SampleSpan> spans;
  std::vector<derived::Counter> busy_counters, other_counters;
  for (const CoreSeries& cs : all) {
    double core_busy = derived::Increase(counter(cs.busy[0])) + derived::Increase(counter(cs.busy[1]));
    double core_iowait = derived::Increase(counter(cs.other[0]));
    double core_steal = derived::Increase(counter(cs.other[1]));
    double core_total = core_busy + core_iowait + core_steal + derived::Increase(counter(cs.other[2]));
    cpu.per_core.push_back({cs.core->name, core_total > 0 ? core_busy / core_total : 0.0});
    busy += core_busy;
    total += core_total;
    iowait += core_iowait;
    steal += core_steal;
    spans.insert(spans.end(), std::begin(cs.busy), std::end(cs.busy));
    spans.insert(spans.end(), std::begin(cs.other), std::end(cs.other));
    for (SampleSpan s : cs.busy) busy_counters.push_back(counter(s));
    for (SampleSpan s : cs.other) other_counters.push_back(counter(s));
  }
  cpu.sampled_s = total / static_cast<double>(all.size());
  cpu.busy_s = busy;
  if (total > 0) {
    cpu.avg_busy = busy / total;
    cpu.avg_iowait = iowait / total;
    cpu.avg_steal = steal / total;
  }

  // Peak: the busy fraction of all cores together over each sampling interval, from the
  // counters' summed increases since the first sample time.
  std::vector<TimeNs> grid;
  DistinctTimes(spans, grid);
  std::vector<double> busy_at, total_at;
  derived::AddCumulativeIncreases(busy_counters, grid, busy_at);
  total_at = busy_at;
  derived::AddCumulativeIncreases(other_counters, grid, total_at);
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
        // Bytes and busy time by the one rule (derived/counter_rate.h): a reset counts 0.
        DiskSummary disk{.name = r.name,
                         .read_bytes = derived::Increase({read, std::nullopt}),
                         .write_bytes = derived::Increase({write, std::nullopt})};
        disk.counted = devices.Counts(r);
        double busy_rate = derived::MeanRate({busy, std::nullopt});
        if (!std::isnan(busy_rate)) disk.avg_busy = std::clamp(busy_rate, 0.0, 1.0);
        out.disks.push_back(disk);
        break;
      }
      case model::ResourceKind::kNet: {
        const model::Series* rx = SeriesOf(run, r, metric::kNetRxBytes);
        const model::Series* tx = SeriesOf(run, r, metric::kNetTxBytes);
        if (SamplesOf(rx).empty() && SamplesOf(tx).empty()) break;
        NetSummary net{.name = r.name,
                       .rx_bytes = derived::Increase({SamplesOf(rx), std::nullopt}),
                       .tx_bytes = derived::Increase({SamplesOf(tx), std::nullopt})};
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
  // The phases' own process memory gauges, for those that have one.
  std::vector<PhaseTrack> tracks, pss_tracks;
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
    // The inclusive sums start from the phase's own (0 for a phase without a process).
    ps.cpu_seconds = ps.self_cpu_seconds;
    ps.user_cpu_seconds = ps.self_user_cpu_seconds;
    ps.system_cpu_seconds = ps.self_system_cpu_seconds;
    ps.read_bytes = ps.self_read_bytes;
    ps.write_bytes = ps.self_write_bytes;
    const model::Series* rss = run.FindSeries(proc->id, metric::kProcRss);
    if (rss != nullptr && !rss->samples.empty()) {
      ps.self_peak_rss_bytes = GaugeMax(rss->samples);
      tracks.push_back({i, RssTrack{.samples = rss->samples, .end_ns = ps.end_ns}});
    }
    const model::Series* pss = run.FindSeries(proc->id, metric::kProcPss);
    if (pss == nullptr || pss->samples.empty()) pss = rss;  // recorded before memory.pss
    if (pss != nullptr && !pss->samples.empty()) {
      ps.self_peak_pss_bytes = GaugeMax(pss->samples);
      pss_tracks.push_back({i, RssTrack{.samples = pss->samples, .end_ns = ps.end_ns}});
    }
  }

  // Inclusive sums, children before parents.
  PhaseForest forest = BuildForest(run);
  for (auto it = forest.preorder.rbegin(); it != forest.preorder.rend(); ++it) {
    PhaseSummary& ps = summary.phases[*it];
    for (uint32_t c : forest.Children(*it)) {
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
  auto tracks_only = [](const std::vector<PhaseTrack>& all) {
    std::vector<RssTrack> out;
    out.reserve(all.size());
    for (const PhaseTrack& t : all) out.push_back(t.track);
    return out;
  };
  ComputeSubtreePeaks(forest, tracks, summary.phases, &PhaseSummary::peak_rss_bytes);
  summary.peak_rss_bytes = PeakOfSum(tracks_only(tracks));
  // A run recorded without memory.pss has the RSS tracks as its PSS tracks: the same
  // samples give the same peaks, so they are copied rather than computed again.
  bool pss_is_rss = std::equal(tracks.begin(), tracks.end(), pss_tracks.begin(), pss_tracks.end(),
                               [](const PhaseTrack& a, const PhaseTrack& b) {
                                 return a.phase == b.phase && a.track.samples.data() == b.track.samples.data() &&
                                        a.track.samples.size() == b.track.samples.size() &&
                                        a.track.end_ns == b.track.end_ns;
                               });
  if (pss_is_rss) {
    for (PhaseSummary& ps : summary.phases) ps.peak_pss_bytes = ps.peak_rss_bytes;
    summary.peak_pss_bytes = summary.peak_rss_bytes;
  } else {
    ComputeSubtreePeaks(forest, pss_tracks, summary.phases, &PhaseSummary::peak_pss_bytes);
    summary.peak_pss_bytes = PeakOfSum(tracks_only(pss_tracks));
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
