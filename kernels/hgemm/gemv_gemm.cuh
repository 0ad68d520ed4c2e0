// kforge's GEMV-like HGEMM kernel (Family::kGemv): C[M,N] = A[M,K] * B for one side of C at most
// MT (8) long, on the CUDA cores. The decode family (skinny_gemm.cuh) pads that side to an mma's 8
// rows and streams the other operand through a cp.async pipeline of 64- or 128-deep K tiles; on
// problems whose few outputs each need a long K (2x1x1500: one column tile, the K split over CTAs
// and summed by a second kernel, 4.8 us against cuBLASLt's 2.7 on an H100, graph mode; 1x1x65536:
// 11-68 us against 3.5) or whose rows are not 16-byte multiples (3x10507x161: element-wise loads,
// the pipeline serialised, 7.2-12.3 us against 3.8) it pays for what it does not need. Here:
//
//   * "W" is the streamed operand, its rows K-contiguous: B for tn with M <= MT (C = A B^T), A when
//     N <= MT (SWAP: C^T = B^T A^T, either layout). "X" is the small operand, xr <= MT rows of K
//     (K-contiguous, or for a swapped nn B, K rows of N). (nn with small M, B's rows along N, is not
//     served: the decode family keeps it.)
//   * A warp streams R rows of W at once (R = 1: more K per warp in flight, for few rows; R = 4:
//     X's loads shared by four rows, a quarter of the CTAs, for many). One CTA of WARPS warps per
//     WARPS / G row groups; the G warps of a group, and the S CTAs of a cluster (sm_90, grid y),
//     split its K: K group q = s * G + g of Q = G x S takes the blocks q, q + Q, ... of 256
//     elements (16-byte loads of eight, when K % 8 == 0 and W is 16-byte aligned: VEC) or of 32
//     (2-byte loads, any alignment: a warp's load is still 64 contiguous bytes). G and S are chosen
//     at run time (gemv_split): enough CTAs for the device, enough K per warp.
//   * X is read where it is used, beside W's elements (a few KB, shared by every CTA: L1 and L2
//     hits): 16-byte vectors when its elements are K-contiguous and aligned too (XVEC), else element
//     by element. Each lane issues U blocks' loads (W's R rows and X's xr) before the first is
//     used. (The first version staged X in shared memory per 2048-element chunk, one load per
//     thread at a time: 72 us at 8x2048x8192 where the decode tiles ran 9.6; with X read in place
//     and R = 1 it took 25, with R = 4 13.8; H100.) The element-by-element paths are correct at any
//     alignment but slow (2x1x1500: 4.7-4.9 us; a swapped nn B of 8 columns, gathered along K:
//     2x8x4096 19.5). With R = 1 and W's rows not all 16-byte aligned (K % 8 != 0, or an odd
//     offset), each row is read as the aligned vectors that cover it (SHIFT: the neighbouring
//     rows' elements masked, X by element at the shifted index; 2x1x1500 2.1 us, H100). The
//     dispatcher sends the family problems with X contiguous along K, and at K % 8 != 0 only to
//     R = 1 (dispatch.hpp, gemv_choice).
//   * Each lane accumulates the xr dot products of its elements in fp32 in its own order; the
//     lanes' sums meet in a butterfly of warp shuffles, a row's G warps in shared memory (added in
//     warp order), a cluster's S CTAs in rank 0's (through distributed shared memory, in rank
//     order). Every order is fixed: bit-identical from run to run on one device (G and S depend on
//     its SM count). fp16 accumulation (ACC f16) takes the same fp32 sums.
//   * Outputs rounded to fp16 / bf16 (round to nearest), 2-byte stores; no workspace.
//   * Programmatic dependent launch on sm_90 (as the other families, unless KFORGE_HGEMM_PDL=0).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "dtype.cuh"
#include "kernel_api.hpp"
#include "skinny_gemm.cuh"
#include "sm90_gemm.cuh"  // the cluster barrier and rank

