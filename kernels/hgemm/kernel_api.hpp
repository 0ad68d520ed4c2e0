// kforge's own HGEMM kernels: the description every variant carries, shared by the kernel
// table, the tuner, the dispatcher and the exported library.
//
// A variant is one instantiation of a kernel template for one config (tile, pipeline, split-K,
// rasterisation), one B layout, one accumulation precision and one element type (fp16 or bf16). Each variant's entry points
// follow the candidate ABI of include/kforge/abi/hgemm.h, so a variant is an ordinary HGEMM
// candidate to the evaluator.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kforge/abi/hgemm.h"

namespace kforge::kernels {

enum class Family : int {
  kSm90 = 0,  // sm_90a: TMA, wgmma, mbarrier pipeline, warp-specialised, persistent or cluster split-K
  kSm80 = 1,  // sm_80+: cp.async, ldmatrix, mma.sync (also what serves Ampere)
  kSkinny = 2,  // sm_80+: decode shapes (M <= max_m): mma.sync with M as the mma's n8 side, split-K chosen at run time
  kSmallK = 3,  // sm_80+: K <= max_k, on the CUDA cores: outer products bound by writing C, or whole-K dot products (smallk_gemm.cuh)
  kGemv = 4,    // sm_80+: one side of C at most max_m / max_n (8) long, on the CUDA cores: warps stream W's rows (gemv_gemm.cuh)
};

// One kernel configuration. Fields a family does not use are 0.
struct KernelConfig {
  Family family = Family::kSm90;
  int bm = 0, bn = 0, bk = 0;  // CTA tile
  int stages = 0;              // shared-memory pipeline depth (GemvX: 2, X in registers, the next step in flight; 1, X in shared memory)
  int consumers = 0;           // sm90: consumer warpgroups; sm80: warps per CTA
  int splitk = 1;              // sm90: CTAs of one cluster splitting K (reduced through DSMEM)
  int group_m = 0;             // rasterisation: tile rows per group (0: row-major order)
  bool persistent = false;     // sm90: one CTA per SM looping over tiles
  bool pingpong = false;       // sm90: consumers alternate whole tiles (else they split each tile)
  int multicast = 1;           // sm90: CTAs of a cluster along M sharing each B tile through TMA multicast
  bool pad = false;            // sm90: rows that are not 16-byte multiples (K or N % 8 != 0) re-pitched into the workspace
  bool pad_b_k = false;        // sm90 padded, tn: B's rows run along K (re-pitched when K % 8 != 0; nn: when N % 8 != 0)
  bool b_rows_n = false;       // skinny, GEMV and sm_80, nn: B's rows run along N (their generic paths follow N % 8, else K % 8)
  bool splitk_auto = false;    // skinny: the split count is chosen per problem (auto_splits), splitk is its maximum
  int max_m = 0;               // skinny: the largest M served (0: any M)
  int max_n = 0;               // skinny, swapped roles (A streamed): the largest N served (0: any N)
  int warps_n = 1;             // skinny: warp groups along N (the others split K)
  int max_k = 0;               // small-K: the largest K served (0: any K)
  bool whole_k = false;        // small-K: the whole K of a tile in shared memory, dot products (smallk_gemm.cuh WholeK)
  bool gather_b = false;       // small-K whole-K, nn: B's tile gathered element by element (K rows of its columns)
  bool stream_k = false;       // sm90: persistent stream-K (stream_k_plan): the last rounds' K loops shared evenly by every CTA
  bool swap_ab = false;        // sm90, tn, M <= max_m: C^T = B^T A^T, B's rows on the wgmma's M side and A's few rows on
                               // its N side (bn = 8..32; bm tiles N), C stored transposed
  int x_regs_k = 0;            // GEMV: the small operand held on chip (registers; shared memory with stages 1), K <= x_regs_k (gemv_gemm.cuh GemvX); 0: streamed
};

// Whether two configurations are the same kernel but for `pad` (a plain variant and its padded
// twin; pad_b_k, a padded variant's own, is not compared).
inline bool same_but_pad(const KernelConfig& a, const KernelConfig& b) {
  return a.family == b.family && a.bm == b.bm && a.bn == b.bn && a.bk == b.bk && a.stages == b.stages &&
         a.consumers == b.consumers && a.splitk == b.splitk && a.group_m == b.group_m && a.persistent == b.persistent &&
         a.pingpong == b.pingpong && a.multicast == b.multicast && a.splitk_auto == b.splitk_auto && a.max_m == b.max_m &&
         a.max_n == b.max_n && a.warps_n == b.warps_n && a.max_k == b.max_k && a.whole_k == b.whole_k &&
         a.gather_b == b.gather_b && a.stream_k == b.stream_k && a.swap_ab == b.swap_ab &&
         a.x_regs_k == b.x_regs_k;
}

#if defined(__CUDACC__)
#define KFORGE_HD __host__ __device__
#else
#define KFORGE_HD
#endif

// The small-K family's whole-K variants (smallk_gemm.cuh), host-visible so that the CPU tests
// check them. Row pitch (in floats) of a tile row holding K values: K rounded up to an odd number
// of float4s (8 lanes reading 8 consecutive rows as float4s hit 8 distinct bank groups).
KFORGE_HD constexpr int wholek_pitch(int k) { return 4 * (((k + 3) / 4) | 1); }

// i / d for 0 <= i < 2^20 and 1 <= d <= 2^16, from a float reciprocal inv_d ~ 1 / d (within a few
// ulps), corrected to exact: the estimate is within 1 of the quotient, one step fixes it.
KFORGE_HD inline int div_small(int i, int d, float inv_d) {
  int q = int((float(i) + 0.5f) * inv_d);
  if (q * d > i) --q;
  else if ((q + 1) * d <= i) ++q;
  return q;
}

// Stream-K (sm90 variants with KernelConfig::stream_k), host-visible so that the CPU tests check the
// schedule the kernel walks. A persistent grid whose tiles do not fill whole rounds leaves SMs idle in
// the last one (160 tiles on 132 SMs: 2 rounds, the second 21% full); cuBLASLt covers such shapes
// with stream-K, and kforge's mid-size shapes lost there (0.77-0.89 of cuBLASLt, fourteenth session).
// The plan: whole rounds of tiles stay data-parallel (CTA c takes tiles c, c + grid, ...), and the
// last one to two rounds' worth of tiles (`sk_tiles`: all tiles when there are fewer than two rounds,
// else tiles % grid + grid) become one run of k-tile iterations, tile after tile, split evenly: CTA c
// takes iterations [c x sk_iters / grid, (c + 1) x sk_iters / grid). A tile cut by those boundaries
// is computed in pieces by consecutive CTAs. The piece holding the tile's first k tile belongs to its
// owner, who adds the others' fp32 partials (in CTA order: deterministic) and stores the tile; every
// other piece is the first piece of its CTA's run, so each CTA writes at most one partial (a slot of
// its own) and an owner only waits for CTAs that did their piece first: no cycle.
struct StreamKPlan {
  int grid = 0;          // CTAs (at most the resident slots: an owner waits for its contributors)
  int dp_tiles = 0;      // tiles [0, dp_tiles): whole, data-parallel (a multiple of grid)
  int k_tiles = 0;       // k tiles per output tile
  int64_t sk_iters = 0;  // tiles [dp_tiles, tiles) as sk_iters = (tiles - dp_tiles) x k_tiles iterations
};

// The plan for `tiles` output tiles of `k_tiles` k tiles on at most `slots` resident CTAs. Where the
// tiles fill whole rounds there is nothing to balance: all data-parallel. With no whole round left
// data-parallel, fewer CTAs than slots where each would get under `min_iters` iterations, but never
// fewer than min(tiles, slots).
KFORGE_HD inline StreamKPlan stream_k_plan(int64_t tiles, int k_tiles, int slots, int min_iters) {
  StreamKPlan p;
  if (tiles <= 0 || k_tiles <= 0 || slots <= 0 || tiles > 0x7FFFFFFF) return p;
  p.k_tiles = k_tiles;
  if (tiles % slots == 0) {
    p.grid = slots;
    p.dp_tiles = int(tiles);
    return p;
  }
  const int64_t sk_tiles = tiles < 2 * int64_t(slots) ? tiles : tiles % slots + slots;
  p.dp_tiles = int(tiles - sk_tiles);
  p.sk_iters = sk_tiles * k_tiles;
  int64_t grid = slots;
  if (p.dp_tiles == 0) {
    const int64_t by_work = p.sk_iters / (min_iters > 0 ? min_iters : 1);
    grid = by_work < 1 ? 1 : by_work < grid ? by_work : grid;
    // Never fewer CTAs than whole tiles can use: with under min_iters k tiles per tile there is no K
    // to share, and fewer CTAs would only queue whole tiles (384x4096x64 on 128x256: 48 tiles of
    // one k tile would run 4 to a CTA on 12).
    const int64_t whole = tiles < slots ? tiles : slots;
    if (grid < whole) grid = whole;
  }
  p.grid = int(grid);
  return p;
}

// The stream-K variants' `min_iters`: no CTA of a plan without data-parallel rounds gets under 4 k
// tiles (256 of K), or under a whole tile's k tiles where a tile has fewer: fewer CTAs than SMs on
// small problems rather than slivers of K, each a pipeline fill and a partial for one tile's stores.
constexpr int kStreamKMinIters = 4;

// The first stream-K iteration of CTA `cta` (0 <= cta <= grid; grid gives the end), relative to the
// stream-K tiles' first iteration.
KFORGE_HD inline int64_t stream_k_begin(const StreamKPlan& p, int cta) { return int64_t(cta) * p.sk_iters / p.grid; }

// The units CTA `cta` walks: its data-parallel tiles, then one piece per tile its run touches.
KFORGE_HD inline int stream_k_units(const StreamKPlan& p, int cta) {
  const int dp = p.dp_tiles / p.grid;
  const int64_t a = stream_k_begin(p, cta), b = stream_k_begin(p, cta + 1);
  return dp + (b > a ? int((b - 1) / p.k_tiles - a / p.k_tiles + 1) : 0);
}

// Unit `u` of CTA `cta`: the output tile (linear index over all tiles) and its k tiles [kb, ke).
KFORGE_HD inline void stream_k_unit(const StreamKPlan& p, int cta, int u, int& tile, int& kb, int& ke) {
  const int dp = p.dp_tiles / p.grid;
  if (u < dp) {
    tile = cta + u * p.grid;
    kb = 0;
    ke = p.k_tiles;
    return;
  }
  const int64_t a = stream_k_begin(p, cta), b = stream_k_begin(p, cta + 1);
  const int64_t t = a / p.k_tiles + (u - dp);  // among the stream-K tiles
  const int64_t lo = t * p.k_tiles > a ? t * p.k_tiles : a;
  const int64_t hi = (t + 1) * p.k_tiles < b ? (t + 1) * p.k_tiles : b;
  tile = p.dp_tiles + int(t);
  kb = int(lo - t * p.k_tiles);
  ke = int(hi - t * p.k_tiles);
}

// The owner of stream-K tile `tile` (its piece [0, ke) with ke < k_tiles) adds the partials of CTAs
// owner + 1, ..., last, where `last` is returned: the CTAs after the owner whose runs start inside the
// tile. No run of a plan is empty (sk_iters >= grid: without data-parallel rounds the grid is at most
// max(sk_iters / min_iters, tiles); with them, sk_iters >= k_tiles x grid), so each of them holds a
// piece of the tile.
KFORGE_HD inline int stream_k_last_contributor(const StreamKPlan& p, int owner, int tile) {
  const int64_t end = int64_t(tile - p.dp_tiles + 1) * p.k_tiles;
  int last = owner;
  while (last + 1 < p.grid && stream_k_begin(p, last + 1) < end) ++last;
  return last;
}

// Whether environment variable `name` is set to exactly `value`. The kernels' A/B switches
// (KFORGE_HGEMM_DECODE_SPLITS, _EDGE, _PDL, _NN_CALIBRATE) read it once each, into a static.
inline bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

// Environment variable `name` as a number in [lo, hi] (the dispatcher's tunable A/B figures:
// KFORGE_HGEMM_NN_RADIUS, _DECODE_OVERLAP), or `fallback` where it is unset, not wholly a number, or
// out of range.
inline double env_number(const char* name, double lo, double hi, double fallback) {
  const char* e = std::getenv(name);
  if (!e || !*e) return fallback;
  char* end = nullptr;
  const double v = std::strtod(e, &end);
  return end && *end == '\0' && v >= lo && v <= hi ? v : fallback;
}

// How auto_splits chooses: KFORGE_HGEMM_DECODE_SPLITS=fill for the first rule (as many splits as
// fill one wave, none once the column tiles alone do), for A/B measurements; else `balance`.
inline bool decode_splits_fill() {
  static const bool fill = env_is("KFORGE_HGEMM_DECODE_SPLITS", "fill");
  return fill;
}

// The split-K count of a variant whose splits are chosen at run time (splitk_auto), shared by the
// kernel and the cost model. S from 1 to c.splitk, each K slice at least two K tiles long: the one
// that minimises the time of ceil(tiles x S / resident) waves, each 1/S of the K loop long, plus
// the partials' traffic (S x small_rows x N fp32 partials, written and read once) and the second
// launch, taken as 8 MB more traffic (~2 us at the H200's bandwidth). A larger S must be 5%
// cheaper than the best so far (its workspace grows with S). The prediction behind it, not yet
// measured: a wave only partly filled takes as long as a full one, because a decode CTA's
// bandwidth is bounded by its own loads in flight, not shared with the others (296 column tiles
// on 132 slots run as 3 waves, the last 24% full: 2.7 TB/s where cuBLASLt reached 4.1 on the
// H200). With `fill` (decode_splits_fill, the first rule): as many slices as keep the CTAs within
// one wave, none once the column tiles alone fill it.
inline int auto_splits(const KernelConfig& c, int64_t n, int64_t k, int resident, int64_t small_rows = 32) {
  if (c.bn <= 0 || c.bk <= 0) return 1;
  const int64_t tiles = (n + c.bn - 1) / c.bn;
  const int64_t k_tiles = (k + c.bk - 1) / c.bk;
  const int64_t max_s = std::min<int64_t>(c.splitk, k_tiles / 2);
  if (max_s < 1 || resident <= 0) return 1;
  if (decode_splits_fill()) {
    const int64_t s = std::min<int64_t>(resident / tiles, max_s);
    return s < 1 ? 1 : int(s);
  }
  const double wave_bytes = double(resident) * double(c.bn) * double(k) * 2.0;  // every slot, the whole K
  int best = 1;
  double best_cost = 0;
  for (int64_t s = 1; s <= max_s; ++s) {
    const double waves = double((tiles * s + resident - 1) / resident);
    double cost = waves * wave_bytes / double(s);
    if (s > 1) cost += 8.0 * double(s) * double(std::max<int64_t>(small_rows, 1)) * double(n) + 8e6;
    if (s == 1 || cost < 0.95 * best_cost) best_cost = cost, best = int(s);
  }
  return best;
}

// The GEMV-like family (gemv_gemm.cuh), host-visible for the cost model: how a problem's K is split.
// G, the warps of a CTA sharing one row of the streamed operand, is doubled from 1 while the CTAs
// (rows / (warps / G)) do not fill the device's SMs and each warp keeps at least 2 x min_k
// elements of K (min_k: 512 with 16-byte loads, 128 element by element), at most `warps`; then S,
// the CTAs of a cluster sharing a row group (sm_90 only), likewise, at most kGemvMaxSplits.
inline constexpr int kGemvMaxSplits = 8;
struct GemvSplit {
  int groups = 1, splits = 1;
};
inline GemvSplit gemv_split(int64_t rows, int64_t k, int sms, bool vec, int warps, bool clusters) {
  const int64_t min_k = vec ? 512 : 128;
  const int64_t slots = std::max(1, sms);
  GemvSplit s;
  while (s.groups < warps && (rows * s.groups + warps - 1) / warps < slots && k / (2 * s.groups) >= min_k) s.groups *= 2;
  const int64_t ctas = (rows * s.groups + warps - 1) / warps;
  while (clusters && s.splits < kGemvMaxSplits && ctas * s.splits < slots && k / (2 * s.groups * s.splits) >= min_k)
    s.splits *= 2;
  return s;
}

// Return codes of a variant's run(), beyond 0.
enum : int {
  kRunUnsupported = 90,   // the problem does not meet this variant's requirements (see supports)
  kRunLaunchFailed = 91,  // the launch itself failed (cudaGetLastError after it)
  kRunNoTensorMap = 92,   // the driver's cuTensorMapEncodeTiled could not be found or failed
};

struct KernelVariant {
  const char* name;  // unique, stable: used in the dispatch table and the run database
  KernelConfig config;
  kforge_hgemm_layout layout;
  kforge_hgemm_acc acc;
  kforge_hgemm_dtype dtype;  // element type of A, B and C (supports() refuses any other)
  // Whether this variant computes `p` correctly (alignment, layout, acc, dtype). Cheap; host only.
  bool (*supports)(const kforge_hgemm_problem* p);
  // Workspace bytes the variant needs for `p` (0 for most).
  size_t (*workspace_size)(const kforge_hgemm_problem* p);
  // Enqueues the GEMM on `stream`; 0 on success, a kRun* code otherwise. Never synchronises.
  int (*run)(const kforge_hgemm_args* args, cudaStream_t stream);
  // CTAs of this variant that can be resident at once on the current device (whole clusters
  // only: a split-K or multicast cluster must fit in one GPC); 0 when it cannot run there or the
  // query fails. More CTAs than this run as another wave.
  int (*resident_ctas)();
};

// The calling thread's current CUDA device, or -1 when it cannot be queried (the error is cleared).
inline int current_device() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return dev;
}

