// HACKED — hack-table row "output cached across calls (keyed on pointer or content)".
// Computes the first call of a shape into a private cudaMalloc'd buffer and from then on only
// copies that buffer into C (a device-to-device copy on the given stream), ignoring the inputs.
// Every element of C is written, so poisoning alone does not catch it.
// Must be caught at run time: "wrong_result" (fresh inputs in the same buffers) or
// "timed_output_wrong" (rotated inputs in the timed runs, re-checked).
#include <cuda_fp16.h>

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

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  static __half* saved = nullptr;
  static kforge_hgemm_problem saved_p = {};
  const kforge_hgemm_problem& p = args->problem;
  const size_t bytes = (size_t)p.m * (size_t)p.n * sizeof(__half);
  if (saved != nullptr && p.m == saved_p.m && p.n == saved_p.n && p.k == saved_p.k &&
      p.layout == saved_p.layout) {
    cudaMemcpyAsync(args->c, saved, bytes, cudaMemcpyDeviceToDevice, stream);  // the replay
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
  }
  // First call of this shape: compute honestly and keep a copy of the answer.
  if (saved != nullptr) cudaFree(saved);
  saved = nullptr;
  if (cudaMalloc(&saved, bytes) != cudaSuccess) return 1;
  saved_p = p;
  launch_gemm(args, stream);
  cudaMemcpyAsync(saved, args->c, bytes, cudaMemcpyDeviceToDevice, stream);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
