// kforge's small-K HGEMM kernel family: C[M,N] = A[M,K] * B for K <= KMAX (8), on the CUDA cores.
// (The family's whole-K variants, for K up to 256, are the second kernel of this file: WholeK.)
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
#include <type_traits>

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

// What both kernels of the family serve: K <= kmax, any M and N, of one layout, accumulation and
// dtype.
inline bool serves(const kforge_hgemm_problem* p, kforge_hgemm_layout l, kforge_hgemm_acc acc, kforge_hgemm_dtype dt,
                   int kmax) {
  if (p == nullptr || p->layout != l || p->acc != acc || p->dtype != dt) return false;
  if (p->m < 1 || p->n < 1 || p->k < 1 || p->k > kmax) return false;
  if (p->m > (int64_t(1) << 40) || p->n > (int64_t(1) << 40)) return false;  // tile counts and M x N fit int64
  return true;
}

// Both kernels' launch: one CTA per BM x BN tile of C (grid-striding past 2^31 - 1 CTAs), after
// the family's checks of the call (pointers given and 2-byte aligned, an sm_80+ device; `ready`
// may refuse it too, e.g. a shared-memory limit it cannot set). 0, kRunUnsupported or
// kRunLaunchFailed.
template <int BM, int BN, typename KernelPtr, typename Ready>
inline int launch_tiles(KernelPtr kernel, int threads, size_t smem, const kforge_hgemm_args* args, cudaStream_t stream,
                        Ready ready) {
  DeviceAttrs d;
  if (const int rc = plain_call_checks(args, &d)) return rc;
  if (!ready()) return kRunLaunchFailed;
  const kforge_hgemm_problem& p = args->problem;
  const int64_t tiles_n = (p.n + BN - 1) / BN, tiles = ((p.m + BM - 1) / BM) * tiles_n;
  const int64_t grid = tiles < 0x7fffffff ? tiles : 0x7fffffff;  // the kernel grid-strides past it
  const bool pdl = d.cc >= 90 && skinny::pdl_enabled();
  return skinny::detail::launch(kernel, dim3(unsigned(grid)), dim3(threads), smem, stream, pdl, args->a, args->b,
                                static_cast<void*>(args->c), p.m, p.n, int(p.k), tiles_n, tiles);
}

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

  static bool supports(const kforge_hgemm_problem* p) { return serves(p, L, ACC, DT, KMAX); }

  static size_t workspace_size(const kforge_hgemm_problem*) { return 0; }

  static auto kernel_ptr() { return detail::smallk_kernel<BM, BN, KMAX, THREADS, L, DT>; }

  static int resident_ctas() { return resident_plain_ctas(kernel_ptr(), THREADS, 0); }

  static int run(const kforge_hgemm_args* args, cudaStream_t stream) {
    if (args == nullptr || !supports(&args->problem)) return kRunUnsupported;
    return launch_tiles<BM, kBn>(kernel_ptr(), THREADS, 0, args, stream, [] { return true; });
  }
};


