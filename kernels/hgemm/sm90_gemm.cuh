// kforge's sm_90a HGEMM kernel family: TMA loads into 128-byte-swizzled shared memory, an
// mbarrier pipeline of kStages stages, warp specialisation (one producer warpgroup issuing TMA,
// kConsumers consumer warpgroups issuing wgmma, registers moved from producer to consumers with
// setmaxnreg), a persistent tile loop with grouped rasterisation, split-K across the CTAs of
// a thread-block cluster reduced deterministically through distributed shared memory, and 2-CTA
// clusters along M whose CTAs share each B tile through TMA multicast (each loads half of it into
// both CTAs' shared memory and a stage is refilled only once both CTAs' consumers released it).
//
//   C[M,N] = A[M,K] * B,  A row-major (K-major for wgmma), B K-major (layout tn) or N-major (nn).
//   Elements fp16 or bf16 (DT; bf16 with fp32 accumulation only): the loads and shared-memory
//   layout are the same 2-byte elements, only the wgmma type and the epilogue's rounding differ.
//
// Shared memory, per stage: A tile [BM rows][64 halves] (128 B per row, 8-row groups of 1 KiB,
// the 128-byte swizzle applied by TMA); B tile: tn [BN rows][64 halves], nn [BN/64 chunks][64 K
// rows][64 halves]. wgmma reads both through descriptors (start, leading/stride byte offsets,
// swizzle mode); the k16 step moves 32 B along a K-major row or 16 rows (2 KiB) of an N-major tile.
#pragma once
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "kernels/hgemm/dtype.cuh"
#include "kernels/hgemm/kernel_api.hpp"
#include "kernels/hgemm/tile_order.cuh"
#include "kernels/hgemm/wgmma_ops.cuh"

namespace kforge::kernels::sm90 {

constexpr int kBK = 64;  // 64 halves = one 128-byte swizzle row

template <int BM, int BN, int STAGES, int CONSUMERS, int SPLITK, int GROUP_M, bool PERSISTENT,
          kforge_hgemm_layout L, kforge_hgemm_acc ACC, bool PINGPONG = false, int MCAST = 1,
          kforge_hgemm_dtype DT = KFORGE_HGEMM_F16, bool STREAMK = false, bool SWAP = false>
struct Traits {
  // Cooperative (default): the consumer warpgroups split each tile's rows. Ping-pong: each
  // consumer owns whole tiles, alternating, so that one's epilogue runs under the other's wgmmas.
  static constexpr int kRowsPerConsumer = PINGPONG ? BM : BM / CONSUMERS;
  static constexpr int kMmaM = kRowsPerConsumer / 64;  // m64 wgmmas per consumer per k16 step
  static constexpr bool kF32 = ACC == KFORGE_HGEMM_ACC_F32;
  static constexpr int kAccRegs = kF32 ? BN / 2 : BN / 4;  // per m64 wgmma, per thread
  static constexpr int kThreads = (CONSUMERS + 1) * 128;
  static constexpr int kTileA = BM * kBK * 2, kTileB = BN * kBK * 2;
  static constexpr int kStageBytes = kTileA + kTileB;
  static constexpr int kPipeBytes = STAGES * kStageBytes;
  // Split-K partial tile (fp32), rows padded by 8 floats: a half-warp's float2 fragment stores
  // (4 rows x 8 columns) then fall in 32 distinct banks; unpadded rows of BN % 32 == 0 floats put
  // all 4 rows in one set of 8 banks (4-way conflicts). The reduction's float4 reads stay contiguous.
  static constexpr int kRedStride = BN + 8;
  static constexpr int kRedBytes = SPLITK > 1 ? BM * kRedStride * 4 : 0;
  // Epilogue staging: each consumer warp owns 16 rows x 64 columns of fp16 (rows padded to 72
  // halves: conflict-free fragment writes), so that global stores go out as whole 128-byte rows.
  static constexpr int kStageRow = 72;
  // (Swapped roles store their few columns straight from the fragments: no staging.)
  static constexpr int kEpiBytes = SPLITK == 1 && !SWAP ? CONSUMERS * 4 * 16 * kStageRow * 2 : 0;
  static constexpr int kEpiOffset = kPipeBytes > kRedBytes ? kPipeBytes : kRedBytes;
  static constexpr int kBarOffset = kEpiOffset + kEpiBytes;
  static constexpr int kSmemBytes = kBarOffset + 1024 /*align*/ + 256 /*barriers*/;

  static_assert(BM % 64 == 0 && BM >= 64 && BM <= 256, "BM must be 64, 128, 192 or 256 (m64 wgmmas; TMA box <= 256 rows)");
  static_assert(kRowsPerConsumer * (PINGPONG ? 1 : CONSUMERS) == BM && kRowsPerConsumer % 64 == 0,
                "each consumer warpgroup owns a multiple of 64 rows");
  static_assert(!PINGPONG || (SPLITK == 1 && CONSUMERS == 2), "ping-pong: two consumers, no split-K");
  static_assert(CONSUMERS >= 1 && CONSUMERS <= 2, "1 or 2 consumer warpgroups (register budget: 2 x 128 x 232 + 128 x 40)");
  static_assert((BN % 16 == 0 || BN == 8) && BN >= 8 && BN <= 256, "BN must be 8 or a multiple of 16 in [16, 256] (wgmma n)");
  static_assert(BN % 64 == 0 || SWAP,
                "BN % 64 == 0: an N-major B tile (nn) is loaded, and every epilogue stored, in 64-column chunks");
  // Swapped roles (decode shapes, SWAP): the kernel computes C^T = B^T A^T, so that the streamed
  // operand (B's N rows) is the wgmma's M side and the few rows of A its N side (BN = 8 to 32),
  // and stores C^T's tile transposed into C. Both operands are then K-major: tn only.
  static_assert(!SWAP || (L == KFORGE_HGEMM_TN && BN <= 32 && MCAST == 1 && !PINGPONG && !STREAMK && !PERSISTENT),
                "swapped roles: tn, BN <= 32, one tile per CTA (split-K clusters allowed), no multicast or ping-pong");
  static_assert(kMmaM * kAccRegs <= 128, "accumulators exceed 128 registers per consumer thread");
  static_assert(STAGES >= 2 && STAGES <= 16, "2 to 16 pipeline stages (the 256 bytes of barriers hold 16 full and 16 empty)");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory over the 227 KiB a Hopper CTA may have");
  static_assert(SPLITK >= 1 && SPLITK <= 16, "split-K cluster of 1 to 16 CTAs (over 8: a non-portable cluster size)");
  static_assert(SPLITK == 1 || !PERSISTENT, "cluster split-K runs one tile per CTA");
  static_assert(GROUP_M >= 0 && GROUP_M <= 64, "rasterisation group of 0 to 64 tile rows");
  static_assert(MCAST == 1 || MCAST == 2, "B multicast to a cluster of 1 or 2 CTAs along M (larger clusters lost "
                                          "performance in published Hopper GEMMs)");
  static_assert(MCAST == 1 || (SPLITK == 1 && !PINGPONG), "multicast: cooperative consumers, no split-K cluster");
  // Each CTA of a pair loads its half of a K-major B tile (BN/2 rows): whole 8-row swizzle atoms.
  static_assert((BN / MCAST) % 8 == 0, "a multicast half of the B tile is a whole number of 8-row swizzle atoms");
  static_assert(DT == KFORGE_HGEMM_F16 || ACC == KFORGE_HGEMM_ACC_F32, "bf16 inputs: fp32 accumulation only (wgmma has no bf16 accumulator)");
  // Stream-K (stream_k_plan): a persistent cooperative grid of single CTAs, fp32 partials.
  static_assert(!STREAMK || (PERSISTENT && SPLITK == 1 && MCAST == 1 && !PINGPONG && ACC == KFORGE_HGEMM_ACC_F32),
                "stream-K: persistent, cooperative consumers, no split-K cluster, no multicast, fp32 accumulation");
  // Consumers release a stage to the producers of every CTA whose loads land in it.
  static constexpr int kEmptyArrivals = (PINGPONG ? 1 : CONSUMERS) * MCAST;
  // Stream-K: a CTA's parked partial tile, in float4s per consumer thread (slot layout: element e of
  // consumer thread ct at float4 index e x consumer threads + ct, so that each store is coalesced).
  static constexpr int kPartialVec = kMmaM * kAccRegs / 4;
  static constexpr int kPartialFloats = BM * BN;
  static_assert(!STREAMK || (kAccRegs % 4 == 0 && kPartialVec * CONSUMERS * 128 * 4 == kPartialFloats),
                "stream-K: the consumer threads' float4s fill exactly one BM x BN partial slot");
};

// ---------------------------------------------------------------------------------------------
// PTX helpers
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::
          "r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(x), "r"(y)
      : "memory");
}

