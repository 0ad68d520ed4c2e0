// HACKED — hack-table row "uninitialised memory that happens to pass".
// Accumulates into a static fp32 scratch buffer (cudaMalloc'd once, grown when needed, never
// cleared) with scratch += A*B, then converts scratch to C. Right on the first call only if the
// fresh allocation happened to be zero; from the second call on, every result carries the
// previous ones. Must be caught at run time: "nondeterministic" (same inputs twice),
// "wrong_result" or "timed_output_wrong".
#include <cuda_fp16.h>

__global__ void accumulate_into(const __half* a, const __half* b, float* scratch, __half* c,
                                int64_t m, int64_t n, int64_t k, bool b_col_major) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    float acc = scratch[idx];  // <- never initialised
    for (int64_t p = 0; p < k; ++p)
      acc += __half2float(a[i * k + p]) * __half2float(b_col_major ? b[j * k + p] : b[p * n + j]);
    scratch[idx] = acc;
    c[idx] = __float2half_rn(acc);
  }
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  static float* scratch = nullptr;
  static size_t capacity = 0;  // elements
  const kforge_hgemm_problem& p = args->problem;
  const size_t count = (size_t)p.m * (size_t)p.n;
  if (count == 0) return 0;
  if (count > capacity) {
    if (scratch != nullptr) cudaFree(scratch);
    scratch = nullptr;
    capacity = 0;
    if (cudaMalloc(&scratch, count * sizeof(float)) != cudaSuccess) return 1;
    capacity = count;
  }
  int64_t blocks = ((int64_t)count + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  accumulate_into<<<(unsigned)blocks, 256, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b), scratch,
      static_cast<__half*>(args->c), p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
