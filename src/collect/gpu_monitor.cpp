#include "collect/gpu_monitor.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

#include "model/metric_names.h"

namespace grademl::collect {

namespace metric = model::metric;
using nvml::NVML_SUCCESS;

namespace {

constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";

template <typename Fn>
Fn Symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(library, name));
}

void SetWhy(std::string* why, std::string reason) {
  if (why != nullptr) *why = std::move(reason);
}

}  // namespace

std::unique_ptr<GpuMonitor> GpuMonitor::Open(model::RunBuilder* builder, model::ResourceId host_resource,
                                             const std::string& host, const std::string& library,
                                             std::string* why) {
  std::string path = library;
  if (path.empty()) {
    const char* env = std::getenv("GRADEML_NVML_LIBRARY");
    path = (env != nullptr && *env != '\0') ? env : kDefaultLibrary;
  }

  // The monitor owns the handle from here on, so every early return cleans up.
  std::unique_ptr<GpuMonitor> monitor(new GpuMonitor(builder));
  ::dlerror();
  monitor->library_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (monitor->library_ == nullptr) {
    const char* err = ::dlerror();
    SetWhy(why, fmt::format("cannot load NVML: {}", err != nullptr ? err : path));
    return nullptr;
  }
  if (!monitor->Resolve(why)) return nullptr;

  nvml::nvmlReturn_t rc = monitor->init_();
  if (rc != NVML_SUCCESS) {
    SetWhy(why, fmt::format("nvmlInit_v2 failed: {}", monitor->ErrorString(rc)));
    return nullptr;
  }
  monitor->initialized_ = true;

  unsigned int count = 0;
  rc = monitor->get_count_(&count);
  if (rc != NVML_SUCCESS) {
    SetWhy(why, fmt::format("nvmlDeviceGetCount_v2 failed: {}", monitor->ErrorString(rc)));
    return nullptr;
  }

  // Gather first, declare afterwards: when no device is usable nothing is declared.
  struct Found {
    unsigned int index;
    nvml::nvmlDevice_t handle;
    std::string name;
    double memory_total;
    double power_limit;
  };
  std::vector<Found> found;
  std::string skipped;
  for (unsigned int i = 0; i < count; ++i) {
    nvml::nvmlDevice_t handle = nullptr;
    rc = monitor->get_handle_(i, &handle);
    if (rc != NVML_SUCCESS) {  // e.g. no permission for a device outside our cgroup
      skipped = fmt::format("gpu{}: {}", i, monitor->ErrorString(rc));
      continue;
    }
    Found f{i, handle, "", model::kNoCapacity, model::kNoCapacity};
    char name[nvml::kDeviceNameBufferSize] = {};
    if (monitor->get_name_ != nullptr && monitor->get_name_(handle, name, sizeof(name)) == NVML_SUCCESS) {
      name[sizeof(name) - 1] = '\0';
      f.name = name;
    }
    nvml::nvmlMemory_t memory{};
    if (monitor->get_memory_(handle, &memory) == NVML_SUCCESS && memory.total > 0)
      f.memory_total = static_cast<double>(memory.total);
    unsigned int limit_mw = 0;
    if (monitor->get_power_limit_ != nullptr && monitor->get_power_limit_(handle, &limit_mw) == NVML_SUCCESS &&
        limit_mw > 0)
      f.power_limit = static_cast<double>(limit_mw) / 1000.0;
    found.push_back(std::move(f));
  }
  if (found.empty()) {
    SetWhy(why, count == 0 ? std::string("NVML reports no GPU")
                           : fmt::format("no usable GPU among {} ({})", count, skipped));
    return nullptr;
  }

  for (const Found& f : found) {
    std::string resource_name = fmt::format("gpu{}", f.index);
    model::ResourceId r = builder->AddResource(
        {.parent = host_resource, .kind = model::ResourceKind::kGpu, .name = resource_name, .host = host});
    auto series = [&](std::string_view name, std::string_view unit, double capacity) {
      return builder->AddSeries({.resource = r,
                                 .name = std::string(name),
                                 .unit = std::string(unit),
                                 .kind = model::SeriesKind::kGauge,
                                 .capacity = capacity});
    };
    Device device;
    device.handle = f.handle;
    device.utilization = series(metric::kGpuUtilization, metric::kUnitFraction, 1);
    device.memory_used = series(metric::kGpuMemoryUsed, metric::kUnitBytes, f.memory_total);
    device.power = series(metric::kGpuPower, metric::kUnitWatts, f.power_limit);
    monitor->devices_.push_back(device);
    monitor->device_names_.push_back(f.name.empty() ? resource_name : resource_name + ": " + f.name);
  }
  return monitor;
}

