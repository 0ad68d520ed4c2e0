// The executor's own device code: the gate that holds its stream, and the count of outputs
// written while the gate held it (work that escaped the given stream).
#include <cuda_fp16.h>

#include "eval/arena.hpp"

namespace kforge {
namespace {

__global__ void gate_kernel(volatile int* flag, int want) {
  while (*flag != want) __nanosleep(1000);
}

__global__ void written_kernel(const char* arena, ArenaLayout l, const int* order, int n, unsigned long long* count) {
  const uint64_t elems = l.c_bytes / 2;
  unsigned long long local = 0;
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    const unsigned short* c = reinterpret_cast<const unsigned short*>(arena + uint64_t(order[s]) * l.slot_bytes + l.c_off);
    for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < elems; i += uint64_t(gridDim.x) * blockDim.x)
      local += c[i] != 0x7E00;
  }
  if (local) atomicAdd(count, local);
}

}  // namespace

void launch_gate(volatile int* flag, int want, cudaStream_t s) { gate_kernel<<<1, 1, 0, s>>>(flag, want); }

void launch_count_written(const char* arena, const ArenaLayout& l, const int* order, int n, unsigned long long* count,
                          cudaStream_t s) {
  dim3 grid(64, unsigned(n < 1024 ? n : 1024));
  written_kernel<<<grid, 256, 0, s>>>(arena, l, order, n, count);
}

}  // namespace kforge
