// Dask: the tasks recorded by grademl's Dask scheduler plugin (python/grademl/dask_plugin.py,
// imported by src/importers/dask/), aggregated per task prefix (Dask's own grouping:
// "read-csv", "add", ...) and per worker: counts, compute / transfer / disk / deserialise
// time from each task's startstops (its child phases), bytes produced, and the slowest task
// against the median. Stragglers within a prefix come from the imbalance analysis (tasks
// carry the `group` tag). A pure function of the model; docs/engines.md describes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/run.h"

namespace grademl::analysis {

struct DaskPrefix {
  std::string prefix;
  int64_t tasks = 0;
  int64_t erred = 0;            // tasks that ended in error
  int64_t cancelled = 0;        // tasks cancelled while a worker had them (no compute recorded)
  int64_t workers = 0;          // distinct workers that ran them
  double compute_s = 0;         // sums over the tasks' startstops
  double transfer_s = 0;
  double disk_s = 0;            // disk-read + disk-write
  double deserialize_s = 0;
  int64_t nbytes = 0;           // bytes of the results
  double max_task_s = 0, median_task_s = 0;  // compute time per task (cancelled ones left out)
  model::PhaseId slowest_task = 0;           // the task with the most compute time
  double total_s() const { return compute_s + transfer_s + disk_s + deserialize_s; }
};

struct DaskWorker {
  std::string worker;           // address, "tcp://127.0.0.1:40331"
  std::string host;
  int32_t pid = 0;
  model::PhaseId process = 0;   // the worker's recorded process phase (0: not recorded)
  model::PhaseId phase = 0;     // the phase its tasks are under (the process, or a dask_worker phase)
  int64_t tasks = 0;
  int64_t erred = 0;
  int64_t cancelled = 0;
  double compute_s = 0, transfer_s = 0, disk_s = 0, deserialize_s = 0;
  int64_t nbytes = 0;           // bytes of the results it computed
  int64_t transfers_in = 0;     // transfers into this worker (fetching dependencies)
  int64_t transfer_bytes_in = 0;  // their bytes, where the log tells
};

struct DaskAnalysis {
  int64_t tasks = 0;
  int64_t erred = 0;
  int64_t cancelled = 0;        // tasks cancelled while a worker had them (tag state=cancelled)
  int64_t edges = 0;            // dependency edges between task phases (kind "dask")
  int64_t transfers = 0;        // transfers between workers (transfer phases)
  int64_t transfer_bytes = 0;   // their bytes, where the log tells
  double compute_s = 0, transfer_s = 0, disk_s = 0, deserialize_s = 0;
  std::vector<DaskPrefix> prefixes;  // the costliest (total_s) first
  std::vector<DaskWorker> workers;   // by address
  bool empty() const { return tasks == 0; }
};

// The Dask tasks of a run (indexed): phases of leaf type `task` tagged engine=dask. Empty
// when it has none.
DaskAnalysis AnalyzeDask(const model::Run& run);

}  // namespace grademl::analysis
