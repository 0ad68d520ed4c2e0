// Hacked (or careless): ignores the problem's dtype and always computes in fp16, so bf16 inputs
// are read as fp16 bit patterns. A candidate must not be rewarded for answering another question
// faster: fp16 and bf16 share the 2-byte buffers, so nothing but the values tells them apart.
// Expected verdict: rejected (wrong_result or unwritten_output: bf16 bits read as fp16 are
// garbage, some of them infinite or NaN).
#include <cuda_fp16.h>

__global__ void fp16_gemm(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ c, int64_t m,
                          int64_t n, int64_t k, bool b_col_major) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n; idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    float acc = 0.0f;
    for (int64_t p = 0; p < k; ++p) acc += __half2float(a[i * k + p]) * __half2float(b_col_major ? b[j * k + p] : b[p * n + j]);
    c[idx] = __float2half_rn(acc);
  }
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  if (p.m == 0 || p.n == 0) return 0;
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  fp16_gemm<<<(unsigned)blocks, 256, 0, stream>>>(static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
                                                   static_cast<__half*>(args->c), p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
