#include "eval/device_checks.hpp"
#include "gpu/cuda.hpp"

namespace kforge {
namespace {

__device__ inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

__global__ void checksum_kernel(const uint16_t* p, size_t n, unsigned long long* out) {
  unsigned long long acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    acc += mix((uint64_t(i) << 16) ^ p[i]);
  atomicAdd(out, acc);
}

__global__ void count_not_kernel(const unsigned char* p, size_t n, unsigned char pattern, unsigned long long* out) {
  unsigned long long c = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    c += p[i] != pattern;
  if (c) atomicAdd(out, c);
}

uint64_t run_reduction(size_t n, cudaStream_t s, void (*launch)(unsigned long long*, int, cudaStream_t, const void*),
                       const void* ctx) {
  DeviceBuffer out(sizeof(unsigned long long), "checksum");
  KF_CUDA(cudaMemsetAsync(out.get(), 0, sizeof(unsigned long long), s));
  const int blocks = int(std::min<size_t>((n + 255) / 256, 2048));
  launch(out.as<unsigned long long>(), blocks > 0 ? blocks : 1, s, ctx);
  KF_CUDA_LAUNCHED();
  unsigned long long h = 0;
  KF_CUDA(cudaMemcpyAsync(&h, out.get(), sizeof h, cudaMemcpyDeviceToHost, s));
  KF_CUDA(cudaStreamSynchronize(s));
  return h;
}

}  // namespace

uint64_t device_checksum(const void* p, size_t bytes, cudaStream_t s) {
  struct Ctx {
    const uint16_t* p;
    size_t n;
  } ctx{static_cast<const uint16_t*>(p), bytes / 2};
  return run_reduction(ctx.n, s,
                       [](unsigned long long* out, int blocks, cudaStream_t st, const void* c) {
                         const Ctx& x = *static_cast<const Ctx*>(c);
                         checksum_kernel<<<blocks, 256, 0, st>>>(x.p, x.n, out);
                       },
                       &ctx);
}

uint64_t count_bytes_not(const void* p, size_t bytes, unsigned char pattern, cudaStream_t s) {
  struct Ctx {
    const unsigned char* p;
    size_t n;
    unsigned char pattern;
  } ctx{static_cast<const unsigned char*>(p), bytes, pattern};
  return run_reduction(ctx.n, s,
                       [](unsigned long long* out, int blocks, cudaStream_t st, const void* c) {
                         const Ctx& x = *static_cast<const Ctx*>(c);
                         count_not_kernel<<<blocks, 256, 0, st>>>(x.p, x.n, x.pattern, out);
                       },
                       &ctx);
}

}  // namespace kforge
