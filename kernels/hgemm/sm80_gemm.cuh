// kforge's sm_80 HGEMM kernel family: cp.async multi-stage pipeline, ldmatrix, mma.sync m16n8k16.
//
// This is the Ampere path and the universal fallback on Hopper: every variant supports every
// M, N, K >= 1 of its layout / accumulation (see Gemm::supports), whatever the alignment of the
// sizes and pointers.
//
// Algorithm (one CTA per BM x BN output tile, grid-stride over tiles, grouped rasterisation):
//
//   * Shared memory holds STAGES stages of an A tile (BM rows x BK, K-contiguous) and a B tile
//     (NN: BK rows x BN, N-contiguous; TN: BN rows x BK, K-contiguous). Every smem row is padded
//     by 8 halves (16 bytes): the row pitch in 16-byte units is then odd (BK/8+1, BN/8+1 with
//     BK, BN multiples of 16), so the 8 row addresses of one ldmatrix 8x8 matrix hit 8 distinct
//     16-byte bank groups (conflict-free reads).
//   * Global -> shared copies are 16-byte cp.async.cg with src-size 0 (zero fill) outside the
//     matrix, one commit group per K tile, cp.async.wait_group<STAGES-2> before each K tile is
//     consumed, and a single __syncthreads per K tile (it both publishes tile kt and retires the
//     buffer read at kt-1, which the copies issued right after it overwrite).
//   * When a row is not 16-byte aligned (K % 8 for A / TN-B, N % 8 for NN-B) or a base pointer is
//     not 16-byte aligned, the run() dispatcher launches the kGeneric instantiation of the same
//     kernel, which (per operand, decided at run time) replaces the cp.async by guarded global
//     loads packed into 16-byte shared stores: 8-byte or 4-byte loads where a chunk's address
//     allows (K % 4 or K % 2 == 0), else element by element. Same pipeline otherwise.
//   * Each warp owns a WM x WN (= BM/WARPS_M x BN/WARPS_N) sub-tile: MI = WM/16 A fragments
//     (ldmatrix.x4) and NI = WN/8 B fragments (ldmatrix.x4[.trans], two n8 tiles per x4) per
//     k16 step, and MI*NI mma.sync.m16n8k16.row.col (f32 or f16 accumulators per ACC).
//   * Epilogue: accumulators -> fp16 (round to nearest) -> a padded BM x BN tile in shared
//     memory -> 16-byte coalesced predicated global stores (element-wise stores when C rows
//     are not 16-byte aligned, decided at run time).
//
// Fragment layouts (PTX ISA, mma.m16n8k16 .f16; g = lane / 4, t = lane % 4):
//   A (16x16, row-major), 4 x .b32, each two consecutive-k halves:
//     a0 = A[g   ][2t, 2t+1]    a1 = A[g+8][2t, 2t+1]
//     a2 = A[g   ][2t+8, 2t+9]  a3 = A[g+8][2t+8, 2t+9]
//   B (16x8, "col" = K-contiguous per column n), 2 x .b32:
//     b0 = B[2t, 2t+1][g]       b1 = B[2t+8, 2t+9][g]
//   C/D f32, 4 floats:  c0 = C[g][2t]  c1 = C[g][2t+1]  c2 = C[g+8][2t]  c3 = C[g+8][2t+1]
//   C/D f16, 2 x .b32:  d0 = C[g][2t, 2t+1] (half2)    d1 = C[g+8][2t, 2t+1]
//
// ldmatrix.x4: lane L supplies the row address of matrix L/8, row L%8; after the load, for each
// matrix j, register j of lane L holds that matrix's row L/4, columns 2(L%4), 2(L%4)+1 (.trans:
// row and column swapped, i.e. rows 2(L%4), 2(L%4)+1 of column L/4).
//   A tile (rows m, K-contiguous), non-trans. Matrices: 0 = (m 0-7, k 0-7), 1 = (m 8-15, k 0-7),
//     2 = (m 0-7, k 8-15), 3 = (m 8-15, k 8-15)  ->  regs 0..3 are exactly a0..a3 above.
//     Lane address: m = L % 16, k = (L / 16) * 8.
//   TN B tile (rows n, K-contiguous), non-trans. Matrix 8x8 with rows n, cols k gives lane L:
//     n = L/4 = g, k = 2t, 2t+1  ->  b0 layout. Matrices: 0 = (n 0-7, k 0-7) = b0 of n-tile 0,
//     1 = (n 0-7, k 8-15) = b1 of n-tile 0, 2 = (n 8-15, k 0-7) = b0 of n-tile 1,
//     3 = (n 8-15, k 8-15) = b1 of n-tile 1.  Lane address: n = L%8 + (L/16)*8, k = ((L/8)%2)*8.
//   NN B tile (rows k, N-contiguous), .trans. Matrix 8x8 with rows k, cols n transposed gives
//     lane L: k = 2t, 2t+1, n = g  ->  b0 layout. Matrices: 0 = (k 0-7, n 0-7) = b0 of n-tile 0,
//     1 = (k 8-15, n 0-7) = b1 of n-tile 0, 2 = (k 0-7, n 8-15) = b0 of n-tile 1,
//     3 = (k 8-15, n 8-15) = b1 of n-tile 1.  Lane address: k = L % 16, n = (L / 16) * 8.
//
// Limitations: base pointers must be at least 2-byte aligned (fp16); run() returns
// kRunUnsupported otherwise. The generic (unaligned) path is correct but slower: its loads are
// synchronous, and element-wise where rows are 2-byte aligned only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "dtype.cuh"
#include "kernel_api.hpp"
#include "tile_order.cuh"

