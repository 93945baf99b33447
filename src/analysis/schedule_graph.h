// The run as a dependency graph that can be replayed with changed durations: the model
// behind the critical path and the what-if simulation (docs/whatif.md explains it in words).
//
// Two levels:
//  - The top level. In a workflow run (the root has "step" children) the root's children are
//    re-scheduled by list scheduling: a step is ready when the steps it depends on (the
//    run's edges between steps) have ended; ready steps start in their original start order
//    while fewer than `jobs` steps run (the root's tag jobs=N, the -j of `grademl run`).
//    Each step keeps its launch latency (the time from the moment it could start to its
//    recorded start). In a single-command run the root is replayed like any other phase.
//  - Within a phase. Each parent's children form two lanes: the program lane (what the
//    parent's own program did: its phases with its pid, a phase without pid counting as its
//    parent's; or, when it has none, the phases recognised in its output) and the process
//    lane (its child processes). A child follows the members of its own lane and of the
//    other lane that ended before it started (ties: the earlier in start order first), and
//    the siblings that explicit edges name. So a program's phases follow each other in
//    program order, a child process starts after the program's phases that ended before it
//    and after its earlier sibling processes, and the program waits for a child process
//    that ended before its next phase. Of those predecessors, the one that ended last in the
//    recording determines the start and keeps its gap (the time from its end to the start);
//    a child without predecessors keeps its offset from its parent's start. The others only
//    have to end before the child starts. A phase with children ends at the end of the
//    child that ended last in the recording plus the parent's tail after it, and not
//    before any other child ends; a phase without children keeps its duration.
//  - Background children: a child process that ran while the program lane had a phase
//    running (a data-loader worker, a helper the program did not wait for) is replayed after
//    the program lane's phases like the others, but nothing waits for it and it does not
//    hold its parent's end.
//
// Gaps, offsets, tails and leaf durations are the phase's "own time": the replay multiplies
// each phase's own time by that phase's multiplier. With all multipliers 1 and the recorded
// jobs limit, the replay reproduces every phase's start and end exactly.
//
// Phases recognised in a step's output (log rules) carry the step's shell's pid but were
// printed by the program it ran: each is replayed as a child of the process of its pid that
// was running when it started, going down through wrapper processes (those with only child
// processes) into the one child process running at that moment, so that scaling such
// phases changes the duration of the process that printed them. That program's own phases
// (auto-instrumented forward passes, say) that started within such a phase are replayed
// inside it: an epoch seen in the output then holds the work recorded during it.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/time.h"
#include "model/run.h"

namespace grademl::analysis {

// Process start times come from /proc in clock ticks, truncated: a process may appear to
// start up to one tick (10 ms at the usual 100 Hz) before the sibling it followed ended. And
// an exit is timed when the monitor's thread wakes on the pidfd, which on a loaded machine
// comes 10-20 ms late (seen on 2 cores under a parallel test run: `sleep 0.6; sleep 0.2`
// overlapped by 10.07 ms). Within this slack a process still counts as starting after that
// sibling.
inline constexpr DurationNs kProcessStartSlack = 30 * kNsPerMs;

// The replayable structure of one run; immutable once built. Nodes are the phases reachable
// from the root, in breadth-first order of the replay tree with each phase's children
// contiguous and sorted by (start, end, position in run.phases); node 0 is the root. Refers to the run's phases:
// the run must outlive the graph.
struct ScheduleGraph {
  // Builds the graph of an indexed run. A run without phases gives an empty graph.
  static ScheduleGraph Build(const model::Run& run);