// The same load delivered to the same shared-memory offset, and signalled on the same barrier
// offset, in every CTA of this cluster named in `mask`.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, int x, int y,
                                                      uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(x), "r"(y), "h"(mask)
      : "memory");
}

// Arrives on the barrier at `local`'s address in CTA `rank` of the cluster (this CTA's own rank
// included). Default semantics (release at CTA scope), as CUTLASS's ClusterBarrier does: the
// arrival only says that this thread's reads of the stage are over (wgmma_wait has retired them);
// a cluster-scope release made every arrival wait on the thread's earlier memory operations.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(local)), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

template <int R>
__device__ __forceinline__ void regs_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void regs_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

// Named barriers (ids 2 and 3: the ping-pong order between two consumer warpgroups).
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// Stream-K flags: a contributor's release (after a CTA barrier over its partial's stores) and an
// owner's acquire, at GPU scope; the partials are read through L2 (ld.global.cg), never a stale L1.
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }
__device__ __forceinline__ void st_relaxed_gpu(unsigned long long* p, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_acquire_gpu(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.b64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Reads a float from the shared memory of CTA `rank` of this cluster, at the address `local`
// has in this CTA.
__device__ __forceinline__ float4 ld_dsmem_f4(const void* local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(local)), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

// The two accumulator values of an m64nN fragment at row half h (rows l/4 and l/4 + 8) and column
// pair j (columns 8j + 2(l%4) + {0, 1}) as floats: fp32 accumulators hold them as 4j + 2h and
// 4j + 2h + 1, fp16 ones as the halves of the packed register 2j + h.
template <bool kF32, class Acc>
__device__ __forceinline__ float2 acc_pair(const Acc* acc, int j, int h) {
  if constexpr (kF32) {
    return make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
  } else {
    const __half2 hv = *reinterpret_cast<const __half2*>(&acc[2 * j + h]);
    return make_float2(__low2float(hv), __high2float(hv));
  }
}

// Calls fn(row, col, pair) for every accumulator pair of a consumer's fragments (R of m64nN, C
// registers each): row = row_off + 64i + 16 warp + l/4 + 8h (the tile row), col = 8j + 2(l%4) (the
// first of the pair's two columns), pair = acc_pair (both values as floats).
template <bool kF32, class Acc, int R, int C, class Fn>
__device__ __forceinline__ void for_each_acc_pair(const Acc (&acc)[R][C], int row_off, int warp, int lane, Fn&& fn) {
  constexpr int kPairs = kF32 ? C / 4 : C / 2;  // column pairs of 8 (N / 8)
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < kPairs; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        fn(row_off + i * 64 + warp * 16 + lane / 4 + 8 * h, 8 * j + 2 * (lane % 4), acc_pair<kF32>(acc[i], j, h));
}

// wgmma shared-memory descriptor, 128-byte swizzle (layout type 1 in bits 62-63).
__device__ __forceinline__ uint64_t make_desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  uint64_t d = 0;
  d |= uint64_t((smem_addr & 0x3FFFF) >> 4);
  d |= uint64_t((lbo & 0x3FFFF) >> 4) << 16;
  d |= uint64_t((sbo & 0x3FFFF) >> 4) << 32;
  d |= uint64_t(1) << 62;
  return d;
}

// ---------------------------------------------------------------------------------------------
// The kernel
// ---------------------------------------------------------------------------------------------
struct Params {
  void* c;  // fp16 or bf16 (the kernel's DT)
  int m, n, k;
  int tiles_m, tiles_n, k_tiles;
  int vec_c;  // C rows 16-byte aligned (N % 8 == 0): whole 8-element chunks stored at once; else element-wise
  // The first row (column) that the last M (N) tile's boxes load. Shifted edge tiles (the
  // default): M - BM (N - BN) where the problem holds a whole tile, so that no TMA box reaches
  // past the tensor; the tile then overlaps its neighbour and stores only the rows (columns) that
  // are its own. Otherwise (tiles_m - 1) * BM: the box runs past the edge and TMA fills zeros.
  int m_last, n_last;
  // Short boxes, for a problem smaller than one tile (M < BM; N < BN): the tensor maps' boxes hold
  // only the rows that exist (rounded up to 8), so that TMA fills no rows past the edge (decode
  // shapes: 7 of a 64-row tile's rows exist; 57 zero-filled rows per box were the ~3 ns per row
  // of docs/perf-notes.md). The shared memory past them keeps whatever it held: it feeds only
  // accumulator rows (columns) past M (N), which are never stored. `stage_tx` is the bytes one
  // stage receives, `b_chunks` how many 64-column chunks of an N-major B tile are loaded.
  uint32_t stage_tx;
  int b_chunks;
  // Stream-K variants only (stream_k_plan): the schedule, the partial slots (grid x BM x BN floats)
  // and one flag per CTA in the workspace, and this launch's epoch, the value a raised flag holds.
  int sk_grid, sk_dp_tiles;
  long long sk_iters;
  float* sk_partials;
  unsigned long long* sk_flags;
  unsigned long long sk_epoch;
};

// Where tile tm's (tn's) boxes start: its own first row, or for the last tile the shifted start.
// A multicast pair's phantom tile (tm == tiles_m) loads the last tile's rows and stores nothing.
__device__ __forceinline__ int tile_row0(int tm, int bm, const Params& p) { return min(tm * bm, p.m_last); }
__device__ __forceinline__ int tile_col0(int tn, int bn, const Params& p) { return min(tn * bn, p.n_last); }

template <int BM, int BN, int STAGES, int CONSUMERS, int SPLITK, int GROUP_M, bool PERSISTENT,
          kforge_hgemm_layout L, kforge_hgemm_acc ACC, bool PINGPONG, int MCAST, kforge_hgemm_dtype DT, bool STREAMK, bool SWAP>
__global__ void __launch_bounds__(Traits<BM, BN, STAGES, CONSUMERS, SPLITK, GROUP_M, PERSISTENT, L, ACC, PINGPONG, MCAST, DT, STREAMK, SWAP>::kThreads, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, const Params p) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using T = Traits<BM, BN, STAGES, CONSUMERS, SPLITK, GROUP_M, PERSISTENT, L, ACC, PINGPONG, MCAST, DT, STREAMK, SWAP>;
  using E = Elem<DT>;  // the element type's conversions
  using ET = typename E::T;
  extern __shared__ uint8_t smem_raw[];
  // 1 KiB alignment: the swizzle pattern repeats every 1024 bytes and TMA and wgmma must agree.
  const uint32_t raw = smem_u32(smem_raw);
  uint8_t* smem = smem_raw + (((raw + 1023) & ~1023u) - raw);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + T::kBarOffset);
  uint64_t* empty = full + STAGES;

  const int wg = threadIdx.x / 128;
  const int tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], T::kEmptyArrivals);  // the consumers that read each stage (of both CTAs: multicast)
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // Multicast: the peer's loads land in this CTA's shared memory and signal its barriers, so both
  // CTAs' barriers must be initialised before either producer starts.
  if constexpr (MCAST > 1) {
    __syncwarp();  // thread 0's warp reconverges before the warp-aligned cluster barrier
    cluster_sync();
  } else {
    __syncthreads();
  }
  // Programmatic dependent launch: this grid may have been started while the kernel before it on
  // the stream was still running, so that the set-up above overlaps that kernel's tail. No thread
  // touches global memory (A, B or C) before that kernel has completed and its writes are visible
  // (a no-op when launched without the attribute)...
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  // ...and the kernel after this one may be scheduled as SMs free up; it waits the same way.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  // Multicast: a scheduling unit is a column of MCAST vertically adjacent tiles sharing one B tile;
  // CTA rank r of the cluster takes row r of it. Both CTAs walk the same units in the same order.
  const uint32_t mc_rank = MCAST > 1 ? cluster_rank() : 0;
  const int units_m = (p.tiles_m + MCAST - 1) / MCAST;
  const int num_tiles = units_m * p.tiles_n;  // scheduling units (tiles when MCAST == 1)
  // This CTA's K range (split-K: cluster rank z takes its share of the k tiles).
  const int split = SPLITK > 1 ? int(blockIdx.z) : 0;
  const int kt_begin = int((int64_t(p.k_tiles) * split) / SPLITK);
  const int kt_end = int((int64_t(p.k_tiles) * (split + 1)) / SPLITK);
  // Stream-K: this CTA walks its units (stream_k_units: whole tiles, then pieces of tiles), each
  // mapped to a tile and a K range by stream_k_unit; every other variant walks tiles over the range above.
  StreamKPlan skp;
  if constexpr (STREAMK) {
    skp.grid = p.sk_grid;
    skp.dp_tiles = p.sk_dp_tiles;
    skp.k_tiles = p.k_tiles;
    skp.sk_iters = p.sk_iters;
  }
  const int num_units = STREAMK ? stream_k_units(skp, int(blockIdx.x)) : num_tiles;
  const int first_tile = STREAMK ? 0 : int(blockIdx.x) / MCAST;
  const int tile_step = STREAMK ? 1 : PERSISTENT ? int(gridDim.x) / MCAST : num_tiles;

  if (wg == 0) {
    // Producer warpgroup: one thread issues every TMA load.
    if constexpr (CONSUMERS >= 2) regs_dec<40>();
    if (tid == 0) {
      // The descriptors' first use is the first load: fetch them while the pipeline starts.
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
      int it = 0;
      for (int t = first_tile; t < num_units; t += tile_step) {
        int tile = t, kb = kt_begin, ke = kt_end;
        if constexpr (STREAMK) stream_k_unit(skp, int(blockIdx.x), t, tile, kb, ke);
        int tm, tn;
        tile_coords<GROUP_M>(tile, units_m, p.tiles_n, tm, tn);
        tm = tm * MCAST + int(mc_rank);  // may be tiles_m (odd tiles_m): loaded and computed, never stored
        for (int kt = kb; kt < ke; ++kt, ++it) {
          const int s = it % STAGES;
          if (it >= STAGES) mbar_wait(&empty[s], ((it / STAGES) - 1) & 1);
          uint8_t* sa = smem + s * T::kStageBytes;
          uint8_t* sb = sa + T::kTileA;
          // The whole stage arrives here either way: A from this CTA, B half from each CTA (multicast).
          mbar_expect_tx(&full[s], p.stage_tx);
          // (A past the last tile row: the last row's A again; the tile is computed, never stored.)
          tma_load_2d(sa, &map_a, &full[s], kt * kBK, tile_row0(tm, BM, p));
          const int b0 = tile_col0(tn, BN, p);
          if constexpr (MCAST > 1) {
            constexpr uint16_t kAll = (1u << MCAST) - 1;
            if constexpr (L == KFORGE_HGEMM_TN) {
              constexpr int kHalf = BN / MCAST;  // rows of B (columns of C) this CTA loads for both
              tma_load_2d_multicast(sb + mc_rank * kHalf * 128, &map_b, &full[s], kt * kBK, b0 + int(mc_rank) * kHalf, kAll);
            } else {
#pragma unroll
              for (int c = 0; c < BN / 64; ++c)
                if (c % MCAST == int(mc_rank) && c < p.b_chunks)
                  tma_load_2d_multicast(sb + c * (kBK * 128), &map_b, &full[s], b0 + c * 64, kt * kBK, kAll);
            }
          } else if constexpr (L == KFORGE_HGEMM_TN) {
            tma_load_2d(sb, &map_b, &full[s], kt * kBK, b0);
          } else {
#pragma unroll
            for (int c = 0; c < BN / 64; ++c)
              if (c < p.b_chunks) tma_load_2d(sb + c * (kBK * 128), &map_b, &full[s], b0 + c * 64, kt * kBK);
          }
        }
      }
    }
  } else {
    if constexpr (CONSUMERS >= 2) regs_inc<232>();
    const int cw = wg - 1;  // consumer index
    using Acc = typename std::conditional<T::kF32, float, uint32_t>::type;
    Acc acc[T::kMmaM][T::kAccRegs];
    const int warp = tid / 32, lane = tid % 32;
    const int row_off = PINGPONG ? 0 : cw * T::kRowsPerConsumer;  // this consumer's rows of a tile
    // A consumed stage goes back to the producer of every CTA whose loads fill it.
    // One thread arrives per destination CTA (multicast: thread r on CTA r's barrier, in parallel,
    // so that warp 0 is not held up by a chain of remote arrivals between its wgmmas).
    auto release_stage = [tid](uint64_t* bar) {
      if constexpr (MCAST > 1) {
        if (tid < MCAST) mbar_arrive_cluster(bar, uint32_t(tid));
      } else if (tid == 0) {
        mbar_arrive(bar);
      }
    };
    int ordinal = 0;  // this CTA's tiles, counted: tile j uses the producer's iterations j*KT .. j*KT+KT-1
    int sk_it = 0;    // stream-K: the producer's iterations before this unit (units differ in length)
    for (int t = first_tile; t < num_units; t += tile_step, ++ordinal) {
      if (PINGPONG && ordinal % CONSUMERS != cw) continue;
      // Ping-pong order: a consumer starts tile j only once the other has issued tile j-1's last
      // wgmma. Besides ordering the tensor cores, this keeps every full-barrier wait within one
      // phase of the barrier (a parity wait cannot tell phase P from P-2).
      if (PINGPONG && ordinal > 0) named_sync(cw == 0 ? 3 : 2, 256);
      int tile = t, kb = kt_begin, ke = kt_end;
      if constexpr (STREAMK) stream_k_unit(skp, int(blockIdx.x), t, tile, kb, ke);
      int it = ordinal * (kt_end - kt_begin);
      if constexpr (STREAMK) {
        it = sk_it;
        sk_it += ke - kb;
      }
      int tm, tn;
      tile_coords<GROUP_M>(tile, units_m, p.tiles_n, tm, tn);
      tm = tm * MCAST + int(mc_rank);
#pragma unroll
      for (int i = 0; i < T::kMmaM; ++i)
#pragma unroll
        for (int j = 0; j < T::kAccRegs; ++j) acc[i][j] = Acc(0);

      int prev_stage = -1;
      for (int kt = kb; kt < ke; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(&full[s], (it / STAGES) & 1);
        const uint32_t sa = smem_u32(smem + s * T::kStageBytes) + row_off * 128;
        const uint32_t sb = smem_u32(smem + s * T::kStageBytes + T::kTileA);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
#pragma unroll
          for (int i = 0; i < T::kMmaM; ++i) {
            const uint64_t da = make_desc(sa + i * 64 * 128 + kk * 32, 16, 1024);
            uint64_t db;
            if constexpr (L == KFORGE_HGEMM_TN)
              db = make_desc(sb + kk * 32, 16, 1024);
            else
              db = make_desc(sb + kk * 16 * 128, kBK * 128, 1024);
            if constexpr (DT == KFORGE_HGEMM_BF16)
              wgmma_bf16_f32<BN, L == KFORGE_HGEMM_NN ? 1 : 0>(acc[i], da, db);
            else if constexpr (T::kF32)
              wgmma_f32<BN, L == KFORGE_HGEMM_NN ? 1 : 0>(acc[i], da, db);
            else
              wgmma_f16<BN, L == KFORGE_HGEMM_NN ? 1 : 0>(acc[i], da, db);
          }
        }
        wgmma_commit();
        // Keep one k tile of wgmmas in flight; the one before it is done: release its stage.
        wgmma_wait<1>();
        if (prev_stage >= 0) release_stage(&empty[prev_stage]);
        prev_stage = s;
      }
      if (PINGPONG && t + tile_step < num_tiles) named_arrive(cw == 0 ? 2 : 3, 256);  // the other may start
      wgmma_wait<0>();
      if (prev_stage >= 0) release_stage(&empty[prev_stage]);

      // Stream-K: a tile computed in pieces (see stream_k_plan).
      if constexpr (STREAMK) {
        if (kb != 0 || ke != p.k_tiles) {
          constexpr int kCt = CONSUMERS * 128;  // consumer threads
          const int ct = int(threadIdx.x) - 128;
          float4* slots = reinterpret_cast<float4*>(p.sk_partials);
          // Where this thread's float4 (i, j4) of a partial lives in a slot: the writer's and the
          // owner's one index.
          auto at = [ct](int i, int j4) { return (i * (T::kAccRegs / 4) + j4) * kCt + ct; };
          // Whether float4 (i, j4) holds an element of C: its rows r and r + 8, columns c and c + 1 of
          // the tile's boxes. Those wholly past M or N (decode shapes: 7 of a 64-row tile's rows) are
          // neither parked nor read back, by the writer and the owner alike; the owner's own sums
          // there are never stored.
          const int p_rows = p.m - tile_row0(tm, BM, p) - row_off - warp * 16 - lane / 4;
          const int p_cols = p.n - tile_col0(tn, BN, p) - 2 * (lane % 4);
          auto live = [p_rows, p_cols](int i, int j4) { return i * 64 < p_rows && 8 * j4 < p_cols; };
          if (kb != 0) {
            // A contributor (this is its run's first piece): park the partial in this CTA's slot, then
            // raise its flag once every consumer thread's stores are done. Not stored here.
            float4* mine = slots + size_t(blockIdx.x) * (T::kPartialFloats / 4);
#pragma unroll
            for (int i = 0; i < T::kMmaM; ++i)
#pragma unroll
              for (int j4 = 0; j4 < T::kAccRegs / 4; ++j4)
                if (live(i, j4))
                  mine[at(i, j4)] =
                      make_float4(acc[i][4 * j4], acc[i][4 * j4 + 1], acc[i][4 * j4 + 2], acc[i][4 * j4 + 3]);
            named_sync(1, kCt);
            if (ct == 0) {
              fence_acq_rel_gpu();
              st_relaxed_gpu(&p.sk_flags[blockIdx.x], p.sk_epoch);
            }
            continue;
          }
          // The owner: wait for every contributor's flag (and lower it again for the next launch),
          // then add their partials in CTA order. (No run of a plan is empty: every CTA after the
          // owner up to the last contributor holds a piece of this tile.)
          const int last = stream_k_last_contributor(skp, int(blockIdx.x), tile);
          if (ct == 0) {
            for (int q = int(blockIdx.x) + 1; q <= last; ++q) {
              while (ld_acquire_gpu(&p.sk_flags[q]) != p.sk_epoch) __nanosleep(64);
              st_relaxed_gpu(&p.sk_flags[q], 0ull);
            }
          }
          named_sync(1, kCt);
          for (int q = int(blockIdx.x) + 1; q <= last; ++q) {
            const float4* theirs = slots + size_t(q) * (T::kPartialFloats / 4);
#pragma unroll
            for (int i = 0; i < T::kMmaM; ++i)
#pragma unroll
              for (int j4 = 0; j4 < T::kAccRegs / 4; ++j4) {
                if (!live(i, j4)) continue;
                const float4 v = __ldcg(&theirs[at(i, j4)]);
                acc[i][4 * j4] += v.x;
                acc[i][4 * j4 + 1] += v.y;
                acc[i][4 * j4 + 2] += v.z;
                acc[i][4 * j4 + 3] += v.w;
              }
          }
        }
      }

      // Epilogue. Accumulator layout of m64nN: warp w holds rows 16w..16w+15; lane l holds rows
      // l/4 and l/4+8 of them, columns 8j + 2(l%4) + {0,1} for j < N/8.
      if constexpr (SPLITK == 1 && SWAP) {
        // Swapped roles: the tile is C^T's, its rows C's columns (p.m = N of them) and its few
        // columns C's rows (p.n = M). Each element goes straight from the fragment to C (row-major,
        // N wide): the 8 lanes of one column pair write 8 consecutive elements of a C row.
        ET* cout = static_cast<ET*>(p.c);
        const int r0 = tile_row0(tm, BM, p), c0 = tile_col0(tn, BN, p), own_r = tm * BM;
        for_each_acc_pair<T::kF32>(acc, row_off, warp, lane, [&](int r, int cidx, float2 x) {
          const int row = r0 + r, col = c0 + cidx;
          if (row < own_r || row >= p.m) return;
          if (col < p.n) cout[int64_t(col) * p.m + row] = E::from(x.x);
          if (col + 1 < p.n) cout[int64_t(col + 1) * p.m + row] = E::from(x.y);
        });
      } else if constexpr (SPLITK == 1) {
        // Through the warp's staging buffer, 64 columns at a time: fragments in, whole rows out.
        ET* stage = reinterpret_cast<ET*>(smem + T::kEpiOffset) + (cw * 4 + warp) * 16 * T::kStageRow;
        // The rows and columns this tile owns: [own_r, p.m) x [own_c, p.n) of what its boxes hold.
        const int r0 = tile_row0(tm, BM, p), c0 = tile_col0(tn, BN, p), own_r = tm * BM, own_c = tn * BN;
#pragma unroll
        for (int i = 0; i < T::kMmaM; ++i) {
          const int wrow0 = r0 + row_off + i * 64 + warp * 16;
#pragma unroll
          for (int chunk = 0; chunk < BN / 64; ++chunk) {
#pragma unroll
            for (int jj = 0; jj < 8; ++jj) {
              const int j = chunk * 8 + jj;
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                typename E::T2 v;
                if constexpr (T::kF32)
                  v = E::pack(acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1]);
                else
                  v = *reinterpret_cast<const __half2*>(&acc[i][2 * j + h]);
                *reinterpret_cast<typename E::T2*>(&stage[(lane / 4 + 8 * h) * T::kStageRow + 8 * jj + 2 * (lane % 4)]) = v;
              }
            }
            __syncwarp();
            if (p.vec_c) {
              // N % 8 == 0: a chunk of 8 is all in or all out, and 16-byte aligned.
#pragma unroll
              for (int q = 0; q < 4; ++q) {
                const int idx = q * 32 + lane, r = idx / 8, c8 = (idx % 8) * 8;
                const int row = wrow0 + r, col = c0 + chunk * 64 + c8;
                if (row >= own_r && row < p.m && col >= own_c && col < p.n)
                  *reinterpret_cast<uint4*>(reinterpret_cast<unsigned short*>(p.c) + int64_t(row) * p.n + col) =
                      *reinterpret_cast<const uint4*>(&stage[r * T::kStageRow + c8]);
              }
            } else {
              // N % 8 != 0 (the re-pitched path): rows are only 2-byte aligned. The lanes take
              // consecutive column pairs of one row, so that each warp-wide store covers 128
              // contiguous bytes (lane-strided 8-element chunks touched 16 sectors per store, 2
              // bytes in each); a pair whose address is 4-byte aligned goes out as one store.
              const unsigned short* srow = reinterpret_cast<const unsigned short*>(stage);
              unsigned short* cout = reinterpret_cast<unsigned short*>(p.c);
              const int col = c0 + chunk * 64 + 2 * lane;
#pragma unroll 4
              for (int r = 0; r < 16; ++r) {
                const int row = wrow0 + r;
                if (row < own_r || row >= p.m || col < own_c || col >= p.n) continue;
                const int64_t off = int64_t(row) * p.n + col;
                const uint32_t lo = srow[r * T::kStageRow + 2 * lane], hi = srow[r * T::kStageRow + 2 * lane + 1];
                // 4-byte aligned address (C's base may be 2-byte aligned only: a view at an odd offset).
                if (col + 1 < p.n && (reinterpret_cast<uintptr_t>(cout + off) & 3u) == 0) {
                  *reinterpret_cast<uint32_t*>(cout + off) = lo | (hi << 16);
                } else {
                  cout[off] = static_cast<unsigned short>(lo);
                  if (col + 1 < p.n) cout[off + 1] = static_cast<unsigned short>(hi);
                }
              }
            }
            __syncwarp();
          }
        }
      }
      if constexpr (SPLITK > 1) {
        // Each CTA of the cluster parks its fp32 partial tile in its own shared memory (the
        // pipeline buffers: every load has been consumed), then CTA r sums rows r, r+S, ... of
        // all partials in cluster-rank order (deterministic) and writes them.
        // Other consumer warpgroups may still be reading the last stage through wgmma.
        if constexpr (CONSUMERS > 1) asm volatile("bar.sync 1, %0;\n" ::"n"(CONSUMERS * 128) : "memory");
        float* red = reinterpret_cast<float*>(smem);
        for_each_acc_pair<T::kF32>(acc, row_off, warp, lane, [&](int r, int cidx, float2 x) {
          *reinterpret_cast<float2*>(&red[r * T::kRedStride + cidx]) = x;
        });
      }
    }
  }
  if constexpr (SPLITK > 1) {
    __syncwarp();
    cluster_sync();  // every partial of the cluster is in shared memory
    if (wg > 0) {
      const float* red = reinterpret_cast<const float*>(smem);
      const uint32_t rank = cluster_rank();
      int tm, tn;
      tile_coords<GROUP_M>(first_tile, p.tiles_m, p.tiles_n, tm, tn);
      const int ct = threadIdx.x - 128, cthreads = CONSUMERS * 128;
      constexpr int kVec = BN / 4;  // float4 per row
      const int my_rows = (BM - int(rank) + SPLITK - 1) / SPLITK;  // rows rank, rank + S, ...
      for (int e = ct; e < my_rows * kVec; e += cthreads) {
        const int r = int(rank) + (e / kVec) * SPLITK, c4 = e % kVec;
        const int row = tile_row0(tm, BM, p) + r, col = tile_col0(tn, BN, p) + c4 * 4;
        if (row < tm * BM || row >= p.m || col < tn * BN || col >= p.n) continue;
        // All S remote loads in flight at once (DSMEM latency is ~0.5 us), then summed in rank order.
        float4 v[SPLITK];
#pragma unroll
        for (int q = 0; q < SPLITK; ++q) v[q] = ld_dsmem_f4(&red[r * T::kRedStride + c4 * 4], uint32_t(q));
        float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int q = 0; q < SPLITK; ++q) {
          sum.x += v[q].x;
          sum.y += v[q].y;
          sum.z += v[q].z;
          sum.w += v[q].w;
        }
        if constexpr (ACC == KFORGE_HGEMM_ACC_F16) {
          // An fp16-accumulate variant rounds its sum to fp16 as it goes.
          sum = make_float4(__half2float(__float2half(sum.x)), __half2float(__float2half(sum.y)),
                            __half2float(__float2half(sum.z)), __half2float(__float2half(sum.w)));
        }
        if constexpr (SWAP) {
          // Swapped roles: tile row `row` is C's column, its columns col.. C's rows (N wide).
          const float s4[4] = {sum.x, sum.y, sum.z, sum.w};
          ET* cout = static_cast<ET*>(p.c);
#pragma unroll
          for (int q = 0; q < 4; ++q)
            if (col + q < p.n) cout[int64_t(col + q) * p.m + row] = E::from(s4[q]);
          continue;
        }
        ET* dst = static_cast<ET*>(p.c) + int64_t(row) * p.n + col;
        if (p.vec_c && col + 3 < p.n) {
          uint2 packed;
          packed.x = as_u32(E::pack(sum.x, sum.y));
          packed.y = as_u32(E::pack(sum.z, sum.w));
          *reinterpret_cast<uint2*>(dst) = packed;  // N % 8 == 0: 8-byte aligned
        } else {
          const float s4[4] = {sum.x, sum.y, sum.z, sum.w};
          for (int q = 0; q < 4 && col + q < p.n; ++q) dst[q] = E::from(s4[q]);
        }
      }
    }
    cluster_sync();  // no CTA leaves while a peer may still read its shared memory
  }
  // Multicast: no CTA leaves while its peer may still arrive on its barriers.
  if constexpr (MCAST > 1) {
    __syncwarp();  // the producer warp's thread 0 rejoins its warp before the warp-aligned barrier
    cluster_sync();
  }
