#include "analysis/critical_path.h"

#include <algorithm>
#include <limits>

namespace grademl::analysis {
namespace {

// The chain of children of p that determined p's end, in time order.
std::vector<int32_t> ChainInside(const Replay& replay, int32_t p) {
  std::vector<int32_t> chain;
  for (int32_t x = replay.end_cause[static_cast<size_t>(p)]; x >= 0; x = replay.start_cause[static_cast<size_t>(x)]) {
    chain.push_back(x);
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace

std::vector<model::PhaseId> CriticalPath::TopLevel() const {
  std::vector<model::PhaseId> ids;
  for (const CriticalLink& l : links) {
    if (l.depth == 0) ids.push_back(l.id);
  }
  return ids;
}

CriticalPath TraceCriticalPath(const ScheduleGraph& graph, const Replay& replay, const CriticalPathOptions& options) {
  CriticalPath path;
  if (graph.empty()) return path;
  // A chain being listed: the links of one level, each followed by the chain inside it.
  struct Frame {
    std::vector<int32_t> chain;
    size_t next = 0;
    int depth = 0;
  };
  std::vector<Frame> stack;
  stack.push_back({ChainInside(replay, 0), 0, 0});
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next == f.chain.size()) {
      stack.pop_back();
      continue;
    }
    int32_t x = f.chain[f.next++];
    int depth = f.depth;
    if (path.links.size() >= options.max_links) {
      path.truncated = true;
      break;
    }
    const size_t xi = static_cast<size_t>(x);
    path.links.push_back({graph.id(x), depth, replay.start[xi], replay.end[xi]});
    if ((options.max_depth < 0 || depth < options.max_depth) && graph.has_children(x)) {
      std::vector<int32_t> inner = ChainInside(replay, x);  // f may move: build first
      stack.push_back({std::move(inner), 0, depth + 1});
    }
  }
  return path;
}

std::vector<StepSlack> ComputeStepSlack(const ScheduleGraph& graph, const Replay& replay) {
  std::vector<StepSlack> slack;
  if (graph.empty() || !graph.workflow) return slack;
  const int32_t tb = graph.child_begin(0);
  const size_t m = static_cast<size_t>(graph.child_end(0) - tb);
  // Predecessors: dependencies, plus the step that freed the slot a step waited for.
  std::vector<std::vector<int32_t>> succ(m);
  std::vector<TimeNs> ready(m, replay.start[0]);  // the latest end among predecessors
  std::vector<int32_t> indeg(m, 0);
  auto add = [&](size_t from, size_t to) {
    succ[from].push_back(static_cast<int32_t>(to));
    ++indeg[to];
    ready[to] = std::max(ready[to], replay.end[from + static_cast<size_t>(tb)]);
  };
  for (size_t k = 0; k < m; ++k) {
    for (int32_t i = graph.dep_first[k]; i < graph.dep_first[k + 1]; ++i) {
      add(static_cast<size_t>(graph.dep_from[static_cast<size_t>(i)] - tb), k);
    }
    const size_t node = static_cast<size_t>(tb) + k;
    int32_t by = replay.start_cause[node];
    if (replay.start_by_slot[node] && by >= 0) add(static_cast<size_t>(by - tb), k);
  }
  TimeNs project_end = std::numeric_limits<TimeNs>::min();
  for (size_t k = 0; k < m; ++k) project_end = std::max(project_end, replay.end[static_cast<size_t>(tb) + k]);
  // Kahn's order, then latest starts backwards.
  std::vector<int32_t> order;
  order.reserve(m);
  for (size_t k = 0; k < m; ++k) {
    if (indeg[k] == 0) order.push_back(static_cast<int32_t>(k));
  }
  for (size_t i = 0; i < order.size(); ++i) {
    for (int32_t s : succ[static_cast<size_t>(order[i])]) {
      if (--indeg[static_cast<size_t>(s)] == 0) order.push_back(s);
    }
  }
  std::vector<TimeNs> latest(m, 0);
  for (size_t i = order.size(); i-- > 0;) {
    const size_t k = static_cast<size_t>(order[i]);
    const size_t node = static_cast<size_t>(tb) + k;
    TimeNs lf = project_end;
    for (int32_t s : succ[k]) {
      const size_t sn = static_cast<size_t>(tb + s);
      TimeNs latency = replay.start[sn] - ready[static_cast<size_t>(s)];
      lf = std::min(lf, latest[static_cast<size_t>(s)] - latency);
    }
    latest[k] = lf - (replay.end[node] - replay.start[node]);
  }
  slack.reserve(m);
  for (size_t k = 0; k < m; ++k) {
    const size_t node = static_cast<size_t>(tb) + k;
    StepSlack s;
    s.id = graph.id(static_cast<int32_t>(node));
    s.earliest_start_ns = replay.start[node];
    s.latest_start_ns = std::max(latest[k], replay.start[node]);
    s.slack_s = NsToSeconds(s.latest_start_ns - s.earliest_start_ns);
    s.critical = s.latest_start_ns == s.earliest_start_ns;
    slack.push_back(s);
  }
  return slack;
}

CriticalPathResult FindCriticalPath(const model::Run& run, const CriticalPathOptions& options) {
  ScheduleGraph graph = ScheduleGraph::Build(run);
  if (graph.empty()) return {};
  return FindCriticalPath(graph, ReplaySchedule(graph), options);
}

CriticalPathResult FindCriticalPath(const ScheduleGraph& graph, const Replay& replay,
                                    const CriticalPathOptions& options) {
  CriticalPathResult result;
  if (graph.empty()) return result;
  result.start_ns = replay.start[0];
  result.end_ns = replay.end[0];
  result.makespan_s = NsToSeconds(result.end_ns - result.start_ns);
  result.jobs = replay.jobs;
  result.path = TraceCriticalPath(graph, replay, options);
  result.slack = ComputeStepSlack(graph, replay);
  return result;
}

}  // namespace grademl::analysis