namespace kforge::kernels::sm80 {

namespace detail {

// ------------------------------------------------------------------------------------------
// PTX wrappers
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte cp.async; when !valid the source is not read (src-size 0) and the 16 bytes of the
// destination are zero-filled. `src` must still be a valid global address (callers pass the
// operand's base pointer in that case).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_size)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D = A * B + D, fp32 accumulators.
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// D = A * B + D, bf16 inputs, fp32 accumulators (bf16 has no other accumulator on mma.sync).
__device__ __forceinline__ void mma_16816_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// D = A * B + D, fp16 accumulators (packed half2).
__device__ __forceinline__ void mma_16816(uint32_t (&d)[2], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
      "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};\n"
      : "+r"(d[0]), "+r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// Guarded load of 8 consecutive halves src[0..7] (only those with col + j < limit, and none when
// !row_ok; the others read as 0), packed for one 16-byte shared store. A chunk wholly inside its
// row whose address is 8- or 4-byte aligned (rows of K % 4 == 0 or K % 2 == 0 elements) is read
// as two 8-byte or four 4-byte loads; the rest element by element (8 loads per chunk).
__device__ __forceinline__ uint4 load8_guarded(const __half* src, bool row_ok, int64_t col, int64_t limit) {
  uint32_t w[4] = {0u, 0u, 0u, 0u};
  if (row_ok) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(src);
    if (col + 8 <= limit && (addr & 7u) == 0) {
      const uint2 x = __ldg(reinterpret_cast<const uint2*>(src)), y = __ldg(reinterpret_cast<const uint2*>(src) + 1);
      return make_uint4(x.x, x.y, y.x, y.y);
    }
    if (col + 8 <= limit && (addr & 3u) == 0) {
      const unsigned int* s = reinterpret_cast<const unsigned int*>(src);
      return make_uint4(__ldg(s), __ldg(s + 1), __ldg(s + 2), __ldg(s + 3));
    }
    const unsigned short* s = reinterpret_cast<const unsigned short*>(src);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (col + j < limit) {
        const uint32_t h = static_cast<uint32_t>(__ldg(s + j));
        w[j >> 1] |= h << (16 * (j & 1));
      }
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// ------------------------------------------------------------------------------------------
// Kernel parameters
// ------------------------------------------------------------------------------------------
// a, b and c hold 2-byte elements of the variant's dtype (fp16 or bf16: loads and stores are bit
// copies, only the mma and the epilogue's rounding know the type).
struct Params {
  const __half* a;
  const __half* b;
  __half* c;
  int64_t m, n, k;
  int64_t tiles_m, tiles_n;
  int vec_a;  // A rows 16-byte aligned (K % 8 == 0, base 16-byte aligned): cp.async for A
  int vec_b;  // B rows 16-byte aligned: cp.async for B
  int vec_c;  // C rows 16-byte aligned (N % 8 == 0, base 16-byte aligned): 16-byte stores
};

// Compile-time geometry of one configuration.
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, kforge_hgemm_layout L,
          kforge_hgemm_acc ACC, kforge_hgemm_dtype DT = KFORGE_HGEMM_F16>
struct Traits {
  static constexpr int kWarps = WARPS_M * WARPS_N;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int WM = BM / WARPS_M;  // warp tile rows
  static constexpr int WN = BN / WARPS_N;  // warp tile columns
  static constexpr int MI = WM / 16;       // m16 fragments per warp
  static constexpr int NI = WN / 8;        // n8 fragments per warp
  static constexpr bool kNN = (L == KFORGE_HGEMM_NN);
  static constexpr bool kF32 = (ACC == KFORGE_HGEMM_ACC_F32);
  static constexpr int kAccRegs = kF32 ? 4 : 2;  // 32-bit registers per m16n8 accumulator
  static constexpr int kGroupM = 8;              // rasterisation: tile rows per group

  static constexpr int kPad = 8;  // halves of padding per shared-memory row (16 bytes)
  // A stage: BM rows x (BK + pad)
  static constexpr int kLdA = BK + kPad;
  static constexpr int kStageA = BM * kLdA;  // halves
  // B stage: NN: BK rows x (BN + pad); TN: BN rows x (BK + pad)
  static constexpr int kLdB = kNN ? (BN + kPad) : (BK + kPad);
  static constexpr int kRowsB = kNN ? BK : BN;
  static constexpr int kStageB = kRowsB * kLdB;  // halves
  // Epilogue C tile: BM rows x (BN + pad), reusing the pipeline buffers.
  static constexpr int kLdC = BN + kPad;
  static constexpr size_t kPipeBytes = size_t(STAGES) * size_t(kStageA + kStageB) * sizeof(__half);
  static constexpr size_t kEpiBytes = size_t(BM) * size_t(kLdC) * sizeof(__half);
  static constexpr size_t kSmemBytes = kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes;

  // Copy geometry (16-byte chunks). A: BM rows of BK/8 chunks.
  static constexpr int kCprA = BK / 8;
  static constexpr int kRpiA = kThreads / kCprA;  // rows covered per copy iteration
  static constexpr int kItA = (BM + kRpiA - 1) / kRpiA;
  // B: NN: BK rows of BN/8 chunks; TN: BN rows of BK/8 chunks.
  static constexpr int kCprB = kNN ? BN / 8 : BK / 8;
  static constexpr int kRpiB = kThreads / kCprB;
  static constexpr int kItB = (kRowsB + kRpiB - 1) / kRpiB;
  // C: BM rows of BN/8 chunks.
  static constexpr int kCprC = BN / 8;
  static constexpr int kRpiC = kThreads / kCprC;
  static constexpr int kItC = (BM + kRpiC - 1) / kRpiC;

  static_assert(STAGES >= 2, "the cp.async pipeline needs at least 2 stages");
  static_assert(DT == KFORGE_HGEMM_F16 || ACC == KFORGE_HGEMM_ACC_F32, "bf16 inputs: fp32 accumulation only (mma.sync has no bf16 accumulator)");
  static_assert(WARPS_M >= 1 && WARPS_N >= 1, "at least one warp per dimension");
  static_assert(kThreads <= 1024, "at most 1024 threads (32 warps) per CTA");
  static_assert(BK % 16 == 0 && BK >= 16, "BK must be a multiple of the mma K (16)");
  static_assert(BM % (WARPS_M * 16) == 0,
                "BM must split into WARPS_M warp tiles whose rows are a multiple of the mma M (16)");
  static_assert(BN % (WARPS_N * 16) == 0,
                "BN must split into WARPS_N warp tiles whose columns are a multiple of 16 "
                "(one ldmatrix.x4 of B covers two n8 mma tiles)");
  static_assert(kThreads % kCprA == 0, "the CTA's threads must cover whole rows of the A tile (BK/8 chunks)");
  static_assert(kThreads % kCprB == 0, "the CTA's threads must cover whole rows of the B tile");
  static_assert(kThreads % kCprC == 0, "the CTA's threads must cover whole rows of the C tile (BN/8 chunks)");
  static_assert(MI * NI * kAccRegs <= 128,
                "accumulator fragment too large for the register file (warp tile too big: add warps)");
  static_assert(kSmemBytes <= size_t(227) * 1024, "shared memory exceeds the 227 KiB per-CTA budget");
  // Conflict-free ldmatrix: row pitches in 16-byte units are odd.
  static_assert(((kLdA / 8) & 1) == 1 && ((kLdB / 8) & 1) == 1, "padded pitch must be an odd number of 16-byte units");
};

// ------------------------------------------------------------------------------------------
// The kernel
// ------------------------------------------------------------------------------------------
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, kforge_hgemm_layout L,
          kforge_hgemm_acc ACC, bool kGeneric, kforge_hgemm_dtype DT>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    sm80_hgemm_kernel(const Params p) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
  using T = Traits<BM, BN, BK, WARPS_M, WARPS_N, STAGES, L, ACC, DT>;
  constexpr int MI = T::MI, NI = T::NI, WM = T::WM, WN = T::WN;
  constexpr bool kNN = T::kNN;
  using AccFrag = typename std::conditional<T::kF32, float[4], uint32_t[2]>::type;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t smem_base = smem_u32(smem_raw);
  const uint32_t sA0 = smem_base;                                                  // STAGES A stages
  const uint32_t sB0 = smem_base + uint32_t(STAGES * T::kStageA * sizeof(__half));  // STAGES B stages
  constexpr uint32_t kStageABytes = uint32_t(T::kStageA * sizeof(__half));
  constexpr uint32_t kStageBBytes = uint32_t(T::kStageB * sizeof(__half));

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wm = warp % WARPS_M;
  const int wn = warp / WARPS_M;

  const int64_t M = p.m, N = p.n, K = p.k;
  const __half* const gA = p.a;
  const __half* const gB = p.b;
  const bool vec_a = kGeneric ? (p.vec_a != 0) : true;
  const bool vec_b = kGeneric ? (p.vec_b != 0) : true;

  // Per-thread copy coordinates (constant column chunk, rows r0 + it * RPI).
  const int a_c = tid % T::kCprA, a_r0 = tid / T::kCprA;
  const int b_c = tid % T::kCprB, b_r0 = tid / T::kCprB;

  // Per-thread ldmatrix offsets (bytes within a stage).
  // A: row = wm*WM + mi*16 + lane%16, col(k) = kk*16 + (lane/16)*8
  const uint32_t a_ld_off =
      uint32_t(((wm * WM + (lane & 15)) * T::kLdA + (lane >> 4) * 8) * int(sizeof(__half)));
  // B NN: row(k) = kk*16 + lane%16, col(n) = wn*WN + nj*16 + (lane/16)*8
  // B TN: row(n) = wn*WN + nj*16 + lane%8 + (lane/16)*8, col(k) = kk*16 + ((lane/8)%2)*8
  const uint32_t b_ld_off =
      kNN ? uint32_t(((lane & 15) * T::kLdB + wn * WN + (lane >> 4) * 8) * int(sizeof(__half)))
          : uint32_t(((wn * WN + (lane & 7) + ((lane >> 4) << 3)) * T::kLdB + ((lane >> 3) & 1) * 8) *
                     int(sizeof(__half)));

  const int64_t total_tiles = p.tiles_m * p.tiles_n;
  const int64_t k_tiles = (K + BK - 1) / BK;

  for (int64_t tile = blockIdx.x; tile < total_tiles; tile += gridDim.x) {
    // ---- grouped rasterisation: groups of kGroupM tile rows, column-major inside a group ----
    int64_t tm, tn;
    tile_coords<T::kGroupM>(tile, int64_t(p.tiles_m), int64_t(p.tiles_n), tm, tn);
    const int64_t m0 = tm * BM;
    const int64_t n0 = tn * BN;

    // ---- loads of one K tile (index kt) into stage s ----
    auto load_tile = [&](int64_t kt, int s) {
      const int64_t k0 = kt * BK;
      // A: rows m0 + r, columns k0 + c*8 .. +7
      {
        const int64_t col = k0 + a_c * 8;
        const uint32_t dst0 = sA0 + uint32_t(s) * kStageABytes;
        // Unaligned rows (kGeneric): every chunk of the tile loaded into registers before the first
        // is stored (a shared store is a compiler barrier: stored one by one, each chunk waited a
        // whole memory latency).
        uint4 ga[kGeneric ? T::kItA : 1];
#pragma unroll
        for (int it = 0; it < T::kItA; ++it) {
          const int r = a_r0 + it * T::kRpiA;
          if ((BM % T::kRpiA == 0) || r < BM) {
            const int64_t gm = m0 + r;
            const bool row_ok = gm < M;
            const uint32_t dst = dst0 + uint32_t((r * T::kLdA + a_c * 8) * int(sizeof(__half)));
            const __half* src = gA + gm * K + col;
            if (vec_a) {
              const bool ok = row_ok && col < K;  // K % 8 == 0 on this path: the whole chunk is in
              cp_async_16(dst, ok ? src : gA, ok);
            } else if constexpr (kGeneric) {
              ga[it] = load8_guarded(src, row_ok, col, K);
            }
          }
        }
        if constexpr (kGeneric)
          if (!vec_a) {
#pragma unroll
            for (int it = 0; it < T::kItA; ++it) {
              const int r = a_r0 + it * T::kRpiA;
              if ((BM % T::kRpiA == 0) || r < BM)
                st_shared_v4(dst0 + uint32_t((r * T::kLdA + a_c * 8) * int(sizeof(__half))), ga[it]);
            }
          }
      }
      // B
      {
        const uint32_t dst0 = sB0 + uint32_t(s) * kStageBBytes;
        uint4 gb[kGeneric ? T::kItB : 1];  // as A's: all loads first
#pragma unroll
        for (int it = 0; it < T::kItB; ++it) {
          const int r = b_r0 + it * T::kRpiB;
          if ((T::kRowsB % T::kRpiB == 0) || r < T::kRowsB) {
            const uint32_t dst = dst0 + uint32_t((r * T::kLdB + b_c * 8) * int(sizeof(__half)));
            if constexpr (kNN) {
              // rows k0 + r (ld N), columns n0 + c*8 .. +7
              const int64_t gk = k0 + r;
              const int64_t col = n0 + b_c * 8;
              const bool row_ok = gk < K;
              const __half* src = gB + gk * N + col;
              if (vec_b) {
                const bool ok = row_ok && col < N;
                cp_async_16(dst, ok ? src : gB, ok);
              } else if constexpr (kGeneric) {
                gb[it] = load8_guarded(src, row_ok, col, N);
              }
            } else {
              // rows n0 + r (ld K), columns k0 + c*8 .. +7
              const int64_t gn = n0 + r;
              const int64_t col = k0 + b_c * 8;
              const bool row_ok = gn < N;
              const __half* src = gB + gn * K + col;
              if (vec_b) {
                const bool ok = row_ok && col < K;
                cp_async_16(dst, ok ? src : gB, ok);
              } else if constexpr (kGeneric) {
                gb[it] = load8_guarded(src, row_ok, col, K);
              }
            }
          }
        }
        if constexpr (kGeneric)
          if (!vec_b) {
#pragma unroll
            for (int it = 0; it < T::kItB; ++it) {
              const int r = b_r0 + it * T::kRpiB;
              if ((T::kRowsB % T::kRpiB == 0) || r < T::kRowsB)
                st_shared_v4(dst0 + uint32_t((r * T::kLdB + b_c * 8) * int(sizeof(__half))), gb[it]);
            }
          }
      }
    };

    // ---- accumulators ----
    AccFrag acc[MI][NI];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NI; ++j)
#pragma unroll
        for (int r = 0; r < T::kAccRegs; ++r) {
          if constexpr (T::kF32) acc[i][j][r] = 0.0f;
          else acc[i][j][r] = 0u;
        }

    // ---- prologue: K tiles 0 .. STAGES-2, one commit group each (empty past the end) ----
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < k_tiles) load_tile(s, s);
      cp_async_commit();
    }

