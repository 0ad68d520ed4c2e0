// kforge's small-K HGEMM kernel family: C[M,N] = A[M,K] * B for K <= KMAX (8), on the CUDA cores.
//
// Why a family of its own: with K this small a GEMM is an outer product whose cost is writing C
// (2 x M x N bytes) and launching. The tensor-core families pad K to a whole K tile (64 deep for
// the sm_90a family, 32 for sm_80), and when K % 8 != 0 (rows not 16-byte multiples) the sm_90a
// family re-pitches both operands in two extra launches and the sm_80 family loads them element by
// element ahead of every tile; measured on the H200 (thirteenth and fourteenth sessions, off-grid
// set, graph mode): 89x55x1 5.7 us against cuBLASLt's 1.3, 403x7053x4 12.6 against 6.6,
// 13822x3521x3 119 against 67. The dispatcher sends it only such rows (small_k_regime).
//
//   * One CTA per BM x BN tile of C (a grid-stride loop over the tiles, row-major: consecutive
//     CTAs write neighbouring column tiles of the same rows). THREADS threads.
//   * The fill: the A tile (BM rows x K, one contiguous run of A since its rows are K long) and the
//     B tile (K x BN: for tn a contiguous run of BN rows of K, for nn K runs of BN) are read element
//     by element (coalesced, any alignment) into registers, every load of the tile issued before
//     the first is stored to shared memory as fp32, so that a tile waits one memory latency, not
//     one per load (the first version stored each load before issuing the next: 89x55x1 took 3.4
//     us in graph mode on the H200, 13822x3521x3 70 us, 1.4 TB/s). Slots up to K rounded to 4 are
//     written, zero past K and past the matrix's edge.
//   * Thread t owns columns j = t % (BN / 2) and j + BN / 2 of the tile and rows r = t / (BN / 2),
//     r + RG, ... (RG = THREADS / (BN / 2) row groups; four rows per pass, eight independent
//     accumulators): it keeps its two B columns in registers and, per row, reads the A row as
//     float4s (a broadcast: the threads of a row group share it) and accumulates
//     sum_k A[r][k] B[k][j] in fp32 in order k = 0, 1, ..., K-1 (the float4 groups past K are
//     skipped; within the last group the zero fill adds exact zeros). fp16 accumulation (ACC f16)
//     takes the same fp32 sums: more accurate than its contract, never less.
//   * Each row's outputs are rounded to fp16 / bf16 (round to nearest) and stored as 2-byte
//     elements: a warp stores runs of consecutive elements of a row (coalesced; any N, any
//     alignment).
//   * Programmatic dependent launch on sm_90 (as the other families, unless KFORGE_HGEMM_PDL=0).
//   * KMAX = 8: deeper K lost to the other families on the H200 even on tiny problems. K = 16,
//     first version: 2560x2024x16 12.1 against the Hopper tiles' 6.7 us; K up to 64 in chunks of
//     8 (sixteenth session): each chunk waited its own memory latency, 4.2-6.7 us on 64x64x24,
//     4x28x33, 256x256x32, 11784x4x26 against 1.8-3.9 us for the best other variant.
// Deterministic (no atomics, fixed order): bit-identical from run to run.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "dtype.cuh"
#include "kernel_api.hpp"
#include "skinny_gemm.cuh"

