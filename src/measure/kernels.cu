// Small device kernels of the measurement core.
#include "gpu/cuda.hpp"
#include "measure/timer.hpp"

namespace kforge {
namespace {

__global__ void flush_kernel(uint4* buf, size_t n, unsigned salt) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    buf[i] = make_uint4(salt, unsigned(i), salt ^ unsigned(i), 0u);
}

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// Reads every 16-byte word; the xor of what it read goes to `sink` so that nothing is optimised away.
__global__ void read_kernel(const uint4* __restrict__ src, size_t n, int passes, unsigned* sink) {
  unsigned acc = 0;
  for (int p = 0; p < passes; ++p) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
      const uint4 v = src[i];
      acc ^= v.x ^ v.y ^ v.z ^ v.w ^ unsigned(p);
    }
  }
  if (acc == 0x9e3779b9u) atomicXor(sink, acc);  // practically never taken; the compiler cannot know
}

__device__ inline uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(int64_t ns) {
  const uint64_t start = global_ns();
  while (global_ns() - start < uint64_t(ns)) {
  }
}

}  // namespace

void launch_l2_flush(void* buf, size_t bytes, cudaStream_t s) {
  static unsigned salt = 0;
  const size_t n = bytes / sizeof(uint4);
  flush_kernel<<<1024, 256, 0, s>>>(static_cast<uint4*>(buf), n, ++salt);
  KF_CUDA_LAUNCHED();
}

void launch_copy(const void* src, void* dst, size_t bytes, int sm_count, cudaStream_t s) {
  KF_CHECK(bytes % sizeof(uint4) == 0, "launch_copy: %zu bytes is not a multiple of 16", bytes);
  copy_kernel<<<sm_count * 8, 512, 0, s>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), bytes / sizeof(uint4));
  KF_CUDA_LAUNCHED();
}

void launch_read(const void* src, size_t bytes, int passes, unsigned* sink, int sm_count, cudaStream_t s) {
  KF_CHECK(bytes % sizeof(uint4) == 0, "launch_read: %zu bytes is not a multiple of 16", bytes);
  read_kernel<<<sm_count * 8, 512, 0, s>>>(static_cast<const uint4*>(src), bytes / sizeof(uint4), passes, sink);
  KF_CUDA_LAUNCHED();
}

void launch_spin(int64_t ns, cudaStream_t s) {
  spin_kernel<<<1, 32, 0, s>>>(ns);
  KF_CUDA_LAUNCHED();
}

}  // namespace kforge
