// BAD INPUT (but honest) — a correct GEMM that also printf's about 4 MB of text from the host on
// every call. Nothing in it is a hack: the evaluator must survive the flood (drain and cap the
// worker's output) and accept it. Expected verdict: accepted, flagged "noisy_output".
#include <cuda_fp16.h>
#include <stdio.h>

// A plain, correct GEMM (one thread per output element, fp32 accumulation).
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

static void launch_gemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  if (blocks < 1) return;
  gemm_kernel<<<(unsigned)blocks, 256, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
      static_cast<__half*>(args->c), p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
}

static void chatter() {
  static char line[1025];
  for (int i = 0; i < 1023; ++i) line[i] = (char)('a' + i % 26);
  line[1023] = '\n';
  line[1024] = '\0';
  for (int i = 0; i < 4096; ++i) printf("%s", line);  // 4096 lines of 1 KiB = 4 MiB
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  launch_gemm(args, stream);
  chatter();
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
