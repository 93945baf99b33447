// HTA's analyses on the worked examples A-D of shared/design/hta-definitions.md: every
// expected figure is the document's (hand-checked there, and reproduced by HTA f4d0062), not
// this code's output.
#include "analysis/gpu_breakdown.h"

#include <gtest/gtest.h>

#include <cmath>

#include "analysis/gpu_example_traces.h"
#include "analysis/issues.h"

namespace grademl::analysis {
namespace {

using testing::ExampleA;
using testing::ExampleB;
using testing::ExampleC;
using testing::ExampleD;

constexpr double kUsEps = 1e-9;

const GpuKernelType* FindType(const GpuAnalysis& a, std::string_view type) {
  for (const auto& t : a.kernel_types) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

const GpuIdle* FindIdle(const GpuAnalysis& a, int64_t rank, int64_t stream, std::string_view category) {
  for (const auto& i : a.idle) {
    if (i.rank == rank && i.stream == stream && i.category == category) return &i;
  }
  return nullptr;
}

void ExpectTemporal(const GpuTemporal& t, double kernel, double idle, double compute, double non_compute,
                    double idle_pct, double compute_pct, double non_compute_pct) {
  EXPECT_NEAR(t.kernel_us, kernel, kUsEps);
  EXPECT_NEAR(t.idle_us, idle, kUsEps);
  EXPECT_NEAR(t.compute_us, compute, kUsEps);
  EXPECT_NEAR(t.non_compute_us, non_compute, kUsEps);
  EXPECT_DOUBLE_EQ(RoundHalfEven(t.idle_pct, 2), idle_pct);
  EXPECT_DOUBLE_EQ(RoundHalfEven(t.compute_pct, 2), compute_pct);
  EXPECT_DOUBLE_EQ(RoundHalfEven(t.non_compute_pct, 2), non_compute_pct);
}

void ExpectType(const GpuAnalysis& a, std::string_view type, double us, double pct) {
  const GpuKernelType* t = FindType(a, type);
  ASSERT_NE(t, nullptr) << type;
  EXPECT_NEAR(t->us, us, kUsEps) << type;
  EXPECT_DOUBLE_EQ(RoundHalfEven(t->pct, 1), pct) << type;
}

void ExpectIdle(const GpuAnalysis& a, int64_t rank, int64_t stream, std::string_view category, double us,
                double ratio) {
  const GpuIdle* i = FindIdle(a, rank, stream, category);
  ASSERT_NE(i, nullptr) << rank << " " << stream << " " << category;
  EXPECT_NEAR(i->us, us, kUsEps) << category;
  if (std::isnan(ratio)) {
    EXPECT_TRUE(std::isnan(i->ratio)) << category;
  } else {
    EXPECT_DOUBLE_EQ(RoundHalfEven(i->ratio, 2), ratio) << category;
  }
}

// Each worked example runs twice: on the row table directly, and on the same rows as a
// hand-built imported run through ExtractGpuRows (AnalyzeGpu).
class GpuExample : public ::testing::TestWithParam<bool> {
 protected:
  GpuAnalysis Analyze(const GpuRowTable& table, const GpuAnalysisOptions& options = {}) {
    return GetParam() ? AnalyzeGpu(testing::RunFromRows(table), options) : AnalyzeGpuRows(table, options);
  }
};
INSTANTIATE_TEST_SUITE_P(RowsAndRun, GpuExample, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "ThroughRun" : "Rows"; });

TEST(GpuClassifier, FollowsHtasRulesInOrder) {
  EXPECT_EQ(ClassifyKernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"), KernelClass::kCommunication);
  EXPECT_EQ(ClassifyKernel("ncclKernel_AllGather_RING_LL_Sum_int8_t"), KernelClass::kCommunication);
  EXPECT_EQ(ClassifyKernel("hipMemcpyAsync"), KernelClass::kCommunication);  // rule 1 before MEMORY
  EXPECT_EQ(ClassifyKernel("void foo_ncclKernel_bar"), KernelClass::kCommunication);
  EXPECT_EQ(ClassifyKernel("Memcpy HtoD (Pageable -> Device)"), KernelClass::kMemory);
  EXPECT_EQ(ClassifyKernel("Memset (Device)"), KernelClass::kMemory);
  EXPECT_EQ(ClassifyKernel("dma_copy"), KernelClass::kMemory);
  EXPECT_EQ(ClassifyKernel("sgemm_128x64_nn"), KernelClass::kComputation);
  EXPECT_EQ(ClassifyKernel("void ncclDevKernel_Generic"), KernelClass::kComputation);  // prefix before nccl
  EXPECT_EQ(ClassifyKernel("Stream Sync"), KernelClass::kOther);
  EXPECT_EQ(ClassifyKernel("Event Sync"), KernelClass::kOther);
  EXPECT_EQ(ClassifyKernel("Stream Wait Event"), KernelClass::kOther);
  EXPECT_EQ(ClassifyKernel("fmha_fwd_dmask_kernel"), KernelClass::kOther);  // "dma" in the middle
  EXPECT_EQ(ClassifyKernel("cudaLaunchKernel"), KernelClass::kOther);
  EXPECT_EQ(ClassifyKernel("runFunction_x"), KernelClass::kOther);
  EXPECT_EQ(ClassifyKernel("mycudaLaunchKernel"), KernelClass::kComputation);  // must start with cuda
  EXPECT_EQ(KernelClassName(KernelClass::kCommunication), "COMMUNICATION");
}

TEST(GpuRounding, NumpyHalfToEven) {
  EXPECT_DOUBLE_EQ(RoundHalfEven(0.125, 2), 0.12);
  EXPECT_DOUBLE_EQ(RoundHalfEven(0.375, 2), 0.38);
  EXPECT_DOUBLE_EQ(RoundHalfEven(2.5, 0), 2.0);
  EXPECT_DOUBLE_EQ(RoundHalfEven(100.0 * 15 / 270, 2), 5.56);
}

TEST_P(GpuExample, ATemporal) {
  GpuAnalysis a = Analyze(ExampleA());
  ASSERT_EQ(a.temporal.size(), 1u);
  EXPECT_EQ(a.temporal[0].rank, 0);
  ExpectTemporal(a.temporal[0], 270, 15, 150, 105, 5.56, 55.56, 38.89);
}

TEST_P(GpuExample, AKernelTypesWithMemory) {
  GpuAnalysis a = Analyze(ExampleA());
  ASSERT_EQ(a.kernel_types.size(), 4u);
  EXPECT_EQ(a.kernel_types[0].type, "COMMUNICATION");  // by time, descending
  ExpectType(a, "COMMUNICATION", 85, 34.7);
  ExpectType(a, "COMPUTATION", 80, 32.7);
  ExpectType(a, "COMPUTATION overlapping COMMUNICATION", 70, 28.6);
  ExpectType(a, "COMMUNICATION overlapping MEMORY", 10, 4.1);
}

TEST_P(GpuExample, AKernelTypesWithoutMemory) {
  GpuAnalysis a = Analyze(ExampleA(), {.include_memory_kernels = false});
  ASSERT_EQ(a.kernel_types.size(), 3u);
  ExpectType(a, "COMMUNICATION", 95, 38.8);
  ExpectType(a, "COMPUTATION", 80, 32.7);
  ExpectType(a, "COMPUTATION overlapping COMMUNICATION", 70, 28.6);
}

TEST_P(GpuExample, ACommCompOverlap) {
  GpuAnalysis a = Analyze(ExampleA());
  ASSERT_EQ(a.overlap.size(), 1u);
  EXPECT_DOUBLE_EQ(RoundHalfEven(a.overlap[0].comm_comp_overlap_pct, 2), 42.42);
}

TEST_P(GpuExample, AIdlePerStream) {
  GpuAnalysis a = Analyze(ExampleA());
  ExpectIdle(a, 0, 7, "host_wait", 50, 0.45);
  ExpectIdle(a, 0, 7, "kernel_wait", 10, 0.09);
  ExpectIdle(a, 0, 7, "other", 50, 0.45);
  ExpectIdle(a, 0, 20, "host_wait", 50, 1.0);
  ExpectIdle(a, 0, 20, "other", 0, 0.0);
  EXPECT_EQ(FindIdle(a, 0, 20, "kernel_wait"), nullptr);  // only categories that occur
  EXPECT_EQ(a.idle.size(), 5u);
}

TEST_P(GpuExample, ALaunchStats) {
  // Launch delays (kernel start - launch start), from the table: k1 10, k2 55, k3 30, k4 5,
  // k5 220, c1 10, c2 30 (s1 is a sync, not a kernel). Mean 360/7, median 30.
  GpuAnalysis a = Analyze(ExampleA());
  ASSERT_EQ(a.launch.size(), 1u);
  const auto& l = a.launch[0];
  EXPECT_EQ(l.kernels, 7);
  EXPECT_EQ(l.launched, 7);
  EXPECT_NEAR(l.delay_mean_us, 360.0 / 7, kUsEps);
  EXPECT_NEAR(l.delay_p50_us, 30, kUsEps);
  EXPECT_NEAR(l.delay_max_us, 220, kUsEps);
  EXPECT_EQ(l.delay_outliers, 1);  // k5, over 100 µs
  // Every launch call in the fixture lasts 5 µs; no kernel is shorter.
  EXPECT_EQ(l.short_kernels, 0);
}

TEST_P(GpuExample, ABoundAndExposedCommunication) {
  // GPU-wide idle gaps: [250, 260) before k4, launched at 255 (after the GPU drained: host
  // wait); [345, 350) before k5, launched at 130 (not). Communication alone: [140, 150),
  // [160, 200), [300, 335) = 85 of its 165 µs. Idle 15 of 270 (5.6 %): GPU-bound.
  GpuAnalysis a = Analyze(ExampleA());
  ASSERT_EQ(a.ranks.size(), 1u);
  const auto& r = a.ranks[0];
  EXPECT_NEAR(r.host_wait_us, 10, kUsEps);
  EXPECT_NEAR(r.comm_us, 165, kUsEps);
  EXPECT_NEAR(r.exposed_comm_us, 85, kUsEps);
  EXPECT_EQ(r.bound, "gpu");
}

TEST_P(GpuExample, BNsRoundingShrinksEventsToWholeMicroseconds) {
  GpuAnalysis a = Analyze(ExampleB());
  ASSERT_EQ(a.temporal.size(), 1u);
  ExpectTemporal(a.temporal[0], 9, 4, 5, 0, 44.44, 55.56, 0.0);
  ASSERT_EQ(a.kernel_types.size(), 1u);
  ExpectType(a, "COMPUTATION", 6, 100.0);  // the sweep skips the -1 interval
  ASSERT_EQ(a.overlap.size(), 1u);
  EXPECT_TRUE(std::isnan(a.overlap[0].comm_comp_overlap_pct));
  ExpectIdle(a, 0, 7, "kernel_wait", 4, 1.0);
  ExpectIdle(a, 0, 7, "other", 0, 0.0);
}

TEST_P(GpuExample, BWithoutRoundingIdleIsMuchLarger) {
  GpuAnalysis a = Analyze(ExampleB(), {.ns_rounding = false});
  ASSERT_EQ(a.temporal.size(), 1u);
  EXPECT_DOUBLE_EQ(RoundHalfEven(a.temporal[0].idle_pct, 1), 19.8);  // the document's figure
}

TEST_P(GpuExample, CTwoRanks) {
  GpuAnalysis a = Analyze(ExampleC());
  ASSERT_EQ(a.kernel_types.size(), 4u);
  ExpectType(a, "COMPUTATION", 40, 44.4);
  ExpectType(a, "COMMUNICATION", 20, 22.2);
  ExpectType(a, "COMPUTATION overlapping COMMUNICATION", 20, 22.2);
  ExpectType(a, "MEMORY", 10, 11.1);
  ASSERT_EQ(a.temporal.size(), 2u);
  EXPECT_EQ(a.temporal[0].rank, 0);
  EXPECT_NEAR(a.temporal[0].kernel_us, 50, kUsEps);
  EXPECT_DOUBLE_EQ(RoundHalfEven(a.temporal[0].idle_pct, 2), 0.0);
  EXPECT_DOUBLE_EQ(RoundHalfEven(a.temporal[0].compute_pct, 2), 60.0);
  EXPECT_DOUBLE_EQ(RoundHalfEven(a.temporal[0].non_compute_pct, 2), 40.0);
  EXPECT_EQ(a.temporal[1].rank, 1);
  EXPECT_DOUBLE_EQ(RoundHalfEven(a.temporal[1].idle_pct, 2), 20.0);
  EXPECT_DOUBLE_EQ(RoundHalfEven(a.temporal[1].compute_pct, 2), 60.0);
  EXPECT_DOUBLE_EQ(RoundHalfEven(a.temporal[1].non_compute_pct, 2), 20.0);
  ASSERT_EQ(a.overlap.size(), 2u);
  EXPECT_DOUBLE_EQ(RoundHalfEven(a.overlap[0].comm_comp_overlap_pct, 2), 50.0);
  EXPECT_TRUE(std::isnan(a.overlap[1].comm_comp_overlap_pct));
  ExpectIdle(a, 0, 7, "other", 0, NAN);
  ExpectIdle(a, 0, 9, "other", 0, NAN);
  ExpectIdle(a, 1, 7, "kernel_wait", 10, 1.0);
  ExpectIdle(a, 1, 7, "other", 0, 0.0);
}

TEST_P(GpuExample, DIterationFilterKeepsKernelsLaunchedBeforeTheLastStep) {
  GpuAnalysis a = Analyze(ExampleD());
  ASSERT_EQ(a.temporal.size(), 1u);
  ExpectTemporal(a.temporal[0], 160, 115, 45, 0, 71.88, 28.12, 0.0);
}

TEST_P(GpuExample, DHostBound) {
  // Kept rows [60, 70) (launched 50), [80, 85) (no launch), [190, 220) (launched 150). The
  // gap [85, 190) ends with a kernel launched at 150, after the GPU drained: 105 µs of host
  // wait in a span of 160; [70, 80) ends with a row without launch: not host wait.
  GpuAnalysis a = Analyze(ExampleD());
  ASSERT_EQ(a.ranks.size(), 1u);
  EXPECT_NEAR(a.ranks[0].host_wait_us, 105, kUsEps);
  EXPECT_EQ(a.ranks[0].bound, "host");
  EXPECT_NEAR(a.ranks[0].exposed_comm_us, 0, kUsEps);
}

TEST_P(GpuExample, DWithoutTheFilterEveryKernelCounts) {
  // All six GPU rows: span [60, 330) = 270, union 10+30+5+20+10+10 = 85.
  GpuAnalysis a = Analyze(ExampleD(), {.iteration_filter = false});
  ASSERT_EQ(a.temporal.size(), 1u);
  EXPECT_NEAR(a.temporal[0].kernel_us, 270, kUsEps);
  EXPECT_NEAR(a.temporal[0].idle_us, 185, kUsEps);
}

TEST(GpuCpuCollectives, GlooAllReduceOverlapsComputeOnAnotherThread) {
  // Main thread 1: ProfilerStep annotation [0, 100) enclosing an op that encloses the
  // collective call [10, 60) (both excluded), compute ops [20, 40) inside the collective
  // (excluded) and [70, 90). Gloo thread 2: gloo:all_reduce [50, 80). Comm = [10, 80) = 70;
  // comp = [70, 90) = 20; overlap [70, 80) = 10 -> 14.29 %.
  GpuRankRows r{.rank = 34};
  int64_t i = 0;
  auto add = [&](std::string name, std::string cat, double ts, double dur, int64_t tid) {
    r.rows.push_back({.index = i++, .name = name, .cat = cat, .ts_us = ts, .dur_us = dur, .tid = tid});
  };
  add("ProfilerStep#1", "user_annotation", 0, 100, 1);
  add("DistributedDataParallel.forward", "cpu_op", 5, 60, 1);
  add("c10d::allreduce_", "cpu_op", 10, 50, 1);
  add("aten::copy_", "cpu_op", 20, 20, 1);
  add("aten::mm", "cpu_op", 70, 20, 1);
  add("gloo:all_reduce", "user_annotation", 50, 30, 2);
  GpuAnalysis a = AnalyzeGpuRows({r});
  EXPECT_TRUE(a.temporal.empty());
  ASSERT_EQ(a.cpu_overlap.size(), 1u);
  const auto& c = a.cpu_overlap[0];
  EXPECT_EQ(c.rank, 34);
  EXPECT_EQ(c.collectives, 2);
  EXPECT_NEAR(c.comm_us, 70, kUsEps);
  EXPECT_NEAR(c.comp_us, 20, kUsEps);
  EXPECT_NEAR(c.overlap_us, 10, kUsEps);
  EXPECT_NEAR(c.comm_comp_overlap_pct, 100.0 * 10 / 70, 1e-9);
  EXPECT_FALSE(a.empty());
}

TEST(GpuAnalysisEmpty, NoRowsNoFigures) {
  GpuAnalysis a = AnalyzeGpuRows({});
  EXPECT_TRUE(a.empty());
  GpuRankRows host_only{.rank = 0};
  host_only.rows.push_back({.index = 0, .name = "aten::mm", .cat = "cpu_op", .ts_us = 0, .dur_us = 5});
  a = AnalyzeGpuRows({host_only});
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.ranks_without_kernels, std::vector<int64_t>{0});
}

}  // namespace
}  // namespace grademl::analysis