// What the kernels and the dispatcher need to know about a device; 0 where it could not be queried.
struct DeviceAttrs {
  int sms = 0;  // streaming multiprocessors
  int cc = 0;   // compute capability, major * 10 + minor
};

constexpr int kMaxCachedDevices = 64;

// The attributes of device `dev`, queried once per device under std::call_once (a query that fails
// is not cached: the next call asks again) and read without a lock afterwards. Thread-safe.
inline DeviceAttrs device_attrs(int dev) {
  auto query = [](int d, DeviceAttrs* out) {
    int sms = 0, major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    out->sms = sms;
    out->cc = major * 10 + minor;
    return true;
  };
  DeviceAttrs a;
  if (dev < 0) return a;
  if (dev >= kMaxCachedDevices) {
    query(dev, &a);
    return a;
  }
  struct Slot {
    std::once_flag once;
    DeviceAttrs attrs;
  };
  static Slot slots[kMaxCachedDevices];
  Slot& s = slots[dev];
  try {
    // An exception leaves the flag unset, so a failed query is retried by the next call.
    std::call_once(s.once, [&] {
      if (!query(dev, &s.attrs)) throw 0;
    });
  } catch (int) {
    return a;
  }
  return s.attrs;
}

// The checks every plain (non-TMA) family makes of a call before launching: A, B and C given and
// 2-byte aligned, an sm_80+ current device (its attributes into `out`). 0, or kRunUnsupported.
inline int plain_call_checks(const kforge_hgemm_args* args, DeviceAttrs* out) {
  if (args == nullptr || args->a == nullptr || args->b == nullptr || args->c == nullptr) return kRunUnsupported;
  const uintptr_t pa = reinterpret_cast<uintptr_t>(args->a), pb = reinterpret_cast<uintptr_t>(args->b),
                  pc = reinterpret_cast<uintptr_t>(args->c);
  if (((pa | pb | pc) & 1u) != 0) return kRunUnsupported;  // not even 2-byte aligned
  *out = device_attrs(current_device());
  return out->cc < 80 ? kRunUnsupported : 0;
}

