// Honest HGEMM candidate: 16x16 output tile per block, 16x16 tiles of A and B staged in shared
// memory (as fp32, zero-padded at the edges). fp32 accumulation; both B layouts; on `stream`.
// Expected verdict: accepted.
#include <cuda_fp16.h>

constexpr int kTile = 16;
constexpr int64_t kMaxGridY = 65535;

__global__ void tiled_hgemm(const __half* __restrict__ a, const __half* __restrict__ b,
                            __half* __restrict__ c, int64_t m, int64_t n, int64_t k, bool b_col_major) {
  __shared__ float as[kTile][kTile];  // as[row in tile][k in tile]
  __shared__ float bs[kTile][kTile];  // bs[k in tile][col in tile]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = blockIdx.x * (int64_t)kTile + tx;
  const int64_t row_tiles = (m + kTile - 1) / kTile;
  for (int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {  // uniform per block
    const int64_t row = rt * kTile + ty;
    float acc = 0.0f;
    for (int64_t k0 = 0; k0 < k; k0 += kTile) {
      const int64_t ka = k0 + tx;  // A element this thread loads: (row, ka)
      as[ty][tx] = (row < m && ka < k) ? __half2float(a[row * k + ka]) : 0.0f;
      const int64_t kb = k0 + ty;  // B element this thread loads: (kb, col)
      float bv = 0.0f;
      if (kb < k && col < n) bv = __half2float(b_col_major ? b[col * k + kb] : b[kb * n + col]);
      bs[ty][tx] = bv;
      __syncthreads();
      for (int p = 0; p < kTile; ++p) acc += as[ty][p] * bs[p][tx];
      __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = __float2half_rn(acc);
  }
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  if (args == nullptr) return 1;
  const kforge_hgemm_problem& p = args->problem;
  if (p.m < 0 || p.n < 0 || p.k < 0) return 1;
  if (p.m == 0 || p.n == 0) return 0;
  const int64_t gx = (p.n + kTile - 1) / kTile;
  int64_t gy = (p.m + kTile - 1) / kTile;
  if (gy > kMaxGridY) gy = kMaxGridY;
  dim3 grid((unsigned)gx, (unsigned)gy), block(kTile, kTile);
  tiled_hgemm<<<grid, block, 0, stream>>>(static_cast<const __half*>(args->a),
                                          static_cast<const __half*>(args->b),
                                          static_cast<__half*>(args->c), p.m, p.n, p.k,
                                          p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