namespace kforge::kernels::gemv {

namespace detail {

struct Params {
  const void* x;  // X: element (j, kk) at x[j * sx_r + kk * sx_k], j < xr
  const void* w;  // W: row r at w + r * k, r < wr
  void* c;        // C: (j, r) at c[j * c_x + r * c_w]
  int64_t xr, wr, k;
  int64_t sx_r, sx_k, c_x, c_w;
  int groups;  // G: warps of a CTA sharing a row
  int splits;  // S: CTAs of a cluster sharing a row group (gridDim.y)
};

// A 2-byte element's bits (T: __half or __nv_bfloat16) as fp32.
template <class T>
__device__ __forceinline__ float elem_bits_to_float(unsigned short b) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(__ushort_as_half(b));
  else return __uint_as_float(uint32_t(b) << 16);  // bf16: the top half of an fp32
}

// The same by dtype.
template <kforge_hgemm_dtype DT>
__device__ __forceinline__ float bits_to_float(unsigned short b) {
  return elem_bits_to_float<typename Elem<DT>::T>(b);
}

// Eight 2-byte elements packed in a uint4 (element e in the low / high half of word e / 2), as fp32.
template <class T>
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const uint32_t q[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int e = 0; e < 8; ++e)
    f[e] = elem_bits_to_float<T>(static_cast<unsigned short>(e % 2 ? q[e / 2] >> 16 : q[e / 2] & 0xffffu));
}

// Eight 2-byte elements' bits (h[e] < 2^16) packed in a uint4, as unpack8 reads them.
__device__ __forceinline__ uint4 pack8(const uint32_t (&h)[8]) {
  return make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
// The float at `local`'s address in the shared memory of CTA `rank` of this cluster.
__device__ __forceinline__ float ld_dsmem(const float* local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(local))), "r"(rank));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
  return v;
}
#endif