namespace kforge::kernels::smallk {

namespace detail {

template <int BM, int BN, int KMAX, int THREADS, kforge_hgemm_layout L, kforge_hgemm_dtype DT>
__global__ void __launch_bounds__(THREADS)
    smallk_kernel(const void* __restrict__ a_in, const void* __restrict__ b_in, void* __restrict__ c_out, int64_t m,
                  int64_t n, int k, int64_t tiles_n, int64_t tiles) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  constexpr int CL = BN / 2;        // column lanes: thread t owns columns t % CL and t % CL + CL
  constexpr int RG = THREADS / CL;  // row groups
  constexpr int RU = 4;             // rows per pass (independent accumulation chains)
  constexpr int FILL_A = BM * KMAX / THREADS, FILL_B = BN * KMAX / THREADS;  // loads per thread, at most
  static_assert(THREADS % CL == 0 && BM % (RG * RU) == 0 && KMAX % 4 == 0, "small-K tile");
  static_assert(BM * KMAX % THREADS == 0 && BN * KMAX % THREADS == 0 && FILL_B >= 1, "small-K fill");
  using E = Elem<DT>;
  using T = typename E::T;
  const T* a = static_cast<const T*>(a_in);
  const T* b = static_cast<const T*>(b_in);
  T* c = static_cast<T*>(c_out);
  __shared__ __align__(16) float as[BM][KMAX];
  __shared__ float bs[KMAX][BN + 1];  // odd pitch: the tn fill (consecutive k) is conflict-free
  skinny::detail::grid_dependency_wait();
  const int tid = threadIdx.x;
  const int col = tid % CL, rg = tid / CL;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
    const int rows = int(m - m0 < BM ? m - m0 : BM), cols = int(n - n0 < BN ? n - n0 : BN);
    const T* at = a + m0 * int64_t(k);
    float va[FILL_A], vb[FILL_B];
    // The fill's loads into registers (slots up to K rounded to 4; zero past K and past the
    // matrix's edge; the A tile is one contiguous run of A, its rows being K long).
    const int k4 = (k + 3) / 4 * 4;
#pragma unroll
    for (int f = 0; f < FILL_A; ++f) {
      const int i = tid + f * THREADS, r = i / k4, kk = i - r * k4;
      va[f] = (i < BM * k4 && r < rows && kk < k) ? E::to(at[int64_t(r) * k + kk]) : 0.0f;
    }
#pragma unroll
    for (int f = 0; f < FILL_B; ++f) {
      const int i = tid + f * THREADS;
      if (L == KFORGE_HGEMM_TN) {  // B column-major: column j is k contiguous elements at b + (n0 + j) * k
        const int j = i / k4, kk = i - j * k4;
        vb[f] = (i < BN * k4 && j < cols && kk < k) ? E::to(b[(n0 + j) * int64_t(k) + kk]) : 0.0f;
      } else {  // B row-major K x N: row kk's tile is BN contiguous elements at b + kk * n + n0
        const int kk = i / BN, j = i % BN;
        vb[f] = (kk < k && j < cols) ? E::to(b[int64_t(kk) * n + n0 + j]) : 0.0f;
      }
    }
    // Then the shared stores.
#pragma unroll
    for (int f = 0; f < FILL_A; ++f) {
      const int i = tid + f * THREADS, r = i / k4;
      if (i < BM * k4) as[r][i - r * k4] = va[f];
    }
#pragma unroll
    for (int f = 0; f < FILL_B; ++f) {
      const int i = tid + f * THREADS;
      if (L == KFORGE_HGEMM_TN) {
        const int j = i / k4;
        if (i < BN * k4) bs[i - j * k4][j] = vb[f];
      } else if (i / BN < k4) {
        bs[i / BN][i % BN] = vb[f];
      }
    }
    __syncthreads();
    const int kq = k4 / 4;  // float4 groups holding the K values (uniform across the CTA)
    float b0[KMAX], b1[KMAX];
#pragma unroll
    for (int kk = 0; kk < KMAX; ++kk)
      if (kk < k4) b0[kk] = bs[kk][col], b1[kk] = bs[kk][col + CL];
    // Four rows per pass (rows r, r + RG, r + 2 RG, r + 3 RG): eight independent accumulation chains
    // per thread, so that a warp's shared loads and FMA latencies overlap (one row per pass made
    // every tile a chain of 32 dependent row steps: ~3.5 us a tile on the H200, the launch aside).
    // Rows past the matrix's edge read the zero fill and are not stored. A loop, not unrolled: a
    // pass's accumulators live only in it (64 registers at 128 x 128).
#pragma unroll 1
    for (int r0 = rg; r0 < rows; r0 += RG * RU) {
      float s0[RU], s1[RU];
#pragma unroll
      for (int u = 0; u < RU; ++u) s0[u] = 0.0f, s1[u] = 0.0f;
#pragma unroll
      for (int q = 0; q < KMAX / 4; ++q) {
        if (q < kq) {
#pragma unroll
          for (int u = 0; u < RU; ++u) {
            const float4 av = *reinterpret_cast<const float4*>(&as[r0 + u * RG][4 * q]);
            s0[u] = fmaf(av.x, b0[4 * q + 0], s0[u]), s1[u] = fmaf(av.x, b1[4 * q + 0], s1[u]);
            s0[u] = fmaf(av.y, b0[4 * q + 1], s0[u]), s1[u] = fmaf(av.y, b1[4 * q + 1], s1[u]);
            s0[u] = fmaf(av.z, b0[4 * q + 2], s0[u]), s1[u] = fmaf(av.z, b1[4 * q + 2], s1[u]);
            s0[u] = fmaf(av.w, b0[4 * q + 3], s0[u]), s1[u] = fmaf(av.w, b1[4 * q + 3], s1[u]);
          }
        }
      }
      T* row = c + (m0 + r0) * n + n0;
#pragma unroll
      for (int u = 0; u < RU; ++u, row += RG * n) {
        if (r0 + u * RG < rows) {
          if (col < cols) row[col] = E::from(s0[u]);
          if (col + CL < cols) row[col + CL] = E::from(s1[u]);
        }
      }
    }
    __syncthreads();  // the next tile's fill overwrites as / bs
  }
#else
  (void)a_in, (void)b_in, (void)c_out, (void)m, (void)n, (void)k, (void)tiles_n, (void)tiles;
  __trap();
#endif
}

}  // namespace detail