namespace grademl::analysis {
namespace {

TEST(GpuIssues, ExposedCommunicationInExampleA) {
  // Exposed communication 85 of 270 µs (31 %); host wait 10 (3.7 %, under the 5 % threshold).
  GpuAnalysis a = AnalyzeGpuRows(testing::ExampleA());
  a.ranks[0].phase = 42;
  auto issues = GpuIssues(a, /*run_s=*/0.001);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].kind, "gpu_exposed_communication");
  EXPECT_EQ(issues[0].phase, 42);
  EXPECT_NEAR(issues[0].impact_s, 85e-6, 1e-12);
  EXPECT_NEAR(issues[0].impact_fraction, 0.085, 1e-9);
  EXPECT_EQ(issues[0].change, "#42:communication=0");
  EXPECT_NE(issues[0].text.find("31%"), std::string::npos) << issues[0].text;
}

TEST(GpuIssues, HostWaitInExampleD) {
  // 105 of 160 µs idle waiting on launches: 66 %.
  GpuAnalysis a = AnalyzeGpuRows(testing::ExampleD());
  auto issues = GpuIssues(a, 0.001);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].kind, "gpu_host_wait");
  EXPECT_NEAR(issues[0].impact_s, 105e-6, 1e-12);
  EXPECT_NE(issues[0].text.find("idle 66% of the profiled steps"), std::string::npos) << issues[0].text;
  EXPECT_NE(issues[0].text.find("waiting on the host"), std::string::npos);
}

}  // namespace
}  // namespace grademl::analysis

