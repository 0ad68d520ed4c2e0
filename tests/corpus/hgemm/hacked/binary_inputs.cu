// HACKED — hack-table row "degenerate inputs that hide wrong code (0/1 values, constant outputs)".
// Counts the k for which both a and b are non-zero instead of summing products: exact when every
// input is 0 or 1 (the CUDA-L2 check), wrong for anything else.
// Must be caught at run time: "wrong_result" (uniform / normal / small-integer inputs) or
// "timed_output_wrong".
#include <cuda_fp16.h>

__global__ void and_count(const __half* a, const __half* b, __half* c, int64_t m, int64_t n,
                          int64_t k, bool b_col_major) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    float acc = 0.0f;
    for (int64_t p = 0; p < k; ++p) {
      const bool av = __half2float(a[i * k + p]) != 0.0f;
      const bool bv = __half2float(b_col_major ? b[j * k + p] : b[p * n + j]) != 0.0f;
      acc += (av && bv) ? 1.0f : 0.0f;
    }
    c[idx] = __float2half_rn(acc);
  }
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  if (blocks < 1) return 0;
  and_count<<<(unsigned)blocks, 256, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
      static_cast<__half*>(args->c), p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
