// The handful of NVML declarations GpuMonitor uses, copied from NVIDIA's nvml.h (C API).
//
// GradeML never links against NVML: the library is dlopen()ed at run time and these
// types describe the function pointers looked up in it. Only what we call is declared.
#pragma once

namespace grademl::collect::nvml {

extern "C" {

// nvmlReturn_t is a C enum in nvml.h; only success (0) matters to us.
typedef int nvmlReturn_t;
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;

typedef struct nvmlDevice_st* nvmlDevice_t;

// Percent of time over the driver's last sample period that the GPU (resp. its memory)
// was busy.
typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

// Bytes.
typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

// NVML_DEVICE_NAME_V2_BUFFER_SIZE.
inline constexpr unsigned int kDeviceNameBufferSize = 96;

typedef nvmlReturn_t (*nvmlInit_v2_fn)(void);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t result);
typedef nvmlReturn_t (*nvmlDeviceGetCount_v2_fn)(unsigned int* deviceCount);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int index, nvmlDevice_t* device);
typedef nvmlReturn_t (*nvmlDeviceGetName_fn)(nvmlDevice_t device, char* name, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t device, nvmlUtilization_t* utilization);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t device, nvmlMemory_t* memory);
// Milliwatts.
typedef nvmlReturn_t (*nvmlDeviceGetPowerUsage_fn)(nvmlDevice_t device, unsigned int* power);
typedef nvmlReturn_t (*nvmlDeviceGetEnforcedPowerLimit_fn)(nvmlDevice_t device, unsigned int* limit);

}  // extern "C"

}  // namespace grademl::collect::nvml
