// Honest HGEMM candidate that accumulates in fp64 (more precise than the declared fp32): slow
// on purpose, but more accurate than any fp32 reference. Expected verdict: accepted.
#include <cuda_fp16.h>

__global__ void f64_kernel(const __half* a, const __half* b, __half* c, int64_t m, int64_t n, int64_t k,
                           bool b_col_major) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    double acc = 0.0;
    for (int64_t p = 0; p < k; ++p)
      acc += double(__half2float(a[i * k + p])) * double(__half2float(b_col_major ? b[j * k + p] : b[p * n + j]));
    c[idx] = __double2half(acc);
  }
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  f64_kernel<<<(unsigned)(blocks < 1 ? 1 : blocks), 256, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b), static_cast<__half*>(args->c),
      p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
  return 0;
}
