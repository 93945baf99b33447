#include "analysis/schedule_graph.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <span>
#include <unordered_map>
#include <utility>


namespace grademl::analysis {
namespace {

constexpr size_t kMaxWrapperChildren = 64;

bool IsProcess(const model::Phase& p) { return p.leaf_is(model::kPhaseTypeProcess); }
bool IsStep(const model::Phase& p) { return p.leaf_is("step"); }

// Own time scaled by a multiplier; exact when the multiplier is 1.
TimeNs Scale(DurationNs d, double m) {
  if (m == 1.0) return d;
  constexpr double kLimit = 1e18;  // ~30 years: far from overflowing when added to a time
  return static_cast<TimeNs>(std::llround(std::clamp(static_cast<double>(d) * m, -kLimit, kLimit)));
}

// Looks phases up by id: a vector when ids are dense (the store's are), a hash map otherwise.
class PositionIndex {
 public:
  // `ids`: the phases' ids, in run.phases order.
  explicit PositionIndex(std::span<const model::PhaseId> ids) {
    model::PhaseId max_id = 0;
    bool positive = true;
    for (model::PhaseId id : ids) {
      max_id = std::max(max_id, id);
      positive = positive && id > 0;
    }
    dense_ = positive && static_cast<size_t>(max_id) <= 4 * ids.size() + 16;
    if (dense_) {
      by_id_.assign(static_cast<size_t>(max_id) + 1, -1);
      for (size_t i = 0; i < ids.size(); ++i) by_id_[static_cast<size_t>(ids[i])] = static_cast<int32_t>(i);
    } else {
      map_.reserve(ids.size());
      for (size_t i = 0; i < ids.size(); ++i) map_.emplace(ids[i], static_cast<int32_t>(i));
    }
  }
  int32_t Find(model::PhaseId id) const {
    if (dense_) return id > 0 && static_cast<size_t>(id) < by_id_.size() ? by_id_[static_cast<size_t>(id)] : -1;
    auto it = map_.find(id);
    return it == map_.end() ? -1 : it->second;
  }

 private:
  bool dense_ = false;
  std::vector<int32_t> by_id_;
  std::unordered_map<model::PhaseId, int32_t> map_;
};

// Compressed adjacency lists: lists of `n` owners built from (owner, item) pairs.
void BuildCsr(size_t n, std::vector<std::pair<int32_t, int32_t>>& pairs, std::vector<int32_t>& first,
              std::vector<int32_t>& items) {
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  first.assign(n + 1, 0);
  for (const auto& [owner, item] : pairs) ++first[static_cast<size_t>(owner) + 1];
  for (size_t i = 0; i < n; ++i) first[i + 1] += first[i];
  items.resize(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) items[i] = pairs[i].second;
}

// Children lists of a tree given each item's parent (-1: none), items in increasing order.
void BuildTreeCsr(const std::vector<int32_t>& parent, std::vector<int32_t>& first, std::vector<int32_t>& items) {
  const size_t n = parent.size();
  first.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    if (parent[i] >= 0) ++first[static_cast<size_t>(parent[i]) + 1];
  }
  for (size_t i = 0; i < n; ++i) first[i + 1] += first[i];
  items.resize(static_cast<size_t>(first[n]));
  std::vector<int32_t> fill(first.begin(), first.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    if (parent[i] >= 0) items[static_cast<size_t>(fill[static_cast<size_t>(parent[i])]++)] = static_cast<int32_t>(i);
  }
}

// List scheduling of the top level (see the header): ready nodes start in node order (their
// original start order) while fewer than `jobs` slot-taking nodes run. `launch(node, t)`
// starts a node decided at time t and returns its end; `cause(node, by, by_slot)` says what
// let it start (-1: the run's start).
template <typename Launch, typename Cause>
void SimulateTopLevel(const ScheduleGraph& g, int jobs, TimeNs t0, Launch launch, Cause cause) {
  const int32_t b = g.child_begin(0);
  const size_t m = static_cast<size_t>(g.child_end(0) - b);
  std::vector<int32_t> indeg(m);
  std::vector<TimeNs> ready_at(m, t0);
  std::vector<int32_t> ready_cause(m, -1);
  using MinQueue = std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>>;
  MinQueue slot_ready, free_ready;
  std::priority_queue<std::pair<TimeNs, int32_t>, std::vector<std::pair<TimeNs, int32_t>>, std::greater<>> running;
  auto make_ready = [&](size_t k) { (g.takes_slot[k] ? slot_ready : free_ready).push(b + static_cast<int32_t>(k)); };
  for (size_t k = 0; k < m; ++k) {
    indeg[k] = g.dep_first[k + 1] - g.dep_first[k];
    if (indeg[k] == 0) make_ready(k);
  }
  int used = 0;
  int32_t last_release = -1;
  TimeNs t = t0;
  auto launch_one = [&](int32_t node) {
    size_t k = static_cast<size_t>(node - b);
    if (ready_at[k] == t) {
      cause(node, ready_cause[k], false);
    } else {
      cause(node, last_release, true);
    }
    running.push({launch(node, t), node});
  };
  auto complete = [&](int32_t node) {
    size_t k = static_cast<size_t>(node - b);
    if (g.takes_slot[k]) {
      --used;
      last_release = node;
    }
    for (int32_t i = g.succ_first[k]; i < g.succ_first[k + 1]; ++i) {
      size_t s = static_cast<size_t>(g.succ_to[static_cast<size_t>(i)] - b);
      if (--indeg[s] == 0) {
        ready_at[s] = t;
        ready_cause[s] = node;
        make_ready(s);
      }
    }
  };
  while (true) {
    while (!free_ready.empty()) {
      int32_t node = free_ready.top();
      free_ready.pop();
      launch_one(node);
    }
    while (!slot_ready.empty() && (jobs <= 0 || used < jobs)) {
      int32_t node = slot_ready.top();
      slot_ready.pop();
      ++used;
      launch_one(node);
    }
    if (running.empty()) break;
    t = std::max(t, running.top().first);
    while (!running.empty() && running.top().first <= t) {
      int32_t node = running.top().second;
      running.pop();
      complete(node);
    }
  }
}

// One replay: the recursive walk over phases within a step (or the whole run), with the
// running maxima of each lane's predecessors.
class Replayer {
 public:
  Replayer(const ScheduleGraph& g, std::span<const double> mult, Replay& out)
      : g_(g), mult_(mult), out_(out), lane_ptr_(g.lane_members.empty() ? 0 : 2 * (g.lane_member_first.size() - 1)),
        lane_max_(lane_ptr_.size()), lane_arg_(lane_ptr_.size()) {}

