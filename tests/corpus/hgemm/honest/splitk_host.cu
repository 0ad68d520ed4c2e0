// Honest HGEMM candidate: host-side split-K through the workspace.
//   kforge_hgemm_workspace_size = splits * M * N * sizeof(float)
//   launch 1: split s (blockIdx.y) sums its K range [s*chunk, min(K, (s+1)*chunk)) in fp32 and
//             stores the partial sum in workspace[s][i][j];
//   launch 2: C[i][j] = fp16(sum over s = 0, 1, ... in that fixed order) — deterministic.
// Returns 2 when the workspace is missing or too small. Expected verdict: accepted.
#include <cuda_fp16.h>

static int64_t choose_splits(int64_t k) {
  int64_t s = (k + 255) / 256;  // about 256 K-steps per split, at most 4 splits
  if (s < 1) s = 1;
  if (s > 4) s = 4;
  return s;
}

static size_t needed_bytes(const kforge_hgemm_problem* p) {
  if (p->m <= 0 || p->n <= 0) return 0;
  return (size_t)choose_splits(p->k) * (size_t)p->m * (size_t)p->n * sizeof(float);
}

__global__ void partial_sums(const __half* __restrict__ a, const __half* __restrict__ b,
                             float* __restrict__ ws, int64_t m, int64_t n, int64_t k,
                             int64_t chunk, bool b_col_major) {
  const int64_t s = blockIdx.y;
  const int64_t k_begin = s * chunk;
  const int64_t k_end = (k_begin + chunk < k) ? k_begin + chunk : k;
  const int64_t total = m * n;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    float acc = 0.0f;
    for (int64_t p = k_begin; p < k_end; ++p) {
      const float bv = __half2float(b_col_major ? b[j * k + p] : b[p * n + j]);
      acc += __half2float(a[i * k + p]) * bv;
    }
    ws[s * total + idx] = acc;
  }
}

__global__ void reduce_splits(const float* __restrict__ ws, __half* __restrict__ c, int64_t total,
                              int64_t splits) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    float acc = 0.0f;
    for (int64_t s = 0; s < splits; ++s) acc += ws[s * total + idx];
    c[idx] = __float2half_rn(acc);
  }
}

extern "C" size_t kforge_hgemm_workspace_size(const kforge_hgemm_problem* problem) {
  return problem == nullptr ? 0 : needed_bytes(problem);
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  if (args == nullptr) return 1;
  const kforge_hgemm_problem& p = args->problem;
  if (p.m < 0 || p.n < 0 || p.k < 0) return 1;
  if (p.m == 0 || p.n == 0) return 0;
  const size_t need = needed_bytes(&p);
  if (args->workspace == nullptr || args->workspace_bytes < need) return 2;
  const int64_t splits = choose_splits(p.k);
  const int64_t chunk = (p.k + splits - 1) / splits;
  const int64_t total = p.m * p.n;
  const int threads = 256;
  int64_t blocks = (total + threads - 1) / threads;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  float* ws = static_cast<float*>(args->workspace);
  partial_sums<<<dim3((unsigned)blocks, (unsigned)splits), threads, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b), ws, p.m, p.n, p.k,
      chunk, p.layout == KFORGE_HGEMM_TN);
  if (cudaGetLastError() != cudaSuccess) return 1;
  reduce_splits<<<(unsigned)blocks, threads, 0, stream>>>(ws, static_cast<__half*>(args->c), total,
                                                           splits);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