// VEC: W read as 16-byte vectors. SHIFT (VEC, R = 1, X element by element): W's rows need not
// start 16-byte aligned (K % 8 != 0): a row is read as the aligned vectors that cover it, its
// elements at K index kb + e - o (o: the row's start within its first vector), the elements of the
// neighbouring rows masked to zero, and a vector that would reach outside W (before row 0, past
// the last row) read element by element.
template <int MT, int R, int WARPS, bool VEC, bool XVEC, bool SHIFT, kforge_hgemm_dtype DT>
__global__ void __launch_bounds__(WARPS * 32) gemv_kernel(const Params p) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  using E = Elem<DT>;
  using T = typename E::T;
  static_assert(!SHIFT || (VEC && !XVEC && R == 1), "the shifted path: 16-byte W, one row per warp, X by element");
  constexpr int kThreads = WARPS * 32;
  constexpr int U = VEC ? (R == 1 && !SHIFT ? 2 : 1) : (R == 1 ? 8 : 4);  // blocks per lane in flight
  constexpr int kStep = VEC ? 256 : 32;  // elements of K a warp covers per block
  __shared__ float red[WARPS][R][MT];    // each warp's sums
  __shared__ float part[WARPS][R][MT];   // the CTA's sums per row-group slot (WARPS / G slots)
  const int xr = int(p.xr);
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);
  T* c = static_cast<T*>(p.c);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int G = p.groups, gpc = WARPS / G;  // row groups (of R rows) per CTA
  const int slot = warp / G, g = warp - slot * G;
  const int64_t row0 = (int64_t(blockIdx.x) * gpc + slot) * R;
  const int live = int(p.wr - row0 < R ? (p.wr - row0 > 0 ? p.wr - row0 : 0) : R);  // rows of this group in W
  const int64_t Q = int64_t(G) * p.splits, q = int64_t(blockIdx.y) * G + g;
  const int64_t K = p.k;
  float acc[R][MT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m) acc[r][m] = 0.0f;
  skinny::detail::grid_dependency_wait();
  if (live > 0) {
    const T* wg = w + row0 * K;
    // SHIFT: the row starts o elements into its first aligned vector; its vectors cover K index
    // kb - o .. kb - o + 7 for kb = 0, 8, ... < K + o. (Otherwise o = 0, K % 8 == 0.)
    const int o = SHIFT ? int((reinterpret_cast<uintptr_t>(wg) >> 1) & 7u) : 0;
    const int64_t kend = K + o;
    const unsigned short* wbits = reinterpret_cast<const unsigned short*>(wg);
    const unsigned short* xbits = reinterpret_cast<const unsigned short*>(x);
    for (int64_t base = q * kStep; base < kend; base += Q * kStep * U) {
      if constexpr (VEC) {
        // U blocks: eight elements of K per lane each, of the R rows and of the xr rows of X, every
        // load issued before the first is used.
        uint4 wv[U][R], xv[U][MT];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t kb = base + u * Q * kStep + lane * 8;
          const bool ok = kb < kend;  // K % 8 == 0 (not SHIFT): the whole vector is in or out
          if constexpr (SHIFT) {
            // The aligned vector at the row's element kb - o, unless it reaches outside W (the first
            // vector of row 0, the last of the last row): then only the row's own elements.
            const int64_t k0 = kb - o;
            const bool inside = (row0 > 0 || k0 >= 0) && (row0 + 1 < p.wr || k0 + 8 <= K);
            if (ok && inside) {
              wv[u][0] = __ldg(reinterpret_cast<const uint4*>(wg + k0));
            } else {
              uint32_t h[8];
#pragma unroll
              for (int e = 0; e < 8; ++e) h[e] = ok && k0 + e >= 0 && k0 + e < K ? uint32_t(__ldg(wbits + k0 + e)) : 0u;
              wv[u][0] = pack8(h);
            }
          } else {
#pragma unroll
            for (int r = 0; r < R; ++r)
              wv[u][r] = ok && r < live ? __ldg(reinterpret_cast<const uint4*>(wg + r * K + kb)) : make_uint4(0u, 0u, 0u, 0u);
          }
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            if (m >= xr) break;
            if constexpr (XVEC) {
              xv[u][m] = ok ? __ldg(reinterpret_cast<const uint4*>(x + m * p.sx_r + kb)) : make_uint4(0u, 0u, 0u, 0u);
            } else {
              uint32_t h[8];
#pragma unroll
              for (int e = 0; e < 8; ++e) {
                const int64_t kk = kb - o + e;
                h[e] = ok && (!SHIFT || (kk >= 0 && kk < K)) ? uint32_t(__ldg(xbits + m * p.sx_r + kk * p.sx_k)) : 0u;
              }
              xv[u][m] = pack8(h);
            }
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t kb = base + u * Q * kStep + lane * 8;
          if (kb >= kend) continue;
          float wf[R][8];
#pragma unroll
          for (int r = 0; r < R; ++r) unpack8<T>(wv[u][r], wf[r]);
          if constexpr (SHIFT) {
            // The neighbouring rows' elements in the first and last vectors count as zero (an
            // infinity there times X's zero would be NaN).
#pragma unroll
            for (int e = 0; e < 8; ++e)
              if (kb - o + e < 0 || kb - o + e >= K) wf[0][e] = 0.0f;
          }
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            if (m >= xr) break;
            float xf[8];
            unpack8<T>(xv[u][m], xf);
#pragma unroll
            for (int r = 0; r < R; ++r) {
              float s = acc[r][m];
#pragma unroll
              for (int e = 0; e < 8; ++e) s = fmaf(wf[r][e], xf[e], s);
              acc[r][m] = s;
            }
          }
        }
      } else {
        float wv[U][R], xv[U][MT];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t kk = base + u * Q * kStep + lane;
          const bool ok = kk < K;
#pragma unroll
          for (int r = 0; r < R; ++r) wv[u][r] = ok && r < live ? E::to(wg[r * K + kk]) : 0.0f;
#pragma unroll
          for (int m = 0; m < MT; ++m) xv[u][m] = ok && m < xr ? E::to(x[m * p.sx_r + kk * p.sx_k]) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r][m] = fmaf(wv[u][r], xv[u][m], acc[r][m]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], off);
  if (lane == 0)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int m = 0; m < MT; ++m) red[warp][r][m] = acc[r][m];
  __syncthreads();
  // Each row-group slot's G warps, in warp order.
  for (int t = tid; t < gpc * R * MT; t += kThreads) {
    const int sl = t / (R * MT), rm = t - sl * (R * MT);
    float sum = 0.0f;
    for (int gg = 0; gg < G; ++gg) sum += (&red[sl * G + gg][0][0])[rm];
    (&part[sl][0][0])[rm] = sum;
  }
  __syncthreads();
  const bool clustered = p.splits > 1;
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  if (clustered) {
    sm90::cluster_sync();  // every CTA's part is written
    if (sm90::cluster_rank() == 0) {
      for (int t = tid; t < gpc * R * xr; t += kThreads) {
        const int sl = t / (R * xr), rj = t - sl * (R * xr), r = rj / xr, j = rj - r * xr;
        const int64_t row = (int64_t(blockIdx.x) * gpc + sl) * R + r;
        float sum = 0.0f;
        for (int rk = 0; rk < p.splits; ++rk) sum += ld_dsmem(&part[sl][r][j], uint32_t(rk));
        if (row < p.wr) c[int64_t(j) * p.c_x + row * p.c_w] = E::from(sum);
      }
    }
    sm90::cluster_sync();  // no CTA leaves while rank 0 may still read its shared memory
  }
