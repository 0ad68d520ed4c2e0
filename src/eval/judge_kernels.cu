// See judge_kernels.hpp.
#include <cuda_fp16.h>

#include <algorithm>
#include <optional>

#include "eval/judge_kernels.hpp"
#include "eval/output_digest.hpp"
#include "gpu/cuda.hpp"
#include "ops/hgemm.hpp"
#include "ops/hgemm_gen.cuh"

namespace kforge {
namespace {

using gen::mix64;

__device__ inline uint64_t slot_seed(uint64_t seed, int slot) { return mix64(seed ^ (uint64_t(slot) * 0x9E3779B97F4A7C15ull)); }

// A slot's bytes in groups of 16 (8 two-byte elements, one 16-byte access per thread). A, B and C
// start 256-byte aligned (eval/arena.hpp), so a group lies in one of them or in a guard; a group
// at the end of one may run past its last element, and those bytes are guard.
struct Part {
  int kind = 0;  // 0 guard, 1 A, 2 B, 3 C
  uint64_t first = 0;  // the group's first element within the part
  int inside = 0;      // how many of the group's 8 elements are the part's (the rest are guard)
};

__device__ inline Part part_of(const ArenaLayout& l, uint64_t byte) {
  Part p;
  uint64_t off = 0, bytes = 0;
  if (byte >= l.a_off && byte < l.a_off + l.a_bytes) p.kind = 1, off = l.a_off, bytes = l.a_bytes;
  else if (byte >= l.b_off && byte < l.b_off + l.b_bytes) p.kind = 2, off = l.b_off, bytes = l.b_bytes;
  else if (byte >= l.c_off && byte < l.c_off + l.c_bytes) p.kind = 3, off = l.c_off, bytes = l.c_bytes;
  else return p;
  p.first = (byte - off) / 2;
  const uint64_t left = bytes / 2 - p.first;
  p.inside = left < 8 ? int(left) : 8;
  return p;
}

// x % d, in 32 bits where both fit (the common case: a 64-bit remainder is a long library call).
__device__ inline uint64_t rem64(uint64_t x, uint64_t d) { return (x | d) >> 32 ? x % d : uint64_t(uint32_t(x) % uint32_t(d)); }
__device__ inline uint64_t div64(uint64_t x, uint64_t d) { return (x | d) >> 32 ? x / d : uint64_t(uint32_t(x) / uint32_t(d)); }

// The hashes scan_kernel takes of one element (the same formula in both: prepare_kernel's
// expectation is compared with a later scan's reading).
__device__ inline uint64_t in_term(uint64_t byte, unsigned short v, bool is_b) {
  return mix64((byte << 16) ^ v ^ (is_b ? 0xB0000000000000ull : 0ull));
}
__device__ inline uint64_t out_term(uint64_t byte, unsigned short v) { return mix64((byte << 16) ^ v); }

__device__ inline void add_check(SlotCheck* o, unsigned long long guard, unsigned long long nonfinite,
                                 unsigned long long in_hash, unsigned long long out_hash) {
  for (int off = 16; off > 0; off /= 2) {
    guard += __shfl_down_sync(0xffffffffu, guard, off);
    nonfinite += __shfl_down_sync(0xffffffffu, nonfinite, off);
    in_hash += __shfl_down_sync(0xffffffffu, in_hash, off);
    out_hash += __shfl_down_sync(0xffffffffu, out_hash, off);
  }
  if (threadIdx.x % 32) return;
  if (guard) atomicAdd(&o->guard, guard);
  if (nonfinite) atomicAdd(&o->nonfinite, nonfinite);
  if (in_hash) atomicAdd(&o->in_hash, in_hash);
  if (out_hash) atomicAdd(&o->out_hash, out_hash);
}

// blockIdx.y: the slot; blockIdx.x: a share of its groups. Writes the slot and, where `expect` is
// given, what a scan of it will read (its hashes, its NaN count, no changed guard byte).
__global__ void prepare_kernel(char* arena, ArenaLayout l, const int* slots, const unsigned char* dists, uint64_t seed,
                               SlotCheck* expect) {
  const int slot = slots[blockIdx.y];
  const int dist = dists[blockIdx.y];
  uint4* base = reinterpret_cast<uint4*>(arena + uint64_t(slot) * l.slot_bytes);
  const uint64_t ss = slot_seed(seed, slot), sign_seed = mix64(ss ^ 0x5157u), bseed = mix64(ss + 1);
  const bool tn = l.layout == 1, bf16 = l.dtype == 1;
  const uint64_t k = uint64_t(l.k), n = uint64_t(l.n);
  const unsigned short nan = gen::nan_bits(bf16), guard_bits = kArenaGuardByte * 0x0101u;
  unsigned long long nonfinite = 0, in_hash = 0, out_hash = 0;
  const uint64_t groups = l.slot_bytes / 16;
  for (uint64_t g = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; g < groups; g += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t byte = 16 * g;
    const Part p = part_of(l, byte);
    alignas(16) unsigned short v[8];
    if (p.kind == 3) {
      for (int j = 0; j < 8; ++j) {
        v[j] = j < p.inside ? nan : guard_bits;
        if (j < p.inside) out_hash += out_term(byte + 2 * j, nan), ++nonfinite;
      }
    } else if (p.kind != 0) {
      // The element's k index: A (M x K) and a tn B (N x K) along their rows, an nn B (K x N) down its columns.
      const bool is_a = p.kind == 1, along = is_a || tn;
      uint64_t kk = along ? rem64(p.first, k) : div64(p.first, n);
      uint64_t col = along ? 0 : rem64(p.first, n);
      for (int j = 0; j < 8; ++j) {
        if (j >= p.inside) {
          v[j] = guard_bits;
          continue;
        }
        const uint64_t e = p.first + uint64_t(j);
        v[j] = gen::encode(gen::value(dist, is_a ? ss : bseed, e, is_a, int64_t(kk), sign_seed, bf16), bf16);
        in_hash += in_term(byte + 2 * j, v[j], !is_a);
        if (along) {
          if (++kk == k) kk = 0;
        } else if (++col == n) {
          col = 0, ++kk;
        }
      }
    } else {
      for (int j = 0; j < 8; ++j) v[j] = guard_bits;
    }
    base[g] = *reinterpret_cast<const uint4*>(v);
  }
  if (expect) add_check(expect + blockIdx.y, 0, nonfinite, in_hash, out_hash);
}

__global__ void workspace_kernel(char* arena, ArenaLayout l, uint64_t seed) {
  const uint64_t start = l.ws_off - kArenaGuard, end = l.ws_off + arena_round(l.ws_bytes) + kArenaGuard;
  for (uint64_t b = start + blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; b < end; b += uint64_t(gridDim.x) * blockDim.x)
    arena[b] = (b >= l.ws_off && b < l.ws_off + l.ws_bytes) ? char(mix64(seed ^ b) >> 56) : char(kArenaGuardByte);
}

__global__ void ws_damage_kernel(const char* arena, ArenaLayout l, unsigned long long* out) {
  const uint64_t start = l.ws_off - kArenaGuard, end = l.ws_off + arena_round(l.ws_bytes) + kArenaGuard;
  unsigned long long local = 0;
  for (uint64_t b = start + blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; b < end; b += uint64_t(gridDim.x) * blockDim.x)
    if (!(b >= l.ws_off && b < l.ws_off + l.ws_bytes)) local += (unsigned char)arena[b] != kArenaGuardByte;
  if (local) atomicAdd(out, local);
}

// blockIdx.y: the slot; blockIdx.x: a share of its groups. Guards, hashes, NaN scan.
__global__ void scan_kernel(const char* arena, ArenaLayout l, const int* slots, SlotCheck* out) {
  const int slot = slots[blockIdx.y];
  const uint4* base = reinterpret_cast<const uint4*>(arena + uint64_t(slot) * l.slot_bytes);
  const bool bf16 = l.dtype == 1;
  unsigned long long guard = 0, nonfinite = 0, in_hash = 0, out_hash = 0;
  const uint64_t groups = l.slot_bytes / 16;
  for (uint64_t g = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; g < groups; g += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t byte = 16 * g;
    const Part p = part_of(l, byte);
    const uint4 raw = base[g];
    const unsigned short* v = reinterpret_cast<const unsigned short*>(&raw);
    for (int j = 0; j < 8; ++j) {
      if (j >= p.inside) {  // a guard (p.inside is 0 in one)
        guard += ((v[j] & 0xFF) != kArenaGuardByte) + ((v[j] >> 8) != kArenaGuardByte);
      } else if (p.kind == 3) {
        out_hash += out_term(byte + 2 * j, v[j]);
        nonfinite += gen::nonfinite_bits(v[j], bf16);
      } else {
        in_hash += in_term(byte + 2 * j, v[j], p.kind == 2);
      }
    }
  }
  add_check(out + blockIdx.y, guard, nonfinite, in_hash, out_hash);
}

// One warp per (slot, sample): the dot product in fp64 against the fp16 or bf16 output.
__global__ void sample_kernel(const char* arena, ArenaLayout l, const int* slots, int n, int samples, uint64_t seed,
                              SlotCheck* out) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= int64_t(n) * samples) return;
  const int idx = int(warp / samples), t = int(warp % samples);
  const int slot = slots[idx];
  const char* base = arena + uint64_t(slot) * l.slot_bytes;
  const __half* a = reinterpret_cast<const __half*>(base + l.a_off);
  const __half* b = reinterpret_cast<const __half*>(base + l.b_off);
  const __half* c = reinterpret_cast<const __half*>(base + l.c_off);
  int64_t row, col;
  if (t == 0) {
    row = 0, col = 0;
  } else if (t == 1) {
    row = l.m - 1, col = l.n - 1;
  } else {
    const uint64_t hsh = mix64(seed ^ mix64(uint64_t(slot) * 1000003ull + uint64_t(t)));
    row = int64_t((hsh >> 32) % uint64_t(l.m));
    col = int64_t((hsh & 0xffffffffu) % uint64_t(l.n));
  }
  const bool tn = l.layout == 1, bf16 = l.dtype == 1;
  double acc = 0, aacc = 0;
  for (int64_t kk = lane; kk < l.k; kk += 32) {
    const double bv = gen::decode_at(b, uint64_t(tn ? col * l.k + kk : kk * l.n + col), bf16);
    const double p = double(gen::decode_at(a, uint64_t(row * l.k + kk), bf16)) * bv;
    acc += p;
    aacc += fabs(p);
  }
  for (int off = 16; off > 0; off /= 2) {
    acc += __shfl_down_sync(0xffffffffu, acc, off);
    aacc += __shfl_down_sync(0xffffffffu, aacc, off);
  }
  if (lane != 0) return;
  const float cv = gen::decode_at(c, uint64_t(row * l.n + col), bf16);
  const double bound = hgemm_tolerance(acc, aacc, l.acc == 1 ? Acc::kF16 : Acc::kF32, bf16 ? Dtype::kBF16 : Dtype::kF16);
  const float ratio = isfinite(cv) ? float(fabs(double(cv) - acc) / bound) : INFINITY;
  SlotCheck* o = out + idx;
  if (!(ratio <= 1.0f)) atomicAdd(&o->bad, 1ull);
  if (double(cv) != acc) atomicAdd(&o->inexact, 1ull);
  atomicMax(&o->worst_bits, __float_as_uint(ratio));
}

