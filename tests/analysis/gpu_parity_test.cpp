// Parity of the GPU analyses with HolisticTraceAnalysis on the shared Kineto traces: each
// trace is read here by a test-only loader (zlib + nlohmann-json, HTA's own loading rules:
// rows with dur and cat, cat != "Trace"; args.stream / args.correlation; ts_float when any ts
// is a JSON float) and compared with HTA's results in shared/traces/kineto/hta_reference/
// within 0.1 percentage points. Skipped, with a message, where ../shared is absent (failed
// there under CI=true: tests/skip_or_fail.h).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "analysis/gpu_breakdown.h"
#include "analysis/gpu_trace_loader.h"
#include "skip_or_fail.h"

namespace grademl::analysis {
namespace {

using testing::LoadTrace;

double Num(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  return std::nan("");
}

class GpuParity : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuParity, AgreesWithHtaWithinATenthOfAPercentagePoint) {
  REQUIRE_SHARED_TRACES(kineto, "kineto");
  std::ifstream ref_file(kineto / "hta_reference" / (GetParam() + ".json"));
  ASSERT_TRUE(ref_file.good()) << "no HTA reference for " << GetParam();
  // The reference files write NaN, which is not JSON.
  std::string ref_text((std::istreambuf_iterator<char>(ref_file)), std::istreambuf_iterator<char>());
  for (size_t p; (p = ref_text.find("NaN")) != std::string::npos;) ref_text.replace(p, 3, "null");
  nlohmann::json ref = nlohmann::json::parse(ref_text);

  GpuAnalysis a = AnalyzeGpuRows({LoadTrace(kineto / (GetParam() + ".json.gz"))});

  // Temporal breakdown.
  ASSERT_EQ(a.temporal.size(), ref["temporal"].size());
  for (size_t i = 0; i < a.temporal.size(); ++i) {
    const auto& t = a.temporal[i];
    const auto& r = ref["temporal"][i];
    EXPECT_EQ(t.rank, r["rank"].get<int64_t>());
    double kernel = r["kernel_time(us)"].get<double>();
    EXPECT_NEAR(t.kernel_us, kernel, 0.001 * kernel);
    EXPECT_NEAR(t.idle_pct, r["idle_time_pctg"].get<double>(), 0.1);
    EXPECT_NEAR(t.compute_pct, r["compute_time_pctg"].get<double>(), 0.1);
    EXPECT_NEAR(t.non_compute_pct, r["non_compute_time_pctg"].get<double>(), 0.1);
    EXPECT_NEAR(100.0 * t.idle_us / kernel, 100.0 * r["idle_time(us)"].get<double>() / kernel, 0.1);
  }
  // Communication-computation overlap.
  ASSERT_EQ(a.overlap.size(), ref["overlap"].size());
  for (size_t i = 0; i < a.overlap.size(); ++i) {
    double expected = Num(ref["overlap"][i]["comp_comm_overlap_pctg"]);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(a.overlap[i].comm_comp_overlap_pct));
    } else {
      EXPECT_NEAR(a.overlap[i].comm_comp_overlap_pct, expected, 0.1);
    }
  }
  // Kernel-type table: every label HTA lists, with its share; no label HTA lacks.
  double ref_total = 0;
  for (const auto& r : ref["kernel_type"]) ref_total += r["sum"].get<double>();
  for (const auto& r : ref["kernel_type"]) {
    std::string type = r["kernel_type"].get<std::string>();
    auto it = std::find_if(a.kernel_types.begin(), a.kernel_types.end(), [&](const auto& k) { return k.type == type; });
    ASSERT_NE(it, a.kernel_types.end()) << type;
    EXPECT_NEAR(it->pct, r["percentage"].get<double>(), 0.1 + 0.05) << type;  // HTA rounds to 1 decimal
    EXPECT_NEAR(100.0 * it->us / ref_total, 100.0 * r["sum"].get<double>() / ref_total, 0.1) << type;
  }
  EXPECT_EQ(a.kernel_types.size(), ref["kernel_type"].size());
  // Idle time per stream (HTA gives it for rank 0 only): compared by idle_us, as a share of
  // the stream's idle time.
  if (ref["idle"].is_array()) {
    std::map<int64_t, double> stream_total;
    for (const auto& r : ref["idle"]) stream_total[r["stream"].get<int64_t>()] += r["idle_time"].get<double>();
    for (const auto& r : ref["idle"]) {
      int64_t stream = r["stream"].get<int64_t>();
      std::string category = r["idle_category"].get<std::string>();
      auto it = std::find_if(a.idle.begin(), a.idle.end(), [&](const GpuIdle& g) {
        return g.rank == r["rank"].get<int64_t>() && g.stream == stream && g.category == category;
      });
      ASSERT_NE(it, a.idle.end()) << stream << " " << category;
      double total = stream_total[stream];
      EXPECT_NEAR(100.0 * it->us / total, 100.0 * r["idle_time"].get<double>() / total, 0.1) << category;
      EXPECT_NEAR(it->ratio, r["idle_time_ratio"].get<double>(), 0.005 + 1e-9) << category;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SharedKinetoTraces, GpuParity,
                         ::testing::Values("gpu_train_control", "gpu_train_test", "gpu_ns_resolution_rank0"));

}  // namespace
}  // namespace grademl::analysis