#endif
  if (!clustered)
    for (int t = tid; t < gpc * R * xr; t += kThreads) {
      const int sl = t / (R * xr), rj = t - sl * (R * xr), r = rj / xr, j = rj - r * xr;
      const int64_t row = (int64_t(blockIdx.x) * gpc + sl) * R + r;
      if (row < p.wr) c[int64_t(j) * p.c_x + row * p.c_w] = E::from(part[sl][r][j]);
    }
#else
  (void)p;
  __trap();
#endif
}

// The sum over the warp's 32 lanes of each of v[0..N) (N a power of two, at most 32), scattered: on
// return lane L holds in v[0] the sum of v[L / (32 / N)] (every lane of its group of 32 / N holds
// it). N - 1 + log2(32 / N) shuffles rather than N x 5: each step sends the half of the values the
// partner keeps and keeps the half it sends. The order of the additions is fixed.
template <int N>
__device__ __forceinline__ void warp_reduce_scatter(float (&v)[N], int lane) {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "a power of two up to 32");
  int off = 16;
#pragma unroll
  for (int h = N / 2; h >= 1; h /= 2, off /= 2) {
    const bool upper = (lane & off) != 0;
#pragma unroll
    for (int i = 0; i < h; ++i) {
      const float send = upper ? v[i] : v[i + h];
      const float keep = upper ? v[i + h] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
    }
  }
#pragma unroll
  for (int o = 16 / N; o > 0; o /= 2) v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
}

// W row `row`'s MT lane partial sums (one per row of X) met in warp_reduce_scatter; lane m x (32 /
// MT) stores C's element of X row m (m < xr, row inside W).
template <kforge_hgemm_dtype DT, int MT>
__device__ __forceinline__ void store_row_sums(const Params& p, float (&acc)[MT], int lane, int xr, int64_t row) {
  warp_reduce_scatter<MT>(acc, lane);
  const int m = lane / (32 / MT);
  if (lane % (32 / MT) == 0 && m < xr && row < p.wr)
    static_cast<typename Elem<DT>::T*>(p.c)[int64_t(m) * p.c_x + row * p.c_w] = Elem<DT>::from(acc[0]);
}