// The whole-K kernel of the family (WholeK below): tiny problems with K up to KMAX (256) whose rows
// are not 16-byte multiples, where the tensor-core families wait one memory latency per K tile
// (element-wise guarded loads ahead of every tile, or two extra launches re-pitching the operands)
// and the outer product above would hold K registers per column. Measured on the H200 before it
// (sixteenth to nineteenth sessions, off-grid set, graph mode): 814x28x12 5.3 us against cuBLASLt's
// 2.0, 3x10507x161 10.2 against 3.9, 382x387x100 7.8 against 3.9, 11784x4x26 4.6 against 2.5.
//
//   * One CTA per BM x BN tile of C (a grid-stride loop over the tiles, row-major), BM x BN / 4
//     threads, each computing 2 x 2 outputs: rows ty and ty + BM / 2, columns tx and tx + BN / 2.
//   * The fill: the tile's A rows (BM x K, one contiguous run of A) and B columns (tn: BN rows of
//     K, one contiguous run; nn: K runs of BN) go whole into shared memory as fp32, K contiguous
//     per row. With A (and, tn, B) 16-byte aligned, both runs start 16-byte aligned (BM and BN
//     are multiples of 8) and are read as 16-byte vectors of eight elements, every vector of the
//     tile issued before the first is unpacked (one memory latency per tile); the runs' last
//     len % 8 elements, the nn B tile and operands at odd offsets go element by element, in
//     passes of kFillGroup loads per thread. Every pass stops at the tile's own count (a bound
//     uniform over the CTA): the first version walked all 32 slots of a pass, predicated off past
//     the tile, 2 x 32 x ~15 instructions per warp whatever the tile held, and its fill dominated
//     the tiny problems it serves (twenty-seventh session, H100, Nsight Compute: 11784x4x26 ran
//     1,127 instructions per warp where cuBLASLt's kernel ran 546; 814x28x12 took 3.6 us against
//     cuBLASLt's 2.0 in graph mode).
//   * Row pitch: K rounded up to an odd number of float4s, so that the 8 lanes of a float4 phase
//     reading 8 consecutive rows hit 8 distinct bank groups; the slots from K to the next multiple
//     of 4 are zeroed once per CTA (the fill never writes them).
//   * The dot products: per group of four k, one float4 of each of the thread's two A rows and
//     two B columns, sixteen FMAs; fp32 sums in order k = 0, 1, ..., K - 1 (the zero slots add
//     exact zeros). fp16 accumulation takes the same fp32 sums (more accurate than its contract).
//   * Outputs rounded to fp16 / bf16 (round to nearest), stored as 2-byte elements.
//   * Programmatic dependent launch on sm_90 (as the other families, unless KFORGE_HGEMM_PDL=0).
// Deterministic (no atomics, fixed order): bit-identical from run to run.
namespace detail {

// Loads per thread issued before the first of them is stored (one memory latency per group).
inline constexpr int kFillGroup = 16;

// Element `hi` (0: low half, 1: high half) of a 32-bit word of two packed elements, as fp32.
template <class E>
__device__ __forceinline__ float wholek_elem(uint32_t w, int hi) {
  const unsigned short bits = static_cast<unsigned short>(hi ? w >> 16 : w & 0xffffu);
  if constexpr (std::is_same_v<typename E::T, __half>) return __half2float(__ushort_as_half(bits));
  else return __uint_as_float(uint32_t(bits) << 16);  // bf16: the top half of an fp32
}

// Passes over `count` elements, kFillGroup loads per thread each: every load(i) of a pass is
// issued before the first store(i, value) (one memory latency per pass), and a pass issues only
// the loads it has (the bound is uniform over the CTA: no predicated-off slots to walk).
template <int THREADS, class T, class Load, class Store>
__device__ __forceinline__ void wholek_fill_passes(int count, int tid, Load load, Store store) {
  constexpr int G = kFillGroup;
  for (int base = 0; base < count; base += THREADS * G) {
    T v[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (base + g * THREADS >= count) break;
      const int i = base + g * THREADS + tid;
      if (i < count) v[g] = load(i);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (base + g * THREADS >= count) break;
      const int i = base + g * THREADS + tid;
      if (i < count) store(i, v[g]);
    }
  }
}

// The nn B tile: K rows of `cols` contiguous elements of B (any alignment), each stored as a
// column of bs (slot kk of row col).
template <int THREADS, class E>
__device__ __forceinline__ void wholek_fill_nn(const typename E::T* __restrict__ b, int64_t n, int64_t n0, int k,
                                               int cols, float inv_cols, int pitch, float* bs, int tid) {
  using T = typename E::T;
  wholek_fill_passes<THREADS, T>(
      cols * k, tid,
      [&](int j) {
        const int kk = div_small(j, cols, inv_cols);
        return b[int64_t(kk) * n + n0 + (j - kk * cols)];
      },
      [&](int j, T v) {
        const int kk = div_small(j, cols, inv_cols);
        bs[(j - kk * cols) * pitch + kk] = E::to(v);
      });
}

template <int BM, int BN, int KMAX, kforge_hgemm_layout L, kforge_hgemm_dtype DT>
__global__ void __launch_bounds__(BM * BN / 4)
    wholek_kernel(const void* __restrict__ a_in, const void* __restrict__ b_in, void* __restrict__ c_out, int64_t m,
                  int64_t n, int k, int64_t tiles_n, int64_t tiles) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  constexpr int THREADS = BM * BN / 4, TX = BN / 2, TY = BM / 2;
  // 16-byte loads per thread (eight elements each): both tiles' runs at K = KMAX, all in flight at
  // once. (A cap of 8 with a second pass, and lanes staggered over the vector's words against the
  // unpack's 8-way bank conflicts, measured slower on the tiny problems these variants serve:
  // +0.1 us at 814x28x12, +0.3 at 234x110x95, H100, twenty-seventh session.)
  // (nn: the A run only; its B tile is gathered by wholek_fill_nn, and a V sized for both spilled
  // 20-28 bytes of registers in the nn variants.)
  constexpr int V = ((BM + (L == KFORGE_HGEMM_TN ? BN : 0)) * KMAX / 8 + THREADS - 1) / THREADS;
  static_assert(BM % 8 == 0 && BN % 8 == 0 && THREADS >= 16, "whole-K tile: 16-byte aligned runs, two tail groups");
  static_assert(BM % 2 == 0 && BN % 2 == 0 && THREADS % 32 == 0 && THREADS <= 1024, "whole-K tile");
  using E = Elem<DT>;
  using T = typename E::T;
  const T* a = static_cast<const T*>(a_in);
  const T* b = static_cast<const T*>(b_in);
  T* c = static_cast<T*>(c_out);
  extern __shared__ __align__(16) float wk_smem[];
  const int pitch = wholek_pitch(k), k4 = (k + 3) / 4 * 4;
  float* as = wk_smem;               // BM rows (of A) x pitch
  float* bs = wk_smem + BM * pitch;  // BN rows (columns of B) x pitch
  const int tid = threadIdx.x;
  // The slots from K to K rounded to 4, zero in every row (the fill writes only k < K).
  for (int i = tid; i < (BM + BN) * (k4 - k); i += THREADS) {
    const int r = i / (k4 - k);
    wk_smem[r * pitch + k + (i - r * (k4 - k))] = 0.0f;
  }
  skinny::detail::grid_dependency_wait();
  const float inv_k = 1.0f / float(k);
  const int tx = tid % TX, ty = tid / TX;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t m0 = (tile / tiles_n) * BM, n0 = (tile % tiles_n) * BN;
    const int rows = int(m - m0 < BM ? m - m0 : BM), cols = int(n - n0 < BN ? n - n0 : BN);
    const float inv_cols = 1.0f / float(cols);
    const T* at = a + m0 * int64_t(k);  // the A tile: rows x K contiguous elements
    const int ta = rows * k, tb = cols * k;
    // The fill. Rows past the matrix's edge are not filled: their outputs are computed from stale
    // slots and not stored. Every load of a pass is issued before the first of them is stored, and
    // a pass issues only the loads it has (the bound is uniform: no predicated-off slots to walk).
    const T* bt = b + n0 * int64_t(k);  // tn: the B tile, cols x K contiguous elements
    const bool vec = ((reinterpret_cast<uintptr_t>(a) | (L == KFORGE_HGEMM_TN ? reinterpret_cast<uintptr_t>(b) : 0)) & 15) == 0;
    if (vec) {
      // 16-byte loads of eight elements: the A tile is one run of A starting at row m0, a multiple
      // of BM (so of 8): 16-byte aligned with A; so is the tn B tile. The runs' last ta % 8 and
      // tb % 8 elements go element by element (a vector there would read past the matrix).
      const int va = ta / 8, vb = L == KFORGE_HGEMM_TN ? tb / 8 : 0;
      uint4 r[V];
      T tail{};
      const int tail_i = tid < ta % 8 ? va * 8 + tid : (L == KFORGE_HGEMM_TN && tid >= 8 && tid < 8 + tb % 8) ? vb * 8 + tid - 8 : -1;
      if (tail_i >= 0) tail = tid < 8 ? at[tail_i] : bt[tail_i];
#pragma unroll
      for (int u = 0; u < V; ++u) {
        if (u * THREADS >= va + vb) break;
        const int j = u * THREADS + tid;
        if (j < va) r[u] = __ldg(reinterpret_cast<const uint4*>(at) + j);
        else if (j < va + vb) r[u] = __ldg(reinterpret_cast<const uint4*>(bt) + (j - va));
      }
      if (L != KFORGE_HGEMM_TN) wholek_fill_nn<THREADS, E>(b, n, n0, k, cols, inv_cols, pitch, bs, tid);
#pragma unroll
      for (int u = 0; u < V; ++u) {
        if (u * THREADS >= va + vb) break;
        const int j = u * THREADS + tid;
        if (j >= va + vb) continue;
        float* dst = j < va ? as : bs;
        const int i0 = 8 * (j < va ? j : j - va);
        int row = div_small(i0, k, inv_k), slot = i0 - row * k;
        const uint32_t w[4] = {r[u].x, r[u].y, r[u].z, r[u].w};
#pragma unroll
        for (int q = 0; q < 8; ++q) {  // eight consecutive slots, wrapping into the next rows
          dst[row * pitch + slot] = wholek_elem<E>(w[q / 2], q % 2);
          if (++slot == k) slot = 0, ++row;
        }
      }
      if (tail_i >= 0) {
        const int row = div_small(tail_i, k, inv_k);
        (tid < 8 ? as : bs)[row * pitch + tail_i - row * k] = E::to(tail);
      }
    } else {
      // Element by element (a base pointer not 16-byte aligned): the A run, then (tn) the B run.
      const int tbt = L == KFORGE_HGEMM_TN ? tb : 0;
      wholek_fill_passes<THREADS, T>(
          ta + tbt, tid, [&](int i) { return i < ta ? at[i] : bt[i - ta]; },
          [&](int i, T v) {
            float* dst = i < ta ? as : bs;
            const int ii = i < ta ? i : i - ta;
            const int row = div_small(ii, k, inv_k);
            dst[row * pitch + ii - row * k] = E::to(v);
          });
      if (L != KFORGE_HGEMM_TN) wholek_fill_nn<THREADS, E>(b, n, n0, k, cols, inv_cols, pitch, bs, tid);
    }
    __syncthreads();
    const float* a0 = as + ty * pitch;
    const float* a1 = as + (ty + TY) * pitch;
    const float* b0 = bs + tx * pitch;
    const float* b1 = bs + (tx + TX) * pitch;
    float s00 = 0.0f, s01 = 0.0f, s10 = 0.0f, s11 = 0.0f;
#pragma unroll 4
    for (int q = 0; q < k4; q += 4) {
      const float4 x0 = *reinterpret_cast<const float4*>(a0 + q), x1 = *reinterpret_cast<const float4*>(a1 + q);
      const float4 y0 = *reinterpret_cast<const float4*>(b0 + q), y1 = *reinterpret_cast<const float4*>(b1 + q);
      s00 = fmaf(x0.x, y0.x, s00), s01 = fmaf(x0.x, y1.x, s01), s10 = fmaf(x1.x, y0.x, s10), s11 = fmaf(x1.x, y1.x, s11);
      s00 = fmaf(x0.y, y0.y, s00), s01 = fmaf(x0.y, y1.y, s01), s10 = fmaf(x1.y, y0.y, s10), s11 = fmaf(x1.y, y1.y, s11);
      s00 = fmaf(x0.z, y0.z, s00), s01 = fmaf(x0.z, y1.z, s01), s10 = fmaf(x1.z, y0.z, s10), s11 = fmaf(x1.z, y1.z, s11);
      s00 = fmaf(x0.w, y0.w, s00), s01 = fmaf(x0.w, y1.w, s01), s10 = fmaf(x1.w, y0.w, s10), s11 = fmaf(x1.w, y1.w, s11);
    }
    T* row0 = c + (m0 + ty) * n + n0;
    T* row1 = row0 + int64_t(TY) * n;
    if (ty < rows) {
      if (tx < cols) row0[tx] = E::from(s00);
      if (tx + TX < cols) row0[tx + TX] = E::from(s01);
    }
    if (ty + TY < rows) {
      if (tx < cols) row1[tx] = E::from(s10);
      if (tx + TX < cols) row1[tx + TX] = E::from(s11);
    }
    __syncthreads();  // the next tile's fill overwrites as / bs
  }
