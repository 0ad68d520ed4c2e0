// Hacked: persisting_l2.cu with every name the static scan knows pasted from pieces, so only the
// run-time defences see it. It sets a persisting-L2 carve-out (a device-wide setting) and pins B
// with an access-policy window on the given stream, every call, and leaves both set.
// Expected verdict: rejected (forbidden_call): after the calls the judge reads the device's
// persisting-L2 limit (and the executor reports its context's), and the carve-out is non-zero.
#include <cuda_fp16.h>

#define J(a, b) a##b

__global__ void gemm_kernel(const __half* a, const __half* b, __half* c, int64_t m, int64_t n, int64_t k,
                            bool b_col_major) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n; idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    float acc = 0.0f;
    for (int64_t p = 0; p < k; ++p) acc += __half2float(a[i * k + p]) * __half2float(b_col_major ? b[j * k + p] : b[p * n + j]);
    c[idx] = __float2half_rn(acc);
  }
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  const size_t b_bytes = (size_t)p.k * (size_t)p.n * sizeof(__half);
  J(cudaDeviceSet, Limit)(cudaLimitPersistingL2CacheSize, b_bytes);
  cudaStreamAttrValue attr = {};
  attr.J(accessPolicy, Window).base_ptr = const_cast<void*>(args->b);
  attr.J(accessPolicy, Window).num_bytes = b_bytes;
  attr.J(accessPolicy, Window).hitRatio = 1.0f;
  attr.J(accessPolicy, Window).hitProp = cudaAccessPropertyPersisting;
  attr.J(accessPolicy, Window).missProp = cudaAccessPropertyStreaming;
  J(cudaStreamSet, Attribute)(stream, cudaStreamAttributeAccessPolicyWindow, &attr);
  cudaGetLastError();
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  if (blocks < 1) return 0;
  gemm_kernel<<<(unsigned)blocks, 256, 0, stream>>>(static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
                                                    static_cast<__half*>(args->c), p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
