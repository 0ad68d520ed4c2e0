#include "eval/devices.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

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

std::string device_env(int device) {
  const char* own = std::getenv("CUDA_VISIBLE_DEVICES");
  if (own && *own) {
    const std::vector<std::string> ids = split(own, ',');
    if (device >= 0 && size_t(device) < ids.size()) return "CUDA_VISIBLE_DEVICES=" + std::string(trim(ids[size_t(device)]));
  }
  return strf("CUDA_VISIBLE_DEVICES=%d", device);
}

void run_on_slots(size_t n, size_t slots, const std::function<void(size_t, size_t)>& fn) {
  slots = std::max<size_t>(1, std::min(slots, n));
  if (n == 0) return;
  if (slots == 1) {
    for (size_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first;
  std::mutex m;
  std::vector<std::thread> threads;
  for (size_t s = 0; s < slots; ++s)
    threads.emplace_back([&, s] {
      for (size_t i = next++; i < n && !failed; i = next++) {
        try {
          fn(i, s);
        } catch (...) {
          std::lock_guard<std::mutex> lock(m);
          if (!first) first = std::current_exception();
          failed = true;
        }
      }
    });
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace kforge
