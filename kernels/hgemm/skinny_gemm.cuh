// kforge's decode (small-M) HGEMM kernel family: C[M,N] = A[M,K] * B for M <= 32, the shapes of
// LLM decoding (a few tokens against a weight matrix). Memory-bound: the whole of B is streamed
// once from DRAM, so the kernel is built to keep every SM's loads in flight, not to reuse tiles.
// With SWAP the roles change sides for N <= 32 (M large: A is streamed, B is the small operand,
// C is written transposed from the tile): below, "X" is the small operand and "W" the streamed one.
// Elements are fp16 or bf16 (DT; bf16 with fp32 accumulation only): loads are bit copies, only
// the mma and the rounding of the results know the type.
//
// Why not the wide-tile families: a 64-row wgmma tile (or the sm_80 family's 32..128-row tiles)
// computes up to 64x the rows needed, and with N / 64 tiles a 4096-wide layer gives 64 CTAs for 132
// SMs, each streaming a 64 x K slab of B through one pipeline (measured 0.46-0.62 of cuBLASLt on
// issue 18's decode shapes). Here:
//
//   * One CTA per (BN columns of C, one K slice): grid (ceil(N / BN), S). The split count S is
//     chosen at run time (splits() below, shared with the cost model) so that ceil(N/BN) x S fills
//     the resident CTA slots of the device in one wave; S = 1 when the columns alone do.
//   * The roles of the mma are swapped (C^T = B^T A^T), so that M is the mma's N dimension, padded
//     only to 8 (MT = 8, 16 or 32 rows of C per CTA), and N is its M dimension (16 per fragment):
//     mma.sync.m16n8k16 with the A operand = a 16(n) x 16(k) piece of B and the B operand = a
//     16(k) x 8(m) piece of A^T.
//   * Shared memory: STAGES stages of an X tile (MT rows of A, K-contiguous) and a W tile (B: tn,
//     BN rows of K; nn, BK rows of N), rows padded by 16 bytes (odd pitches in 16-byte units:
//     conflict-free ldmatrix); cp.async.cg 16-byte copies with zero fill outside the matrix, one
//     commit group per K tile, a single __syncthreads per K tile (the sm_80 family's pipeline).
//     Unaligned rows or pointers (K % 8, N % 8 for nn, bases not 16-byte aligned) take the kGeneric
//     instantiation: element-wise guarded loads, same pipeline otherwise.
//   * The WARPS warps of a CTA form WN groups along N (each takes BN / WN of the tile's columns)
//     by WARPS / WN groups along K (group g takes the k16 steps g, g + WARPS / WN, ... of each K
//     tile), so that every warp holds BN / 16 / WN x MT / 8 accumulator fragments. WN = 1 (the
//     first variants) splits K only: few columns per warp need many K groups, whose partials cost
//     shared memory and a reduction. WN > 1 serves MT = 32 with wide tiles (BN = 128: half the
//     small operand's re-reads of BN = 64) within the register file. At the end the K groups'
//     partial tiles meet in shared memory and are summed in group order (fp32).
//   * S == 1: the CTA writes its C tile (fp16, round to nearest). S > 1: it writes its fp32
//     partial tile into the workspace at [split][M][N], and a second kernel on the same stream
//     sums the S partials in split order and writes C. Both orders are fixed: the result is
//     bit-identical from run to run (no atomics).
//   * Programmatic dependent launch (sm_90, as the Hopper family, unless KFORGE_HGEMM_PDL=0):
//     each kernel waits for its predecessor on the stream before touching global memory.
//
// Fragment layouts (PTX ISA, mma.m16n8k16, g = lane / 4, t = lane % 4), in this kernel's roles:
//   mma A = W^T piece, 16 (n) x 16 (k): a0 = (n g, k 2t..2t+1), a1 = (n g+8, k 2t..), a2 = (n g,
//     k 2t+8..), a3 = (n g+8, k 2t+8..).
//     tn (W rows n, K-contiguous): ldmatrix.x4, lane address n = L % 16, k = (L / 16) * 8.
//     nn (W rows k, N-contiguous): ldmatrix.x4.trans, lane address k = L % 8 + (L / 16) * 8,
//     n = ((L / 8) % 2) * 8.
//   mma B = X^T piece, 16 (k) x 8 (m): b0 = (k 2t..2t+1, m g), b1 = (k 2t+8.., m g). X rows m are
//     K-contiguous: ldmatrix.x4 gives two m8 fragments (lane address m = L % 8 + (L / 16) * 8,
//     k = ((L / 8) % 2) * 8), ldmatrix.x2 one (lanes 0-15 as the x4's 0-15).
//   D (f32): d0 = (n g, m 2t), d1 = (n g, m 2t+1), d2 = (n g+8, m 2t), d3 = (n g+8, m 2t+1);
//   D (f16): half2 d0 = (n g, m 2t..2t+1), d1 = (n g+8, m 2t..2t+1): the same order.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "kernel_api.hpp"
#include "sm80_gemm.cuh"