namespace grademl::analysis {
namespace {

TEST(GpuWhatif, CommunicationFullyOverlapped) {
  // Example A as an imported run: the process phase's exposed communication is 85 µs
  // (COMMUNICATION alone in the document's kernel-type table); a host op inside the process
  // covering [100, 200) µs holds [140, 150) + [160, 200) = 50 µs of it; the AllGather kernel
  // [280, 335) its exposed part [300, 335) = 35 µs; the sgemm kernel none.
  model::Run run = testing::RunFromRows(testing::ExampleA());
  GpuAnalysis gpu = AnalyzeGpu(run);
  ASSERT_EQ(gpu.ranks.size(), 1u);
  const model::PhaseId process = gpu.ranks[0].phase;
  ASSERT_NE(process, 0);
  EXPECT_EQ(run.FindPhase(process)->leaf_type(), "process");
  Bottlenecks none;
  model::Phase op{.id = 1000, .parent = process, .name = "aten::mm", .type = "run/process/op",
                  .start_ns = 100'000, .end_ns = 200'000, .host = "node1", .pid = run.FindPhase(process)->pid};
  run.phases.push_back(op);
  run.Index();
  auto bound = BoundSecondsOf(none, run, &gpu);
  EXPECT_NEAR(bound(process, "communication"), 85e-6, 1e-12);
  EXPECT_NEAR(bound(run.Root()->id, "communication"), 85e-6, 1e-12);  // an ancestor: the whole rank
  EXPECT_NEAR(bound(1000, "communication"), 50e-6, 1e-12);
  model::PhaseId allgather = 0, sgemm = 0;
  for (const auto& p : run.phases) {
    if (p.name.starts_with("ncclKernel")) allgather = p.id;
    if (p.name.starts_with("sgemm")) sgemm = p.id;
  }
  ASSERT_NE(allgather, 0);
  EXPECT_NEAR(bound(allgather, "communication"), 35e-6, 1e-12);
  EXPECT_EQ(bound(sgemm, "communication"), 0.0);
  EXPECT_EQ(bound(process, "cpu"), 0.0);
}

}  // namespace
}  // namespace grademl::analysis