  size_t size() const { return phase.size(); }
  bool empty() const { return phase.empty(); }
  int32_t child_begin(int32_t n) const { return child_first[static_cast<size_t>(n)]; }
  int32_t child_end(int32_t n) const { return child_first[static_cast<size_t>(n) + 1]; }
  bool has_children(int32_t n) const { return child_begin(n) != child_end(n); }
  DurationNs duration(int32_t n) const { return end[static_cast<size_t>(n)] - start[static_cast<size_t>(n)]; }
  model::PhaseId id(int32_t n) const { return phase[static_cast<size_t>(n)]->id; }
  // The node of a phase id, or -1 when the phase is not replayed (not under the root).
  int32_t NodeOf(model::PhaseId id) const;

  // Per node.
  std::vector<const model::Phase*> phase;
  std::vector<int32_t> parent;       // replay parent; -1 for the root
  std::vector<TimeNs> start, end;    // recorded (an open phase ends at the run's effective end)
  std::vector<int32_t> child_first;  // size() + 1 entries: children of n are [child_first[n], child_first[n+1])
  std::vector<uint8_t> process;      // a process phase (its start has the slack above)
  std::vector<uint8_t> background;   // nothing waits for the node (see above)
  std::vector<int32_t> lane;         // the node's lane among its siblings; -1: none (background)
  std::vector<int32_t> other_lane;   // the sibling lane it also follows; -1: none
  std::vector<int32_t> lane_first;   // size() + 1 entries: lanes of n's children are [lane_first[n], lane_first[n+1])
  std::vector<int32_t> pos_own;      // end of the node's predecessors in lane_members of its own lane
  std::vector<int32_t> pos_other;    // the same in its other lane
  std::vector<int32_t> det_pred;     // the predecessor that determined the start; -1: the parent's start
  std::vector<int32_t> det_child;    // the child that ended last; -1: no children
  std::vector<int32_t> edge_first;   // size() + 1 entries into edge_from: explicit sibling predecessors
  std::vector<int32_t> edge_from;
  // Per lane: its members sorted by (recorded end, node).
  std::vector<int32_t> lane_member_first;  // lanes + 1 entries
  std::vector<int32_t> lane_members;

  // The top level.
  bool workflow = false;           // the root's children are scheduled steps
  int recorded_jobs = 0;           // the root's jobs tag (0: none)
  int jobs = 0;                    // the limit the replay uses by default (0: unlimited)
  std::vector<uint8_t> takes_slot; // per top-level node (index: node - child_begin(0)): a step
  std::vector<DurationNs> latency; // per top-level node: launch latency
  std::vector<int32_t> dep_first;  // per top-level node + 1: into dep_from (dependencies, nodes)
  std::vector<int32_t> dep_from;
  std::vector<int32_t> succ_first; // per top-level node + 1: into succ_to (dependents, nodes)
  std::vector<int32_t> succ_to;

 private:
  std::vector<int32_t> node_of_dense_;  // phase id -> node when ids are dense
  std::unordered_map<model::PhaseId, int32_t> node_of_sparse_;  // otherwise
};

// What a replay changes: each node's own-time multiplier (empty: all 1; 0 removes the
// phase's own time, so a phase with all of its subtree at 0 takes no time) and the step
// concurrency limit.
struct ReplayOptions {
  std::span<const double> multiplier;  // per node
  int jobs = -1;                       // -1: the graph's; 0: unlimited
};

// The replayed schedule: new times per node and why each start and end fell where it did.
struct Replay {
  std::vector<TimeNs> start, end;
  // The sibling whose end determined the start; -1: the parent's start (or the run's start
  // for a top-level step without a dependency or a wait for a slot).
  std::vector<int32_t> start_cause;
  // For top-level nodes: 1 when the cause freed the slot the step waited for, 0 when it is
  // a dependency.
  std::vector<uint8_t> start_by_slot;
  // The child whose end determined the end; -1: the node's own duration.
  std::vector<int32_t> end_cause;
  int jobs = 0;  // the limit used (0: unlimited)
};

// Replays the graph. Linear in the number of phases (plus n log n over top-level steps).
Replay ReplaySchedule(const ScheduleGraph& graph, const ReplayOptions& options = {});

}  // namespace grademl::analysis