namespace kforge::kernels::skinny {

// Programmatic dependent launch unless KFORGE_HGEMM_PDL=0 (read once; the sm_90a family reads the
// same variable).
inline bool pdl_enabled() {
  static const bool on = !env_is("KFORGE_HGEMM_PDL", "0");
  return on;
}

namespace detail {

using sm80::detail::cp_async_16;
using sm80::detail::cp_async_commit;
using sm80::detail::cp_async_wait;
using sm80::detail::ld_shared_v4;
using sm80::detail::ldmatrix_x4;
using sm80::detail::ldmatrix_x4_trans;
using sm80::detail::load8_guarded;
using sm80::detail::mma_16816;
using sm80::detail::mma_16816_bf16;
using sm80::detail::smem_u32;
using sm80::detail::st_shared_v4;

__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

// sm_90: wait for the grid this one depends on (programmatic launch), then let the next one start
// its set-up. No-ops when launched without the attribute; absent before sm_90.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// X is the small operand (<= MT rows of C's small side), W the streamed one: A and B, or (SWAP,
// small N) B and A. xr, wr: their extents along C (M and N, or N and M).
struct Params {  // x, w, c: 2-byte elements of the variant's dtype
  const __half* x;
  const __half* w;
  __half* c;
  float* ws;  // S > 1: S x M x N fp32 partials, in C's layout
  int64_t xr, wr, k;
  int k_tiles;  // ceil(K / BK)
  int splits;   // S = gridDim.y
  int vec_x;    // X rows 16-byte aligned: cp.async for the X tile
  int vec_w;    // W rows 16-byte aligned: cp.async for the W tile
  int vec_c;    // C's row length % 4 == 0 and C 8-byte aligned: 8-byte stores
  int vec_ws;   // C's row length % 4 == 0: float4 partial stores
};

template <int MT, int BN, int BK, int WARPS, int STAGES, kforge_hgemm_layout L, kforge_hgemm_acc ACC, bool SWAP,
          kforge_hgemm_dtype DT = KFORGE_HGEMM_F16, int WN = 1>
struct Traits {
  static constexpr int kThreads = WARPS * 32;
  static constexpr int kWarpsN = WN;          // warp groups along N
  static constexpr int kWarpsK = WARPS / WN;  // warp groups along K
  // W rows K-contiguous (tn B, or A when swapped); else W is B stored K rows of N (nn).
  static constexpr bool kWK = SWAP || L == KFORGE_HGEMM_TN;
  // X rows K-contiguous (A, or a tn B when swapped); else X is an nn B, K rows of N <= MT (swapped).
  static constexpr bool kXK = !SWAP || L == KFORGE_HGEMM_TN;
  static constexpr bool kF32 = ACC == KFORGE_HGEMM_ACC_F32;
  static constexpr int kAccRegs = kF32 ? 4 : 2;
  static constexpr int NW = BN / 16;  // mma A fragments of the tile (16 columns of C each)
  static constexpr int NWW = NW / WN;  // ... of one warp
  static constexpr int NX = MT / 8;   // mma B fragments (8 rows of C each)
  static constexpr int kSteps = BK / 16;
  static constexpr int kStepsPerWarp = kSteps / kWarpsK;
  static constexpr int kPad = 8;  // halves per shared-memory row
  // X stage: K-contiguous MT rows x (BK + pad); else BK rows x (MT + pad), the pad making the pitch
  // an odd number of 16-byte units (MT = 8: 16 halves of pad).
  static constexpr int kLdX = kXK ? BK + kPad : ((MT / 8 + 1) % 2 == 1 ? MT + kPad : MT + 2 * kPad);
  static constexpr int kRowsX = kXK ? MT : BK;
  static constexpr int kStageX = kRowsX * kLdX;
  // W stage: K-contiguous BN rows x (BK + pad); else BK rows x (BN + pad).
  static constexpr int kLdW = kWK ? BK + kPad : BN + kPad;
  static constexpr int kRowsW = kWK ? BN : BK;
  static constexpr int kStageW = kRowsW * kLdW;
  static constexpr size_t kPipeBytes = size_t(STAGES) * (kStageX + kStageW) * sizeof(__half);
  // Per-K-group fp32 partial tiles [kWarpsK][MT][BN + 4] (the pitch keeps a warp's fragment stores
  // in 32 distinct banks and rows 16-byte aligned), reusing the pipeline's buffers.
  static constexpr int kLdR = BN + 4;
  static constexpr size_t kRedBytes = size_t(kWarpsK) * MT * kLdR * sizeof(float);
  static constexpr size_t kSmemBytes = kPipeBytes > kRedBytes ? kPipeBytes : kRedBytes;
  // Copy geometry (16-byte chunks).
  static constexpr int kCprX = kXK ? BK / 8 : MT / 8;
  static constexpr int kChunksX = kRowsX * kCprX;
  static constexpr int kItX = (kChunksX + kThreads - 1) / kThreads;
  static constexpr int kCprW = kWK ? BK / 8 : BN / 8;
  static constexpr int kChunksW = kRowsW * kCprW;
  static constexpr int kItW = (kChunksW + kThreads - 1) / kThreads;
  // Output: groups of 4 consecutive elements of a C row (MT rows of BN, or BN rows of MT when swapped).
  static constexpr int kGroups = SWAP ? BN * (MT / 4) : MT * (BN / 4);
  static constexpr int kItO = (kGroups + kThreads - 1) / kThreads;

