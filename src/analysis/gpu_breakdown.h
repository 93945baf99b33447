// GPU and communication analyses of imported framework traces (PyTorch/Kineto), per rank,
// with the definitions HolisticTraceAnalysis (HTA) uses (docs/gpu.md): the temporal
// breakdown, the idle-time breakdown per stream, the kernel-type breakdown over all ranks and
// the communication-computation overlap; plus kernel launch statistics and, where HTA is
// blind, the overlap of CPU-only (gloo) collectives with computation on the CPU threads.
//
// The analyses are pure functions of a neutral row table (GpuRowTable: one row per complete
// event of a rank's trace, as HTA's dataframe holds it); ExtractGpuRows builds that table from
// a model::Run (phases on device tracks and the launches on thread tracks, tags cat/stream/
// correlation, the Source's rank and ts_float tags). Nothing here prints.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/run.h"

namespace grademl::analysis {

// One complete event of a rank's trace: a kernel, memcpy, memset, sync on a GPU stream, or a
// host event (CPU op, runtime call, annotation).
struct GpuTraceRow {
  int64_t index = 0;         // position in the rank's trace (file order); HTA's `index`
  std::string name;
  std::string cat;
  double ts_us = 0;          // as the trace wrote it, in µs (correctly rounded to double)
  double dur_us = 0;
  int64_t stream = -1;       // args.stream; -1 when absent or not numeric (host events)
  int64_t correlation = -1;  // args.correlation; -1 when absent
  int64_t tid = 0;           // host thread of a host event (the CPU-only overlap groups by it)
};

// The rows of one rank (one trace file).
struct GpuRankRows {
  int64_t rank = 0;
  model::PhaseId phase = 0;  // the process phase the trace's events lie under (0: unknown)
  bool ts_float = false;  // some ts written as a JSON float: HTA rounds every event to whole µs
  std::vector<GpuTraceRow> rows;
};
using GpuRowTable = std::vector<GpuRankRows>;

// HTA's knobs, at HTA's defaults.
struct GpuAnalysisOptions {
  bool include_memory_kernels = true;        // MEMORY is a class of the kernel-type table
  bool ns_rounding = true;                   // round ts_float ranks to whole µs (HTA_DISABLE_NS_ROUNDING unset)
  bool iteration_filter = true;              // drop the last ProfilerStep and kernels launched outside the steps
  double consecutive_kernel_delay_us = 30;   // idle gaps shorter than this are kernel_wait
  double launch_delay_outlier_us = 100;      // launch stats: a launch delay above this is an outlier
  double runtime_outlier_us = 50;            // launch stats: a runtime call longer than this is an outlier
  double gpu_bound_max_idle_pct = 10;        // a rank whose GPU idled at most this much is GPU-bound
  double host_bound_min_wait_pct = 10;       // ... and host-bound when it idled this much waiting on launches
  double issue_min_pct = 5;                  // GPU issues: at least this share of the rank's GPU span
};

// HTA's kernel classes (get_kernel_type), by the kernel's full name.
enum class KernelClass { kCommunication, kMemory, kComputation, kOther };
KernelClass ClassifyKernel(std::string_view name);
std::string_view KernelClassName(KernelClass k);  // "COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER"

// Temporal breakdown of one rank: the span from the first kernel start to the last kernel end
// over all streams (kernel_us), split into idle (no stream busy), compute (COMPUTATION
// kernels running) and non-compute (other busy time). Percentages of kernel_us, unrounded.
struct GpuTemporal {
  int64_t rank = 0;
  double idle_us = 0, compute_us = 0, non_compute_us = 0, kernel_us = 0;
  double idle_pct = 0, compute_pct = 0, non_compute_pct = 0;
};
// Share of communication kernel time that overlaps computation kernels; NaN when the rank
// ran no communication kernel.
struct GpuOverlap {
  int64_t rank = 0;
  double comm_comp_overlap_pct = 0;
};
// A row of the kernel-type table over all ranks: `type` as HTA spells it ("COMPUTATION",
// "COMPUTATION overlapping COMMUNICATION", ...), its time and share of the table's total.
struct GpuKernelType {
  std::string type;
  double us = 0;
  double pct = 0;
};
// Idle time of one stream in one category ("host_wait", "kernel_wait", "other") and its
// share of the stream's idle time (NaN when the stream had none).
struct GpuIdle {
  int64_t rank = 0;
  int64_t stream = 0;
  std::string category;
  double us = 0;
  double ratio = 0;
};
// Kernel launch statistics of one rank: launch delay = kernel start - start of the host
// runtime call that launched it (paired by correlation); a short kernel ran for less time
// than the runtime call that launched it took on the host.
struct GpuLaunchStats {
  int64_t rank = 0;
  int64_t kernels = 0;           // kernels, memcpys and memsets on streams
  int64_t launched = 0;          // those with a host launch event
  double delay_mean_us = 0, delay_p50_us = 0, delay_p95_us = 0, delay_max_us = 0;
  int64_t delay_outliers = 0;    // launch delay > options.launch_delay_outlier_us
  int64_t runtime_outliers = 0;  // runtime call > options.runtime_outlier_us
  int64_t short_kernels = 0;     // kernel shorter than its runtime call
  double short_kernel_us = 0;    // their total kernel time
};
// CPU-only collectives (gloo), where HTA sees no kernel: communication = the union of the
// collectives' intervals on the host threads, computation = the union of the CPU ops that
// neither run inside nor enclose a collective of their thread.
struct CpuCommOverlap {
  int64_t rank = 0;
  model::PhaseId phase = 0;  // GpuRankRows::phase
  int64_t collectives = 0;
  double comm_us = 0, comp_us = 0, overlap_us = 0;
  double comm_comp_overlap_pct = 0;  // NaN when comm_us is 0
};

// What limited one rank's GPU, and what fully overlapping its communication would save.
struct GpuRankSummary {
  int64_t rank = 0;
  model::PhaseId phase = 0;    // GpuRankRows::phase
  double kernel_us = 0;        // the temporal breakdown's span
  double idle_us = 0;          // no stream busy
  // Of idle_us: gaps after which the next kernel was launched by the host only after the GPU
  // had gone idle (the GPU-wide counterpart of the per-stream host_wait).
  double host_wait_us = 0;
  double comm_us = 0;          // union of the communication kernels
  int64_t comm_kernels = 0;    // the communication kernels
  // Communication running while no other kernel ran: what overlapping communication fully
  // with other work would take off the GPU's timeline (the what-if lever
  // `communication_overlapped`).
  double exposed_comm_us = 0;
  std::vector<std::pair<double, double>> exposed_comm_intervals_us;  // [start, end) in the rows' µs
  // "gpu": idle at most gpu_bound_max_idle_pct of the span; "host": idle waiting on launches
  // at least host_bound_min_wait_pct; "mixed": the GPU idled, for other reasons (syncs,
  // dependencies, communication waits) or for several.
  std::string bound;
  double host_wait_pct() const { return kernel_us > 0 ? 100.0 * host_wait_us / kernel_us : 0; }
  double exposed_comm_pct() const { return kernel_us > 0 ? 100.0 * exposed_comm_us / kernel_us : 0; }
};

struct GpuAnalysis {
  std::vector<GpuTemporal> temporal;          // per rank, by rank
  std::vector<GpuOverlap> overlap;            // per rank
  std::vector<GpuKernelType> kernel_types;    // over all ranks, by time descending
  std::vector<GpuIdle> idle;                  // per rank and stream (by number): host_wait, kernel_wait, other
  std::vector<GpuLaunchStats> launch;         // per rank
  std::vector<CpuCommOverlap> cpu_overlap;    // per rank with CPU collectives
  std::vector<GpuRankSummary> ranks;          // per rank with kernels: bound and what-if
  std::vector<int64_t> ranks_without_kernels; // ranks with rows but no kernel after the iteration filter
  bool empty() const { return temporal.empty() && cpu_overlap.empty(); }
};

// The analyses on a row table.
GpuAnalysis AnalyzeGpuRows(const GpuRowTable& table, const GpuAnalysisOptions& options = {});

// The row table of a run: per imported Source with device-track phases or CPU collectives
// (rank from the Source's `rank` tag, 0 when absent; a later Source with the same rank
// replaces an earlier one, as HTA does), its phases that were trace events with a duration.
GpuRowTable ExtractGpuRows(const model::Run& run);

// ExtractGpuRows then AnalyzeGpuRows.
GpuAnalysis AnalyzeGpu(const model::Run& run, const GpuAnalysisOptions& options = {});

// numpy's round(x, decimals): half to even on x * 10^decimals (HTA rounds its figures so).
double RoundHalfEven(double x, int decimals);

}  // namespace grademl::analysis