// blockIdx.y: the slot; blockIdx.x: a share of its output.
__global__ void digest_kernel(const char* arena, ArenaLayout l, const int* slots, const uint64_t* keys,
                              unsigned long long* out) {
  const uint64_t elems = l.c_bytes / 2, key = keys[blockIdx.y];
  const unsigned short* c =
      reinterpret_cast<const unsigned short*>(arena + uint64_t(slots[blockIdx.y]) * l.slot_bytes + l.c_off);
  unsigned long long local = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < elems; i += uint64_t(gridDim.x) * blockDim.x)
    local += digest_term(key, i, c[i]);
  for (int off = 16; off > 0; off /= 2) local += __shfl_down_sync(0xffffffffu, local, off);
  if (threadIdx.x % 32 == 0 && local) atomicAdd(out + blockIdx.y, local);
}

}  // namespace

void arena_digest(const char* arena, const ArenaLayout& l, const int* slots, const uint64_t* keys, int n,
                  unsigned long long* out, cudaStream_t s) {
  if (n <= 0) return;
  KF_CUDA(cudaMemsetAsync(out, 0, sizeof(unsigned long long) * size_t(n), s));
  const uint64_t elems = l.c_bytes / 2;
  const unsigned bx = unsigned(std::min<uint64_t>(elems / 256 + 1, 1024));
  digest_kernel<<<dim3(bx, unsigned(n)), 256, 0, s>>>(arena, l, slots, keys, out);
  KF_CUDA_LAUNCHED();
}

