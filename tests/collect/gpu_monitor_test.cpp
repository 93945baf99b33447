#include "collect/gpu_monitor.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>

#include "model/metric_names.h"

namespace grademl::collect {
namespace {

namespace m = model::metric;
using model::Resource;
using model::ResourceKind;
using model::RunBuilder;
using model::RunDelta;
using model::SeriesInfo;

// A real shared library exporting NVML's entry points with fixed values (see the file):
// a test double for the GPU this machine does not have.
const std::string kFakeNvml = std::string(GRADEML_BINARY_DIR) + "/tests/libfake_nvml.so";

// Sets an environment variable for the scope of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

class GpuMonitorTest : public ::testing::Test {
 protected:
  GpuMonitorTest() : builder_(model::RunInfo{}) {
    host_ = builder_.AddResource({.kind = ResourceKind::kHost, .name = "node1", .host = "node1"});
  }
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kFakeNvml))
        << kFakeNvml << " is missing: build the fake_nvml target along with collect_tests";
    // Hold the library ourselves to ask it whether inits and shutdowns balance.
    fake_ = ::dlopen(kFakeNvml.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(fake_, nullptr) << ::dlerror();
    init_count_ = reinterpret_cast<int (*)()>(::dlsym(fake_, "fakeNvmlInitCount"));
    ASSERT_NE(init_count_, nullptr);
  }
  void TearDown() override {
    if (fake_ != nullptr) ::dlclose(fake_);
  }

  RunBuilder builder_;
  model::ResourceId host_ = 0;
  void* fake_ = nullptr;
  int (*init_count_)() = nullptr;
};

const SeriesInfo* FindSeries(const RunDelta& d, model::ResourceId r, std::string_view name) {
  for (const auto& s : d.series)
    if (s.resource == r && s.name == name) return &s;
  return nullptr;
}

TEST_F(GpuMonitorTest, DeclaresOneResourcePerDeviceWithCapacities) {
  std::string why;
  auto monitor = GpuMonitor::Open(&builder_, host_, "node1", kFakeNvml, &why);
  ASSERT_NE(monitor, nullptr) << why;
  EXPECT_EQ(monitor->num_devices(), 2u);
  EXPECT_EQ(monitor->device_names(), (std::vector<std::string>{"gpu0: Fake GPU 0", "gpu1: Fake GPU 1"}));
  EXPECT_EQ(init_count_(), 1);

  RunDelta d = builder_.TakeDelta(/*final=*/true);
  std::vector<const Resource*> gpus;
  for (const auto& r : d.resources)
    if (r.kind == ResourceKind::kGpu) gpus.push_back(&r);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0]->name, "gpu0");
  EXPECT_EQ(gpus[1]->name, "gpu1");
  for (const Resource* g : gpus) {
    EXPECT_EQ(g->parent, host_);
    EXPECT_EQ(g->host, "node1");
  }
  EXPECT_EQ(d.series.size(), 6u);

  const SeriesInfo* util = FindSeries(d, gpus[0]->id, m::kGpuUtilization);
  ASSERT_NE(util, nullptr);
  EXPECT_EQ(util->unit, m::kUnitFraction);
  EXPECT_EQ(util->kind, model::SeriesKind::kGauge);
  EXPECT_EQ(util->capacity, 1);

  const SeriesInfo* mem0 = FindSeries(d, gpus[0]->id, m::kGpuMemoryUsed);
  ASSERT_NE(mem0, nullptr);
  EXPECT_EQ(mem0->unit, m::kUnitBytes);
  EXPECT_EQ(mem0->kind, model::SeriesKind::kGauge);
  EXPECT_EQ(mem0->capacity, 80.0 * (1 << 30));
  const SeriesInfo* mem1 = FindSeries(d, gpus[1]->id, m::kGpuMemoryUsed);
  ASSERT_NE(mem1, nullptr);
  EXPECT_EQ(mem1->capacity, 16.0 * (1 << 30));

  const SeriesInfo* power0 = FindSeries(d, gpus[0]->id, m::kGpuPower);
  ASSERT_NE(power0, nullptr);
  EXPECT_EQ(power0->unit, m::kUnitWatts);
  EXPECT_EQ(power0->kind, model::SeriesKind::kGauge);
  EXPECT_EQ(power0->capacity, 300.0);
  // gpu1's fake answers NOT_SUPPORTED for the power limit: no capacity.
  const SeriesInfo* power1 = FindSeries(d, gpus[1]->id, m::kGpuPower);
  ASSERT_NE(power1, nullptr);
  EXPECT_FALSE(power1->has_capacity());

  monitor.reset();
  EXPECT_EQ(init_count_(), 0) << "nvmlShutdown not called";
}

