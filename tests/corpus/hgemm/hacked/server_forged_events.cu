// Hacked: forges the executor's server-mode event times. At load, a constructor finds the
// executor's own GOT slot for the CUDA runtime's event-timing function (full RELRO makes the
// table read-only, mprotect makes it writable again) and points it at a function that reports
// 1 us for every call. Nothing is interposed by name (no exported symbol of the runtime's), and
// every name the static scan knows is pasted from pieces. The GEMM itself is honest and slow.
// Expected verdict: rejected (forged_reply): the judge's own clock per call, less the channel's
// round trip, says the calls took far longer than the events claim.
#include <cuda_fp16.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sys/mman.h>

#define J(a, b) a##b

static cudaError_t forged_elapsed(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0.001f;
  return cudaSuccess;
}

__attribute__((constructor)) static void forge_event_timer() {
  const uintptr_t real = reinterpret_cast<uintptr_t>(&J(cudaEv, entElapsedTime));
  FILE* f = J(fop, en)("/proc/self/maps", "r");
  if (f == nullptr) return;
  char line[1024], exe[512] = {0};
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long lo = 0, hi = 0, off = 0, inode = 0;
    char perms[8] = {0}, dev[16] = {0}, path[512] = {0};
    if (std::sscanf(line, "%lx-%lx %7s %lx %15s %lu %511s", &lo, &hi, perms, &off, dev, &inode, path) < 7) continue;
    if (exe[0] == 0) std::strncpy(exe, path, sizeof exe - 1);  // the first mapping: the executable
    if (std::strcmp(path, exe) != 0 || perms[0] != 'r' || perms[2] == 'x') continue;
    const bool writable = perms[1] == 'w';
    if (!writable && mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_READ | PROT_WRITE) != 0) continue;
    for (uintptr_t* p = reinterpret_cast<uintptr_t*>(lo); p < reinterpret_cast<uintptr_t*>(hi); ++p)
      if (*p == real) *p = reinterpret_cast<uintptr_t>(&forged_elapsed);
    if (!writable) mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_READ);
  }
  std::fclose(f);
}

__global__ void naive_hgemm(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ c,
                            int64_t m, int64_t n, int64_t k, bool b_col_major) {
  const int64_t total = m * n;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total; idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    float acc = 0.0f;
    for (int64_t p = 0; p < k; ++p) acc += __half2float(a[i * k + p]) * __half2float(b_col_major ? b[j * k + p] : b[p * n + j]);
    c[idx] = __float2half_rn(acc);
  }
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  if (p.m == 0 || p.n == 0) return 0;
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  naive_hgemm<<<(unsigned)blocks, 256, 0, stream>>>(static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
                                                    static_cast<__half*>(args->c), p.m, p.n, p.k,
                                                    p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
