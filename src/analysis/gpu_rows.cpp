// ExtractGpuRows: the neutral row table of the GPU analyses (gpu_breakdown.h) from a
// model::Run. Until the model has tracks and sources (the ingestion foundation), a run has no
// imported trace events and the table is empty.
#include "analysis/gpu_breakdown.h"

namespace grademl::analysis {

GpuRowTable ExtractGpuRows(const model::Run& /*run*/) { return {}; }

GpuAnalysis AnalyzeGpu(const model::Run& run, const GpuAnalysisOptions& options) {
  return AnalyzeGpuRows(ExtractGpuRows(run), options);
}

}  // namespace grademl::analysis