  static_assert(MT == 8 || MT == 16 || MT == 32, "MT (rows of C per CTA) must be 8, 16 or 32");
  static_assert(BN % 16 == 0 && BN >= 16 && BN <= 256, "BN must be a multiple of 16 (the mma's M) in [16, 256]");
  static_assert(BK % 16 == 0 && BK >= 16, "BK must be a multiple of the mma's K (16)");
  static_assert(WARPS >= 1 && WARPS <= 16, "1 to 16 warps per CTA");
  static_assert(WN >= 1 && WARPS % WN == 0, "WN (warp groups along N) must divide WARPS");
  static_assert(NW % WN == 0, "the tile's 16-column fragments must split evenly among the N groups");
  static_assert(kSteps % kWarpsK == 0, "the k16 steps of a K tile must split evenly among the K groups");
  static_assert(STAGES >= 2, "the cp.async pipeline needs at least 2 stages");
  static_assert(NWW * NX * kAccRegs <= 96, "accumulator fragments too large for the register file");
  static_assert(((kLdX / 8) & 1) == 1 && ((kLdW / 8) & 1) == 1, "padded pitches must be odd in 16-byte units");
  static_assert(kSmemBytes <= size_t(227) * 1024, "shared memory over the 227 KiB per-CTA budget");
  static_assert(DT == KFORGE_HGEMM_F16 || ACC == KFORGE_HGEMM_ACC_F32, "bf16 inputs: fp32 accumulation only (mma.sync has no bf16 accumulator)");
};

template <int MT, int BN, int BK, int WARPS, int STAGES, kforge_hgemm_layout L, kforge_hgemm_acc ACC, bool SWAP,
          bool kGeneric, kforge_hgemm_dtype DT, int WN>
__global__ void __launch_bounds__(WARPS * 32) skinny_kernel(const Params p) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  using T = Traits<MT, BN, BK, WARPS, STAGES, L, ACC, SWAP, DT, WN>;
  using E = Elem<DT>;
  constexpr bool kWK = T::kWK, kXK = T::kXK;
  constexpr int NWW = T::NWW, NX = T::NX, WKG = T::kWarpsK;
  using AccFrag = typename std::conditional<T::kF32, float[4], uint32_t[2]>::type;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t base = smem_u32(smem_raw);
  const uint32_t sX0 = base;
  const uint32_t sW0 = base + uint32_t(STAGES * T::kStageX * sizeof(__half));
  constexpr uint32_t kStageXBytes = uint32_t(T::kStageX * sizeof(__half));
  constexpr uint32_t kStageWBytes = uint32_t(T::kStageW * sizeof(__half));

  grid_dependency_wait();

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // This warp's N group (its fragments are wn * NWW .. wn * NWW + NWW - 1 of the tile) and K group.
  const int wn = warp % WN, wk = warp / WN;
  const int64_t XR = p.xr, WR = p.wr, K = p.k;
  const int64_t n0 = int64_t(blockIdx.x) * BN;  // first W row (column of C, or row when swapped)
  const int split = int(blockIdx.y);
  const int kt_begin = int((int64_t(p.k_tiles) * split) / p.splits);
  const int kt_end = int((int64_t(p.k_tiles) * (split + 1)) / p.splits);
  const int n_kt = kt_end - kt_begin;
  const bool vec_x = kGeneric ? p.vec_x != 0 : true;
  const bool vec_w = kGeneric ? p.vec_w != 0 : true;