  double M(int32_t n) const { return mult_.empty() ? 1.0 : mult_[static_cast<size_t>(n)]; }

  // Replays node `top` and its subtree, `top` starting at `start`.
  void Subtree(int32_t top, TimeNs start) {
    out_.start[static_cast<size_t>(top)] = start;
    if (!g_.has_children(top)) {
      Leaf(top);
      return;
    }
    Enter(top);
    while (!stack_.empty()) {
      int32_t p = stack_.back().node;
      int32_t c = stack_.back().next;
      if (c < g_.child_end(p)) {
        ++stack_.back().next;
        Start(p, c);
        if (g_.has_children(c)) {
          Enter(c);
        } else {
          Leaf(c);
        }
      } else {
        End(p);
        stack_.pop_back();
      }
    }
  }

  // The end of a phase with children, from its children's new ends.
  void End(int32_t p) {
    const size_t pi = static_cast<size_t>(p);
    const double m = M(p);
    int32_t d = g_.det_child[pi];
    TimeNs best = out_.end[static_cast<size_t>(d)] + Scale(g_.end[pi] - g_.end[static_cast<size_t>(d)], m);
    int32_t cause = d;
    for (int32_t c = g_.child_begin(p); c < g_.child_end(p); ++c) {
      const size_t ci = static_cast<size_t>(c);
      if (c == d || g_.background[ci]) continue;
      TimeNs v = out_.end[ci] + std::min<TimeNs>(0, Scale(g_.end[pi] - g_.end[ci], m));
      if (v > best) {
        best = v;
        cause = c;
      }
    }
    if (out_.start[pi] > best) {
      best = out_.start[pi];
      cause = -1;
    }
    out_.end[pi] = best;
    out_.end_cause[pi] = cause;
  }

 private:
  // A phase being replayed: its children are replayed in order, then its end.
  struct Frame {
    int32_t node;
    int32_t next;  // the next child to replay
  };

  void Leaf(int32_t n) {
    const size_t ni = static_cast<size_t>(n);
    out_.end[ni] = out_.start[ni] + Scale(g_.end[ni] - g_.start[ni], M(n));
    out_.end_cause[ni] = -1;
  }

  void Enter(int32_t p) {
    const size_t pi = static_cast<size_t>(p);
    for (int32_t l = g_.lane_first[pi]; l < g_.lane_first[pi + 1]; ++l) {
      for (size_t li = 2 * static_cast<size_t>(l); li < 2 * static_cast<size_t>(l) + 2; ++li) {
        lane_ptr_[li] = g_.lane_member_first[static_cast<size_t>(l)];
        lane_max_[li] = std::numeric_limits<TimeNs>::min();
        lane_arg_[li] = -1;
      }
    }
    stack_.push_back({p, g_.child_begin(p)});
  }