bool GpuMonitor::Resolve(std::string* why) {
  init_ = Symbol<nvml::nvmlInit_v2_fn>(library_, "nvmlInit_v2");
  shutdown_ = Symbol<nvml::nvmlShutdown_fn>(library_, "nvmlShutdown");
  error_string_ = Symbol<nvml::nvmlErrorString_fn>(library_, "nvmlErrorString");
  get_count_ = Symbol<nvml::nvmlDeviceGetCount_v2_fn>(library_, "nvmlDeviceGetCount_v2");
  get_handle_ = Symbol<nvml::nvmlDeviceGetHandleByIndex_v2_fn>(library_, "nvmlDeviceGetHandleByIndex_v2");
  get_name_ = Symbol<nvml::nvmlDeviceGetName_fn>(library_, "nvmlDeviceGetName");
  get_utilization_ = Symbol<nvml::nvmlDeviceGetUtilizationRates_fn>(library_, "nvmlDeviceGetUtilizationRates");
  get_memory_ = Symbol<nvml::nvmlDeviceGetMemoryInfo_fn>(library_, "nvmlDeviceGetMemoryInfo");
  get_power_ = Symbol<nvml::nvmlDeviceGetPowerUsage_fn>(library_, "nvmlDeviceGetPowerUsage");
  get_power_limit_ = Symbol<nvml::nvmlDeviceGetEnforcedPowerLimit_fn>(library_, "nvmlDeviceGetEnforcedPowerLimit");

  const char* missing = init_ == nullptr              ? "nvmlInit_v2"
                        : shutdown_ == nullptr        ? "nvmlShutdown"
                        : get_count_ == nullptr       ? "nvmlDeviceGetCount_v2"
                        : get_handle_ == nullptr      ? "nvmlDeviceGetHandleByIndex_v2"
                        : get_utilization_ == nullptr ? "nvmlDeviceGetUtilizationRates"
                        : get_memory_ == nullptr      ? "nvmlDeviceGetMemoryInfo"
                        : get_power_ == nullptr       ? "nvmlDeviceGetPowerUsage"
                                                      : nullptr;
  if (missing != nullptr) {
    SetWhy(why, fmt::format("NVML library lacks {} (driver too old?)", missing));
    return false;
  }
  return true;
}

std::string GpuMonitor::ErrorString(nvml::nvmlReturn_t code) const {
  const char* text = error_string_ != nullptr ? error_string_(code) : nullptr;
  return text != nullptr ? fmt::format("{} (NVML error {})", text, code) : fmt::format("NVML error {}", code);
}

GpuMonitor::~GpuMonitor() {
  if (initialized_) shutdown_();
  if (library_ != nullptr) ::dlclose(library_);
}

void GpuMonitor::Sample(TimeNs now) {
  for (const Device& d : devices_) {
    nvml::nvmlUtilization_t utilization{};
    if (get_utilization_(d.handle, &utilization) == NVML_SUCCESS)
      builder_->AddSample(d.utilization, now, static_cast<double>(utilization.gpu) / 100.0);
    nvml::nvmlMemory_t memory{};
    if (get_memory_(d.handle, &memory) == NVML_SUCCESS)
      builder_->AddSample(d.memory_used, now, static_cast<double>(memory.used));
    unsigned int power_mw = 0;
    if (get_power_(d.handle, &power_mw) == NVML_SUCCESS)
      builder_->AddSample(d.power, now, static_cast<double>(power_mw) / 1000.0);
  }
}

}  // namespace grademl::collect