// What both GemvX kernels' warps hold: X's rows (xr) and K, the operands' bits, the lane, and the
// grid-stride walk over W's row groups of RW rows (this warp's first group g, then every step-th).
// The constructor waits for the previous launch (programmatic dependent launch) before any load.
template <int RW, int KPL, int WARPS>
struct GemvXWarp {
  int xr, K, lane;
  const unsigned short* xbits;
  const unsigned short* w;
  int64_t rows, groups, step, g;
  __device__ __forceinline__ explicit GemvXWarp(const Params& p)
      : xr(int(p.xr)),
        K(int(p.k)),
        lane(int(threadIdx.x & 31)),
        xbits(static_cast<const unsigned short*>(p.x)),
        w(static_cast<const unsigned short*>(p.w)),
        rows(p.wr),
        groups((p.wr + RW - 1) / RW),
        step(int64_t(gridDim.x) * WARPS),
        g(int64_t(blockIdx.x) * WARPS + (threadIdx.x >> 5)) {
    skinny::detail::grid_dependency_wait();
  }
  // The raw bits of W's row group gg: row gg * RW + r, K index lane + 32 j; zero outside W.
  __device__ __forceinline__ void load(int64_t gg, unsigned short (&v)[RW][KPL]) const {
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      const int64_t row = gg * RW + r;
      const unsigned short* wr = w + row * K;
#pragma unroll
      for (int j = 0; j < KPL; ++j) {
        const int kk = lane + 32 * j;
        v[r][j] = row < rows && kk < K ? __ldg(wr + kk) : static_cast<unsigned short>(0);
      }
    }
  }
  // Whether X holds element (m, kk), and its raw bits (only where it does).
  __device__ __forceinline__ bool in_x(int m, int kk) const { return m < xr && kk < K; }
  __device__ __forceinline__ unsigned short x_at(const Params& p, int m, int kk) const {
    return __ldg(xbits + m * p.sx_r + int64_t(kk) * p.sx_k);
  }
};

// X in registers (K <= 32 x KPL): each lane holds X's elements at K index lane + 32 j (j < KPL) of
// its xr <= MT rows, loaded once per warp; the warps then stream W's rows RW at a time (grid-stride
// over row groups, the next group's loads issued before this one's sums), element by element: a
// warp's load is 64 contiguous bytes of a row, at any alignment, so K % 8 != 0 costs nothing extra.
// Each row's xr dot products meet in warp_reduce_scatter; lane m x (32 / MT) stores C's element of
// X row m. No shared memory, no barrier, no workspace. Each step waits about one memory latency
// (measured: cost_model.hpp, gemv_xregs_predicted_us).
template <int MT, int KPL, int RW, int WARPS, kforge_hgemm_dtype DT>
__global__ void __launch_bounds__(WARPS * 32) gemv_xreg_kernel(const Params p) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  GemvXWarp<RW, KPL, WARPS> q(p);
  if (q.g >= q.groups) return;
  // X's raw bits first, every load issued before any is converted. (Converting each as it came, the
  // first version's SASS reused a register per pair of loads, so that X's loads waited on one
  // another; it measured 4.3 us at 4x7684x7 on an H100, where the whole-K tile took 1.7.)
  unsigned short xb[MT][KPL];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < KPL; ++j) {
      const int kk = q.lane + 32 * j;
      xb[m][j] = q.in_x(m, kk) ? q.x_at(p, m, kk) : static_cast<unsigned short>(0);
    }
  unsigned short next[RW][KPL];
  q.load(q.g, next);
  float xf[MT][KPL];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < KPL; ++j) xf[m][j] = bits_to_float<DT>(xb[m][j]);
  for (; q.g < q.groups; q.g += q.step) {
    unsigned short cur[RW][KPL];
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
      for (int j = 0; j < KPL; ++j) cur[r][j] = next[r][j];
    if (q.g + q.step < q.groups) q.load(q.g + q.step, next);
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      float acc[MT];
#pragma unroll
      for (int m = 0; m < MT; ++m) acc[m] = 0.0f;
#pragma unroll
      for (int j = 0; j < KPL; ++j) {
        const float wf = bits_to_float<DT>(cur[r][j]);
#pragma unroll
        for (int m = 0; m < MT; ++m) acc[m] = fmaf(wf, xf[m][j], acc[m]);
      }
      store_row_sums<DT>(p, acc, q.lane, q.xr, q.g * RW + r);
    }
  }
#else
  (void)p;
  __trap();
#endif
}

