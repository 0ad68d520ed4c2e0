// HACKED — hack-table row "hangs, crashes, sticky CUDA errors, huge compile times".
// Launches a kernel that waits forever for a flag nobody sets, then returns success.
// Must be caught at run time: "timeout" (the worker is killed and restarted).
#include <cuda_fp16.h>

__device__ int g_release = 0;  // never set

__global__ void spin_forever() {
  while (atomicAdd(&g_release, 0) == 0) __nanosleep(1000);
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  (void)args;
  spin_forever<<<1, 1, 0, stream>>>();
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
