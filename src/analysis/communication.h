// Communication between ranks of a distributed job (torch.distributed: collectives recorded
// by the auto-instrumentation, DDP's bucketed gradient all-reduce included; collectives of
// imported NCCL/gloo traces through the GPU analysis): per rank, the time in collectives, how
// much of it overlapped computation, and how much was spent waiting for the slowest peer (the
// k-th collective of a process group on each rank is the same operation: a rank's wait is how
// long after its own arrival the last peer arrived). The rank the others waited for most is
// the straggler.
//
// Definitions (docs/engines.md, "torch.distributed and DDP"):
//  - a rank is a process phase tagged `rank`; its collectives are the phases of leaf type
//    `collective` in it (any thread, child processes excluded); ranks form one job per `job`
//    tag (torchrun's run id or the rendezvous address) and workflow step, a rank repeating
//    starting another job;
//  - comm_s: the union of the rank's collectives' intervals;
//  - compute_s: the union of its computation phases (forward, backward, optimizer_step, loss,
//    module, op) on any thread, less the synchronous collectives (async=0) inside them (a
//    thread blocked in a collective does not compute), and less the end of a backward in
//    which DDP's buckets were reduced, from its last bucket's start to the buckets' last end
//    (DDP launches the last bucket once the last gradient is computed, then blocks backward
//    until all are reduced);
//  - overlapped_s: comm ∩ compute;
//  - wait_s: collectives are matched across the job's ranks by (process_group, channel,
//    seq); in a match whose last participant arrived (started) at L, a rank that arrived at a
//    waited [a, min(L, its end)]; wait_s is the union of those intervals (so wait ≤ comm);
//    the wait is caused by the last arriver;
//  - a collective still pending when its rank stopped (never ended, or ended by its process's
//    end: a job stopped by a signal) on every rank that entered it, where a rank that belongs
//    to it (the job's ranks for "world", the listed ranks of a group, a channel's two ends)
//    never entered it: those ranks never arrived; each rank that entered it waited from its
//    arrival until it stopped, caused by every rank that never came (never_joined);
//  - the straggler: the rank whose late arrivals made the others wait most (the sum over the
//    other ranks of the union of their waits it caused), when that is at least
//    kStragglerMinS and kStragglerFactor times the next rank's; its cost is that sum over
//    the other ranks, divided by their number (the others' mean wait caused by it).
// A pure function of the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/gpu_breakdown.h"
#include "model/run.h"

namespace grademl::analysis {

struct RankCommunication {
  int64_t rank = 0;
  size_t job = 0;               // index into CommunicationAnalysis::jobs
  std::string host;
  int32_t pid = 0;
  model::PhaseId process = 0;   // the rank's process phase
  std::string source;           // "events" (grademl's instrumentation) or "trace" (an imported trace)
  int64_t collectives = 0;      // collective phases recorded on this rank
  int64_t ddp_buckets = 0;      // of those, DDP's gradient bucket all-reduces
  int64_t bytes = 0;            // payload bytes of those collectives
  double comm_s = 0;            // union of the collectives' time
  double overlapped_s = 0;      // of comm_s, the time computation ran on the rank at once
  double overlap_pct = 0;       // 100 * overlapped_s / comm_s (0 when comm_s is 0)
  double wait_s = 0;            // of comm_s, waiting for the slowest peer to arrive
  bool wait_known = true;       // false for trace ranks: nothing to match their collectives with
  double compute_s = 0;         // the rank's computation (forward, backward, optimizer, ...)
  double caused_wait_s = 0;     // the other ranks' mean wait caused by this rank arriving last
  bool straggler = false;       // the rank the others waited for
};

// One kind of collective (the phase's name), over all ranks.
struct CollectiveKind {
  std::string name;             // "all_reduce", "broadcast", "barrier", ...
  int64_t count = 0;
  int64_t ddp_buckets = 0;      // of count, DDP's gradient bucket all-reduces
  int64_t bytes = 0;
  double total_s = 0;           // the sum of their durations
  double wait_s = 0;            // the sum of their waits for the last peer
};

// One distributed job: its ranks and its straggler.
struct CommunicationJob {
  std::string id;               // the `job` tag ("" when the ranks had none)
  int64_t world_size = 0;       // the ranks' world_size tag, else the number of ranks seen
  int64_t ranks = 0;            // ranks seen
  int64_t matched = 0;          // collectives matched across two or more of its ranks
  int64_t straggler_rank = -1;  // -1: none stands out
  model::PhaseId straggler_process = 0;
  double straggler_cost_s = 0;  // the others' mean wait caused by it
  double straggler_total_s = 0; // the others' waits caused by it, summed
  // Causality across the ranks' clocks: a collective of a process group cannot complete on
  // one rank before the last rank entered it. Matched collectives where a rank on one host
  // ended before the last arrival on another host by more than the two hosts' clock
  // uncertainties together (Host::clock_uncertainty_ns), and the largest such gap: clocks
  // misaligned beyond what was measured. Point-to-point messages are not checked (a send may
  // complete before its receive starts).
  int64_t clock_violations = 0;
  double max_clock_violation_s = 0;
  // Collectives its ranks were still waiting in when they stopped, for a rank of the job that
  // never entered them (a hung job stopped from outside); of those, the ones the straggler
  // never entered.
  int64_t never_joined = 0;
  int64_t straggler_never_joined = 0;
};

struct CommunicationAnalysis {
  int64_t world_size = 0;                 // of the job with the costliest straggler (else the first)
  std::vector<RankCommunication> ranks;   // by job, then rank
  std::vector<CollectiveKind> kinds;      // the costliest first
  std::vector<CommunicationJob> jobs;
  int64_t straggler_rank = -1;            // the costliest straggler of any job; -1: none
  double straggler_cost_s = 0;            // the others' mean wait caused by it
  bool empty() const { return ranks.empty(); }
};

struct CommunicationOptions {
  double straggler_min_s = 0.01;   // kStragglerMinS: a straggler's cost is at least this ...
  double straggler_factor = 2.0;   // ... and this many times the next rank's
};

// The communication of the distributed job(s) in a run (indexed). Empty without ranks. `gpu`
// (AnalyzeGpu), when given, adds the ranks of imported traces that grademl's instrumentation
// did not see (source "trace": their collectives, communication and overlap as the GPU
// analysis measured them; no wait).
CommunicationAnalysis AnalyzeCommunication(const model::Run& run, const GpuAnalysis* gpu = nullptr,
                                           const CommunicationOptions& options = {});

}  // namespace grademl::analysis