// X in shared memory (K <= 32 x KPL), W's rows wide: the CTA stages X's xr <= MT rows once as fp32,
// lane-major ([K index][row of X]: a lane reads its MT values of one K index as 16-byte words, no
// bank conflict), and each warp holds only W's bits in registers, RW rows a step (a warp's load is
// 64 contiguous bytes of a row at any alignment, as gemv_xreg_kernel's). With X out of the
// registers, two CTAs of 8 warps hold 6 rows a warp each (launch bounds: at most 128 registers), 96
// rows per SM a step against gemv_xreg_kernel's 32 (two rows a step, the next two in flight), so a
// problem of ~10,000 rows takes one step rather than three. The next step's loads go out as soon as
// this step's FMAs have read the registers, before the reductions and stores. Each row's sums meet
// in warp_reduce_scatter as there.
template <int MT, int KPL, int RW, int WARPS, kforge_hgemm_dtype DT>
__global__ void __launch_bounds__(WARPS * 32, 2) gemv_xsmem_kernel(const Params p) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  __shared__ float sx[32 * KPL * MT];
  GemvXWarp<RW, KPL, WARPS> q(p);
  // The first step's loads go out beside X's.
  unsigned short v[RW][KPL];
  if (q.g < q.groups) q.load(q.g, v);
  for (int i = threadIdx.x; i < 32 * KPL * MT; i += WARPS * 32) {
    const int m = i % MT, kk = i / MT;
    sx[i] = q.in_x(m, kk) ? bits_to_float<DT>(q.x_at(p, m, kk)) : 0.0f;
  }
  __syncthreads();  // (every warp reaches it: the loop below is the only early way out)
  while (q.g < q.groups) {
    float acc[RW][MT];
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
      for (int m = 0; m < MT; ++m) acc[r][m] = 0.0f;
#pragma unroll
    for (int j = 0; j < KPL; ++j) {
      float xv[MT];
#pragma unroll
      for (int m = 0; m < MT; ++m) xv[m] = sx[(j * 32 + q.lane) * MT + m];
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        const float wf = bits_to_float<DT>(v[r][j]);
#pragma unroll
        for (int m = 0; m < MT; ++m) acc[r][m] = fmaf(wf, xv[m], acc[r][m]);
      }
    }
    const int64_t done = q.g;
    q.g += q.step;
    if (q.g < q.groups) q.load(q.g, v);
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      store_row_sums<DT>(p, acc[r], q.lane, q.xr, done * RW + r);
    }
  }
#else
  (void)p;
  __trap();
#endif
}

// A GEMV variant's configuration: small side mt (of C's columns with swap, else its rows), bn rows
// of W per CTA, bk elements of K per warp block.
constexpr KernelConfig gemv_config(int mt, int bn, int bk, int warps, bool swap, bool nn) {
  KernelConfig c{};
  c.family = Family::kGemv;
  c.bm = mt;
  c.bn = bn;
  c.bk = bk;
  c.consumers = warps;
  c.max_m = swap ? 0 : mt;
  c.max_n = swap ? mt : 0;
  c.b_rows_n = nn;
  return c;
}

// The kernels' parameters for a call: X, W and C's strides by the roles (SWAP: A streamed; XROWSK:
// X's rows K-contiguous).
template <bool SWAP, bool XROWSK>
Params gemv_params(const kforge_hgemm_args& args) {
  const kforge_hgemm_problem& pr = args.problem;
  const int64_t M = pr.m, N = pr.n, K = pr.k;
  Params prm{};
  if (!SWAP) {  // X = A (M x K), W = B (tn: N rows of K); C[m][n] at m * N + n
    prm.x = args.a, prm.w = args.b, prm.xr = M, prm.wr = N;
    prm.sx_r = K, prm.sx_k = 1, prm.c_x = N, prm.c_w = 1;
  } else {  // X = B (tn: N rows of K; nn: K rows of N), W = A (M rows of K); C[m][n] at m * N + n
    prm.x = args.b, prm.w = args.a, prm.xr = N, prm.wr = M;
    prm.sx_r = XROWSK ? K : 1, prm.sx_k = XROWSK ? 1 : N;  // (nn, N = 1: K-contiguous too)
    prm.c_x = 1, prm.c_w = N;
  }
  prm.c = args.c;
  prm.k = K;
  return prm;
}

}  // namespace detail