  auto load_tile = [&](int kt, int s) {
    const int64_t k0 = int64_t(kt) * BK;
    // X: K-contiguous rows r (< MT, ld K), columns k0 + c * 8; else rows k0 + r (ld XR), columns c * 8.
    // Unaligned rows (kGeneric): every chunk of the tile loaded into registers before the first is
    // stored (a shared store is a compiler barrier: stored one by one, each chunk waited a whole
    // memory latency).
    uint4 gx[kGeneric ? T::kItX : 1], gw[kGeneric ? T::kItW : 1];
#pragma unroll
    for (int it = 0; it < T::kItX; ++it) {
      const int idx = tid + it * T::kThreads;
      if ((T::kChunksX % T::kThreads == 0) || idx < T::kChunksX) {
        const int r = idx / T::kCprX, c = idx % T::kCprX;
        const uint32_t dst = sX0 + uint32_t(s) * kStageXBytes + uint32_t((r * T::kLdX + c * 8) * int(sizeof(__half)));
        const int64_t row = kXK ? int64_t(r) : k0 + r, col = kXK ? k0 + c * 8 : int64_t(c) * 8;
        const int64_t rows = kXK ? XR : K, cols = kXK ? K : XR;
        const bool row_ok = row < rows;
        const __half* src = p.x + row * cols + col;
        if (vec_x) {
          const bool ok = row_ok && col < cols;  // cols % 8 == 0 here: a chunk is all in or all out
          cp_async_16(dst, ok ? src : p.x, ok);
        } else if constexpr (kGeneric) {
          gx[it] = load8_guarded(src, row_ok, col, cols);
        }
      }
    }
    // W: K-contiguous rows n0 + r (ld K), columns k0 + c * 8; else rows k0 + r (ld WR), columns n0 + c * 8.
#pragma unroll
    for (int it = 0; it < T::kItW; ++it) {
      const int idx = tid + it * T::kThreads;
      if ((T::kChunksW % T::kThreads == 0) || idx < T::kChunksW) {
        const int r = idx / T::kCprW, c = idx % T::kCprW;
        const uint32_t dst = sW0 + uint32_t(s) * kStageWBytes + uint32_t((r * T::kLdW + c * 8) * int(sizeof(__half)));
        const int64_t row = kWK ? n0 + r : k0 + r, col = kWK ? k0 + c * 8 : n0 + c * 8;
        const int64_t rows = kWK ? WR : K, cols = kWK ? K : WR;
        const bool row_ok = row < rows;
        const __half* src = p.w + row * cols + col;
        if (vec_w) {
          const bool ok = row_ok && col < cols;
          cp_async_16(dst, ok ? src : p.w, ok);
        } else if constexpr (kGeneric) {
          gw[it] = load8_guarded(src, row_ok, col, cols);
        }
      }
    }
    if constexpr (kGeneric) {
      if (!vec_x) {
#pragma unroll
        for (int it = 0; it < T::kItX; ++it) {
          const int idx = tid + it * T::kThreads;
          if ((T::kChunksX % T::kThreads == 0) || idx < T::kChunksX) {
            const int r = idx / T::kCprX, c = idx % T::kCprX;
            st_shared_v4(sX0 + uint32_t(s) * kStageXBytes + uint32_t((r * T::kLdX + c * 8) * int(sizeof(__half))), gx[it]);
          }
        }
      }
      if (!vec_w) {
#pragma unroll
        for (int it = 0; it < T::kItW; ++it) {
          const int idx = tid + it * T::kThreads;
          if ((T::kChunksW % T::kThreads == 0) || idx < T::kChunksW) {
            const int r = idx / T::kCprW, c = idx % T::kCprW;
            st_shared_v4(sW0 + uint32_t(s) * kStageWBytes + uint32_t((r * T::kLdW + c * 8) * int(sizeof(__half))), gw[it]);
          }
        }
      }
    }
  };

  AccFrag acc[NWW][NX];
#pragma unroll
  for (int i = 0; i < NWW; ++i)
#pragma unroll
    for (int j = 0; j < NX; ++j)
#pragma unroll
      for (int r = 0; r < T::kAccRegs; ++r) {
        if constexpr (T::kF32) acc[i][j][r] = 0.0f;
        else acc[i][j][r] = 0u;
      }