#else
  __trap();  // built without sm_90a code: never launched (run() checks the device), never silent
#endif
}

// ---------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A 2-D fp16 or bf16 tensor map: `inner` contiguous elements per row, `outer` rows `ld` elements
// apart, boxes of 64 x box_rows with the 128-byte swizzle; out-of-range elements read as zero.
inline bool encode_map(CUtensorMap* map, const void* base, uint64_t inner, uint64_t outer, uint64_t ld, uint32_t box_rows,
                       kforge_hgemm_dtype dt) {
  auto enc = tensor_map_encoder();
  if (!enc) return false;
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {ld * 2};
  const cuuint32_t box[2] = {uint32_t(kBK), box_rows};
  const cuuint32_t elem[2] = {1, 1};
  const CUtensorMapDataType type = dt == KFORGE_HGEMM_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return enc(map, type, 2, const_cast<void*>(base), dims, strides, box, elem,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Compute capability (major * 10 + minor) of the current device (0: unknown), cached per device.
inline int device_cc() { return device_attrs(current_device()).cc; }

// The driver's cuCtxGetCurrent, found once.
inline PFN_cuCtxGetCurrent_v4000 ctx_get_current() {
  static PFN_cuCtxGetCurrent_v4000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &f, 4000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(f);
  }();
  return fn;
}

// cuTensorMapEncodeTiled is a driver call and needs a current context in the calling thread
// (CUDA_ERROR_INVALID_CONTEXT otherwise). A host thread whose first CUDA call is kforge_hgemm()
// has none: cudaGetDevice does not bind one, and the per-device state the first thread set up
// (attributes, function attributes) skips every runtime call that would. That was the return code
// 92 seen with two host threads. Binds the current device's primary context where none is current
// (a context the caller made current is left alone).
inline void ensure_current_context() {
  auto get = ctx_get_current();
  CUcontext ctx = nullptr;
  if (get && get(&ctx) == CUDA_SUCCESS && ctx != nullptr) return;
  const int dev = current_device();
  if (dev >= 0 && cudaSetDevice(dev) != cudaSuccess) (void)cudaGetLastError();
}

// Encoded tensor maps are cached per host thread (no lock on the per-call path), keyed by
// everything that goes into them: a caller that multiplies the same buffers again (the common
// case) skips two driver encodes. A hash map of up to kMapCacheEntries maps per thread (128 bytes
// each); when full it starts again from empty.
struct MapKey {
  const void* base;
  uint64_t inner, outer, ld;
  uint32_t box_rows;
  kforge_hgemm_dtype dt;
  bool operator==(const MapKey& o) const {
    return base == o.base && inner == o.inner && outer == o.outer && ld == o.ld && box_rows == o.box_rows && dt == o.dt;
  }
};
struct MapKeyHash {
  size_t operator()(const MapKey& k) const {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ reinterpret_cast<uintptr_t>(k.base);
    for (uint64_t v : {k.inner, k.outer, k.ld, uint64_t(k.box_rows) << 8 | uint64_t(k.dt)}) h = (h ^ v) * 0x100000001b3ull + (h >> 29);
    return size_t(h ^ (h >> 32));
  }
};
constexpr size_t kMapCacheEntries = 4096;

inline bool cached_map(CUtensorMap* map, const void* base, uint64_t inner, uint64_t outer, uint64_t ld, uint32_t box_rows,
                       kforge_hgemm_dtype dt) {
  thread_local std::unordered_map<MapKey, CUtensorMap, MapKeyHash> cache;
  const MapKey key{base, inner, outer, ld, box_rows, dt};
  const auto it = cache.find(key);
  if (it != cache.end()) {
    *map = it->second;
    return true;
  }
  if (!encode_map(map, base, inner, outer, ld, box_rows, dt)) {
    // Most likely no current context in this thread: bind one and try once more.
    ensure_current_context();
    if (!encode_map(map, base, inner, outer, ld, box_rows, dt)) return false;
  }
  if (cache.size() >= kMapCacheEntries) cache.clear();
  cache.emplace(key, *map);
  return true;
}

// SMs of the current device (0: unknown; callers refuse to launch rather than guess a count).
inline int sm_count() { return device_attrs(current_device()).sms; }

// Programmatic dependent launch for every Hopper kernel, unless KFORGE_HGEMM_PDL=0 (read once).
inline bool programmatic_launch_enabled() {
  static const bool on = !env_is("KFORGE_HGEMM_PDL", "0");
  return on;
}

// Programmatic dependent launch beside the stream-K variants' cooperative attribute only under
// KFORGE_HGEMM_STREAMK_PDL=1 (read once): whether the driver takes the pair is not yet known, and a
// refused launch inside a stream capture would invalidate the capture. For the first GPU run's A/B.
inline bool stream_k_programmatic_launch() {
  static const bool on = env_is("KFORGE_HGEMM_STREAMK_PDL", "1");
  return on;
}

// Edge tiles shifted inside the tensor (Params::m_last), unless KFORGE_HGEMM_EDGE=clip (read once):
// a TMA box that runs past the tensor's last row measured ~3 ns per missing row on the H200
// (docs/perf-notes.md, twelfth session), which a memory-bound edge tile cannot hide.
inline bool edge_shift_enabled() {
  static const bool on = !env_is("KFORGE_HGEMM_EDGE", "clip");
  return on;
}

// A persistent grid for `work` units on at most `slots` resident CTAs (or pairs): as few as give
// the same number of rounds, so that every CTA does the same number of units (2048 tiles on 132
// SMs: 128 CTAs of 16 tiles rather than 132 of 15 or 16; the spare SMs relieve L2 and power, and a
// published Hopper worklog measured 128 faster than 132 at 8192^3).
inline int balanced_grid(int work, int slots) {
  if (work <= slots) return work;
  const int rounds = (work + slots - 1) / slots;
  return (work + rounds - 1) / rounds;
}

// A launch's stream-K epoch: distinct for every launch of this process (a random salt, so that
// whatever else a caller's workspace held is not mistaken for a raised flag). Each flag is lowered
// again by its owner, so a CUDA graph replaying one launch (one epoch) starts from lowered flags.
inline unsigned long long stream_k_epoch() {
  static const uint64_t salt = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ uint64_t(rd());
  }();
  static std::atomic<uint64_t> count{0};
  const uint64_t e = salt ^ (count.fetch_add(1, std::memory_order_relaxed) * 0x9E3779B97F4A7C15ull);
  return e == 0 ? 1 : e;
}

