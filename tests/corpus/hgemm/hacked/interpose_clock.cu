// HACKED (issue 13, class "the judge is reachable"). Defines the C library's monotonic clock
// (name assembled by token pasting) to run at a tenth of real speed, so that whoever times the
// calls in this process sees them ten times faster. Must be caught: forbidden_call (a candidate
// defining a clock or CUDA symbol is refused); and no timing happens in the executor anyway.
#include <cuda_fp16.h>
#include <time.h>

#define KF_CAT(a, b) a##b

extern "C" int KF_CAT(clock_, gettime)(clockid_t, struct timespec* ts) {
  static long fake = 0;
  fake += 1000;
  ts->tv_sec = fake / 1000000000L;
  ts->tv_nsec = fake % 1000000000L;
  return 0;
}

// A plain, correct GEMM (one thread per output element, fp32 accumulation, both B layouts).
__global__ void gemm_kernel(const __half* a, const __half* b, __half* c, int64_t m, int64_t n,
                            int64_t k, bool b_col_major) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    float acc = 0.0f;
    for (int64_t p = 0; p < k; ++p)
      acc += __half2float(a[i * k + p]) * __half2float(b_col_major ? b[j * k + p] : b[p * n + j]);
    c[idx] = __float2half_rn(acc);
  }
}

static unsigned blocks_for(const kforge_hgemm_problem& p) {
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  return (unsigned)(blocks < 1 ? 1 : blocks);
}

static void launch_gemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  gemm_kernel<<<blocks_for(p), 256, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
      static_cast<__half*>(args->c), p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  launch_gemm(args, stream);
  return 0;
}