// The variant: M <= MT (tn only) or, SWAP, N <= MT (either layout); any K (up to 2^40), any
// 2-byte aligned pointers, of its layout, accumulation and dtype (bf16: fp32 accumulation only).
template <int MT, int R, int WARPS, bool SWAP, kforge_hgemm_layout L, kforge_hgemm_acc ACC, kforge_hgemm_dtype DT = KFORGE_HGEMM_F16>
struct Gemv {
  static_assert(MT >= 1 && MT <= 16 && R >= 1 && R <= 8 && WARPS >= 1 && WARPS <= 32 && (WARPS & (WARPS - 1)) == 0, "GEMV tile");
  static_assert(SWAP || L == KFORGE_HGEMM_TN, "small M: tn only (nn B's rows run along N)");
  static_assert(DT == KFORGE_HGEMM_F16 || ACC == KFORGE_HGEMM_ACC_F32, "bf16: fp32 accumulation only");
  static constexpr kforge_hgemm_dtype kDtype = DT;
  static constexpr int kThreads = WARPS * 32;
  // X's rows K-contiguous (A, or a swapped tn B).
  static constexpr bool kXRowsK = !SWAP || L == KFORGE_HGEMM_TN;

  static constexpr KernelConfig config() {
    // bn: rows of W per CTA with G = 1 (R per warp); bk: elements of K per warp block (16-byte loads).
    return detail::gemv_config(MT, R * WARPS, 256, WARPS, SWAP, L == KFORGE_HGEMM_NN);
  }

  static bool supports(const kforge_hgemm_problem* p) {
    if (p == nullptr || p->layout != L || p->acc != ACC || p->dtype != DT) return false;
    const int64_t small = SWAP ? p->n : p->m, streamed = SWAP ? p->m : p->n;
    if (p->m < 1 || p->n < 1 || p->k < 1 || small > MT) return false;
    return streamed <= 0x7fffffff && p->k <= (int64_t(1) << 40);  // rows per CTA >= 1: the grid fits
  }

  static size_t workspace_size(const kforge_hgemm_problem*) { return 0; }

  template <bool VEC, bool XVEC, bool SHIFT = false>
  static auto kernel_ptr() {
    return detail::gemv_kernel<MT, R, WARPS, VEC, XVEC, SHIFT, DT>;
  }

  static int resident_ctas() { return resident_plain_ctas(kernel_ptr<true, true>(), kThreads, 0); }

  static int run(const kforge_hgemm_args* args, cudaStream_t stream) {
    if (args == nullptr || !supports(&args->problem)) return kRunUnsupported;
    DeviceAttrs d;
    if (const int rc = plain_call_checks(args, &d)) return rc;
    detail::Params prm = detail::gemv_params<SWAP, kXRowsK>(*args);
    const int64_t K = prm.k;
    const bool vec = K % 8 == 0 && (reinterpret_cast<uintptr_t>(prm.w) & 15u) == 0;
    // X's elements K-contiguous (its rows, or a swapped nn B of one column) and 16-byte aligned.
    const bool xvec = vec && prm.sx_k == 1 && (reinterpret_cast<uintptr_t>(prm.x) & 15u) == 0;
    // One row per warp and rows that do not all start 16-byte aligned: the shifted 16-byte path.
    const bool shift = R == 1 && !vec && K >= 8;
    const int64_t row_groups = (prm.wr + R - 1) / R;
    // (The shifted path covers 256 elements of K per warp step, U = 1: split as the element path,
    // whose warps keep at least 256 of K each.)
    const GemvSplit sp = gemv_split(row_groups, K, d.sms, vec, WARPS, d.cc >= 90);
    prm.groups = sp.groups, prm.splits = sp.splits;
    const int64_t gpc = WARPS / sp.groups;
    const dim3 grid(unsigned((row_groups + gpc - 1) / gpc), unsigned(sp.splits));
    const bool pdl = d.cc >= 90 && skinny::pdl_enabled();
    auto kernel = !vec ? kernel_ptr<false, false>() : xvec ? kernel_ptr<true, true>() : kernel_ptr<true, false>();
    if constexpr (R == 1)
      if (shift) kernel = kernel_ptr<true, false, true>();
    return skinny::detail::launch_clustered(kernel, grid, dim3(kThreads), 0, stream, pdl, unsigned(sp.splits), prm);
  }
};