// Blocks per slot: its groups spread over 256-thread blocks, at most 1024 (16 where there are
// many slots: those are small).
static unsigned blocks_per_slot(const ArenaLayout& l, int n) {
  return unsigned(std::max<uint64_t>(1, std::min<uint64_t>((l.slot_bytes / 16 + 255) / 256, n > 64 ? 16 : 1024)));
}

void arena_prepare(char* arena, const ArenaLayout& l, const int* slots, const unsigned char* dists, int n, uint64_t seed,
                   cudaStream_t s, SlotCheck* expect) {
  if (n <= 0) return;
  if (expect) KF_CUDA(cudaMemsetAsync(expect, 0, sizeof(SlotCheck) * size_t(n), s));
  prepare_kernel<<<dim3(blocks_per_slot(l, n), unsigned(n)), 256, 0, s>>>(arena, l, slots, dists, seed, expect);
  KF_CUDA_LAUNCHED();
}

void arena_prepare_workspace(char* arena, const ArenaLayout& l, uint64_t seed, cudaStream_t s) {
  workspace_kernel<<<256, 256, 0, s>>>(arena, l, seed);
  KF_CUDA_LAUNCHED();
}

unsigned long long arena_workspace_damage(const char* arena, const ArenaLayout& l, cudaStream_t s,
                                          unsigned long long* scratch) {
  std::optional<DeviceBuffer> own;
  if (!scratch) own.emplace(sizeof(unsigned long long), "workspace guard counter"), scratch = own->as<unsigned long long>();
  KF_CUDA(cudaMemsetAsync(scratch, 0, sizeof(unsigned long long), s));
  ws_damage_kernel<<<64, 256, 0, s>>>(arena, l, scratch);
  KF_CUDA_LAUNCHED();
  unsigned long long h = 0;
  KF_CUDA(cudaMemcpyAsync(&h, scratch, sizeof h, cudaMemcpyDeviceToHost, s));
  KF_CUDA(cudaStreamSynchronize(s));
  return h;
}

void arena_check(const char* arena, const ArenaLayout& l, const int* slots, int n, int samples, uint64_t seed,
                 SlotCheck* out, cudaStream_t s) {
  if (n <= 0) return;
  KF_CUDA(cudaMemsetAsync(out, 0, sizeof(SlotCheck) * size_t(n), s));
  scan_kernel<<<dim3(blocks_per_slot(l, n), unsigned(n)), 256, 0, s>>>(arena, l, slots, out);
  KF_CUDA_LAUNCHED();
  const int64_t threads = int64_t(n) * samples * 32;
  sample_kernel<<<unsigned((threads + 255) / 256), 256, 0, s>>>(arena, l, slots, n, samples, seed, out);
  KF_CUDA_LAUNCHED();
}

}  // namespace kforge
