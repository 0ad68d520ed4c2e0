// What the current CUDA device is, and whether there is one.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kforge {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::string uuid;  // "GPU-xxxxxxxx-..." as nvidia-smi prints it
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t l2_bytes = 0;
  size_t mem_total = 0, mem_free = 0;
  size_t smem_per_block_optin = 0;
  int clock_khz = 0, mem_clock_khz = 0, mem_bus_bits = 0;
  int driver_version = 0, runtime_version = 0;  // e.g. 13000
  std::string arch() const;                     // "sm_90"
};

// Empty when a usable device exists; otherwise a one-line reason ("no CUDA driver", ...).
std::optional<std::string> gpu_unavailable_reason();
// Throws a runtime error with that reason when there is no usable device.
void require_gpu();
DeviceInfo query_device(int ordinal = 0);
std::string cuda_version_string(int v);  // 13000 -> "13.0"
nlohmann::json to_json(const DeviceInfo& d);

}  // namespace kforge