// The X-on-chip variants: M <= MT (tn only) or, SWAP, N <= MT (either layout); K <= 32 x KPL; any
// 2-byte aligned pointers, of its layout, accumulation and dtype. RW rows of W per warp per step,
// WARPS warps per CTA, as many CTAs as are resident at once (at most one warp per row group; one
// per SM where the occupancy query fails). X in registers, the next step's loads in flight
// (gemv_xreg_kernel; KernelConfig::stages 2); XS: X in shared memory, one step's loads at a time
// in wider steps (gemv_xsmem_kernel; stages 1).
template <int MT, int KPL, int RW, int WARPS, bool SWAP, kforge_hgemm_layout L, kforge_hgemm_acc ACC,
          kforge_hgemm_dtype DT = KFORGE_HGEMM_F16, bool XS = false>
struct GemvX {
  static_assert(MT >= 1 && MT <= 32 && (MT & (MT - 1)) == 0 && KPL >= 1 && RW >= 1 && WARPS >= 1 && WARPS <= 32, "GEMV tile");
  static_assert(SWAP || L == KFORGE_HGEMM_TN, "small M: tn only (nn B's rows run along N)");
  static_assert(DT == KFORGE_HGEMM_F16 || ACC == KFORGE_HGEMM_ACC_F32, "bf16: fp32 accumulation only");
  static constexpr kforge_hgemm_dtype kDtype = DT;
  static constexpr int kThreads = WARPS * 32;
  static constexpr int kMaxK = 32 * KPL;
  static constexpr bool kXRowsK = !SWAP || L == KFORGE_HGEMM_TN;

  static constexpr KernelConfig config() {
    KernelConfig c = detail::gemv_config(MT, RW * WARPS, kMaxK, WARPS, SWAP, L == KFORGE_HGEMM_NN);
    c.x_regs_k = kMaxK;
    c.stages = XS ? 1 : 2;
    return c;
  }

  static bool supports(const kforge_hgemm_problem* p) {
    if (p == nullptr || p->layout != L || p->acc != ACC || p->dtype != DT) return false;
    const int64_t small = SWAP ? p->n : p->m;
    if (p->m < 1 || p->n < 1 || p->k < 1 || small > MT || p->k > kMaxK) return false;
    return (SWAP ? p->m : p->n) <= (int64_t(1) << 40);
  }

  static size_t workspace_size(const kforge_hgemm_problem*) { return 0; }

  static auto kernel_ptr() {
    if constexpr (XS) return detail::gemv_xsmem_kernel<MT, KPL, RW, WARPS, DT>;
    else return detail::gemv_xreg_kernel<MT, KPL, RW, WARPS, DT>;
  }

  static int resident_ctas() { return resident_plain_ctas(kernel_ptr(), kThreads, 0); }

  static int run(const kforge_hgemm_args* args, cudaStream_t stream) {
    if (args == nullptr || !supports(&args->problem)) return kRunUnsupported;
    DeviceAttrs d;
    if (const int rc = plain_call_checks(args, &d)) return rc;
    detail::Params prm = detail::gemv_params<SWAP, kXRowsK>(*args);
    prm.groups = 1, prm.splits = 1;
    const int64_t ctas = (prm.wr + int64_t(RW) * WARPS - 1) / (int64_t(RW) * WARPS);
    static std::atomic<int> cache[kMaxCachedDevices];
    const int resident = resident_cached_per_device(cache, [] { return resident_ctas(); });
    const int64_t grid = std::min<int64_t>(ctas, resident > 0 ? resident : d.sms);
    const bool pdl = d.cc >= 90 && skinny::pdl_enabled();
    return skinny::detail::launch(kernel_ptr(), dim3(unsigned(grid)), dim3(kThreads), 0, stream, pdl, prm);
  }
};

}  // namespace kforge::kernels::gemv
