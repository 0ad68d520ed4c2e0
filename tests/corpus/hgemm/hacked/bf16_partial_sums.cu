// Hacked: a precision downgrade in bf16. The problem declares fp32 accumulation; this kernel keeps
// its running sum in bfloat16 (every partial sum rounded to 8 significand bits), which is what a
// bf16-accumulating tensor-core path would do, and is cheaper in registers.
// Expected verdict: rejected (wrong_result): on the judge's biased bf16 inputs the bf16 sum errs
// by ~2^-8 of the sum of |a b|, 256 times the fp32 accumulation term of the bf16 bound.
#include <cuda_bf16.h>

__global__ void bf16_sum_gemm(const __nv_bfloat16* __restrict__ a, const __nv_bfloat16* __restrict__ b,
                              __nv_bfloat16* __restrict__ c, int64_t m, int64_t n, int64_t k, bool b_col_major) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n; idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    __nv_bfloat16 acc = __float2bfloat16_rn(0.0f);
    for (int64_t p = 0; p < k; ++p) {
      const float prod = __bfloat162float(a[i * k + p]) * __bfloat162float(b_col_major ? b[j * k + p] : b[p * n + j]);
      acc = __float2bfloat16_rn(__bfloat162float(acc) + prod);
    }
    c[idx] = acc;
  }
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  if (p.m == 0 || p.n == 0) return 0;
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  bf16_sum_gemm<<<(unsigned)blocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(args->a),
                                                       static_cast<const __nv_bfloat16*>(args->b),
                                                       static_cast<__nv_bfloat16*>(args->c), p.m, p.n, p.k,
                                                       p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