    // ---- main loop ----
    int read_stage = 0;
    int write_stage = STAGES - 1;
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
      // Groups committed so far: STAGES-1+kt; at most STAGES-2 pending => tiles 0..kt landed.
      cp_async_wait<STAGES - 2>();
      // Publishes tile kt to every thread and retires stage (kt-1)%STAGES (read at kt-1),
      // which is the stage the copies below overwrite.
      __syncthreads();
      {
        const int64_t next = kt + (STAGES - 1);
        if (next < k_tiles) load_tile(next, write_stage);
        cp_async_commit();
      }

      const uint32_t sA = sA0 + uint32_t(read_stage) * kStageABytes + a_ld_off;
      const uint32_t sB = sB0 + uint32_t(read_stage) * kStageBBytes + b_ld_off;
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        uint32_t af[MI][4];
        uint32_t bf[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          ldmatrix_x4(af[mi], sA + uint32_t((mi * 16 * T::kLdA + kk * 16) * int(sizeof(__half))));
        }
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {
          uint32_t r[4];
          if constexpr (kNN) {
            ldmatrix_x4_trans(r, sB + uint32_t((kk * 16 * T::kLdB + nj * 16) * int(sizeof(__half))));
          } else {
            ldmatrix_x4(r, sB + uint32_t((nj * 16 * T::kLdB + kk * 16) * int(sizeof(__half))));
          }
          bf[2 * nj][0] = r[0];
          bf[2 * nj][1] = r[1];
          bf[2 * nj + 1][0] = r[2];
          bf[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            if constexpr (DT == KFORGE_HGEMM_BF16)
              mma_16816_bf16(acc[mi][ni], af[mi], bf[ni]);
            else
              mma_16816(acc[mi][ni], af[mi], bf[ni]);
          }
      }