  // ldmatrix lane offsets (bytes within a stage). x2 (MT = 8): lanes 0-15 as the x4's; 16-31 repeat
  // them (their addresses are ignored but stay inside the tile).
  // X K-contiguous (rows x), x4: x = L % 8 + (L / 16) * 8, k = ((L / 8) % 2) * 8.
  // X K rows (swapped nn B), x4.trans: k = L % 8 + ((L / 8) % 2) * 8, x = (L / 16) * 8 (matrices:
  // (k 0-7, x 0-7) = b0 and (k 8-15, x 0-7) = b1 of fragment 0, then the same for x 8-15).
  const int xl = MT == 8 ? (lane & 15) : lane;
  const uint32_t x_off =
      kXK ? uint32_t((((xl & 7) + ((xl >> 4) << 3)) * T::kLdX + ((xl >> 3) & 1) * 8) * int(sizeof(__half)))
          : uint32_t((((xl & 7) + ((xl >> 3) & 1) * 8) * T::kLdX + (xl >> 4) * 8) * int(sizeof(__half)));
  // W K-contiguous (rows n): n = L % 16, k = (L / 16) * 8.  W K rows, trans: k = L % 8 + (L / 16) * 8,
  // n = ((L / 8) % 2) * 8.
  const uint32_t w_off = !kWK ? uint32_t((((lane & 7) + ((lane >> 4) << 3)) * T::kLdW + ((lane >> 3) & 1) * 8) *
                                         int(sizeof(__half)))
                              : uint32_t(((lane & 15) * T::kLdW + (lane >> 4) * 8) * int(sizeof(__half)));

  // Prologue: K tiles 0 .. STAGES-2 of this slice, one commit group each (empty past the end).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n_kt) load_tile(kt_begin + s, s);
    cp_async_commit();
  }
  int read_stage = 0, write_stage = STAGES - 1;
  for (int i = 0; i < n_kt; ++i) {
    cp_async_wait<STAGES - 2>();  // tile i has landed (this thread's copies)...
    __syncthreads();              // ...everyone's, and stage (i-1) % STAGES is free again
    if (i + STAGES - 1 < n_kt) load_tile(kt_begin + i + STAGES - 1, write_stage);
    cp_async_commit();

    const uint32_t sX = sX0 + uint32_t(read_stage) * kStageXBytes + x_off;
    const uint32_t sW = sW0 + uint32_t(read_stage) * kStageWBytes + w_off;
#pragma unroll
    for (int q = 0; q < T::kStepsPerWarp; ++q) {
      const int kk = wk + q * WKG;  // this warp's k16 step of the tile
      uint32_t xf[NX][2];
      // Offsets of step kk and fragment pair j: K-contiguous X, kk * 16 columns and j * 16 rows; K-row
      // X, kk * 16 rows and j * 16 columns.
      constexpr int kStepX = kXK ? 16 : 16 * T::kLdX, kPairX = kXK ? 16 * T::kLdX : 16;
      if constexpr (MT == 8) {
        if constexpr (kXK) ldmatrix_x2(xf[0], sX + uint32_t(kk * kStepX * int(sizeof(__half))));
        else ldmatrix_x2_trans(xf[0], sX + uint32_t(kk * kStepX * int(sizeof(__half))));
      } else {
#pragma unroll
        for (int j = 0; j < NX / 2; ++j) {
          uint32_t r[4];
          const uint32_t addr = sX + uint32_t((j * kPairX + kk * kStepX) * int(sizeof(__half)));
          if constexpr (kXK) ldmatrix_x4(r, addr);
          else ldmatrix_x4_trans(r, addr);
          xf[2 * j][0] = r[0];
          xf[2 * j][1] = r[1];
          xf[2 * j + 1][0] = r[2];
          xf[2 * j + 1][1] = r[3];
        }
      }
#pragma unroll
      for (int w = 0; w < NWW; ++w) {
        const int wg = wn * NWW + w;  // the fragment's index in the tile
        uint32_t wf[4];
        if constexpr (!kWK) ldmatrix_x4_trans(wf, sW + uint32_t((kk * 16 * T::kLdW + wg * 16) * int(sizeof(__half))));
        else ldmatrix_x4(wf, sW + uint32_t((wg * 16 * T::kLdW + kk * 16) * int(sizeof(__half))));
#pragma unroll
        for (int j = 0; j < NX; ++j) {
          if constexpr (DT == KFORGE_HGEMM_BF16)
            mma_16816_bf16(acc[w][j], wf, xf[j]);
          else
            mma_16816(acc[w][j], wf, xf[j]);
        }
      }
    }
    read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
    write_stage = write_stage + 1 == STAGES ? 0 : write_stage + 1;
  }
  cp_async_wait<0>();  // only empty groups can be pending
  __syncthreads();     // every warp is done reading the stages: they become the partial tiles

