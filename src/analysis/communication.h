// Communication between ranks of a distributed job (torch.distributed: collectives recorded
// by the auto-instrumentation, DDP's bucketed gradient all-reduce included; collectives of
// imported NCCL/gloo traces): per rank, the time in collectives, how much of it overlapped
// computation, and how much was spent waiting for the slowest peer (the k-th collective of
// a process group on each rank is the same operation: a rank's wait is how long after its
// own arrival the last peer arrived). The rank the others waited for most is the straggler.
// A pure function of the model; docs/engines.md describes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/run.h"

namespace grademl::analysis {

struct RankCommunication {
  int64_t rank = 0;
  std::string host;
  int32_t pid = 0;
  model::PhaseId process = 0;   // the rank's process phase
  int64_t collectives = 0;      // collective phases recorded on this rank
  int64_t bytes = 0;            // payload bytes of those collectives
  double comm_s = 0;            // union of the collectives' time
  double overlapped_s = 0;      // of comm_s, the time computation ran on the rank at once
  double overlap_pct = 0;       // 100 * overlapped_s / comm_s (0 when comm_s is 0)
  double wait_s = 0;            // of comm_s, waiting for the slowest peer to arrive
  double compute_s = 0;         // the rank's computation (forward, backward, optimizer)
  bool straggler = false;       // the rank the others waited for
};

// One kind of collective, over all ranks.
struct CollectiveKind {
  std::string name;             // "all_reduce", "broadcast", "barrier", "allreduce_bucket"...
  int64_t count = 0;
  int64_t bytes = 0;
  double total_s = 0;
};

struct CommunicationAnalysis {
  int64_t world_size = 0;
  std::vector<RankCommunication> ranks;   // by rank
  std::vector<CollectiveKind> kinds;      // the costliest first
  int64_t straggler_rank = -1;            // -1: none stands out
  double straggler_cost_s = 0;            // the others' mean wait caused by it
  bool empty() const { return ranks.empty(); }
};

// The communication of the distributed job(s) in a run (indexed). Empty without ranks.
CommunicationAnalysis AnalyzeCommunication(const model::Run& run);

}  // namespace grademl::analysis