  // The start of child c of p, from its predecessors' (already replayed) new ends.
  void Start(int32_t p, int32_t c) {
    const size_t pi = static_cast<size_t>(p), ci = static_cast<size_t>(c);
    const double m = M(p);
    int32_t d = g_.det_pred[ci];
    TimeNs best;
    int32_t cause = d;
    if (d < 0) {
      best = out_.start[pi] + Scale(g_.start[ci] - g_.start[pi], m);
    } else {
      best = out_.end[static_cast<size_t>(d)] + Scale(g_.start[ci] - g_.end[static_cast<size_t>(d)], m);
    }
    // A process's start was read from /proc, up to kProcessStartSlack early: the others
    // that ended after it (within the slack) only have to end that much before it.
    const int stream = g_.process[ci] ? 1 : 0;
    const DurationNs slack = stream ? kProcessStartSlack : 0;
    auto consider_lane = [&](int32_t l, int32_t target) {
      const size_t li = 2 * static_cast<size_t>(l) + static_cast<size_t>(stream);
      int32_t& ptr = lane_ptr_[li];
      while (ptr < target) {
        int32_t x = g_.lane_members[static_cast<size_t>(ptr++)];
        if (out_.end[static_cast<size_t>(x)] > lane_max_[li]) {
          lane_max_[li] = out_.end[static_cast<size_t>(x)];
          lane_arg_[li] = x;
        }
      }
      if (lane_arg_[li] >= 0 && lane_max_[li] - slack > best) {
        best = lane_max_[li] - slack;
        cause = lane_arg_[li];
      }
    };
    if (g_.lane[ci] >= 0) consider_lane(g_.lane[ci], g_.pos_own[ci]);
    if (g_.other_lane[ci] >= 0) consider_lane(g_.other_lane[ci], g_.pos_other[ci]);
    for (int32_t i = g_.edge_first[ci]; i < g_.edge_first[ci + 1]; ++i) {
      int32_t a = g_.edge_from[static_cast<size_t>(i)];
      if (out_.end[static_cast<size_t>(a)] > best) {
        best = out_.end[static_cast<size_t>(a)];
        cause = a;
      }
    }
    out_.start[ci] = best;
    out_.start_cause[ci] = cause;
  }