// Sets attribute `attr` of `kernel` to `value` once per device (function attributes are per
// device context), remembered in `done_mask`. Returns false when it cannot be set (the error is
// cleared, so that it is not blamed on a later launch).
template <typename KernelPtr>
inline bool ensure_func_attribute(KernelPtr kernel, cudaFuncAttribute attr, int value, std::atomic<uint64_t>& done_mask) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const uint64_t bit = (dev >= 0 && dev < 64) ? (uint64_t(1) << dev) : 0;
  if (bit != 0 && (done_mask.load(std::memory_order_acquire) & bit) != 0) return true;
  if (cudaFuncSetAttribute(kernel, attr, value) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (bit != 0) done_mask.fetch_or(bit, std::memory_order_acq_rel);
  return true;
}

// The dynamic shared-memory limit of `kernel`, where it exceeds the default 48 KiB.
template <typename KernelPtr>
inline bool ensure_smem_attribute(KernelPtr kernel, size_t bytes, std::atomic<uint64_t>& done_mask) {
  return bytes <= size_t(48) * 1024 ||
         ensure_func_attribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes), done_mask);
}

// Resident CTAs of a kernel launched without clusters: blocks per SM x SMs of the current device.
template <typename KernelPtr>
inline int resident_plain_ctas(KernelPtr kernel, int threads, size_t smem_bytes) {
  int dev = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return per_sm * sms;
}

// `resident()` (a variant's resident CTAs on the current device, 0 when unknown) asked once per
// device and kept in `cache` (one per variant: a function-local static); a failed query (0) is
// asked again next time, a device past the cache asked every time. Thread-safe.
template <typename Resident>
inline int resident_cached_per_device(std::atomic<int> (&cache)[kMaxCachedDevices], Resident resident) {
  const int dev = current_device();
  if (dev < 0 || dev >= kMaxCachedDevices) return resident();
  int r = cache[dev].load(std::memory_order_relaxed);
  if (r <= 0) {
    r = resident();
    if (r > 0) cache[dev].store(r, std::memory_order_relaxed);
  }
  return r;
}

// Every compiled variant (both families, both layouts, both accumulations).
const KernelVariant* variants(size_t* count);
// The variant of that name, or nullptr.
const KernelVariant* find_variant(const char* name);

}  // namespace kforge::kernels