      read_stage = (read_stage + 1 == STAGES) ? 0 : read_stage + 1;
      write_stage = (write_stage + 1 == STAGES) ? 0 : write_stage + 1;
    }

    // ---- epilogue ----
    cp_async_wait<0>();  // only empty groups can be pending; drain before reusing the buffers
    __syncthreads();     // every warp is done reading the pipeline stages

    // Fragments -> fp16 -> padded C tile in shared memory. Thread holds C[g][2t..2t+1] and
    // C[g+8][2t..2t+1] of each m16n8 tile (g = lane/4, t = lane%4).
    {
      const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          const int row = wm * WM + mi * 16 + g;
          const int col = wn * WN + ni * 8 + 2 * t4;
          uint32_t lo, hi;
          if constexpr (T::kF32) {
            lo = as_u32(Elem<DT>::pack(acc[mi][ni][0], acc[mi][ni][1]));
            hi = as_u32(Elem<DT>::pack(acc[mi][ni][2], acc[mi][ni][3]));
          } else {
            lo = acc[mi][ni][0];
            hi = acc[mi][ni][1];
          }
          st_shared_b32(smem_base + uint32_t((row * T::kLdC + col) * int(sizeof(__half))), lo);
          st_shared_b32(smem_base + uint32_t(((row + 8) * T::kLdC + col) * int(sizeof(__half))), hi);
        }
      }
    }
    __syncthreads();

    // C tile -> global, predicated on the matrix bounds: 16-byte chunks where C's rows are
    // 16-byte aligned; else consecutive threads take consecutive column pairs of a row (a warp's
    // store covers up to 128 contiguous bytes, not 2 bytes in each of 16 sectors), a pair whose
    // address is 4-byte aligned as one store.
    if (p.vec_c != 0) {
      const int c_c = tid % T::kCprC, c_r0 = tid / T::kCprC;
      const int64_t gcol = n0 + c_c * 8;
#pragma unroll
      for (int it = 0; it < T::kItC; ++it) {
        const int r = c_r0 + it * T::kRpiC;
        if ((BM % T::kRpiC == 0) || r < BM) {
          const int64_t grow = m0 + r;
          if (grow < M && gcol < N) {  // N % 8 == 0: the whole chunk is inside the row
            const uint4 v = ld_shared_v4(smem_base + uint32_t((r * T::kLdC + c_c * 8) * int(sizeof(__half))));
            *reinterpret_cast<uint4*>(reinterpret_cast<unsigned short*>(p.c) + grow * N + gcol) = v;
          }
        }
      }
    } else {
      constexpr int kPairs = BN / 2;
      unsigned short* cout = reinterpret_cast<unsigned short*>(p.c);
      for (int e = tid; e < BM * kPairs; e += T::kThreads) {
        const int r = e / kPairs, c = 2 * (e % kPairs);
        const int64_t grow = m0 + r, gcol = n0 + c;
        if (grow >= M || gcol >= N) continue;
        uint32_t v;
        asm volatile("ld.shared.b32 %0, [%1];\n"
                     : "=r"(v)
                     : "r"(smem_base + uint32_t((r * T::kLdC + c) * int(sizeof(__half))))
                     : "memory");
        const int64_t off = grow * N + gcol;
        // 4-byte aligned address (C's base may be 2-byte aligned only: a view at an odd offset).
        if (gcol + 1 < N && (reinterpret_cast<uintptr_t>(cout + off) & 3u) == 0) {
          *reinterpret_cast<uint32_t*>(cout + off) = v;
        } else {
          cout[off] = static_cast<unsigned short>(v & 0xffffu);
          if (gcol + 1 < N) cout[off + 1] = static_cast<unsigned short>(v >> 16);
        }
      }
    }
    // The next tile's prologue overwrites the C tile: everyone must have read it.
    __syncthreads();
  }