  const ScheduleGraph& g_;
  std::span<const double> mult_;
  Replay& out_;
  std::vector<int32_t> lane_ptr_;
  std::vector<TimeNs> lane_max_;
  std::vector<int32_t> lane_arg_;
  std::vector<Frame> stack_;
};


// What the build reads of each phase, by position in run.phases, in one pass (phases are
// large and their types are apart from them; these arrays are not), and the recorded tree.
struct PhaseArrays {
  std::vector<TimeNs> ps, pe;         // start; end (an open phase ends at the run's end)
  std::vector<int32_t> orig_parent;   // the recorded parent's position, -1: none
  std::vector<int32_t> pid_of;        // the phase's own pid (0: none)
  std::vector<uint8_t> is_proc, is_step;
  std::vector<model::PhaseId> id_of;
  int32_t root_pos = -1;
  std::vector<int32_t> ofirst, ochild;  // the recorded tree's children lists
  std::span<const int32_t> ochildren(int32_t p) const {
    return std::span<const int32_t>(ochild.data() + ofirst[static_cast<size_t>(p)],
                                    ochild.data() + ofirst[static_cast<size_t>(p) + 1]);
  }
  bool running_at(int32_t q, TimeNs t) const { return ps[static_cast<size_t>(q)] <= t && t < pe[static_cast<size_t>(q)]; }
};

PhaseArrays ReadPhases(const model::Run& run, const model::Phase& root_phase, std::optional<PositionIndex>& index) {
  const auto& phases = run.phases;
  const size_t n_all = phases.size();
  const TimeNs effective_end = run.EffectiveEnd();
  PhaseArrays a;
  a.ps.resize(n_all);
  a.pe.resize(n_all);
  a.orig_parent.assign(n_all, -1);
  a.pid_of.resize(n_all);
  a.is_proc.resize(n_all);
  a.is_step.resize(n_all);
  a.id_of.resize(n_all);
  std::vector<model::PhaseId> parent_id(n_all);
  for (size_t i = 0; i < n_all; ++i) {
    if (i + 8 < n_all) __builtin_prefetch(phases[i + 8].type.data());  // the types, a few phases ahead
    const model::Phase& ph = phases[i];
    a.ps[i] = ph.start_ns;
    a.pe[i] = std::max(a.ps[i], ph.ended() ? ph.end_ns : effective_end);
    parent_id[i] = ph.parent != ph.id ? ph.parent : 0;
    a.pid_of[i] = ph.pid;
    a.is_proc[i] = IsProcess(ph) ? 1 : 0;
    a.is_step[i] = IsStep(ph) ? 1 : 0;
    a.id_of[i] = ph.id;
  }
  index.emplace(a.id_of);
  for (size_t i = 0; i < n_all; ++i) {
    if (parent_id[i] != 0) a.orig_parent[i] = index->Find(parent_id[i]);
  }
  a.root_pos = index->Find(root_phase.id);
  a.orig_parent[static_cast<size_t>(a.root_pos)] = -1;
  BuildTreeCsr(a.orig_parent, a.ofirst, a.ochild);
  return a;
}

// Phases reachable from the root, parents first (`reach`), with their effective pid (their
// own, else their parent's).
void Reach(const PhaseArrays& a, int32_t root_pid, std::vector<int32_t>& reach, std::vector<int32_t>& pid_eff) {
  reach.assign(1, a.root_pos);
  pid_eff.assign(a.ps.size(), 0);
  pid_eff[static_cast<size_t>(a.root_pos)] = root_pid;
  for (size_t k = 0; k < reach.size(); ++k) {
    int32_t p = reach[k];
    for (int32_t c : a.ochildren(p)) {
      const size_t ci = static_cast<size_t>(c);
      pid_eff[ci] = a.pid_of[ci] != 0 ? a.pid_of[ci] : pid_eff[static_cast<size_t>(p)];
      reach.push_back(c);
    }
  }
}

// Replay parents by position: phases from a step's output go under the process that printed
// them, and the program's own phases that started within such a phase go under it.
std::vector<int32_t> ReplayParents(const PhaseArrays& a, const std::vector<int32_t>& reach,
                                   const std::vector<int32_t>& pid_eff) {
  const auto& ps = a.ps;
  const auto& pid_of = a.pid_of;
  const auto& is_proc = a.is_proc;
  auto ochildren = [&](int32_t p) { return a.ochildren(p); };
  auto running_at = [&](int32_t q, TimeNs t) { return a.running_at(q, t); };
  std::vector<int32_t> rparent = a.orig_parent;
  auto is_wrapper = [&](int32_t q) {
    auto kids = ochildren(q);
    if (kids.empty() || kids.size() > kMaxWrapperChildren) return false;
    return std::all_of(kids.begin(), kids.end(), [&](int32_t x) { return is_proc[static_cast<size_t>(x)] != 0; });
  };
  std::vector<std::pair<int32_t, int32_t>> procs;  // (pid, position) of a parent's child processes
  std::vector<std::pair<int32_t, int32_t>> moved_into;  // (process, phase) of the phases moved
  for (int32_t p : reach) {
    auto kids = ochildren(p);
    auto moves = [&](int32_t c) {
      const size_t ci = static_cast<size_t>(c);
      return pid_of[ci] != 0 && pid_of[ci] != pid_eff[static_cast<size_t>(p)] && !is_proc[ci];
    };
    if (std::none_of(kids.begin(), kids.end(), moves)) continue;
    procs.clear();
    for (int32_t c : kids) {
      if (is_proc[static_cast<size_t>(c)]) procs.push_back({pid_of[static_cast<size_t>(c)], c});
    }
    std::sort(procs.begin(), procs.end());
    for (int32_t c : kids) {
      if (!moves(c)) continue;
      const TimeNs t = ps[static_cast<size_t>(c)];
      int32_t q = -1;
      const int32_t cpid = pid_of[static_cast<size_t>(c)];
      auto it = std::lower_bound(procs.begin(), procs.end(), std::make_pair(cpid, -1));
      for (auto jt = it; jt != procs.end() && jt->first == cpid; ++jt) {
        if (running_at(jt->second, t)) {
          q = jt->second;
          break;
        }
      }
      // The first phase from the output may start with its step or run, a few ms before the
      // process that printed it (its start time is in clock ticks, after the fork): the
      // process of that pid that started within kProcessStartSlack after it.
      for (auto jt = it; q < 0 && jt != procs.end() && jt->first == cpid; ++jt) {
        const TimeNs start = ps[static_cast<size_t>(jt->second)];
        if (start >= t && start - t <= kProcessStartSlack) q = jt->second;
      }
      if (q < 0) continue;
      while (is_wrapper(q)) {
        int32_t only = -1, count = 0;
        for (int32_t x : ochildren(q)) {
          if (running_at(x, t)) {
            only = x;
            ++count;
          }
        }
        if (count != 1) break;
        q = only;
      }
      rparent[static_cast<size_t>(c)] = q;
      moved_into.push_back({q, c});
    }
  }
  // The program's own phases that started within such a phase go under it: an epoch seen in
  // the output holds the forward and backward passes recorded inside the program.
  std::sort(moved_into.begin(), moved_into.end(), [&](const auto& x, const auto& y) {
    return x.first != y.first ? x.first < y.first : ps[static_cast<size_t>(x.second)] < ps[static_cast<size_t>(y.second)];
  });
  for (size_t i = 0; i < moved_into.size();) {
    const int32_t q = moved_into[i].first;
    size_t j = i;
    while (j < moved_into.size() && moved_into[j].first == q) ++j;
    for (int32_t a : ochildren(q)) {
      const size_t ai = static_cast<size_t>(a);
      if (is_proc[ai] || pid_eff[ai] != pid_eff[static_cast<size_t>(q)]) continue;
      // The latest-starting output phase that started at or before a.
      auto it = std::upper_bound(moved_into.begin() + static_cast<std::ptrdiff_t>(i),
                                 moved_into.begin() + static_cast<std::ptrdiff_t>(j), ps[ai],
                                 [&](TimeNs t, const auto& x) { return t < ps[static_cast<size_t>(x.second)]; });
      if (it == moved_into.begin() + static_cast<std::ptrdiff_t>(i)) continue;
      const int32_t f = std::prev(it)->second;
      if (running_at(f, ps[ai])) rparent[ai] = f;
    }
    i = j;
  }

  return rparent;
}

// The replay tree (children sorted by start, end, recorded order; nodes in breadth-first
// order) into g's child lists, parents and per-node arrays; node_of_pos maps a position in
// run.phases to its node (-1: not under the root); step marks the workflow steps by node.
void BuildReplayTree(const model::Run& run, const PhaseArrays& a, std::vector<int32_t>& rparent, size_t reach_size,
                     ScheduleGraph& g, std::vector<int32_t>& node_of_pos, std::vector<uint8_t>& step) {
  const auto& phases = run.phases;
  const size_t n_all = phases.size();
  const auto& ps = a.ps;
  const auto& pe = a.pe;
  const int32_t root_pos = a.root_pos;
  std::vector<int32_t> rfirst, rchild;
  BuildTreeCsr(rparent, rfirst, rchild);
  auto by_time = [&](int32_t a, int32_t b) {
    const size_t ai = static_cast<size_t>(a), bi = static_cast<size_t>(b);
    if (ps[ai] != ps[bi]) return ps[ai] < ps[bi];
    if (pe[ai] != pe[bi]) return pe[ai] < pe[bi];
    return a < b;
  };
  std::vector<int32_t> order{root_pos};
  order.reserve(reach_size);
  g.child_first.reserve(reach_size + 1);
  for (size_t k = 0; k < order.size(); ++k) {
    int32_t p = order[k];
    auto b = rchild.begin() + rfirst[static_cast<size_t>(p)], e = rchild.begin() + rfirst[static_cast<size_t>(p) + 1];
    if (!std::is_sorted(b, e, by_time)) std::sort(b, e, by_time);
    g.child_first.push_back(static_cast<int32_t>(order.size()));
    order.insert(order.end(), b, e);
  }
  const size_t n = order.size();
  g.child_first.push_back(static_cast<int32_t>(n));

  node_of_pos.assign(n_all, -1);
  g.phase.resize(n);
  g.start.resize(n);
  g.end.resize(n);
  g.parent.assign(n, -1);
  std::vector<uint8_t>& proc = g.process;
  proc.assign(n, 0);
  step.assign(n, 0);
  for (size_t k = 0; k < n; ++k) {
    const size_t pos = static_cast<size_t>(order[k]);
    node_of_pos[pos] = static_cast<int32_t>(k);
    g.phase[k] = &phases[pos];
    g.start[k] = ps[pos];
    g.end[k] = pe[pos];
    proc[k] = a.is_proc[pos];
    step[k] = a.is_step[pos];
  }
  for (size_t k = 0; k < n; ++k) {
    for (int32_t c = g.child_first[k]; c < g.child_first[k + 1]; ++c) g.parent[static_cast<size_t>(c)] = static_cast<int32_t>(k);
  }
}

// Edges between siblings (explicit predecessors) into g.edge_first/edge_from; in a workflow,
// the dependencies between top-level steps go to `top_edges` as (to, from) instead.
void SiblingEdges(const model::Run& run, const PositionIndex& index, const std::vector<int32_t>& node_of_pos,
                  ScheduleGraph& g, std::vector<std::pair<int32_t, int32_t>>& top_edges) {
  const size_t n = g.phase.size();
  std::vector<std::pair<int32_t, int32_t>> sibling_edges;
  for (const model::Edge& e : run.edges) {
    int32_t fp = index.Find(e.from), tp = index.Find(e.to);
    if (fp < 0 || tp < 0) continue;
    int32_t f = node_of_pos[static_cast<size_t>(fp)], t = node_of_pos[static_cast<size_t>(tp)];
    if (f < 0 || t < 0 || f >= t || g.parent[static_cast<size_t>(f)] != g.parent[static_cast<size_t>(t)]) continue;
    if (g.end[static_cast<size_t>(f)] > g.start[static_cast<size_t>(t)]) continue;  // not a precedence in time
    if (g.workflow && g.parent[static_cast<size_t>(t)] == 0) {
      top_edges.push_back({t, f});
    } else {
      sibling_edges.push_back({t, f});
    }
  }
  BuildCsr(n, sibling_edges, g.edge_first, g.edge_from);

}

// Each parent's children in lanes (the program's phases; its child processes; background
// processes in none), each child's position in the lanes it waits on and its determining
// predecessor, and each parent's determining child.
void BuildLanes(ScheduleGraph& g) {
  const size_t n = g.phase.size();
  const std::vector<uint8_t>& proc = g.process;
  g.background.assign(n, 0);
  g.lane.assign(n, -1);
  g.other_lane.assign(n, -1);
  g.pos_own.assign(n, -1);
  g.pos_other.assign(n, -1);
  g.det_pred.assign(n, -1);
  g.det_child.assign(n, -1);
  g.lane_first.assign(n + 1, 0);
  g.lane_members.reserve(n);
  auto later_end = [&](int32_t a, int32_t b) {  // a ended after b (ties: the later node)
    if (b < 0) return true;
    const size_t ai = static_cast<size_t>(a), bi = static_cast<size_t>(b);
    return g.end[ai] != g.end[bi] ? g.end[ai] > g.end[bi] : a > b;
  };
  enum Class : uint8_t { kProgram, kProcess, kBackground };
  std::vector<uint8_t> cls;
  std::vector<int32_t> members[2];
  std::vector<TimeNs> program_starts, program_reach;  // non-empty program phases: starts, running max of ends
  for (size_t p = 0; p < n; ++p) {
    const int32_t b = g.child_first[p], e = g.child_first[p + 1];
    g.lane_first[p] = static_cast<int32_t>(g.lane_member_first.size());
    if (b == e) continue;
    // Classify the children.
    cls.assign(static_cast<size_t>(e - b), kProgram);
    program_starts.clear();
    program_reach.clear();
    for (int32_t c = b; c < e; ++c) {
      const size_t ci = static_cast<size_t>(c);
      uint8_t& k = cls[ci - static_cast<size_t>(b)];
      if (proc[ci]) {
        k = kProcess;
      } else if (g.end[ci] > g.start[ci]) {
        program_starts.push_back(g.start[ci]);
        program_reach.push_back(std::max(g.end[ci], program_reach.empty() ? g.end[ci] : program_reach.back()));
      }
    }
    // A child process that ran while a program phase ran is in the background.
    for (int32_t c = b; c < e; ++c) {
      const size_t ci = static_cast<size_t>(c);
      uint8_t& k = cls[ci - static_cast<size_t>(b)];
      if (k != kProcess) continue;
      size_t before = static_cast<size_t>(
          std::lower_bound(program_starts.begin(), program_starts.end(), g.end[ci]) - program_starts.begin());
      if (g.end[ci] == g.start[ci]) continue;
      if (before > 0 && program_reach[before - 1] > g.start[ci] + kProcessStartSlack) k = kBackground;
    }
    // The lanes, members sorted by (end, node).
    int32_t lane_id[2] = {-1, -1};
    for (int l = 0; l < 2; ++l) {
      members[l].clear();
      for (int32_t c = b; c < e; ++c) {
        if (cls[static_cast<size_t>(c - b)] == l) members[l].push_back(c);
      }
      if (members[l].empty()) continue;
      auto by_end = [&](int32_t x, int32_t y) { return later_end(y, x); };
      if (!std::is_sorted(members[l].begin(), members[l].end(), by_end)) {
        std::sort(members[l].begin(), members[l].end(), by_end);
      }
      lane_id[l] = static_cast<int32_t>(g.lane_member_first.size());
      g.lane_member_first.push_back(static_cast<int32_t>(g.lane_members.size()));
      g.lane_members.insert(g.lane_members.end(), members[l].begin(), members[l].end());
    }
    // One pointer per lane and kind of querier: processes' starts get the slack.
    std::array<int32_t, 4> ptr = {0, 0, 0, 0};
    for (int l = 0; l < 2; ++l) {
      if (lane_id[l] < 0) continue;
      ptr[static_cast<size_t>(2 * l)] = ptr[static_cast<size_t>(2 * l + 1)] =
          g.lane_member_first[static_cast<size_t>(lane_id[l])];
    }
    auto lane_end = [&](int l) {
      return l == 0 && lane_id[1] >= 0 ? g.lane_member_first[static_cast<size_t>(lane_id[1])]
                                       : static_cast<int32_t>(g.lane_members.size());
    };
    // The predecessors of each child: the prefix of a lane that ended before it started
    // (and, with the slack, before its start: never a sibling that starts after it).
    auto advance = [&](int l, int32_t c) {
      const int stream = proc[static_cast<size_t>(c)] ? 1 : 0;
      int32_t& q = ptr[static_cast<size_t>(2 * l + stream)];
      const int32_t qe = lane_end(l);
      const TimeNs s = g.start[static_cast<size_t>(c)] + (stream ? kProcessStartSlack : 0);
      while (q < qe) {
        int32_t x = g.lane_members[static_cast<size_t>(q)];
        TimeNs xe = g.end[static_cast<size_t>(x)];
        if ((xe < s || (xe == s && x < c)) && x < c) {
          ++q;
        } else {
          break;
        }
      }
      return q;
    };
    int32_t last = -1, last_any = -1;
    for (int32_t c = b; c < e; ++c) {
      const size_t ci = static_cast<size_t>(c);
      const uint8_t k = cls[ci - static_cast<size_t>(b)];
      const int own = k == kBackground ? -1 : k;
      const int other = k == kProgram ? 1 : 0;
      int32_t det = -1;
      if (own >= 0 && lane_id[own] >= 0) {
        g.lane[ci] = lane_id[own];
        g.pos_own[ci] = advance(own, c);
        if (g.pos_own[ci] > g.lane_member_first[static_cast<size_t>(lane_id[own])]) {
          det = g.lane_members[static_cast<size_t>(g.pos_own[ci]) - 1];
        }
      }
      if (lane_id[other] >= 0) {
        g.other_lane[ci] = lane_id[other];
        g.pos_other[ci] = advance(other, c);
        if (g.pos_other[ci] > g.lane_member_first[static_cast<size_t>(lane_id[other])]) {
          int32_t x = g.lane_members[static_cast<size_t>(g.pos_other[ci]) - 1];
          if (later_end(x, det)) det = x;
        }
      }
      for (int32_t i = g.edge_first[ci]; i < g.edge_first[ci + 1]; ++i) {
        int32_t x = g.edge_from[static_cast<size_t>(i)];
        if (later_end(x, det)) det = x;
      }
      g.det_pred[ci] = det;
      g.background[ci] = k == kBackground ? 1 : 0;
      if (later_end(c, last_any)) last_any = c;
      if (k != kBackground && later_end(c, last)) last = c;
    }
    g.det_child[p] = last >= 0 ? last : last_any;
  }
  g.lane_first[n] = static_cast<int32_t>(g.lane_member_first.size());
  g.lane_member_first.push_back(static_cast<int32_t>(g.lane_members.size()));

}

// The top level: which nodes take a slot, their dependencies and successors, the recorded
// concurrency and each node's launch latency (its wait beyond the recorded limit's).
void BuildTopLevel(ScheduleGraph& g, const std::vector<uint8_t>& step, std::vector<std::pair<int32_t, int32_t>>& top_edges) {
  const int32_t tb = g.child_begin(0), te = g.child_end(0);
  const size_t m = static_cast<size_t>(te - tb);
  g.takes_slot.assign(m, 0);
  g.latency.assign(m, 0);
  if (g.workflow) {
    for (size_t k = 0; k < m; ++k) g.takes_slot[k] = step[static_cast<size_t>(tb) + k];
  }
  for (auto& [to, from] : top_edges) {
    to -= tb;
    from -= tb;
  }
  BuildCsr(m, top_edges, g.dep_first, g.dep_from);
  for (int32_t& x : g.dep_from) x += tb;
  for (auto& [to, from] : top_edges) std::swap(to, from);
  BuildCsr(m, top_edges, g.succ_first, g.succ_to);
  for (int32_t& x : g.succ_to) x += tb;
  if (!g.workflow) return;

  for (const auto& [key, value] : g.phase[0]->tags) {
    if (key != "jobs") continue;
    int v = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec == std::errc() && p == value.data() + value.size() && v > 0) g.recorded_jobs = v;
  }
  if (g.recorded_jobs > 0) {
    // A hand-made or odd recording may have run more steps at once than its limit: the
    // replay must be able to reproduce it.
    std::vector<std::pair<TimeNs, int>> events;
    for (size_t k = 0; k < m; ++k) {
      if (!g.takes_slot[k]) continue;
      const size_t node = static_cast<size_t>(tb) + k;
      if (g.end[node] == g.start[node]) continue;
      events.push_back({g.start[node], 1});
      events.push_back({g.end[node], -1});
    }
    std::sort(events.begin(), events.end());
    int running = 0, most = 0;
    for (const auto& [t, d] : events) most = std::max(most, running += d);
    g.jobs = std::max(g.recorded_jobs, most);
  }
  SimulateTopLevel(
      g, g.jobs, g.start[0],
      [&](int32_t node, TimeNs t) {
        const size_t ni = static_cast<size_t>(node);
        TimeNs s = std::max(t, g.start[ni]);
        g.latency[ni - static_cast<size_t>(tb)] = s - t;
        return s + (g.end[ni] - g.start[ni]);
      },
      [](int32_t, int32_t, bool) {});
}

}  // namespace