template <int BM, int BN, int STAGES, int CONSUMERS, int SPLITK, int GROUP_M, bool PERSISTENT, kforge_hgemm_layout L,
          kforge_hgemm_acc ACC, bool PINGPONG = false, int MCAST = 1, kforge_hgemm_dtype DT = KFORGE_HGEMM_F16,
          bool STREAMK = false, bool SWAP = false>
struct Gemm {
  using T = Traits<BM, BN, STAGES, CONSUMERS, SPLITK, GROUP_M, PERSISTENT, L, ACC, PINGPONG, MCAST, DT, STREAMK, SWAP>;
  static constexpr kforge_hgemm_dtype kDtype = DT;
  static constexpr kforge_hgemm_layout kLayout = L;

  // Swapped roles (SWAP): the largest M served, up to two column tiles of the small side.
  static constexpr int kSwapMaxM = 2 * BN < 32 ? 2 * BN : 32;

  static constexpr KernelConfig config() {
    KernelConfig c;
    c.family = Family::kSm90;
    c.swap_ab = SWAP;
    c.max_m = SWAP ? kSwapMaxM : 0;
    c.bm = BM;
    c.bn = BN;
    c.bk = kBK;
    c.stages = STAGES;
    c.consumers = CONSUMERS;
    c.splitk = SPLITK;
    c.group_m = GROUP_M;
    c.persistent = PERSISTENT;
    c.pingpong = PINGPONG;
    c.multicast = MCAST;
    c.stream_k = STREAMK;
    return c;
  }

