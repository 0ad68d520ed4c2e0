// The device's ceilings, measured once and cached per device, each the fastest sample seen (upper
// bounds, as a floor needs):
//   tensor_tflops       fp16 tensor-core rate: cuBLASLt's heuristic algorithms on several large fp16
//                       GEMMs (fp32 accumulation), graph mode;
//   bandwidth_gbs       device memory: the faster of a 2 GiB copy kernel (bytes read + written) and a
//                       2 GiB read kernel (pure streaming reads run faster than copies);
//   l2_bandwidth_gbs    a read kernel over a buffer a quarter of the L2 size, read again and again.
// The counted floor of a problem is max(FLOPs / peak, memory time), where the memory time lets at
// most `l2_resident_bytes` of the traffic come from L2 (warm-cache runs) and the rest from device
// memory. A time under the floor is a bug or a hack.
#pragma once
#include <cuda_runtime_api.h>

#include <nlohmann/json.hpp>
#include <string>

#include "gpu/device.hpp"

namespace kforge {

struct Ceilings {
  double tensor_tflops = 0;  // fp16 in, fp32 accumulate
  double bandwidth_gbs = 0;     // GB/s (1e9 bytes), device memory
  double l2_bandwidth_gbs = 0;  // GB/s, reads that hit L2
  std::string device_uuid, device_name, measured_at, method;
  int driver_version = 0;
};

Ceilings calibrate_ceilings(const DeviceInfo& dev, cudaStream_t s);
// Cached at ceilings_cache_path(dev); recalibrates when asked, when the cache is missing or
// unreadable, or when it was written for another device or driver.
Ceilings load_or_calibrate_ceilings(const DeviceInfo& dev, cudaStream_t s, bool recalibrate);
// Empty when a quick measurement (a 512 MiB copy, a large cuBLASLt GEMM) stays within the cached
// ceilings; otherwise which one it beat, and by how much: a cache that was lowered (by hand or by
// a hostile process) would lower every counted floor.
std::string ceilings_beaten(const Ceilings& c, const DeviceInfo& dev, cudaStream_t s);
// Writes `c` as the cached ceilings of `dev` (atomically).
void save_ceilings(const DeviceInfo& dev, const Ceilings& c);
// $KFORGE_CACHE_DIR, else $XDG_CACHE_HOME/kforge, else $HOME/.cache/kforge.
std::string cache_dir();
std::string ceilings_cache_path(const DeviceInfo& dev);

// `l2_resident_bytes`: how much of the traffic may be served by L2 (0 for cold or rotated inputs,
// the L2 size for warm back-to-back runs).
double counted_floor_us(double flops, double bytes, const Ceilings& c, double l2_resident_bytes = 0);

nlohmann::json to_json(const Ceilings& c);
Ceilings ceilings_from_json(const nlohmann::json& j);

}  // namespace kforge