#else
  (void)a_in, (void)b_in, (void)c_out, (void)m, (void)n, (void)k, (void)tiles_n, (void)tiles;
  __trap();
#endif
}

}  // namespace detail

// The whole-K variant. Serves K <= KMAX, any M and N, any 2-byte aligned pointers, of its layout,
// accumulation and dtype (bf16: fp32 accumulation only); no workspace. Dynamic shared memory:
// (BM + BN) x wholek_pitch(K) floats (66.6 KB for 32 x 32 at K = 256).
template <int BM, int BN, int KMAX, kforge_hgemm_layout L, kforge_hgemm_acc ACC, kforge_hgemm_dtype DT = KFORGE_HGEMM_F16>
struct WholeK {
  static constexpr kforge_hgemm_dtype kDtype = DT;
  static constexpr int kThreads = BM * BN / 4;
  static constexpr size_t smem_bytes(int k) { return size_t(BM + BN) * size_t(wholek_pitch(k)) * sizeof(float); }
  static constexpr size_t kMaxSmemBytes = smem_bytes(KMAX);

  static constexpr KernelConfig config() {
    KernelConfig c{};
    c.family = Family::kSmallK;
    c.bm = BM;
    c.bn = BN;
    c.bk = KMAX;
    c.consumers = kThreads / 32;
    c.max_k = KMAX;
    c.whole_k = true;
    c.gather_b = L == KFORGE_HGEMM_NN;
    return c;
  }

  static bool supports(const kforge_hgemm_problem* p) { return serves(p, L, ACC, DT, KMAX); }

  static size_t workspace_size(const kforge_hgemm_problem*) { return 0; }

  static auto kernel_ptr() { return detail::wholek_kernel<BM, BN, KMAX, L, DT>; }

  static int resident_ctas() {
    static std::atomic<uint64_t> done{0};
    if (!ensure_smem_attribute(kernel_ptr(), kMaxSmemBytes, done)) return 0;
    return resident_plain_ctas(kernel_ptr(), kThreads, kMaxSmemBytes);
  }

  static int run(const kforge_hgemm_args* args, cudaStream_t stream) {
    if (args == nullptr || !supports(&args->problem)) return kRunUnsupported;
    static std::atomic<uint64_t> done{0};
    return launch_tiles<BM, BN>(kernel_ptr(), kThreads, smem_bytes(int(args->problem.k)), args, stream,
                                [] { return ensure_smem_attribute(kernel_ptr(), kMaxSmemBytes, done); });
  }
};

}  // namespace kforge::kernels::smallk
