// Honest HGEMM candidate written with CuTe (the CUTLASS headers of the nvidia-cutlass wheel, found
// by the compile service by itself): a TiledMMA of four SM80 warp MMAs, m16n8k16 with fp16 inputs
// and fp32 accumulators, arranged 2x2 over the warps.
//
//   mma    : SM80_16x8x16_F32F16F16F32_TN x (2,2,1) warps   -> one pass covers 32 x 16 x 16
//   CTA    : 64 x 64 tile of C, k-steps of 16               -> (MMA, MMA_M=2, MMA_N=4) fragments
//   sA     : (BM,BK) = (64,16) K-major, sB : (BN,BK) = (64,16) K-major (CuTe's (N,K) view of B)
//   global : A (M,K):(K,1); B (N,K):(1,N) for nn, (K,1) for tn; C (M,N):(N,1)
//
// Each k-step stages the A and B tiles through shared memory with bounds checks (zero padding past
// the edges, so any M, N, K works), copies the thread's fragments into registers and accumulates
// with cute::gemm. The epilogue finds each accumulator's (row, col) through the TiledMMA's own
// partition of an identity tensor and writes only in-bounds elements, rounded to nearest.
// fp32 accumulation for both declared precisions (the ABI's f16 means "fp16 or better"); both B
// layouts; all work on `stream`. Expected verdict: accepted.
#include <cuda_fp16.h>

#include <cute/atom/mma_atom.hpp>
#include <cute/tensor.hpp>

using namespace cute;

// File scope, no anonymous namespace: nvcc's host stub cannot tell an anonymous namespace of the
// file from CuTe's own ones once `using namespace cute` is in effect.
constexpr int kBM = 64, kBN = 64, kBK = 16;
constexpr int kThreads = 128;
constexpr int64_t kMaxGridY = 65535;

using TiledMma = decltype(make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{}, Layout<Shape<_2, _2, _1>>{}));
static_assert(decltype(size(TiledMma{}))::value == kThreads, "four warps");

static __global__ void __launch_bounds__(kThreads)
    cute_hgemm(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ c, int64_t m,
               int64_t n, int64_t k, bool b_col_major) {
  __shared__ __align__(16) half_t smem_a[kBM * kBK];
  __shared__ __align__(16) half_t smem_b[kBN * kBK];
  Tensor sA = make_tensor(make_smem_ptr(smem_a), make_layout(make_shape(Int<kBM>{}, Int<kBK>{}), LayoutRight{}));
  Tensor sB = make_tensor(make_smem_ptr(smem_b), make_layout(make_shape(Int<kBN>{}, Int<kBK>{}), LayoutRight{}));

  TiledMma mma;
  ThrMMA thr = mma.get_slice(threadIdx.x);
  Tensor tCsA = thr.partition_A(sA);             // (MMA, MMA_M, MMA_K)
  Tensor tCsB = thr.partition_B(sB);             // (MMA, MMA_N, MMA_K)
  Tensor tCrA = thr.make_fragment_A(tCsA);       // registers, same shape
  Tensor tCrB = thr.make_fragment_B(tCsB);
  Tensor tCrC = partition_fragment_C(mma, Shape<Int<kBM>, Int<kBN>>{});  // (MMA, MMA_M, MMA_N), fp32
  // (row, col) within the CTA tile of every accumulator this thread holds.
  Tensor tCcC = thr.partition_C(make_identity_tensor(Shape<Int<kBM>, Int<kBN>>{}));

  const int tid = threadIdx.x;
  const int64_t col0 = blockIdx.x * int64_t(kBN);
  const int64_t row_tiles = (m + kBM - 1) / kBM;
  for (int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {  // uniform per block
    const int64_t row0 = rt * kBM;
    clear(tCrC);
    for (int64_t k0 = 0; k0 < k; k0 += kBK) {
      for (int e = tid; e < kBM * kBK; e += kThreads) {
        const int r = e / kBK, q = e % kBK;
        const int64_t gr = row0 + r, gk = k0 + q;
        sA(r, q) = (gr < m && gk < k) ? half_t(a[gr * k + gk]) : half_t(0.0f);
      }
      for (int e = tid; e < kBN * kBK; e += kThreads) {
        const int s = e / kBK, q = e % kBK;
        const int64_t gc = col0 + s, gk = k0 + q;
        __half v = __float2half(0.0f);
        if (gc < n && gk < k) v = b_col_major ? b[gc * k + gk] : b[gk * n + gc];
        sB(s, q) = half_t(v);
      }
      __syncthreads();
      copy(tCsA, tCrA);
      copy(tCsB, tCrB);
      gemm(mma, tCrA, tCrB, tCrC);  // tCrC += tCrA * tCrB
      __syncthreads();              // the tiles are overwritten by the next k-step
    }
    for (int i = 0; i < size(tCrC); ++i) {
      const int64_t gr = row0 + get<0>(tCcC(i)), gc = col0 + get<1>(tCcC(i));
      if (gr < m && gc < n) c[gr * n + gc] = __float2half_rn(tCrC(i));
    }
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
  cute_hgemm<<<dim3((unsigned)gx, (unsigned)gy), kThreads, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b), static_cast<__half*>(args->c), p.m,
      p.n, p.k, p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
