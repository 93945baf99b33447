/* A stand-in for NVIDIA's libnvidia-ml.so: a test double for GPUs the test machines do not
 * have. GpuMonitor's tests dlopen() it instead of the real library.
 *
 * It exports the NVML entry points GpuMonitor uses, with the official C signatures, and
 * answers with fixed values:
 *   2 devices, "Fake GPU 0" and "Fake GPU 1";
 *   utilisation 37% and 80%;
 *   memory total 80 GiB / used 3 GiB, and 16 GiB / 512 MiB;
 *   power 123456 mW on both; enforced power limit 300000 mW on gpu0, NOT_SUPPORTED on gpu1.
 * Environment switches, read at each call:
 *   FAKE_NVML_FAIL_INIT=1     nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED;
 *   FAKE_NVML_DEVICE_COUNT=N  reports N devices (0..2) instead of 2;
 *   FAKE_NVML_FAIL_SAMPLE=1   utilisation and power of gpu1 fail with NVML_ERROR_GPU_IS_LOST.
 * fakeNvmlInitCount() tells tests whether every nvmlInit_v2 was matched by nvmlShutdown. */
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_GPU_IS_LOST 15

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;
typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

struct nvmlDevice_st {
  const char* name;
  unsigned int utilization;
  unsigned long long memory_total;
  unsigned long long memory_used;
  unsigned int power_mw;
  unsigned int power_limit_mw; /* 0: not supported */
};

static struct nvmlDevice_st devices[2] = {
    {"Fake GPU 0", 37, 80ULL << 30, 3ULL << 30, 123456, 300000},
    {"Fake GPU 1", 80, 16ULL << 30, 512ULL << 20, 123456, 0},
};
static int init_count = 0;

static int EnvIs(const char* name, const char* value) {
  const char* v = getenv(name);
  return v != NULL && strcmp(v, value) == 0;
}

static unsigned int DeviceCount(void) {
  const char* v = getenv("FAKE_NVML_DEVICE_COUNT");
  if (v == NULL) return 2;
  int n = atoi(v);
  return n < 0 ? 0 : n > 2 ? 2 : (unsigned int)n;
}

static int Valid(nvmlDevice_t device) { return device == &devices[0] || device == &devices[1]; }

int fakeNvmlInitCount(void) { return init_count; }

nvmlReturn_t nvmlInit_v2(void) {
  if (EnvIs("FAKE_NVML_FAIL_INIT", "1")) return NVML_ERROR_DRIVER_NOT_LOADED;
  ++init_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --init_count;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (deviceCount == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = DeviceCount();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == NULL || index >= DeviceCount()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &devices[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  if (!Valid(device) || name == NULL || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
  strncpy(name, device->name, length - 1);
  name[length - 1] = '\0';
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  if (!Valid(device) || utilization == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (device == &devices[1] && EnvIs("FAKE_NVML_FAIL_SAMPLE", "1")) return NVML_ERROR_GPU_IS_LOST;
  utilization->gpu = device->utilization;
  utilization->memory = device->utilization / 2;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (!Valid(device) || memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  memory->total = device->memory_total;
  memory->used = device->memory_used;
  memory->free = device->memory_total - device->memory_used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  if (!Valid(device) || power == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (device == &devices[1] && EnvIs("FAKE_NVML_FAIL_SAMPLE", "1")) return NVML_ERROR_GPU_IS_LOST;
  *power = device->power_mw;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* limit) {
  if (!Valid(device) || limit == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->power_limit_mw == 0) return NVML_ERROR_NOT_SUPPORTED;
  *limit = device->power_limit_mw;
  return NVML_SUCCESS;
}
