#include "eval/devices.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>

#include "core/error.hpp"
#include "core/text.hpp"
#include "gpu/device.hpp"

namespace kforge {

std::vector<int> parse_devices(const std::string& spec_in) {
  const std::string spec(trim(spec_in));
  if (spec.empty()) return {};
  int count = -1;  // unknown: no GPU here (the workers will say so in their verdicts)
  if (!gpu_unavailable_reason()) {
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      count = -1;
    }
  }
  std::vector<int> out;
  if (spec == "all") {
    if (count < 1) KF_USAGE_ERROR("--devices all: no CUDA device is visible here");
    for (int d = 0; d < count; ++d) out.push_back(d);
    return out;
  }
  for (const std::string& part : split(spec, ',')) {
    const std::string p(trim(part));
    char* end = nullptr;
    const long d = p.empty() ? -1 : std::strtol(p.c_str(), &end, 10);
    if (p.empty() || *end != '\0' || d < 0 || d > 1023)
      KF_USAGE_ERROR("--devices: '%s' is not a device index (expected e.g. 0,1 or all)", p.c_str());
    if (std::find(out.begin(), out.end(), int(d)) != out.end())
      KF_USAGE_ERROR("--devices: device %ld is listed twice", d);
    if (count >= 0 && d >= count)
      KF_USAGE_ERROR("--devices: there is no device %ld (%d visible: 0..%d)", d, count, count - 1);
    out.push_back(int(d));
  }
  return out;
}

void require_default_device(const std::vector<int>& devices, const std::string& device) {
  if (!devices.empty() && device != "cuda")
    KF_USAGE_ERROR("--devices picks the GPUs itself: leave --device at cuda (got '%s')", device.c_str());
}

std::string device_env(int device) {
  const char* own = std::getenv("CUDA_VISIBLE_DEVICES");
  if (own && *own) {
    const std::vector<std::string> ids = split(own, ',');
    if (device >= 0 && size_t(device) < ids.size()) return "CUDA_VISIBLE_DEVICES=" + std::string(trim(ids[size_t(device)]));
  }
  return strf("CUDA_VISIBLE_DEVICES=%d", device);
}

}  // namespace kforge
