// Honest HGEMM candidate: inline PTX mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32.
// A block of 4 warps computes a 32x16 tile of C (2x2 warps, 16x8 each). Each k-step stages a
// 32x16 tile of A (as[row][k]) and a 16x16 tile of B stored column by column (bs[col][k]) in
// shared memory, zero-padded past the edges; the fragments are then packed from shared memory
// following the PTX ISA fragment layout (g = lane / 4, t = lane % 4):
//   A (16x16, row): a0 = (g, 2t..2t+1)  a1 = (g+8, 2t..2t+1)  a2 = (g, 2t+8..)  a3 = (g+8, 2t+8..)
//   B (16x8, col):  b0 = (k 2t..2t+1, col g)   b1 = (k 2t+8..2t+9, col g)
//   C (16x8, f32):  c0,c1 = (g, 2t..2t+1)      c2,c3 = (g+8, 2t..2t+1)
// fp32 accumulation; both B layouts; on `stream`. Expected verdict: accepted.
#include <cuda_fp16.h>
#include <stdint.h>

constexpr int kBM = 32, kBN = 16, kBK = 16;
constexpr int kThreads = 128;
constexpr int64_t kMaxGridY = 65535;

__device__ __forceinline__ uint32_t pack_half2(__half lo, __half hi) {
  // The element with the lower index sits in the lower 16 bits.
  return (uint32_t)__half_as_ushort(lo) | ((uint32_t)__half_as_ushort(hi) << 16);
}

__global__ void mma_hgemm(const __half* __restrict__ a, const __half* __restrict__ b,
                          __half* __restrict__ c, int64_t m, int64_t n, int64_t k, bool b_col_major) {
  __shared__ __half as[kBM][kBK];  // A tile: rows x k
  __shared__ __half bs[kBN][kBK];  // B tile: cols x k
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int wm = warp / 2, wn = warp % 2;  // this warp's 16x8 sub-tile
  const int64_t col0 = blockIdx.x * (int64_t)kBN;
  const int64_t row_tiles = (m + kBM - 1) / kBM;
  for (int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {  // uniform per block
    const int64_t row0 = rt * kBM;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t k0 = 0; k0 < k; k0 += kBK) {
      for (int e = tid; e < kBM * kBK; e += kThreads) {
        const int r = e / kBK, q = e % kBK;
        const int64_t gr = row0 + r, gk = k0 + q;
        as[r][q] = (gr < m && gk < k) ? a[gr * k + gk] : __float2half(0.0f);
      }
      for (int e = tid; e < kBN * kBK; e += kThreads) {
        const int s = e / kBK, q = e % kBK;
        const int64_t gc = col0 + s, gk = k0 + q;
        __half v = __float2half(0.0f);
        if (gc < n && gk < k) v = b_col_major ? b[gc * k + gk] : b[gk * n + gc];
        bs[s][q] = v;
      }
      __syncthreads();
      const int ar = wm * 16, bc = wn * 8;
      const uint32_t a0 = pack_half2(as[ar + g][2 * t], as[ar + g][2 * t + 1]);
      const uint32_t a1 = pack_half2(as[ar + g + 8][2 * t], as[ar + g + 8][2 * t + 1]);
      const uint32_t a2 = pack_half2(as[ar + g][2 * t + 8], as[ar + g][2 * t + 9]);
      const uint32_t a3 = pack_half2(as[ar + g + 8][2 * t + 8], as[ar + g + 8][2 * t + 9]);
      const uint32_t b0 = pack_half2(bs[bc + g][2 * t], bs[bc + g][2 * t + 1]);
      const uint32_t b1 = pack_half2(bs[bc + g][2 * t + 8], bs[bc + g][2 * t + 9]);
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
          "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
          : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
      __syncthreads();
    }
    const int64_t r_lo = row0 + wm * 16 + g, r_hi = r_lo + 8;
    const int64_t cc = col0 + wn * 8 + 2 * t;
    if (r_lo < m && cc < n) c[r_lo * n + cc] = __float2half_rn(acc[0]);
    if (r_lo < m && cc + 1 < n) c[r_lo * n + cc + 1] = __float2half_rn(acc[1]);
    if (r_hi < m && cc < n) c[r_hi * n + cc] = __float2half_rn(acc[2]);
    if (r_hi < m && cc + 1 < n) c[r_hi * n + cc + 1] = __float2half_rn(acc[3]);
  }
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  if (args == nullptr) return 1;
  const kforge_hgemm_problem& p = args->problem;
  if (p.m < 0 || p.n < 0 || p.k < 0) return 1;
  if (p.m == 0 || p.n == 0) return 0;
  const int64_t gx = (p.n + kBN - 1) / kBN;
  int64_t gy = (p.m + kBM - 1) / kBM;
  if (gy > kMaxGridY) gy = kMaxGridY;
  mma_hgemm<<<dim3((unsigned)gx, (unsigned)gy), kThreads, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
      static_cast<__half*>(args->c), p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