  // Each K group's partial tile: red[wk][m][n] (fp32), its columns written by the group's N warps.
  float* red = reinterpret_cast<float*>(smem_raw);
  {
    const int g = lane >> 2, t4 = lane & 3;
    float* mine = red + wk * (MT * T::kLdR);
#pragma unroll
    for (int w = 0; w < NWW; ++w)
#pragma unroll
      for (int j = 0; j < NX; ++j) {
        float v[4];
        if constexpr (T::kF32) {
#pragma unroll
          for (int r = 0; r < 4; ++r) v[r] = acc[w][j][r];
        } else {
          const __half2 lo = *reinterpret_cast<const __half2*>(&acc[w][j][0]);
          const __half2 hi = *reinterpret_cast<const __half2*>(&acc[w][j][1]);
          v[0] = __low2float(lo);
          v[1] = __high2float(lo);
          v[2] = __low2float(hi);
          v[3] = __high2float(hi);
        }
        const int n = (wn * NWW + w) * 16 + g, m = j * 8 + 2 * t4;
        mine[m * T::kLdR + n] = v[0];
        mine[(m + 1) * T::kLdR + n] = v[1];
        mine[m * T::kLdR + n + 8] = v[2];
        mine[(m + 1) * T::kLdR + n + 8] = v[3];
      }
  }
  __syncthreads();

  // Sum the K groups' partials in group order, 4 consecutive elements of a C row per thread, and write
  // them out: C[x][n0 + w] (row length WR), or swapped C[n0 + w][x] (row length XR).
  const int64_t c_rows = SWAP ? WR : XR, c_cols = SWAP ? XR : WR;
#pragma unroll
  for (int it = 0; it < T::kItO; ++it) {
    const int idx = tid + it * T::kThreads;
    if ((T::kGroups % T::kThreads != 0) && idx >= T::kGroups) continue;
    // (x, w) of the group's first element; the 4 go along w (normal) or along x (swapped).
    const int gx = SWAP ? (idx % (MT / 4)) * 4 : idx / (BN / 4);
    const int gw = SWAP ? idx / (MT / 4) : (idx % (BN / 4)) * 4;
    const int64_t row = SWAP ? n0 + gw : gx, col = SWAP ? gx : n0 + gw;
    if (row >= c_rows || col >= c_cols) continue;
    float s4[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int off = SWAP ? (gx + q) * T::kLdR + gw : gx * T::kLdR + gw + q;
      float v = red[off];
#pragma unroll
      for (int w = 1; w < WKG; ++w) v += red[w * (MT * T::kLdR) + off];
      s4[q] = v;
    }
    if (p.splits == 1) {
      typename E::T* dst = reinterpret_cast<typename E::T*>(p.c) + row * c_cols + col;
      if (p.vec_c && col + 3 < c_cols) {  // row length % 4 == 0 and col % 4 == 0: 8-byte aligned
        uint2 packed;
        packed.x = as_u32(E::pack(s4[0], s4[1]));
        packed.y = as_u32(E::pack(s4[2], s4[3]));
        *reinterpret_cast<uint2*>(dst) = packed;
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (col + q < c_cols) dst[q] = E::from(s4[q]);
      }
    } else {
      float* dst = p.ws + (int64_t(split) * c_rows + row) * c_cols + col;
      if (p.vec_ws && col + 3 < c_cols) {  // 16-byte aligned in the (16-byte aligned) workspace
        *reinterpret_cast<float4*>(dst) = make_float4(s4[0], s4[1], s4[2], s4[3]);
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (col + q < c_cols) dst[q] = s4[q];
      }
    }
  }
#else
  (void)p;
  __trap();  // never launched below sm_80 (run() checks the device)
#endif
}

// C = sum over s of ws[s] (fp32, in split order), rounded to fp16 or bf16 (DT). Four elements per
// thread of the flattened M x N; grid-stride. (A template also so that the header may be included
// in several translation units.)
template <kforge_hgemm_dtype DT = KFORGE_HGEMM_F16>
__global__ void __launch_bounds__(256) splitk_reduce_kernel(const float* __restrict__ ws, void* __restrict__ c_out,
                                                            int64_t mn, int splits, int vec) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  using E = Elem<DT>;
  typename E::T* const c = static_cast<typename E::T*>(c_out);
  grid_dependency_wait();
  const int64_t groups = (mn + 3) / 4;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = g * 4;
    if (vec && e + 3 < mn) {  // mn % 4 == 0, C 8-byte aligned
      float4 sum = __ldg(reinterpret_cast<const float4*>(ws + e));
      for (int s = 1; s < splits; ++s) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(ws + int64_t(s) * mn + e));
        sum.x += v.x;
        sum.y += v.y;
        sum.z += v.z;
        sum.w += v.w;
      }
      uint2 packed;
      packed.x = as_u32(E::pack(sum.x, sum.y));
      packed.y = as_u32(E::pack(sum.z, sum.w));
      *reinterpret_cast<uint2*>(c + e) = packed;
    } else {
      for (int q = 0; q < 4 && e + q < mn; ++q) {
        float sum = ws[e + q];
        for (int s = 1; s < splits; ++s) sum += ws[int64_t(s) * mn + e + q];
        c[e + q] = E::from(sum);
      }
    }
  }