  // Everything but the alignment of rows: layout, accumulation and dtype, sizes within int range for the
  // coordinates, tile indices within 32 bits.
  static bool supports_shape(const kforge_hgemm_problem* p) {
#ifdef KFORGE_HGEMM_NO_SM90A
    // Built without sm_90a code (CMAKE_CUDA_ARCHITECTURES lacks 90a): the kernel body is a trap.
    (void)p;
    return false;
#endif
    if (!p || p->layout != L || p->acc != ACC || p->dtype != DT) return false;
    if (p->m < 1 || p->n < 1 || p->k < 1) return false;
    if (p->m > (int64_t(1) << 30) || p->n > (int64_t(1) << 30) || p->k > (int64_t(1) << 30)) return false;
    if (SWAP && p->m > kSwapMaxM) return false;
    const int64_t tiles = ((p->m + BM - 1) / BM) * ((p->n + BN - 1) / BN);
    if (tiles > 0x7FFFFFFF) return false;  // tile indices are 32-bit in the kernel
    return true;
  }

  // TMA needs 16-byte aligned bases and row pitches: K % 8 == 0 (A and a K-major B), N % 8 == 0
  // (an N-major B, and C's 16-byte stores). Padded<> below serves the other shapes. Swapped roles
  // store C element by element: any N.
  static bool supports(const kforge_hgemm_problem* p) {
    return supports_shape(p) && p->k % 8 == 0 && (SWAP || p->n % 8 == 0);
  }

