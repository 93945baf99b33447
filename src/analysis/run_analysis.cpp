#include "analysis/run_analysis.h"

namespace grademl::analysis {

RunAnalysis AnalyzeRun(const model::Run& run, const model::ExperimentGraph* graph) {
  RunAnalysis a;
  a.summary = SummarizeRun(run);
  a.bottlenecks = FindBottlenecks(run);
  a.imbalance = FindImbalance(run);
  a.core_use = FindCoreUse(run);
  a.gpu = AnalyzeGpu(run);
  a.spark = AnalyzeSpark(run);
  a.dask = AnalyzeDask(run);
  a.communication = AnalyzeCommunication(run, &a.gpu);
  a.fine_sampling = AnalyzeFineSampling(run);
  a.deep_profile = AnalyzeDeepProfile(run);
  a.reuse = AnalyzeReuse(run, graph != nullptr ? *graph : model::ExperimentGraph{});
  // One schedule graph and one replay of it for the critical path and the ranked issues
  // (whose what-if questions replay it with changes); built after the analyses that do not
  // need it, so that it is not held while they run.
  {
    const ScheduleGraph schedule = ScheduleGraph::Build(run);
    const Replay baseline = schedule.empty() ? Replay{} : ReplaySchedule(schedule);
    a.critical_path = FindCriticalPath(schedule, baseline);
    a.hosts = AnalyzeHosts(run, a.summary, a.critical_path);
    a.issues = RankIssues(run, a.bottlenecks, a.imbalance, a.critical_path, {}, &a.core_use, &a.gpu, &a.spark,
                          &a.communication, &a.hosts, &a.reuse, &schedule, &baseline);
  }
  return a;
}

}  // namespace grademl::analysis