int32_t ScheduleGraph::NodeOf(model::PhaseId id) const {
  if (!node_of_sparse_.empty()) {
    auto it = node_of_sparse_.find(id);
    return it == node_of_sparse_.end() ? -1 : it->second;
  }
  if (id <= 0 || static_cast<size_t>(id) >= node_of_dense_.size()) return -1;
  return node_of_dense_[static_cast<size_t>(id)];
}

ScheduleGraph ScheduleGraph::Build(const model::Run& run) {
  ScheduleGraph g;
  const model::Phase* root_phase = run.Root();
  if (root_phase == nullptr) return g;
  std::optional<PositionIndex> index;
  const PhaseArrays a = ReadPhases(run, *root_phase, index);
  std::vector<int32_t> reach, pid_eff;
  Reach(a, root_phase->pid, reach, pid_eff);
  std::vector<int32_t> rparent = ReplayParents(a, reach, pid_eff);
  std::vector<int32_t>().swap(pid_eff);
  std::vector<int32_t> node_of_pos;
  std::vector<uint8_t> step;
  BuildReplayTree(run, a, rparent, reach.size(), g, node_of_pos, step);
  std::vector<int32_t>().swap(rparent);

  const size_t n_all = run.phases.size();
  const auto& id_of = a.id_of;
  model::PhaseId max_id = 0;
  for (size_t pos = 0; pos < n_all; ++pos) {
    if (node_of_pos[pos] >= 0) max_id = std::max(max_id, id_of[pos]);
  }
  if (static_cast<size_t>(std::max<model::PhaseId>(max_id, 0)) <= 4 * n_all + 16) {
    g.node_of_dense_.assign(static_cast<size_t>(std::max<model::PhaseId>(max_id, 0)) + 1, -1);
    for (size_t pos = 0; pos < n_all; ++pos) {
      if (id_of[pos] > 0 && node_of_pos[pos] >= 0) g.node_of_dense_[static_cast<size_t>(id_of[pos])] = node_of_pos[pos];
    }
  } else {
    for (size_t pos = 0; pos < n_all; ++pos) {
      if (node_of_pos[pos] >= 0) g.node_of_sparse_.emplace(id_of[pos], node_of_pos[pos]);
    }
  }

  // The top level is a workflow's when it holds a step.
  for (int32_t c = g.child_begin(0); c < g.child_end(0); ++c) g.workflow = g.workflow || step[static_cast<size_t>(c)];
  std::vector<std::pair<int32_t, int32_t>> top_edges;
  SiblingEdges(run, *index, node_of_pos, g, top_edges);
  BuildLanes(g);
  BuildTopLevel(g, step, top_edges);
  return g;
}

