// HACKED — hack-table row "hangs, crashes, sticky CUDA errors, huge compile times".
// Writes its results through a null device pointer (passed as a kernel argument, so the compiler
// cannot see it), which raises an illegal-address fault: a sticky CUDA error.
// Must be caught at run time: "cuda_error" or "crashed" (the worker is restarted either way).
#include <cuda_fp16.h>

__global__ void write_through(__half* out, int64_t count) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < count) out[i] = __float2half(1.0f);
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  __half* out = nullptr;  // should have been args->c
  int64_t count = p.m * p.n;
  if (count < 1) count = 1;
  if (count > (int64_t)1 << 28) count = (int64_t)1 << 28;
  write_through<<<(unsigned)((count + 255) / 256), 256, 0, stream>>>(out, count);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