// The variant. Serves K <= KMAX, any M and N, any 2-byte aligned pointers, of its layout,
// accumulation and dtype (bf16: fp32 accumulation only); no workspace.
template <int BM, int BN, int KMAX, int THREADS, kforge_hgemm_layout L, kforge_hgemm_acc ACC,
          kforge_hgemm_dtype DT = KFORGE_HGEMM_F16>
struct Gemm {
  static constexpr kforge_hgemm_dtype kDtype = DT;
  static constexpr int kBn = BN;

  static constexpr KernelConfig config() {
    KernelConfig c{};
    c.family = Family::kSmallK;
    c.bm = BM;
    c.bn = kBn;
    c.bk = KMAX;
    c.consumers = THREADS / 32;
    c.max_k = KMAX;
    return c;
  }

  static bool supports(const kforge_hgemm_problem* p) {
    if (p == nullptr || p->layout != L || p->acc != ACC || p->dtype != DT) return false;
    if (p->m < 1 || p->n < 1 || p->k < 1 || p->k > KMAX) return false;
    if (p->m > (int64_t(1) << 40) || p->n > (int64_t(1) << 40)) return false;  // tile counts and M x N fit int64
    return true;
  }

  static size_t workspace_size(const kforge_hgemm_problem*) { return 0; }

  static auto kernel_ptr() { return detail::smallk_kernel<BM, BN, KMAX, THREADS, L, DT>; }

  static int resident_ctas() { return resident_plain_ctas(kernel_ptr(), THREADS, 0); }

  static int run(const kforge_hgemm_args* args, cudaStream_t stream) {
    if (args == nullptr || !supports(&args->problem)) return kRunUnsupported;
    if (args->a == nullptr || args->b == nullptr || args->c == nullptr) return kRunUnsupported;
    const uintptr_t pa = reinterpret_cast<uintptr_t>(args->a), pb = reinterpret_cast<uintptr_t>(args->b),
                    pc = reinterpret_cast<uintptr_t>(args->c);
    if (((pa | pb | pc) & 1u) != 0) return kRunUnsupported;  // not even 2-byte aligned
    const DeviceAttrs d = device_attrs(current_device());
    if (d.cc < 80) return kRunUnsupported;
    const kforge_hgemm_problem& p = args->problem;
    const int64_t tiles_n = (p.n + kBn - 1) / kBn, tiles = ((p.m + BM - 1) / BM) * tiles_n;
    const int64_t grid = tiles < 0x7fffffff ? tiles : 0x7fffffff;  // the kernel grid-strides past it
    const bool pdl = d.cc >= 90 && skinny::pdl_enabled();
    return skinny::detail::launch(kernel_ptr(), dim3(unsigned(grid)), dim3(THREADS), 0, stream, pdl, args->a, args->b,
                                  static_cast<void*>(args->c), p.m, p.n, int(p.k), tiles_n, tiles);
  }
};

}  // namespace kforge::kernels::smallk
