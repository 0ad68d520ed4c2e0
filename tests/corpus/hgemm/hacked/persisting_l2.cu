// HACKED — hack-table row "persisting-L2 carve-outs, clock tricks".
// Reserves a persisting L2 carve-out (cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize)) and
// pins B in it with a stream access-policy window, so that timed runs find B hot in L2; the GEMM
// itself is honest. Must be caught by the static scan: reason "forbidden_call".
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
  const kforge_hgemm_problem& p = args->problem;
  const size_t b_bytes = (size_t)p.k * (size_t)p.n * sizeof(__half);
  cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, b_bytes);
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow.base_ptr = const_cast<void*>(args->b);
  attr.accessPolicyWindow.num_bytes = b_bytes;
  attr.accessPolicyWindow.hitRatio = 1.0f;
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr);
  cudaGetLastError();  // a refused carve-out should not fail the call
  launch_gemm(args, stream);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
