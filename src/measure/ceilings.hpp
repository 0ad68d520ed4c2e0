// The device's two ceilings, measured once and cached per device: the fp16 tensor-core rate (the
// fastest sample of cuBLASLt's heuristic algorithms on several large fp16 GEMMs, fp32 accumulation,
// graph mode) and the memory bandwidth (the fastest sample of a 2 GiB copy kernel, bytes read plus
// bytes written). Both are upper bounds, as a floor needs. The counted
// floor of a problem is max(FLOPs / peak, bytes / bandwidth): a time under it is a bug or a hack.
#pragma once
#include <cuda_runtime_api.h>

#include <nlohmann/json.hpp>
#include <string>

#include "gpu/device.hpp"

namespace kforge {

struct Ceilings {
  double tensor_tflops = 0;  // fp16 in, fp32 accumulate
  double bandwidth_gbs = 0;  // GB/s (1e9 bytes)
  std::string device_uuid, device_name, measured_at, method;
  int driver_version = 0;
};

Ceilings calibrate_ceilings(const DeviceInfo& dev, cudaStream_t s);
// Cached at ceilings_cache_path(dev); recalibrates when asked, when the cache is missing or
// unreadable, or when it was written for another device or driver.
Ceilings load_or_calibrate_ceilings(const DeviceInfo& dev, cudaStream_t s, bool recalibrate);
// $KFORGE_CACHE_DIR, else $XDG_CACHE_HOME/kforge, else $HOME/.cache/kforge.
std::string cache_dir();
std::string ceilings_cache_path(const DeviceInfo& dev);

double counted_floor_us(double flops, double bytes, const Ceilings& c);

nlohmann::json to_json(const Ceilings& c);
Ceilings ceilings_from_json(const nlohmann::json& j);

}  // namespace kforge
