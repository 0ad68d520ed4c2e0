// The executor's own device code: the gate that holds its stream, the count of outputs written
// while the gate held it (work that escaped the given stream), and the digest of a server-mode
// call's output (eval/output_digest.hpp).
#include <cuda_fp16.h>

#include "eval/arena.hpp"
#include "eval/output_digest.hpp"
#include "ops/hgemm_gen.cuh"

namespace kforge {
namespace {

__global__ void gate_kernel(volatile int* flag, int want) {
  while (*flag != want) __nanosleep(1000);
}

__global__ void wake_kernel() {}

__global__ void written_kernel(const char* arena, ArenaLayout l, const int* order, int n, unsigned long long* count) {
  const uint64_t elems = l.c_bytes / 2;
  // The judge's poison in the slot's element type (a bf16 output compared with fp16's NaN would
  // count every element as written: honest/naive_bf16.cu was refused side_stream on the H200).
  const unsigned short poison = gen::nan_bits(l.dtype == 1);
  unsigned long long local = 0;
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    const unsigned short* c = reinterpret_cast<const unsigned short*>(arena + uint64_t(order[s]) * l.slot_bytes + l.c_off);
    for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < elems; i += uint64_t(gridDim.x) * blockDim.x)
      local += c[i] != poison;
  }
  if (local) atomicAdd(count, local);
}

__global__ void digest_kernel(const char* arena, ArenaLayout l, int slot, uint64_t key, unsigned long long* out) {
  const uint64_t elems = l.c_bytes / 2;
  const unsigned short* c = reinterpret_cast<const unsigned short*>(arena + uint64_t(slot) * l.slot_bytes + l.c_off);
  unsigned long long local = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < elems; i += uint64_t(gridDim.x) * blockDim.x)
    local += digest_term(key, i, c[i]);
  for (int off = 16; off > 0; off /= 2) local += __shfl_down_sync(0xffffffffu, local, off);
  if (threadIdx.x % 32 == 0 && local) atomicAdd(out, local);
}

}  // namespace

void launch_gate(volatile int* flag, int want, cudaStream_t s) { gate_kernel<<<1, 1, 0, s>>>(flag, want); }

void launch_wake(cudaStream_t s) { wake_kernel<<<1, 32, 0, s>>>(); }

void launch_count_written(const char* arena, const ArenaLayout& l, const int* order, int n, unsigned long long* count,
                          cudaStream_t s) {
  dim3 grid(64, unsigned(n < 1024 ? n : 1024));
  written_kernel<<<grid, 256, 0, s>>>(arena, l, order, n, count);
}

// `out` (device) zeroed, then the digest of slot `slot`'s output added into it, on `s`.
void launch_output_digest(const char* arena, const ArenaLayout& l, int slot, uint64_t key, unsigned long long* out,
                          cudaStream_t s) {
  cudaMemsetAsync(out, 0, sizeof(unsigned long long), s);
  const uint64_t elems = l.c_bytes / 2;
  const unsigned blocks = unsigned(elems / 256 + 1 < 1024 ? elems / 256 + 1 : 1024);
  digest_kernel<<<blocks, 256, 0, s>>>(arena, l, slot, key, out);
}

}  // namespace kforge
