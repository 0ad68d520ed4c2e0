// See judge_kernels.hpp.
#include <cuda_fp16.h>

#include "eval/judge_kernels.hpp"
#include "eval/output_digest.hpp"
#include "gpu/cuda.hpp"
#include "ops/hgemm.hpp"
#include "ops/hgemm_gen.cuh"

namespace kforge {
namespace {

using gen::mix64;

__device__ inline uint64_t slot_seed(uint64_t seed, int slot) { return mix64(seed ^ (uint64_t(slot) * 0x9E3779B97F4A7C15ull)); }

__global__ void prepare_kernel(char* arena, ArenaLayout l, const int* slots, const unsigned char* dists, uint64_t seed) {
  const int slot = slots[blockIdx.y];
  const int dist = dists[blockIdx.y];
  char* base = arena + uint64_t(slot) * l.slot_bytes;
  const uint64_t ss = slot_seed(seed, slot), sign_seed = mix64(ss ^ 0x5157u);
  const bool tn = l.layout == 1, bf16 = l.dtype == 1;
  const uint64_t halves = l.slot_bytes / 2;
  unsigned short* h = reinterpret_cast<unsigned short*>(base);
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < halves; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t byte = 2 * i;
    unsigned short v = 0xA5A5;
    if (byte >= l.a_off && byte < l.a_off + l.a_bytes) {
      const uint64_t e = (byte - l.a_off) / 2;
      v = gen::encode(gen::value(dist, ss, e, true, int64_t(e % uint64_t(l.k)), sign_seed, bf16), bf16);
    } else if (byte >= l.b_off && byte < l.b_off + l.b_bytes) {
      const uint64_t e = (byte - l.b_off) / 2;
      const int64_t kk = tn ? int64_t(e % uint64_t(l.k)) : int64_t(e / uint64_t(l.n));
      v = gen::encode(gen::value(dist, mix64(ss + 1), e, false, kk, sign_seed, bf16), bf16);
    } else if (byte >= l.c_off && byte < l.c_off + l.c_bytes) {
      v = gen::nan_bits(bf16);
    }
    h[i] = v;
  }
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

// blockIdx.y: the slot; blockIdx.x: a share of its bytes. Guards, hashes, NaN scan.
__global__ void scan_kernel(const char* arena, ArenaLayout l, const int* slots, SlotCheck* out) {
  const int slot = slots[blockIdx.y];
  const char* base = arena + uint64_t(slot) * l.slot_bytes;
  const unsigned short* h = reinterpret_cast<const unsigned short*>(base);
  const uint64_t halves = l.slot_bytes / 2;
  unsigned long long guard = 0, nonfinite = 0, in_hash = 0, out_hash = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < halves; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t byte = 2 * i;
    const unsigned short v = h[i];
    if (byte >= l.a_off && byte < l.a_off + l.a_bytes) {
      in_hash += mix64((byte << 16) ^ v);
    } else if (byte >= l.b_off && byte < l.b_off + l.b_bytes) {
      in_hash += mix64((byte << 16) ^ v ^ 0xB0000000000000ull);
    } else if (byte >= l.c_off && byte < l.c_off + l.c_bytes) {
      out_hash += mix64((byte << 16) ^ v);
      nonfinite += gen::nonfinite_bits(v, l.dtype == 1);
    } else {
      guard += ((v & 0xFF) != kArenaGuardByte) + ((v >> 8) != kArenaGuardByte);
    }
  }
  SlotCheck* o = out + blockIdx.y;
  if (guard) atomicAdd(&o->guard, guard);
  if (nonfinite) atomicAdd(&o->nonfinite, nonfinite);
  atomicAdd(&o->in_hash, in_hash);
  atomicAdd(&o->out_hash, out_hash);
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

void arena_prepare(char* arena, const ArenaLayout& l, const int* slots, const unsigned char* dists, int n, uint64_t seed,
                   cudaStream_t s) {
  if (n <= 0) return;
  const uint64_t halves = l.slot_bytes / 2;
  const unsigned bx = unsigned(std::min<uint64_t>((halves + 255) / 256, n > 64 ? 16 : 1024));
  prepare_kernel<<<dim3(bx, unsigned(n)), 256, 0, s>>>(arena, l, slots, dists, seed);
  KF_CUDA_LAUNCHED();
}

void arena_prepare_workspace(char* arena, const ArenaLayout& l, uint64_t seed, cudaStream_t s) {
  workspace_kernel<<<256, 256, 0, s>>>(arena, l, seed);
  KF_CUDA_LAUNCHED();
}

unsigned long long arena_workspace_damage(const char* arena, const ArenaLayout& l, cudaStream_t s) {
  DeviceBuffer d(sizeof(unsigned long long), "workspace guard counter");
  KF_CUDA(cudaMemsetAsync(d.get(), 0, d.bytes(), s));
  ws_damage_kernel<<<64, 256, 0, s>>>(arena, l, d.as<unsigned long long>());
  KF_CUDA_LAUNCHED();
  unsigned long long h = 0;
  KF_CUDA(cudaMemcpyAsync(&h, d.get(), sizeof h, cudaMemcpyDeviceToHost, s));
  KF_CUDA(cudaStreamSynchronize(s));
  return h;
}

void arena_check(const char* arena, const ArenaLayout& l, const int* slots, int n, int samples, uint64_t seed,
                 SlotCheck* out, cudaStream_t s) {
  if (n <= 0) return;
  KF_CUDA(cudaMemsetAsync(out, 0, sizeof(SlotCheck) * size_t(n), s));
  const uint64_t halves = l.slot_bytes / 2;
  const unsigned bx = unsigned(std::min<uint64_t>((halves + 255) / 256, n > 64 ? 16 : 1024));
  scan_kernel<<<dim3(bx, unsigned(n)), 256, 0, s>>>(arena, l, slots, out);
  KF_CUDA_LAUNCHED();
  const int64_t threads = int64_t(n) * samples * 32;
  sample_kernel<<<unsigned((threads + 255) / 256), 256, 0, s>>>(arena, l, slots, n, samples, seed, out);
  KF_CUDA_LAUNCHED();
}

}  // namespace kforge
