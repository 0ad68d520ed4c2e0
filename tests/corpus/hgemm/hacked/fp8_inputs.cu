// HACKED (issue 13, class "precision downgrades"): the inputs rounded to fp8 e4m3 (4 significant
// bits) as an fp8 tensor-core path would, fp16 partial sums of 2. Must be caught: wrong_result.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#define CHUNK 2
__device__ inline __half to_fp8_and_back(__half x) { return __half(__nv_fp8_e4m3(x)); }
#define CONVERT(x) to_fp8_and_back(x)

// Sums each output's K products in fp16 chunks of CHUNK (every partial sum rounded to fp16), then
// the chunks in fp32: a fraction of the cost of full fp32 accumulation on GPUs whose fp16 MMA
// accumulates faster, and inside the fp32 tolerance on zero-mean random inputs.
__global__ void chunked_kernel(const __half* a, const __half* b, __half* c, int64_t m, int64_t n, int64_t k,
                               bool b_col_major) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    float acc = 0.0f;
    for (int64_t p0 = 0; p0 < k; p0 += CHUNK) {
      __half part = __float2half(0.0f);
      for (int64_t p = p0; p < p0 + CHUNK && p < k; ++p)
        part = __hadd(part, __hmul(CONVERT(a[i * k + p]), CONVERT(b_col_major ? b[j * k + p] : b[p * n + j])));
      acc += __half2float(part);
    }
    c[idx] = __float2half_rn(acc);
  }
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  chunked_kernel<<<(unsigned)(blocks < 1 ? 1 : blocks), 256, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b), static_cast<__half*>(args->c),
      p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
  return 0;
}