#else
  (void)ws, (void)c_out, (void)mn, (void)splits, (void)vec;
  __trap();
#endif
}

// Launches `kernel` on `stream` as clusters of `cluster_y` CTAs along y where cluster_y > 1, with
// programmatic dependent launch where allowed (retried without it when the attribute is refused).
// 0, or kRunLaunchFailed.
template <typename... KArgs, typename... Args>
inline int launch_clustered(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                            bool pdl, unsigned cluster_y, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster_y > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = 1, attr[n].val.clusterDim.y = cluster_y, attr[n].val.clusterDim.z = 1;
    ++n;
  }
  const unsigned base = n;
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = n;
  if (n > base) {
    if (cudaLaunchKernelEx(&cfg, kernel, args...) == cudaSuccess) return 0;
    (void)cudaGetLastError();
    cfg.numAttrs = base;
  }
  if (cudaLaunchKernelEx(&cfg, kernel, args...) != cudaSuccess) {
    (void)cudaGetLastError();
    return kRunLaunchFailed;
  }
  return 0;
}

// The same without clusters.
template <typename... KArgs, typename... Args>
inline int launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                  Args... args) {
  return launch_clustered(kernel, grid, block, smem, stream, pdl, 1u, args...);
}

}  // namespace detail

// The variant. Serves M <= MT (SWAP: N <= MT), any other size, K >= 1 and any 2-byte aligned
// pointers, of its layout and accumulation; the workspace holds S x M x N fp32 partials when S > 1.
template <int MT, int BN, int BK, int WARPS, int STAGES, kforge_hgemm_layout L, kforge_hgemm_acc ACC, bool SWAP = false,
          kforge_hgemm_dtype DT = KFORGE_HGEMM_F16, int WN = 1>
struct Gemm {
  using Traits = detail::Traits<MT, BN, BK, WARPS, STAGES, L, ACC, SWAP, DT, WN>;
  static constexpr kforge_hgemm_dtype kDtype = DT;
  static constexpr size_t kSmemBytes = Traits::kSmemBytes;
  static constexpr int kThreads = Traits::kThreads;
  static constexpr int kMaxSplits = 16;

  static constexpr KernelConfig config() {
    KernelConfig c{};
    c.family = Family::kSkinny;
    c.bm = MT;
    c.bn = BN;
    c.bk = BK;
    c.stages = STAGES;
    c.consumers = WARPS;
    c.warps_n = WN;
    c.splitk = kMaxSplits;
    c.splitk_auto = true;
    c.max_m = SWAP ? 0 : MT;
    c.max_n = SWAP ? MT : 0;
    c.b_rows_n = L == KFORGE_HGEMM_NN;  // the cost model's generic-path charge: which rows are unaligned
    return c;
  }

  static bool supports(const kforge_hgemm_problem* p) {
    if (p == nullptr || p->layout != L || p->acc != ACC || p->dtype != DT) return false;
    const int64_t small = SWAP ? p->n : p->m, streamed = SWAP ? p->m : p->n;
    if (p->m < 1 || p->n < 1 || p->k < 1 || small > MT) return false;
    // Tiles of the streamed side fit gridDim.x, K tiles an int; element counts fit int64.
    if (streamed > (int64_t(1) << 40) || p->k > (int64_t(1) << 40)) return false;
    if ((streamed + BN - 1) / BN > 0x7fffffff || (p->k + BK - 1) / BK > 0x7fffffff) return false;
    return true;
  }

  static auto kernel_ptr(bool generic) {
    return generic ? detail::skinny_kernel<MT, BN, BK, WARPS, STAGES, L, ACC, SWAP, true, DT, WN>
                   : detail::skinny_kernel<MT, BN, BK, WARPS, STAGES, L, ACC, SWAP, false, DT, WN>;
  }

  // Occupancy of the vectorised kernel (the generic one has the same threads and shared memory).
  static int resident_ctas() {
    static std::atomic<uint64_t> done{0};
    if (!ensure_smem_attribute(kernel_ptr(false), kSmemBytes, done)) return 0;
    return resident_plain_ctas(kernel_ptr(false), kThreads, kSmemBytes);
  }