  // Stream-K: a partial slot (BM x BN floats) and a flag for each CTA of the plan on the current
  // device (at most one per SM), plus 256 bytes to align the workspace's base. Others need none.
  static size_t workspace_size(const kforge_hgemm_problem* p) {
    if constexpr (STREAMK) {
      if (!supports(p)) return 0;
      const StreamKPlan plan = stream_k_plan(tiles_of(*p), k_tiles_of(*p), sm_count(), kStreamKMinIters);
      return plan.grid > 0 ? stream_k_bytes(plan.grid) : 0;
    } else {
      (void)p;
      return 0;
    }
  }
  static int64_t tiles_of(const kforge_hgemm_problem& p) { return ((p.m + BM - 1) / BM) * ((p.n + BN - 1) / BN); }
  static int k_tiles_of(const kforge_hgemm_problem& p) { return int((p.k + kBK - 1) / kBK); }
  static size_t stream_k_bytes(int grid) { return size_t(grid) * (size_t(T::kPartialFloats) * 4 + 8) + 256; }

  static auto kernel_ptr() {
    return gemm_kernel<BM, BN, STAGES, CONSUMERS, SPLITK, GROUP_M, PERSISTENT, L, ACC, PINGPONG, MCAST, DT, STREAMK, SWAP>;
  }
  static constexpr int kClusterCtas = SPLITK > 1 ? SPLITK : MCAST;

  // The kernel's attributes on the current device (they are per device): its shared memory, and
  // permission for a cluster over 8 CTAs. False when they cannot be set.
  static bool prepare() {
    static std::atomic<uint64_t> smem_done{0}, cluster_done{0};
    if (!ensure_smem_attribute(kernel_ptr(), T::kSmemBytes, smem_done)) return false;
    if constexpr (kClusterCtas > 8)
      return ensure_func_attribute(kernel_ptr(), cudaFuncAttributeNonPortableClusterSizeAllowed, 1, cluster_done);
    return true;
  }

  // The launch attribute of a clustered variant: split-K clusters along z, multicast pairs along x.
  static cudaLaunchAttribute cluster_dim() {
    cudaLaunchAttribute a = {};
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = SPLITK > 1 ? 1 : MCAST;
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = SPLITK > 1 ? SPLITK : 1;
    return a;
  }