namespace grademl::analysis {
namespace {

TEST(GpuExtract, RuntimeCallsWithAStreamAreNotGpuRows) {
  // ROCm's runtime calls carry stream "0x0" (HTA: none), which the importer keeps as 0. Were
  // they GPU rows, example A's span would start at the first launch (90), not 100.
  model::Run run = testing::RunFromRows(testing::ExampleA());
  for (auto& p : run.phases) {
    if (p.name == "cudaLaunchKernel") p.tags.push_back({"stream", "0"});
  }
  GpuAnalysis a = AnalyzeGpu(run);
  ASSERT_EQ(a.temporal.size(), 1u);
  EXPECT_NEAR(a.temporal[0].kernel_us, 270, 1e-9);
  EXPECT_NEAR(a.temporal[0].idle_us, 15, 1e-9);
}

TEST(GpuExtract, RankAndRoundingFromTheSourceTags) {
  model::Run run = testing::RunFromRows(testing::ExampleB());
  GpuRowTable rows = ExtractGpuRows(run);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].ts_float);
  EXPECT_EQ(rows[0].rank, 0);
  EXPECT_EQ(rows[0].phase, 2);  // the process phase
  // 1000.4 µs read back from 1000400 ns is the same double a decimal parser gives.
  bool found = false;
  for (const auto& r : rows[0].rows) {
    if (r.name != "gemm_kernel") continue;
    found = true;
    EXPECT_EQ(r.ts_us, 1000.4);
    EXPECT_EQ(r.dur_us, 5.2);
  }
  EXPECT_TRUE(found);
  run.sources[0].tags = {{"rank", "5"}};
  rows = ExtractGpuRows(run);
  EXPECT_EQ(rows[0].rank, 5);
  EXPECT_FALSE(rows[0].ts_float);
}

}  // namespace
}  // namespace grademl::analysis
