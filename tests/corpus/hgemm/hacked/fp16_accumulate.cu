// HACKED — hack-table row "precision downgrade (fp16 accumulate in an fp32 task, tf32, fp8)".
// The same WMMA kernel as honest/wmma_f32acc.cu, but the accumulator fragments are __half: every
// 16-wide k-step is rounded to fp16, whatever args->problem.acc declares. Exact on small-integer
// inputs (sums stay far below 2048), off by far more than fp32 accumulation allows on normal
// inputs with a large K. Must be caught at run time: "wrong_result" (tolerance model of the
// declared fp32 accumulation) or "timed_output_wrong".
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

constexpr int kBM = 32, kBN = 32, kBK = 16;
constexpr int kThreads = 128;
constexpr int64_t kMaxGridY = 65535;

__global__ void wmma_hgemm_f16acc(const __half* __restrict__ a, const __half* __restrict__ b,
                                  __half* __restrict__ c, int64_t m, int64_t n, int64_t k,
                                  bool b_col_major) {
  __shared__ __align__(32) __half as[kBM][kBK];
  __shared__ __align__(32) __half bs[kBK][kBN];
  __shared__ __align__(32) __half cs[kBM][kBN];
  const int tid = threadIdx.x, warp = tid / 32;
  const int wm = warp / 2, wn = warp % 2;
  const int64_t col0 = blockIdx.x * (int64_t)kBN;
  const int64_t row_tiles = (m + kBM - 1) / kBM;
  for (int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
    const int64_t row0 = rt * kBM;
    wmma::fragment<wmma::accumulator, 16, 16, 16, __half> acc;  // <- the downgrade
    wmma::fill_fragment(acc, __float2half(0.0f));
    for (int64_t k0 = 0; k0 < k; k0 += kBK) {
      for (int e = tid; e < kBM * kBK; e += kThreads) {
        const int r = e / kBK, q = e % kBK;
        const int64_t gr = row0 + r, gk = k0 + q;
        as[r][q] = (gr < m && gk < k) ? a[gr * k + gk] : __float2half(0.0f);
      }
      for (int e = tid; e < kBK * kBN; e += kThreads) {
        const int q = e / kBN, s = e % kBN;
        const int64_t gk = k0 + q, gc = col0 + s;
        __half v = __float2half(0.0f);
        if (gk < k && gc < n) v = b_col_major ? b[gc * k + gk] : b[gk * n + gc];
        bs[q][s] = v;
      }
      __syncthreads();
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
      wmma::load_matrix_sync(fa, &as[wm * 16][0], kBK);
      wmma::load_matrix_sync(fb, &bs[0][wn * 16], kBN);
      wmma::mma_sync(acc, fa, fb, acc);
      __syncthreads();
    }
    wmma::store_matrix_sync(&cs[wm * 16][wn * 16], acc, kBN, wmma::mem_row_major);
    __syncthreads();
    for (int e = tid; e < kBM * kBN; e += kThreads) {
      const int r = e / kBN, s = e % kBN;
      const int64_t gr = row0 + r, gc = col0 + s;
      if (gr < m && gc < n) c[gr * n + gc] = cs[r][s];
    }
    __syncthreads();
  }
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  if (p.m <= 0 || p.n <= 0) return 0;
  int64_t gy = (p.m + kBM - 1) / kBM;
  if (gy > kMaxGridY) gy = kMaxGridY;
  wmma_hgemm_f16acc<<<dim3((unsigned)((p.n + kBN - 1) / kBN), (unsigned)gy), kThreads, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
      static_cast<__half*>(args->c), p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
