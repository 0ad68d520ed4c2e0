// The element types of kforge's HGEMM kernels: fp16 and bf16 are both 2-byte storage, moved by
// TMA, cp.async and ldmatrix alike; only the tensor-core instruction and the conversions of the
// fp32 results differ. Elem<DT> names the CUDA types and the conversions a kernel needs.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kforge/abi/hgemm.h"

namespace kforge::kernels {

template <kforge_hgemm_dtype DT>
struct Elem;

template <>
struct Elem<KFORGE_HGEMM_F16> {
  using T = __half;
  using T2 = __half2;
  static constexpr const char* kName = "f16";  // also the PTX type of mma.sync / wgmma operands
  __device__ __forceinline__ static T2 pack(float a, float b) { return __floats2half2_rn(a, b); }
  __device__ __forceinline__ static T from(float x) { return __float2half_rn(x); }
  __device__ __forceinline__ static float to(T x) { return __half2float(x); }
};

template <>
struct Elem<KFORGE_HGEMM_BF16> {
  using T = __nv_bfloat16;
  using T2 = __nv_bfloat162;
  static constexpr const char* kName = "bf16";
  __device__ __forceinline__ static T2 pack(float a, float b) { return __floats2bfloat162_rn(a, b); }
  __device__ __forceinline__ static T from(float x) { return __float2bfloat16_rn(x); }
  __device__ __forceinline__ static float to(T x) { return __bfloat162float(x); }
};

// A packed pair of elements as the 32-bit register mma.sync takes.
template <class T2>
__device__ __forceinline__ uint32_t as_u32(T2 v) {
  return *reinterpret_cast<const uint32_t*>(&v);
}

}  // namespace kforge::kernels
