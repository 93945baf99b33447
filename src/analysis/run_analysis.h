// Every analysis of one run, computed together for the reports (`grademl report`, the
// HTML report): the summary, bottlenecks, imbalance, critical path, the ranked issues and the
// GPU analyses of imported traces, the engines' views (Spark, Dask, ranks) and, for a run
// across hosts, each host's part (analysis/hosts.h), and reuse across runs (analysis/reuse.h).
#pragma once

#include <vector>

#include "analysis/bottlenecks.h"
#include "analysis/communication.h"
#include "analysis/core_use.h"
#include "analysis/critical_path.h"
#include "analysis/dask_tasks.h"
#include "analysis/deep_profile.h"
#include "analysis/fine_sampling.h"
#include "analysis/gpu_breakdown.h"
#include "analysis/hosts.h"
#include "analysis/imbalance.h"
#include "analysis/issues.h"
#include "analysis/reuse.h"
#include "analysis/run_summary.h"
#include "analysis/spark_stages.h"
#include "model/experiment_graph.h"
#include "model/run.h"

namespace grademl::analysis {

// The results of all analyses of a run. Plain values; reports only render them.
struct RunAnalysis {
  RunSummary summary;
  Bottlenecks bottlenecks;
  std::vector<Imbalance> imbalance;
  CriticalPathResult critical_path;
  std::vector<Issue> issues;
  CoreUse core_use;  // threads, cores used and available per step and process
  GpuAnalysis gpu;   // imported GPU traces (HTA's breakdowns per rank); empty without them
  SparkAnalysis spark;                  // imported Spark event logs; empty without them
  DaskAnalysis dask;                    // Dask tasks; empty without them
  CommunicationAnalysis communication;  // ranks of distributed jobs; empty without them
  HostsAnalysis hosts;                  // a run across hosts; empty for a run on one host
  FineSampling fine_sampling;           // fine phases recorded on a sample of the iterations; empty without
  DeepProfile deep_profile;             // operators profiled on a sample of the iterations; empty without
  ReuseAnalysis reuse;                  // workflow steps restored or recomputed (docs/reuse.md); empty without step executions
};

// Runs every analysis on an indexed run. `graph` (the store's experiment graph, or only the
// executions with the keys of this run's steps) finds the steps that recomputed what an
// earlier run had; null: none is found, reused steps are still reported.
RunAnalysis AnalyzeRun(const model::Run& run, const model::ExperimentGraph* graph = nullptr);

}  // namespace grademl::analysis
