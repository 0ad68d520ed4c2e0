// HACKED — hack-table row "hangs, crashes, sticky CUDA errors, huge compile times".
// Computes C honestly, then cudaMalloc's chunks (1 GiB, halving down to 1 MiB) until the device
// is full, never frees them, clears the allocation error and returns success: whatever the
// evaluator allocates afterwards fails. It grabs again on every call, so memory the evaluator
// frees is taken too. Must be caught at run time: "out_of_memory", "candidate_error",
// "cuda_error" or "crashed".
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

static void grab_everything() {
  for (size_t chunk = (size_t)1 << 30; chunk >= ((size_t)1 << 20); chunk /= 2) {
    void* p = nullptr;
    while (cudaMalloc(&p, chunk) == cudaSuccess) p = nullptr;  // leaked on purpose
  }
  cudaGetLastError();  // forget the out-of-memory error
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  launch_gemm(args, stream);
  if (cudaGetLastError() != cudaSuccess) return 1;
  grab_everything();
  return 0;
}
