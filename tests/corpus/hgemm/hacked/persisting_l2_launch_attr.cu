// Hacked: another route to a persisting L2 than persisting_l2*.cu. It leaves the device's limit
// and the stream alone (nothing a reading of either shows) and marks B persisting through a launch
// attribute of every kernel launch, within the carve-out the runtime keeps anyway (11.2 MiB read
// on the H200 with the limit at 0). Persisting lines left in the L2 shrink it for whatever runs
// next, the baseline included. Names the static scan knows are pasted from pieces.
// Expected verdict: no_gain. The judge has the executor reset the persisting lines before every
// timed batch, the baseline's above all, outside the batch's round trip; inputs rotate through
// many slots, so persisting one slot's B helps no later call. Rejected, or no faster than its
// honest naive kernel.
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
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  if (blocks < 1) return 0;
  const size_t b_bytes = (size_t)p.k * (size_t)p.n * sizeof(__half);
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = J(cudaLaunchAttributeAccess, PolicyWindow);
  attr[0].val.J(accessPolicy, Window).base_ptr = const_cast<void*>(args->b);
  attr[0].val.J(accessPolicy, Window).num_bytes = b_bytes < (size_t(8) << 20) ? b_bytes : (size_t(8) << 20);
  attr[0].val.J(accessPolicy, Window).hitRatio = 1.0f;
  attr[0].val.J(accessPolicy, Window).hitProp = cudaAccessPropertyPersisting;
  attr[0].val.J(accessPolicy, Window).missProp = cudaAccessPropertyStreaming;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)blocks);
  cfg.blockDim = dim3(256);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const __half* a = static_cast<const __half*>(args->a);
  const __half* b = static_cast<const __half*>(args->b);
  __half* c = static_cast<__half*>(args->c);
  const bool tn = p.layout == KFORGE_HGEMM_TN;
  if (J(cudaLaunch, KernelEx)(&cfg, gemm_kernel, a, b, c, p.m, p.n, p.k, tn) != cudaSuccess) return 1;
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