TEST_F(GpuMonitorTest, SamplesExactValues) {
  std::string why;
  auto monitor = GpuMonitor::Open(&builder_, host_, "node1", kFakeNvml, &why);
  ASSERT_NE(monitor, nullptr) << why;
  RunDelta declared = builder_.TakeDelta(/*final=*/true);
  monitor->Sample(42);
  RunDelta d = builder_.TakeDelta(/*final=*/true);

  std::map<std::string, double> got;  // "gpuN/series" -> value
  for (const auto& rec : d.samples) {
    EXPECT_EQ(rec.sample.t, 42);
    for (const auto& s : declared.series) {
      if (s.id != rec.series) continue;
      for (const auto& r : declared.resources)
        if (r.id == s.resource) got[r.name + "/" + s.name] = rec.sample.v;
    }
  }
  EXPECT_EQ(got.size(), 6u);
  EXPECT_EQ(got["gpu0/gpu.utilization"], 0.37);
  EXPECT_EQ(got["gpu1/gpu.utilization"], 0.80);
  EXPECT_EQ(got["gpu0/gpu.memory_used"], 3.0 * (1 << 30));
  EXPECT_EQ(got["gpu1/gpu.memory_used"], 512.0 * (1 << 20));
  EXPECT_EQ(got["gpu0/gpu.power"], 123.456);
  EXPECT_EQ(got["gpu1/gpu.power"], 123.456);
}

TEST_F(GpuMonitorTest, AFailingCallSkipsOnlyThatSample) {
  std::string why;
  auto monitor = GpuMonitor::Open(&builder_, host_, "node1", kFakeNvml, &why);
  ASSERT_NE(monitor, nullptr) << why;
  builder_.TakeDelta(/*final=*/true);
  ScopedEnv fail("FAKE_NVML_FAIL_SAMPLE", "1");  // gpu1 utilisation and power fail
  monitor->Sample(7);
  RunDelta d = builder_.TakeDelta(/*final=*/true);
  EXPECT_EQ(d.samples.size(), 4u);  // gpu0: 3, gpu1: memory only
}

TEST_F(GpuMonitorTest, LibraryFromEnvironment) {
  ScopedEnv env("GRADEML_NVML_LIBRARY", kFakeNvml.c_str());
  std::string why;
  auto monitor = GpuMonitor::Open(&builder_, host_, "node1", "", &why);
  ASSERT_NE(monitor, nullptr) << why;
  EXPECT_EQ(monitor->num_devices(), 2u);
}

TEST_F(GpuMonitorTest, MissingLibraryGivesNullAndAReason) {
  std::string why;
  auto monitor = GpuMonitor::Open(&builder_, host_, "node1", "/nonexistent/libnvidia-ml.so.1", &why);
  EXPECT_EQ(monitor, nullptr);
  EXPECT_NE(why.find("cannot load NVML"), std::string::npos) << why;
  EXPECT_NE(why.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << why;
  EXPECT_EQ(builder_.TakeDelta(/*final=*/true).resources.size(), 1u);  // the host only
}

TEST_F(GpuMonitorTest, LibraryWithoutNvmlSymbolsGivesNull) {
  std::string why;
  // libc is a loadable library that is not NVML.
  auto monitor = GpuMonitor::Open(&builder_, host_, "node1", "libc.so.6", &why);
  EXPECT_EQ(monitor, nullptr);
  EXPECT_NE(why.find("nvmlInit_v2"), std::string::npos) << why;
}

TEST_F(GpuMonitorTest, InitFailureGivesNullAndAReason) {
  ScopedEnv fail("FAKE_NVML_FAIL_INIT", "1");
  std::string why;
  auto monitor = GpuMonitor::Open(&builder_, host_, "node1", kFakeNvml, &why);
  EXPECT_EQ(monitor, nullptr);
  EXPECT_NE(why.find("nvmlInit_v2 failed"), std::string::npos) << why;
  EXPECT_NE(why.find("Driver Not Loaded"), std::string::npos) << why;
  EXPECT_EQ(init_count_(), 0);
  EXPECT_EQ(builder_.TakeDelta(/*final=*/true).resources.size(), 1u);
}

TEST_F(GpuMonitorTest, ZeroDevicesGivesNullAndShutsDown) {
  ScopedEnv none("FAKE_NVML_DEVICE_COUNT", "0");
  std::string why;
  auto monitor = GpuMonitor::Open(&builder_, host_, "node1", kFakeNvml, &why);
  EXPECT_EQ(monitor, nullptr);
  EXPECT_EQ(why, "NVML reports no GPU");
  EXPECT_EQ(init_count_(), 0) << "nvmlShutdown not called on the failure path";
  EXPECT_EQ(builder_.TakeDelta(/*final=*/true).resources.size(), 1u);
}

TEST_F(GpuMonitorTest, NullWhyIsAllowed) {
  EXPECT_EQ(GpuMonitor::Open(&builder_, host_, "node1", "/nonexistent.so", nullptr), nullptr);
}

}  // namespace
}  // namespace grademl::collect
