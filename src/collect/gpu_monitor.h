// GpuMonitor: samples NVIDIA GPUs (utilisation, memory used, power draw) through NVML and
// declares one kGpu resource per device under a host resource of the run.
//
// NVML is loaded at run time with dlopen(), never linked, so grademl runs unchanged on hosts
// without an NVIDIA driver: Open() then returns nullptr with a reason for the log. Devices
// are named "gpu0", "gpu1", ... by NVML index (resource names stay short); the marketing
// names NVML reports ("NVIDIA H100 80GB HBM3") are kept in device_names() for logs.
//
// Not thread-safe: Sample() is called from one sampling thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collect/nvml_api.h"
#include "core/time.h"
#include "model/run_builder.h"

namespace grademl::collect {

class GpuMonitor {
 public:
  // Loads NVML (library path: argument if non-empty, else $GRADEML_NVML_LIBRARY, else
  // "libnvidia-ml.so.1"), nvmlInit_v2, enumerates devices, declares one kGpu resource per
  // device ("gpu0", ...) with series gpu.utilization (fraction, capacity 1), gpu.memory_used
  // (bytes, capacity total) and gpu.power (W, capacity = enforced power limit when available).
  // No library, no driver, init failure or zero devices -> nullptr and *why set (a short
  // reason for logs). Never an error, never a crash. `why` may be null.
  static std::unique_ptr<GpuMonitor> Open(model::RunBuilder* builder, model::ResourceId host_resource,
                                          const std::string& host, const std::string& library,
                                          std::string* why);

  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;
  ~GpuMonitor();  // nvmlShutdown, dlclose

  // One sampling pass. A call that fails for one device skips that one sample.
  void Sample(TimeNs now);

  size_t num_devices() const { return devices_.size(); }
  // "gpu0: NVIDIA H100 80GB HBM3", one per device, for logs.
  const std::vector<std::string>& device_names() const { return device_names_; }

 private:
  struct Device {
    nvml::nvmlDevice_t handle = nullptr;
    model::SeriesId utilization = 0;
    model::SeriesId memory_used = 0;
    model::SeriesId power = 0;
  };

  explicit GpuMonitor(model::RunBuilder* builder) : builder_(builder) {}
  // Looks up the NVML entry points; false with *why set when one is missing.
  bool Resolve(std::string* why);
  std::string ErrorString(nvml::nvmlReturn_t code) const;

  model::RunBuilder* builder_;
  void* library_ = nullptr;   // dlopen handle
  bool initialized_ = false;  // nvmlInit_v2 succeeded: shut down on destruction
  std::vector<Device> devices_;
  std::vector<std::string> device_names_;

  nvml::nvmlInit_v2_fn init_ = nullptr;
  nvml::nvmlShutdown_fn shutdown_ = nullptr;
  nvml::nvmlErrorString_fn error_string_ = nullptr;  // optional
  nvml::nvmlDeviceGetCount_v2_fn get_count_ = nullptr;
  nvml::nvmlDeviceGetHandleByIndex_v2_fn get_handle_ = nullptr;
  nvml::nvmlDeviceGetName_fn get_name_ = nullptr;  // optional
  nvml::nvmlDeviceGetUtilizationRates_fn get_utilization_ = nullptr;
  nvml::nvmlDeviceGetMemoryInfo_fn get_memory_ = nullptr;
  nvml::nvmlDeviceGetPowerUsage_fn get_power_ = nullptr;
  nvml::nvmlDeviceGetEnforcedPowerLimit_fn get_power_limit_ = nullptr;  // optional
};

}  // namespace grademl::collect