Replay ReplaySchedule(const ScheduleGraph& g, const ReplayOptions& options) {
  Replay out;
  const size_t n = g.size();
  out.start.assign(n, 0);
  out.end.assign(n, 0);
  out.start_cause.assign(n, -1);
  out.start_by_slot.assign(n, 0);
  out.end_cause.assign(n, -1);
  out.jobs = options.jobs < 0 ? g.jobs : options.jobs;
  if (n == 0) return out;
  Replayer replayer(g, options.multiplier, out);
  if (!g.workflow) {
    replayer.Subtree(0, g.start[0]);
    return out;
  }
  const int32_t tb = g.child_begin(0);
  const double root_m = replayer.M(0);
  out.start[0] = g.start[0];
  SimulateTopLevel(
      g, out.jobs, g.start[0],
      [&](int32_t node, TimeNs t) {
        const size_t ni = static_cast<size_t>(node);
        DurationNs latency = replayer.M(node) == 0 ? 0 : Scale(g.latency[ni - static_cast<size_t>(tb)], root_m);
        replayer.Subtree(node, t + latency);
        return out.end[ni];
      },
      [&](int32_t node, int32_t by, bool by_slot) {
        out.start_cause[static_cast<size_t>(node)] = by;
        out.start_by_slot[static_cast<size_t>(node)] = by_slot ? 1 : 0;
      });
  if (g.has_children(0)) {
    replayer.End(0);
  } else {
    out.end[0] = out.start[0] + Scale(g.duration(0), root_m);
  }
  return out;
}

}  // namespace grademl::analysis
