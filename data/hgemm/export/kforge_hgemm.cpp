// The C API of kforge_hgemm (see include/kforge_hgemm.h): the dispatcher over kforge's kernel
// variants, with the tuned table of src/dispatch_table.cpp.
#include <cuda_runtime_api.h>

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

using kforge::kernels::Choice;
using kforge::kernels::KernelVariant;

// The tuned table with its indices, built once (a function-local static: thread-safe initialisation).
const kforge::kernels::Dispatcher& dispatcher() {
  static const kforge::kernels::Dispatcher d = [] {
    size_t n = 0;
    const kforge::kernels::DispatchEntry* t = kforge_hgemm_export::table(&n);
    return kforge::kernels::Dispatcher(t, n);
  }();
  return d;
}

bool valid(const kforge_hgemm_problem* p) {
  return p != nullptr && p->m >= 1 && p->n >= 1 && p->k >= 1 &&
         (p->layout == KFORGE_HGEMM_NN || p->layout == KFORGE_HGEMM_TN) &&
         (p->acc == KFORGE_HGEMM_ACC_F32 || p->acc == KFORGE_HGEMM_ACC_F16) &&
         // bf16 is defined with fp32 accumulation only (kforge/abi/hgemm.h)
         (p->dtype == KFORGE_HGEMM_F16 || (p->dtype == KFORGE_HGEMM_BF16 && p->acc == KFORGE_HGEMM_ACC_F32));
}

// The dispatcher's choice for `p` on the current device (memoised per thread: after the first call
// of a problem in a thread, one cudaGetDevice and a hash lookup); *code set when there is none.
// Per-device attributes are queried once per device (std::call_once in device_attrs).
Choice pick(const kforge_hgemm_problem* p, int* code) {
  if (!valid(p)) {
    *code = KFORGE_HGEMM_ERROR_INVALID_ARGUMENT;
    return {};
  }
  const int dev = kforge::kernels::current_device();
  const kforge::kernels::DeviceAttrs a = kforge::kernels::device_attrs(dev);
  if (dev < 0 || a.cc == 0 || a.sms <= 0) {
    *code = KFORGE_HGEMM_ERROR_CUDA;
    return {};
  }
  if (a.cc < 80) {
    *code = KFORGE_HGEMM_ERROR_NO_KERNEL;
    return {};
  }
  const Choice c = dispatcher().resolve_cached(*p, kforge::kernels::nominal_device_model(a.sms, a.cc), dev);
  *code = c.variant ? KFORGE_HGEMM_SUCCESS : KFORGE_HGEMM_ERROR_NO_KERNEL;
  return c;
}

}  // namespace

extern "C" {

int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  if (args == nullptr || args->a == nullptr || args->b == nullptr || args->c == nullptr)
    return KFORGE_HGEMM_ERROR_INVALID_ARGUMENT;
  int code = 0;
  const Choice c = pick(&args->problem, &code);
  if (c.variant == nullptr) return code;
  const KernelVariant* v = c.variant;
  const uintptr_t bits = reinterpret_cast<uintptr_t>(args->a) | reinterpret_cast<uintptr_t>(args->b) |
                         reinterpret_cast<uintptr_t>(args->c);
  if ((bits & 1u) != 0) return KFORGE_HGEMM_ERROR_INVALID_ARGUMENT;  // not even fp16-aligned
  if ((bits & 15u) != 0 && v->config.family == kforge::kernels::Family::kSm90) {
    // TMA needs 16-byte aligned bases: the sm_80 family serves any alignment.
    v = c.unaligned;
    if (v == nullptr) return KFORGE_HGEMM_ERROR_NO_KERNEL;
  }
  const size_t need = v->workspace_size(&args->problem);
  if (need > 0 && (args->workspace == nullptr || args->workspace_bytes < need))
    return KFORGE_HGEMM_ERROR_INVALID_ARGUMENT;
  return v->run(args, stream);
}

// As cheap as the call's own dispatch: the memoised choice carries the workspace both of its
// variants need (an unaligned pointer may send the call to the sm_80 family).
size_t kforge_hgemm_workspace_size(const kforge_hgemm_problem* problem) {
  int code = 0;
  return pick(problem, &code).workspace;
}

const char* kforge_hgemm_variant_name(const kforge_hgemm_problem* problem) {
  int code = 0;
  const Choice c = pick(problem, &code);
  return c.variant ? c.variant->name : nullptr;
}

const char* kforge_hgemm_version(void) { return kforge_hgemm_export::version(); }

const char* kforge_hgemm_error_string(int code) {
  switch (code) {
    case KFORGE_HGEMM_SUCCESS: return "success";
    case KFORGE_HGEMM_ERROR_INVALID_ARGUMENT: return "invalid argument (NULL pointer, size < 1, unknown layout, accumulation or dtype, bf16 without fp32 accumulation, unaligned pointer or workspace too small)";
    case KFORGE_HGEMM_ERROR_NO_KERNEL: return "no kernel serves this problem on the current device (compute capability 8.0 or newer is needed)";
    case KFORGE_HGEMM_ERROR_CUDA: return "the current CUDA device could not be queried";
    case KFORGE_HGEMM_ERROR_KERNEL_UNSUPPORTED: return "the kernel does not support this problem";
    case KFORGE_HGEMM_ERROR_LAUNCH_FAILED: return "the kernel launch failed (see cudaGetLastError)";
    case KFORGE_HGEMM_ERROR_TENSOR_MAP: return "the driver could not encode a TMA tensor map";
    default: return "unknown kforge_hgemm return code";
  }
}

}  // extern "C"