  // Resident CTAs on the current device, asked once per device (0: unknown).
  static int resident_cached() {
    static std::atomic<int> cache[kMaxCachedDevices];
    return resident_cached_per_device(cache, [] { return resident_ctas(); });
  }

  // The split count run() uses for `p` on the current device.
  static int splits_for(const kforge_hgemm_problem* p) {
    int resident = resident_cached();
    if (resident <= 0) resident = 2 * std::max(1, device_attrs(current_device()).sms);
    return auto_splits(config(), SWAP ? p->m : p->n, p->k, resident, SWAP ? p->n : p->m);
  }

  static size_t partial_bytes(const kforge_hgemm_problem* p, int splits) {
    return splits > 1 ? size_t(splits) * size_t(p->m) * size_t(p->n) * sizeof(float) : 0;
  }

  static size_t workspace_size(const kforge_hgemm_problem* p) {
    if (!supports(p)) return 0;
    return partial_bytes(p, splits_for(p));
  }

  static int run(const kforge_hgemm_args* args, cudaStream_t stream) {
    if (args == nullptr || !supports(&args->problem)) return kRunUnsupported;
    DeviceAttrs d;
    if (const int rc = plain_call_checks(args, &d)) return rc;
    const uintptr_t pa = reinterpret_cast<uintptr_t>(args->a), pb = reinterpret_cast<uintptr_t>(args->b),
                    pc = reinterpret_cast<uintptr_t>(args->c), pw = reinterpret_cast<uintptr_t>(args->workspace);
    const kforge_hgemm_problem& pr = args->problem;
    const int64_t M = pr.m, N = pr.n, K = pr.k;
    int splits = splits_for(&pr);
    // A workspace smaller than asked for (or misaligned) gets fewer splits rather than a refusal.
    while (splits > 1 && (args->workspace == nullptr || (pw & 15u) != 0 || args->workspace_bytes < partial_bytes(&pr, splits)))
      splits = splits > 2 ? splits / 2 : 1;

    detail::Params prm;
    prm.x = static_cast<const __half*>(SWAP ? args->b : args->a);
    prm.w = static_cast<const __half*>(SWAP ? args->a : args->b);
    prm.c = static_cast<__half*>(args->c);
    prm.ws = splits > 1 ? static_cast<float*>(args->workspace) : nullptr;
    prm.xr = SWAP ? N : M;
    prm.wr = SWAP ? M : N;
    prm.k = K;
    prm.k_tiles = int((K + BK - 1) / BK);
    prm.splits = splits;
    // A's rows are K long; B's are K (tn) or N (nn) long.
    const bool a_ok = K % 8 == 0 && pa % 16 == 0;
    const bool b_ok = (L == KFORGE_HGEMM_NN ? N % 8 == 0 : K % 8 == 0) && pb % 16 == 0;
    prm.vec_x = SWAP ? b_ok : a_ok;
    prm.vec_w = SWAP ? a_ok : b_ok;
    prm.vec_c = N % 4 == 0 && pc % 8 == 0;
    prm.vec_ws = N % 4 == 0;

    const bool generic = !(prm.vec_x && prm.vec_w);
    auto kernel = kernel_ptr(generic);
    static std::atomic<uint64_t> done_vec{0}, done_gen{0};
    if (!ensure_smem_attribute(kernel, kSmemBytes, generic ? done_gen : done_vec)) return kRunLaunchFailed;
    const bool pdl = d.cc >= 90 && pdl_enabled();
    const dim3 grid(unsigned((prm.wr + BN - 1) / BN), unsigned(splits));
    if (const int rc = detail::launch(kernel, grid, dim3(kThreads), kSmemBytes, stream, pdl, prm)) return rc;
    if (splits > 1) {
      const int64_t mn = M * N;
      const int64_t groups = (mn + 3) / 4;
      const int64_t max_blocks = int64_t(std::max(1, d.sms)) * 8;
      const int64_t blocks = std::min<int64_t>((groups + 255) / 256, max_blocks);
      const int vec = (mn % 4 == 0) && (pc % 8 == 0);
      if (const int rc = detail::launch(detail::splitk_reduce_kernel<DT>, dim3(unsigned(blocks)), dim3(256), 0, stream, pdl,
                                        static_cast<const float*>(prm.ws), static_cast<void*>(prm.c), mn, splits, vec))
        return rc;
    }
    return 0;
  }
};

}  // namespace kforge::kernels::skinny