  // Whole clusters that fit at once (a cluster must sit in one GPC, so fewer CTAs than blocks
  // per SM x SMs may be resident), times their size; 0 off Hopper or when the query fails.
  // Split-K clusters count the clusters that fit one CTA per SM: the clusters past them are
  // packed two CTAs to an SM, which then finishes last. Measured on an H100 (twenty-fourth
  // session, graph mode): 64x128 split-K 4 fits 62 clusters (two CTAs per SM), and ran
  // 15x4096x4096 (32 clusters, 128 CTAs) in 13.7-14.2 us, where 64x64 split-K 2 (128 CTAs, all
  // on their own SMs) took 9.0-9.5 and the same 64x128 split-K 4 at 16x3584x4096 (28 clusters)
  // 7.8 on the H200. Estimated as the clusters over the CTAs per SM (62 / 2 = 31; 198 / 3 = 66
  // for 64x64 split-K 2): the one-per-SM counts of the H200 were 66 clusters of 2, 30 of 4.
  static int resident_ctas() {
#ifdef KFORGE_HGEMM_NO_SM90A
    return 0;
#endif
    const DeviceAttrs d = device_attrs(current_device());
    if (d.cc != 90 || d.sms <= 0 || !prepare()) return 0;
    if constexpr (kClusterCtas == 1) {
      return resident_plain_ctas(kernel_ptr(), T::kThreads, T::kSmemBytes);
    } else {
      cudaLaunchConfig_t q = {};
      cudaLaunchAttribute attr[1] = {cluster_dim()};
      q.gridDim = SPLITK > 1 ? dim3(d.sms, 1, SPLITK) : dim3(d.sms / MCAST * MCAST);
      q.blockDim = dim3(T::kThreads);
      q.dynamicSmemBytes = T::kSmemBytes;
      q.attrs = attr;
      q.numAttrs = 1;
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, kernel_ptr(), &q) != cudaSuccess) {
        cudaGetLastError();
        return 0;
      }
      if constexpr (SPLITK > 1) {
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_ptr(), T::kThreads, T::kSmemBytes) != cudaSuccess) {
          cudaGetLastError();
          per_sm = 1;
        }
        if (per_sm > 1) clusters = std::max(clusters > 0 ? 1 : 0, clusters / per_sm);
      }
      return clusters * kClusterCtas;
    }
  }

  static int run(const kforge_hgemm_args* a, cudaStream_t stream) {
    if (!a || !supports(&a->problem) || !a->a || !a->b || !a->c) return kRunUnsupported;
    if ((reinterpret_cast<uintptr_t>(a->a) | reinterpret_cast<uintptr_t>(a->b) | reinterpret_cast<uintptr_t>(a->c)) % 16)
      return kRunUnsupported;
    const kforge_hgemm_problem& pr = a->problem;
    if constexpr (STREAMK)
      if (a->workspace == nullptr || a->workspace_bytes < workspace_size(&pr)) return kRunUnsupported;
    return launch(a->a, uint64_t(pr.k), a->b, uint64_t(L == KFORGE_HGEMM_TN ? pr.k : pr.n), a->c, pr, stream,
                  a->workspace, a->workspace_bytes);
  }

  // The GEMM of `pr` with A rows `lda` elements apart and B rows (tn: N rows of K; nn: K rows of N)
  // `ldb` apart, both multiples of 8 with 16-byte aligned bases; C is pr.n wide (any N: rows that
  // are not 16-byte multiples are stored element-wise). For run() and Padded<>. `ws`: the stream-K
  // variants' partials and flags (workspace_size), unused by the others.
  static int launch(const void* A, uint64_t lda, const void* B, uint64_t ldb, void* C, const kforge_hgemm_problem& pr,
                    cudaStream_t stream, void* ws = nullptr, size_t ws_bytes = 0) {
    if constexpr (SWAP) {
      // C^T = B^T A^T: B's N rows of K are the kernel's A, A's M rows its (K-major) B, and the
      // kernel's M x N is C's N x M (stored transposed by the epilogue).
      kforge_hgemm_problem t = pr;
      t.m = pr.n;
      t.n = pr.m;
      return launch_kernel(B, ldb, A, lda, C, t, stream, ws, ws_bytes);
    } else {
      return launch_kernel(A, lda, B, ldb, C, pr, stream, ws, ws_bytes);
    }
  }

  // launch() in the kernel's roles (swapped already where SWAP).
  static int launch_kernel(const void* A, uint64_t lda, const void* B, uint64_t ldb, void* C,
                           const kforge_hgemm_problem& pr, cudaStream_t stream, void* ws, size_t ws_bytes) {
    const int dev = current_device();
    const DeviceAttrs d = device_attrs(dev);
    if (d.cc != 90) return kRunUnsupported;  // sm_90a code only: Hopper's wgmma and setmaxnreg
    if (d.sms <= 0) return kRunLaunchFailed;
    if (lda % 8 != 0 || ldb % 8 != 0 ||
        (reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B) | reinterpret_cast<uintptr_t>(C)) % 16)
      return kRunUnsupported;
    // Short boxes where the problem is smaller than a tile (Params::stage_tx); not with
    // KFORGE_HGEMM_EDGE=clip. A multicast pair's K-major B halves keep their full boxes.
    const bool shift = edge_shift_enabled();
    const uint32_t a_rows = shift && pr.m < BM ? uint32_t((pr.m + 7) / 8 * 8) : uint32_t(BM);
    const uint32_t b_rows = shift && MCAST == 1 && pr.n < BN ? uint32_t((pr.n + 7) / 8 * 8) : uint32_t(BN / MCAST);
    const int b_chunks = shift && pr.n < BN ? int((pr.n + 63) / 64) : BN / 64;
    CUtensorMap ma, mb;
    if (!cached_map(&ma, A, uint64_t(pr.k), uint64_t(pr.m), lda, a_rows, DT)) return kRunNoTensorMap;
    const bool ok_b = L == KFORGE_HGEMM_TN ? cached_map(&mb, B, uint64_t(pr.k), uint64_t(pr.n), ldb, b_rows, DT)
                                           : cached_map(&mb, B, uint64_t(pr.n), uint64_t(pr.k), ldb, kBK, DT);
    if (!ok_b) return kRunNoTensorMap;
    Params p;
    p.stage_tx = a_rows * 128u + (L == KFORGE_HGEMM_TN ? (MCAST == 1 ? b_rows : uint32_t(BN)) * 128u
                                                       : uint32_t(b_chunks) * uint32_t(kBK) * 128u);
    p.b_chunks = b_chunks;
    p.c = C;
    p.vec_c = !SWAP && pr.n % 8 == 0;  // (swapped: C's rows are the kernel's columns, stored one by one)
    p.m = int(pr.m);
    p.n = int(pr.n);
    p.k = int(pr.k);
    p.tiles_m = int((pr.m + BM - 1) / BM);
    p.tiles_n = int((pr.n + BN - 1) / BN);
    p.k_tiles = int((pr.k + kBK - 1) / kBK);
    // Shifted edge tiles: N only where C's 8-element chunks stay aligned (N % 8 == 0), so that a
    // chunk is wholly this tile's or wholly its neighbour's.
    p.m_last = shift && p.m >= BM ? p.m - BM : (p.tiles_m - 1) * BM;
    p.n_last = shift && p.vec_c && p.n >= BN ? p.n - BN : (p.tiles_n - 1) * BN;
    const int tiles = p.tiles_m * p.tiles_n;
    auto kernel = kernel_ptr();
    if (!prepare()) return kRunLaunchFailed;

    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attrs[3];
    cfg.blockDim = dim3(T::kThreads);
    cfg.dynamicSmemBytes = T::kSmemBytes;
    cfg.stream = stream;
    cfg.attrs = attrs;
    if constexpr (kClusterCtas > 1) attrs[cfg.numAttrs++] = cluster_dim();
    p.sk_grid = p.sk_dp_tiles = 0;
    p.sk_iters = 0;
    p.sk_partials = nullptr;
    p.sk_flags = nullptr;
    p.sk_epoch = 0;
    if constexpr (SPLITK > 1) {
      cfg.gridDim = dim3(tiles, 1, SPLITK);
    } else if constexpr (STREAMK) {
      // At most one CTA per SM (every CTA must be resident at once: an owner waits for its
      // contributors); the workspace holds a slot and a flag for each.
      const StreamKPlan plan = stream_k_plan(tiles, p.k_tiles, d.sms, kStreamKMinIters);
      if (plan.grid <= 0) return kRunUnsupported;
      const uintptr_t base = (reinterpret_cast<uintptr_t>(ws) + 255) & ~uintptr_t(255);
      if (ws == nullptr || ws_bytes < stream_k_bytes(plan.grid)) return kRunUnsupported;
      p.sk_grid = plan.grid;
      p.sk_dp_tiles = plan.dp_tiles;
      p.sk_iters = plan.sk_iters;
      p.sk_partials = reinterpret_cast<float*>(base);
      p.sk_flags = reinterpret_cast<unsigned long long*>(base + size_t(plan.grid) * T::kPartialFloats * 4);
      p.sk_epoch = stream_k_epoch();
      cfg.gridDim = dim3(plan.grid);
      // A cooperative launch: the whole grid is resident at once or not started, so an owner never
      // spins on a contributor that waits for an SM (two stream-K GEMMs on two streams, each
      // partly resident, would otherwise wait on each other forever).
      attrs[cfg.numAttrs].id = cudaLaunchAttributeCooperative;
      attrs[cfg.numAttrs].val.cooperative = 1;
      ++cfg.numAttrs;
    } else if constexpr (MCAST > 1) {
      // Pairs of CTAs; a persistent grid holds only as many pairs as can be resident at once (a
      // cluster must fit in one GPC), or the last pairs would run as a second wave.
      const int units = ((p.tiles_m + MCAST - 1) / MCAST) * p.tiles_n;
      int pairs = units;
      if constexpr (PERSISTENT) {
        // Resident pairs, per device (asked once per device; two threads asking at once get the same answer).
        static std::atomic<int> resident_pairs[kMaxCachedDevices];
        int resident = dev < kMaxCachedDevices ? resident_pairs[dev].load(std::memory_order_relaxed) : 0;
        if (resident <= 0) {
          const int ctas = resident_ctas();
          resident = std::max(1, ctas >= MCAST ? ctas / MCAST : d.sms / MCAST);
          if (dev < kMaxCachedDevices) resident_pairs[dev].store(resident, std::memory_order_relaxed);
        }
        pairs = balanced_grid(units, resident);
      }
      cfg.gridDim = dim3(pairs * MCAST);
    } else {
      cfg.gridDim = dim3(PERSISTENT ? balanced_grid(tiles, d.sms) : tiles);
    }
    // Programmatic dependent launch; for stream-K only under KFORGE_HGEMM_STREAMK_PDL=1
    // (stream_k_programmatic_launch).
    if ((!STREAMK || stream_k_programmatic_launch()) && programmatic_launch_enabled()) {
      // Programmatic dependent launch (the kernel waits for its predecessor before touching memory).
      attrs[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attrs[cfg.numAttrs].val.programmaticStreamSerializationAllowed = 1;
      ++cfg.numAttrs;
      if (cudaLaunchKernelEx(&cfg, kernel, ma, mb, p) == cudaSuccess) return 0;
      cudaGetLastError();  // not allowed here (e.g. some stream kinds): launch it the ordinary way
      --cfg.numAttrs;
    }
    if (cudaLaunchKernelEx(&cfg, kernel, ma, mb, p) != cudaSuccess) {
      cudaGetLastError();
      return kRunLaunchFailed;
    }
    return 0;
  }
};