#else
  // Compiled for an architecture without cp.async / ldmatrix / m16n8k16: never launched there
  // (run() is host code; launching on such a device fails with an error reported by run()).
  (void)p;
  __trap();
#endif
}

}  // namespace detail

// ------------------------------------------------------------------------------------------
// The variant
// ------------------------------------------------------------------------------------------
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, kforge_hgemm_layout L,
          kforge_hgemm_acc ACC, kforge_hgemm_dtype DT = KFORGE_HGEMM_F16>
struct Gemm {
  using Traits = detail::Traits<BM, BN, BK, WARPS_M, WARPS_N, STAGES, L, ACC, DT>;
  static constexpr kforge_hgemm_layout kLayout = L;
  static constexpr kforge_hgemm_acc kAcc = ACC;
  static constexpr kforge_hgemm_dtype kDtype = DT;
  static constexpr size_t kSmemBytes = Traits::kSmemBytes;
  static constexpr int kThreads = Traits::kThreads;

  static constexpr KernelConfig config() {
    KernelConfig c{};
    c.family = Family::kSm80;
    c.bm = BM;
    c.bn = BN;
    c.bk = BK;
    c.stages = STAGES;
    c.consumers = WARPS_M * WARPS_N;
    c.splitk = 1;
    c.group_m = Traits::kGroupM;
    c.persistent = false;
    c.b_rows_n = L == KFORGE_HGEMM_NN;  // the cost model's generic-path charge: which rows are unaligned
    return c;
  }

