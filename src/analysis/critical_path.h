// The critical path of a run: the chain of phases that determined its duration, and how
// much each workflow step could be delayed without delaying the run (its slack).
//
// Both come from a replay of the run's schedule (analysis/schedule_graph.h), so that the
// what-if simulation can give the same answers for a changed schedule.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/schedule_graph.h"
#include "core/time.h"
#include "model/run.h"

namespace grademl::analysis {

// One phase on the critical path.
struct CriticalLink {
  model::PhaseId id = 0;
  int depth = 0;          // 0: a top-level phase (a step, or a process of a single-command run)
  TimeNs start_ns = 0;    // in the schedule the path was traced in
  TimeNs end_ns = 0;
};

// The chain of phases that determined a run's end, top-down (pre-order): the top-level
// chain in time order, each link followed by the chain inside it that determined its end.
// The chain inside a phase starts at the child whose end determined the phase's end and
// goes back through what determined each start (the predecessor that ended last, a step's
// dependency or the step whose end freed its slot) to a child that started at its offset
// from its parent.
struct CriticalPath {
  std::vector<CriticalLink> links;
  bool truncated = false;  // links stopped at the limit

  // The ids of the depth-0 links (the steps on the path), in time order.
  std::vector<model::PhaseId> TopLevel() const;
};

// How much a top-level phase (a workflow step) could be delayed without delaying the run.
struct StepSlack {
  model::PhaseId id = 0;
  TimeNs earliest_start_ns = 0;  // its start in the schedule
  TimeNs latest_start_ns = 0;    // the latest start that keeps the end of the last step
  double slack_s = 0;            // latest - earliest
  bool critical = false;         // slack_s == 0
};

// How much of the critical path to list.
struct CriticalPathOptions {
  size_t max_links = 10000;  // stop listing links after this many (CriticalPath::truncated)
  int max_depth = -1;        // links deeper than this are left out; -1: no limit
};

// The critical path and step slack of a run as recorded (its baseline replay).
struct CriticalPathResult {
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;
  double makespan_s = 0;
  int jobs = 0;  // the step concurrency limit of the replay (0: unlimited, or no steps)
  CriticalPath path;
  std::vector<StepSlack> slack;  // per step, in start order; empty for a single-command run
};

// Computes the critical path of an indexed run. A run without phases gives an empty result.
CriticalPathResult FindCriticalPath(const model::Run& run, const CriticalPathOptions& options = {});
// The same from the run's schedule graph and its unchanged replay (ReplaySchedule(graph)),
// for callers that share them with other analyses (AnalyzeRun: the ranked issues).
CriticalPathResult FindCriticalPath(const ScheduleGraph& graph, const Replay& baseline,
                                    const CriticalPathOptions& options = {});

// The building blocks, for a replay of a changed schedule (analysis/whatif.h).
CriticalPath TraceCriticalPath(const ScheduleGraph& graph, const Replay& replay,
                               const CriticalPathOptions& options = {});
// Slack by the critical path method over the top-level phases of a workflow run: earliest
// starts are the replay's; an edge joins each step to its dependents and, where a step
// waited for a free slot (-j), to the step whose end freed it, so that the slot assignment
// of the replayed schedule is held fixed; each step keeps its launch latency. The latest
// start of a step is the latest that delays none of its successors' starts beyond their
// own latest starts and ends no later than the last step's end.
std::vector<StepSlack> ComputeStepSlack(const ScheduleGraph& graph, const Replay& replay);

}  // namespace grademl::analysis
