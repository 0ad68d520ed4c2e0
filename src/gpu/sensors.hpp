// The GPU's clock, power and temperature as the driver's management library (NVML) reports them.
// NVML is opened at run time (dlopen of libnvidia-ml.so.1, which comes with the driver, not the
// toolkit): no header or link-time dependency, and a machine without it (no driver, a container
// without the library) reports nothing instead of failing. Only a process that runs no candidate
// code reads these (the judge): they describe the state the GPU was in while each side was timed.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace kforge {

struct GpuReading {
  bool ok = false;
  unsigned sm_mhz = 0;      // the SM clock now
  unsigned power_mw = 0;    // board power now (the driver's own averaging)
  unsigned temp_c = 0;      // GPU die temperature (only when asked for: the slowest read)
  uint64_t reasons = 0;     // why the clock is below its maximum now (NVML's clock-event bits)
};

// What a reading's reason bits say, in words ("power cap", "thermal", ...), "" for none.
std::string clock_reasons_text(uint64_t reasons);

class GpuSensors {
 public:
  // The device by its CUDA ordinal (matched to NVML by PCI bus id). Never throws.
  explicit GpuSensors(int cuda_ordinal);
  ~GpuSensors();
  GpuSensors(const GpuSensors&) = delete;
  GpuSensors& operator=(const GpuSensors&) = delete;
  bool available() const;
  // Why not, when !available() ("libnvidia-ml.so.1 not found", ...).
  const std::string& why_not() const { return why_not_; }
  GpuReading read(bool with_temperature = false) const;

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  std::string why_not_;
};

}  // namespace kforge
