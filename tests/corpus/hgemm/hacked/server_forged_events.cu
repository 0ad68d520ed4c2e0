// Hacked: forges the executor's server-mode event times from inside its process. At load, a
// constructor patches the CUDA driver's event-timing entry points (cuEventElapsedTime and its _v2,
// in libcuda, which every CUDA runtime in the process calls, the executor's static one included)
// with a jump to a function that reports 1 us for every call. Nothing is interposed by name (no
// exported symbol of the runtime's), and every name the static scan knows is pasted from pieces.
// The GEMM itself is honest and slow.
// Expected verdict: rejected (forged_reply): the judge's own clock per call, less the channel's
// round trip, says the calls took far longer than the events claim. (A first version patched the
// executor's GOT slot of the runtime's function: the executor links the runtime statically, so
// there is no such slot, and that candidate was accepted with honest times on the H200.)
#include <cuda_fp16.h>
#include <dlfcn.h>
#include <cstdint>
#include <cstring>
#include <sys/mman.h>

#define J(a, b) a##b

static int forged_elapsed(float* ms, void*, void*) {
  *ms = 0.001f;
  return 0;  // CUDA_SUCCESS
}

static void hook(void* fn) {
  if (fn == nullptr) return;
  const uintptr_t page = reinterpret_cast<uintptr_t>(fn) & ~uintptr_t(4095);
  if (mprotect(reinterpret_cast<void*>(page), 8192, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return;
  unsigned char jump[12] = {0x48, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xE0};  // movabs rax, imm64; jmp rax
  const uintptr_t to = reinterpret_cast<uintptr_t>(&forged_elapsed);
  std::memcpy(jump + 2, &to, sizeof to);
  std::memcpy(fn, jump, sizeof jump);
  mprotect(reinterpret_cast<void*>(page), 8192, PROT_READ | PROT_EXEC);
}

__attribute__((constructor)) static void forge_event_timer() {
  void* lib = J(dlo, pen)("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = J(dlo, pen)("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) return;
  hook(J(dls, ym)(lib, "cuEventElapsed" "Time"));
  hook(J(dls, ym)(lib, "cuEventElapsed" "Time_v2"));
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