  static bool supports(const kforge_hgemm_problem* p) {
    if (p == nullptr) return false;
    if (p->layout != L || p->acc != ACC || p->dtype != DT) return false;
    if (p->m < 1 || p->n < 1 || p->k < 1) return false;
    constexpr int64_t kMax = INT64_MAX;
    if (p->m > kMax / p->k) return false;  // A: M*K elements
    if (p->k > kMax / p->n) return false;  // B: K*N elements
    if (p->m > kMax / p->n) return false;  // C: M*N elements
    return true;
  }

  static size_t workspace_size(const kforge_hgemm_problem*) { return 0; }

  // The vectorised kernel's occupancy (the scalar fallback has the same shared memory and threads).
  static int resident_ctas() {
    auto kernel = detail::sm80_hgemm_kernel<BM, BN, BK, WARPS_M, WARPS_N, STAGES, L, ACC, false, DT>;
    static std::atomic<uint64_t> done{0};
    if (!ensure_smem_attribute(kernel, kSmemBytes, done)) return 0;
    return resident_plain_ctas(kernel, kThreads, kSmemBytes);
  }

  static int run(const kforge_hgemm_args* args, cudaStream_t stream) {
    if (args == nullptr || !supports(&args->problem)) return kRunUnsupported;
    if (args->a == nullptr || args->b == nullptr || args->c == nullptr) return kRunUnsupported;
    const uintptr_t pa = reinterpret_cast<uintptr_t>(args->a);
    const uintptr_t pb = reinterpret_cast<uintptr_t>(args->b);
    const uintptr_t pc = reinterpret_cast<uintptr_t>(args->c);
    if (((pa | pb | pc) & 1u) != 0) return kRunUnsupported;  // not even fp16-aligned

    const int64_t M = args->problem.m, N = args->problem.n, K = args->problem.k;
    detail::Params prm;
    prm.a = static_cast<const __half*>(args->a);
    prm.b = static_cast<const __half*>(args->b);
    prm.c = static_cast<__half*>(args->c);
    prm.m = M;
    prm.n = N;
    prm.k = K;
    prm.tiles_m = (M + BM - 1) / BM;
    prm.tiles_n = (N + BN - 1) / BN;
    prm.vec_a = (K % 8 == 0) && (pa % 16 == 0);
    prm.vec_b = (L == KFORGE_HGEMM_NN ? (N % 8 == 0) : (K % 8 == 0)) && (pb % 16 == 0);
    prm.vec_c = (N % 8 == 0) && (pc % 16 == 0);

    const int64_t tiles = prm.tiles_m * prm.tiles_n;  // <= M*N, no overflow
    const int64_t kMaxGrid = 0x7fffffff;               // gridDim.x limit; the kernel grid-strides
    const dim3 grid(static_cast<unsigned>(tiles < kMaxGrid ? tiles : kMaxGrid));
    const dim3 block(kThreads);

    if (prm.vec_a && prm.vec_b) {
      auto kernel = detail::sm80_hgemm_kernel<BM, BN, BK, WARPS_M, WARPS_N, STAGES, L, ACC, false, DT>;
      static std::atomic<uint64_t> done{0};
      if (!ensure_smem_attribute(kernel, kSmemBytes, done)) return kRunLaunchFailed;
      kernel<<<grid, block, kSmemBytes, stream>>>(prm);
    } else {
      auto kernel = detail::sm80_hgemm_kernel<BM, BN, BK, WARPS_M, WARPS_N, STAGES, L, ACC, true, DT>;
      static std::atomic<uint64_t> done{0};
      if (!ensure_smem_attribute(kernel, kSmemBytes, done)) return kRunLaunchFailed;
      kernel<<<grid, block, kSmemBytes, stream>>>(prm);
    }
    if (cudaGetLastError() != cudaSuccess) return kRunLaunchFailed;
    return 0;
  }
};

}  // namespace kforge::kernels::sm80
