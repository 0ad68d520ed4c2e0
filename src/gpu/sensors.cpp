#include "gpu/sensors.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

namespace kforge {

namespace {
// The few NVML entry points used, declared by their documented C signatures (nvml.h is not part
// of the CUDA toolkit's runtime headers here). nvmlDevice_t is an opaque pointer; every call
// returns 0 (NVML_SUCCESS) on success.
using nvmlDevice_t = struct nvmlDevice_st*;
using InitFn = int (*)();
using ByPciFn = int (*)(const char*, nvmlDevice_t*);
using ClockFn = int (*)(nvmlDevice_t, int, unsigned*);
using PowerFn = int (*)(nvmlDevice_t, unsigned*);
using TempFn = int (*)(nvmlDevice_t, int, unsigned*);
using ReasonsFn = int (*)(nvmlDevice_t, unsigned long long*);
constexpr int kClockSm = 1;     // NVML_CLOCK_SM
constexpr int kTempGpu = 0;     // NVML_TEMPERATURE_GPU
}  // namespace

struct GpuSensors::Api {
  void* lib = nullptr;
  nvmlDevice_t dev = nullptr;
  ClockFn clock = nullptr;
  PowerFn power = nullptr;
  TempFn temp = nullptr;
  ReasonsFn reasons = nullptr;
};

std::string clock_reasons_text(uint64_t r) {
  // NVML's clock-event reason bits (nvmlClocksEventReason*).
  static const std::pair<uint64_t, const char*> names[] = {
      {0x1, "idle"},           {0x2, "application clocks"}, {0x4, "power cap"},
      {0x8, "hardware slowdown"}, {0x10, "sync boost"},        {0x20, "software thermal"},
      {0x40, "hardware thermal"}, {0x80, "power brake"},       {0x100, "display clocks"}};
  std::string s;
  for (const auto& [bit, name] : names)
    if (r & bit) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

GpuSensors::GpuSensors(int cuda_ordinal) {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    why_not_ = "libnvidia-ml.so.1 not found (the driver's management library)";
    return;
  }
  const auto sym = [&](const char* name) { return ::dlsym(lib, name); };
  auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
  auto by_pci = reinterpret_cast<ByPciFn>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
  auto a = std::make_unique<Api>();
  a->lib = lib;
  a->clock = reinterpret_cast<ClockFn>(sym("nvmlDeviceGetClockInfo"));
  a->power = reinterpret_cast<PowerFn>(sym("nvmlDeviceGetPowerUsage"));
  a->temp = reinterpret_cast<TempFn>(sym("nvmlDeviceGetTemperature"));
  a->reasons = reinterpret_cast<ReasonsFn>(sym("nvmlDeviceGetCurrentClocksEventReasons"));
  if (!a->reasons) a->reasons = reinterpret_cast<ReasonsFn>(sym("nvmlDeviceGetCurrentClocksThrottleReasons"));
  char bus[64] = {};
  if (!init || !by_pci || !a->clock || !a->power || !a->temp) {
    why_not_ = "libnvidia-ml.so.1 lacks an entry point this reader needs";
  } else if (init() != 0) {
    why_not_ = "nvmlInit failed";
  } else if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_ordinal) != cudaSuccess) {
    why_not_ = "the CUDA device's PCI bus id is unknown";
  } else if (by_pci(bus, &a->dev) != 0) {
    why_not_ = std::string("NVML does not know the device at ") + bus;
  } else {
    api_ = std::move(a);
    return;
  }
  ::dlclose(lib);  // nvmlShutdown is not called: init may have failed, and the library goes anyway
}

GpuSensors::~GpuSensors() = default;  // the library stays loaded: NVML keeps process-wide state

bool GpuSensors::available() const { return api_ != nullptr; }

GpuReading GpuSensors::read(bool with_temperature) const {
  GpuReading r;
  if (!api_) return r;
  unsigned mhz = 0, mw = 0;
  if (api_->clock(api_->dev, kClockSm, &mhz) != 0 || api_->power(api_->dev, &mw) != 0) return r;
  r.sm_mhz = mhz, r.power_mw = mw;
  unsigned long long why = 0;
  if (api_->reasons && api_->reasons(api_->dev, &why) == 0) r.reasons = why;
  unsigned t = 0;
  if (with_temperature && api_->temp(api_->dev, kTempGpu, &t) == 0) r.temp_c = t;
  r.ok = true;
  return r;
}

}  // namespace kforge
