// The C API of kforge_hgemm (see include/kforge_hgemm.h): the dispatcher over kforge's kernel
// variants, with the tuned table of src/dispatch_table.cpp.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

// Only the C API is exported from the shared library (everything else is built hidden).
#pragma GCC visibility push(default)
#include "kforge_hgemm.h"
#pragma GCC visibility pop

#include "kernels/hgemm/dispatch.hpp"

namespace kforge_hgemm_export {
// src/dispatch_table.cpp
const kforge::kernels::DispatchEntry* table(size_t* count);
const char* version();
}  // namespace kforge_hgemm_export

namespace {

using kforge::kernels::KernelVariant;

struct DeviceProps {
  int sms = 0;
  int cc = 0;  // major * 10 + minor
};

// SM count and compute capability per device, queried once. Packed in one atomic word per
// device so that concurrent first calls need no lock (they may both query; same answer).
constexpr int kCachedDevices = 64;
std::atomic<uint64_t> g_props[kCachedDevices];

bool current_device(DeviceProps* out) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (dev >= 0 && dev < kCachedDevices) {
    const uint64_t v = g_props[dev].load(std::memory_order_relaxed);
    if (v != 0) {
      out->sms = static_cast<int>(v >> 32);
      out->cc = static_cast<int>(v & 0xffffffffu);
      return true;
    }
  }
  int sms = 0, major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return false;
  out->sms = sms;
  out->cc = major * 10 + minor;
  if (dev >= 0 && dev < kCachedDevices)
    g_props[dev].store((static_cast<uint64_t>(sms) << 32) | static_cast<uint32_t>(out->cc), std::memory_order_relaxed);
  return true;
}

bool valid(const kforge_hgemm_problem* p) {
  return p != nullptr && p->m >= 1 && p->n >= 1 && p->k >= 1 &&
         (p->layout == KFORGE_HGEMM_NN || p->layout == KFORGE_HGEMM_TN) &&
         (p->acc == KFORGE_HGEMM_ACC_F32 || p->acc == KFORGE_HGEMM_ACC_F16);
}

// The dispatcher's choice for `p` on the current device; nullptr with *code set otherwise.
const KernelVariant* pick(const kforge_hgemm_problem* p, int* code) {
  if (!valid(p)) {
    *code = KFORGE_HGEMM_ERROR_INVALID_ARGUMENT;
    return nullptr;
  }
  DeviceProps d;
  if (!current_device(&d)) {
    cudaGetLastError();  // do not leave the failed query's error behind for the caller
    *code = KFORGE_HGEMM_ERROR_CUDA;
    return nullptr;
  }
  if (d.cc < 80) {
    *code = KFORGE_HGEMM_ERROR_NO_KERNEL;
    return nullptr;
  }
  size_t n = 0;
  const kforge::kernels::DispatchEntry* t = kforge_hgemm_export::table(&n);
  const KernelVariant* v = kforge::kernels::choose_cached(t, n, *p, d.sms, d.cc);
  *code = v ? KFORGE_HGEMM_SUCCESS : KFORGE_HGEMM_ERROR_NO_KERNEL;
  return v;
}

}  // namespace

extern "C" {

int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  if (args == nullptr || args->a == nullptr || args->b == nullptr || args->c == nullptr)
    return KFORGE_HGEMM_ERROR_INVALID_ARGUMENT;
  int code = 0;
  const KernelVariant* v = pick(&args->problem, &code);
  if (v == nullptr) return code;
  const uintptr_t bits = reinterpret_cast<uintptr_t>(args->a) | reinterpret_cast<uintptr_t>(args->b) |
                         reinterpret_cast<uintptr_t>(args->c);
  if ((bits & 1u) != 0) return KFORGE_HGEMM_ERROR_INVALID_ARGUMENT;  // not even fp16-aligned
  if ((bits & 15u) != 0 && v->config.family == kforge::kernels::Family::kSm90) {
    // TMA needs 16-byte aligned bases: the sm_80 family serves any alignment.
    DeviceProps d;
    current_device(&d);
    v = kforge::kernels::heuristic_choice(args->problem, d.sms, 80);
    if (v == nullptr) return KFORGE_HGEMM_ERROR_NO_KERNEL;
  }
  const size_t need = v->workspace_size(&args->problem);
  if (need > 0 && (args->workspace == nullptr || args->workspace_bytes < need))
    return KFORGE_HGEMM_ERROR_INVALID_ARGUMENT;
  return v->run(args, stream);
}

size_t kforge_hgemm_workspace_size(const kforge_hgemm_problem* problem) {
  int code = 0;
  const KernelVariant* v = pick(problem, &code);
  if (v == nullptr) return 0;
  size_t need = v->workspace_size(problem);
  // An unaligned pointer may send the call to the sm_80 family: cover its need too.
  DeviceProps d;
  if (v->config.family == kforge::kernels::Family::kSm90 && current_device(&d)) {
    if (const KernelVariant* alt = kforge::kernels::heuristic_choice(*problem, d.sms, 80)) {
      const size_t alt_need = alt->workspace_size(problem);
      if (alt_need > need) need = alt_need;
    }
  }
  return need;
}

const char* kforge_hgemm_variant_name(const kforge_hgemm_problem* problem) {
  int code = 0;
  const KernelVariant* v = pick(problem, &code);
  return v ? v->name : nullptr;
}

const char* kforge_hgemm_version(void) { return kforge_hgemm_export::version(); }

const char* kforge_hgemm_error_string(int code) {
  switch (code) {
    case KFORGE_HGEMM_SUCCESS: return "success";
    case KFORGE_HGEMM_ERROR_INVALID_ARGUMENT: return "invalid argument (NULL pointer, size < 1, unknown layout or accumulation, unaligned pointer or workspace too small)";
    case KFORGE_HGEMM_ERROR_NO_KERNEL: return "no kernel serves this problem on the current device (compute capability 8.0 or newer is needed)";
    case KFORGE_HGEMM_ERROR_CUDA: return "the current CUDA device could not be queried";
    case KFORGE_HGEMM_ERROR_KERNEL_UNSUPPORTED: return "the kernel does not support this problem";
    case KFORGE_HGEMM_ERROR_LAUNCH_FAILED: return "the kernel launch failed (see cudaGetLastError)";
    case KFORGE_HGEMM_ERROR_TENSOR_MAP: return "the driver could not encode a TMA tensor map";
    default: return "unknown kforge_hgemm return code";
  }
}

}  // extern "C"