// ---------------------------------------------------------------------------------------------
// K or N not a multiple of 8: the same kernels on operands re-pitched into the workspace
// ---------------------------------------------------------------------------------------------
// TMA needs row pitches that are multiples of 16 bytes. An operand whose rows are not (A and a
// K-major B when K % 8 != 0, an N-major B when N % 8 != 0) is copied into the workspace with its
// rows padded to the next multiple of 8 elements, and the kernel reads the copy; the tensor maps
// keep the true sizes, so TMA fills everything past K or N with zeros and the padding's contents
// never matter. C is written in place (element-wise where N % 8 != 0). The copy is one extra pass
// over the operand (read + write), small against the GEMM for the shapes where the Hopper kernels
// are worth it; the cost model charges it (cost_model.hpp), and the tuner measures it.

// dst[r][c] = src[r * cols + c] for c < cols, 0 for cols <= c < ld; 8 elements (one 16-byte store)
// per thread, grid-stride; bit copies of 2-byte elements (fp16 and bf16 alike). Waits for the kernel before it on the stream (programmatic launch).
// (A template only so that the header may be included in several translation units.)
template <int kUnused = 0>
__global__ void __launch_bounds__(256) repitch_kernel(const __half* __restrict__ src, int64_t rows, int64_t cols,
                                                      __half* __restrict__ dst, int64_t ld) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const int64_t per_row = ld / 8;
  const int64_t chunks = rows * per_row;
  const unsigned short* s = reinterpret_cast<const unsigned short*>(src);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c0 = (i % per_row) * 8;
    const unsigned short* row = s + r * cols;
    uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (c0 + j < cols) w[j >> 1] |= uint32_t(__ldg(row + c0 + j)) << (16 * (j & 1));
    *reinterpret_cast<uint4*>(dst + r * ld + c0) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

inline int64_t round8(int64_t x) { return (x + 7) / 8 * 8; }

// Where Padded<> puts the copies: which operands are copied, their pitches, and the workspace
// they take (each copy 256-byte aligned, plus 256 bytes to align the workspace's base).
struct PadPlan {
  bool copy_a = false, copy_b = false;
  int64_t lda = 0, ldb = 0;
  size_t off_b = 0;  // bytes from the aligned base
  size_t bytes = 0;  // workspace needed (0: no copy)
};

inline PadPlan pad_plan(const kforge_hgemm_problem& p) {
  PadPlan pl;
  const bool tn = p.layout == KFORGE_HGEMM_TN;
  pl.copy_a = p.k % 8 != 0;
  pl.copy_b = tn ? p.k % 8 != 0 : p.n % 8 != 0;
  pl.lda = pl.copy_a ? round8(p.k) : p.k;
  pl.ldb = tn ? (pl.copy_b ? round8(p.k) : p.k) : (pl.copy_b ? round8(p.n) : p.n);
  const size_t a_bytes = pl.copy_a ? (size_t(p.m) * size_t(pl.lda) * 2 + 255) / 256 * 256 : 0;
  const size_t b_bytes = pl.copy_b ? size_t(tn ? p.n : p.k) * size_t(pl.ldb) * 2 : 0;
  pl.off_b = a_bytes;
  pl.bytes = pl.copy_a || pl.copy_b ? 256 + a_bytes + b_bytes : 0;
  return pl;
}

template <class G>
struct Padded {
  static constexpr kforge_hgemm_dtype kDtype = G::kDtype;
  static constexpr KernelConfig config() {
    KernelConfig c = G::config();
    c.pad = true;
    c.pad_b_k = G::kLayout == KFORGE_HGEMM_TN;  // pad_plan: which of B's extents its rows run along
    return c;
  }

  // Only the shapes the plain variant refuses: K or N not a multiple of 8.
  static bool supports(const kforge_hgemm_problem* p) {
    return G::supports_shape(p) && (p->k % 8 != 0 || p->n % 8 != 0);
  }

  static size_t workspace_size(const kforge_hgemm_problem* p) { return supports(p) ? pad_plan(*p).bytes : 0; }

  static int resident_ctas() { return G::resident_ctas(); }

  static int copy(const __half* src, int64_t rows, int64_t cols, __half* dst, int64_t ld, cudaStream_t stream) {
    const int64_t chunks = rows * (ld / 8);
    const int sms = std::max(1, sm_count());
    const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((chunks + 255) / 256, int64_t(sms) * 8));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = dim3(unsigned(blocks));
    cfg.blockDim = dim3(256);
    cfg.stream = stream;
    cfg.attrs = attr;
    if (programmatic_launch_enabled()) {
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.numAttrs = 1;
      if (cudaLaunchKernelEx(&cfg, repitch_kernel<>, src, rows, cols, dst, ld) == cudaSuccess) return 0;
      cudaGetLastError();
      cfg.numAttrs = 0;
    }
    if (cudaLaunchKernelEx(&cfg, repitch_kernel<>, src, rows, cols, dst, ld) != cudaSuccess) {
      cudaGetLastError();
      return kRunLaunchFailed;
    }
    return 0;
  }

  static int run(const kforge_hgemm_args* a, cudaStream_t stream) {
    if (!a || !supports(&a->problem) || !a->a || !a->b || !a->c) return kRunUnsupported;
    // Bases 16-byte aligned as for the plain kernels (unaligned pointers go to a family without
    // TMA: kforge_hgemm's fallback).
    if ((reinterpret_cast<uintptr_t>(a->a) | reinterpret_cast<uintptr_t>(a->b) | reinterpret_cast<uintptr_t>(a->c)) % 16)
      return kRunUnsupported;
    if (device_cc() != 90) return kRunUnsupported;
    const kforge_hgemm_problem& pr = a->problem;
    const PadPlan pl = pad_plan(pr);
    if (pl.bytes > 0 && (a->workspace == nullptr || a->workspace_bytes < pl.bytes)) return kRunUnsupported;
    const uintptr_t ws = reinterpret_cast<uintptr_t>(a->workspace);
    uint8_t* base = reinterpret_cast<uint8_t*>((ws + 255) / 256 * 256);
    const void* A = a->a;
    const void* B = a->b;
    if (pl.copy_a) {
      __half* dst = reinterpret_cast<__half*>(base);
      if (const int rc = copy(static_cast<const __half*>(a->a), pr.m, pr.k, dst, pl.lda, stream)) return rc;
      A = dst;
    }
    if (pl.copy_b) {
      __half* dst = reinterpret_cast<__half*>(base + pl.off_b);
      const bool tn = pr.layout == KFORGE_HGEMM_TN;
      if (const int rc = copy(static_cast<const __half*>(a->b), tn ? pr.n : pr.k, tn ? pr.k : pr.n, dst, pl.ldb, stream))
        return rc;
      B = dst;
    }
    return G::launch(A, uint64_t(pl.lda), B, uint64_t(pl.ldb), a->c, pr, stream);
  }
};

}  // namespace kforge::kernels::sm90
