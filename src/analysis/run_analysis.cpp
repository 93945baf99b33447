#include "analysis/run_analysis.h"

namespace grademl::analysis {

RunAnalysis AnalyzeRun(const model::Run& run, const model::ExperimentGraph* graph) {
  RunAnalysis a;
  a.summary = SummarizeRun(run);
  a.bottlenecks = FindBottlenecks(run);
  a.imbalance = FindImbalance(run);
  a.critical_path = FindCriticalPath(run);
  a.core_use = FindCoreUse(run);
  a.gpu = AnalyzeGpu(run);
  a.spark = AnalyzeSpark(run);
  a.dask = AnalyzeDask(run);
  a.communication = AnalyzeCommunication(run, &a.gpu);
  a.hosts = AnalyzeHosts(run, a.summary, a.critical_path);
  a.fine_sampling = AnalyzeFineSampling(run);
  a.deep_profile = AnalyzeDeepProfile(run);
  a.reuse = AnalyzeReuse(run, graph != nullptr ? *graph : model::ExperimentGraph{});
  a.issues = RankIssues(run, a.bottlenecks, a.imbalance, a.critical_path, {}, &a.core_use, &a.gpu, &a.spark,
                        &a.communication, &a.hosts, &a.reuse);
  return a;
}

}  // namespace grademl::analysis
