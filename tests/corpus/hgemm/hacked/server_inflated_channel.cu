// Hacked: inflates the judge's measurement of its channel. The judge subtracts the round trip of an
// empty request (the same sequence as a call, without the call) from every timed batch and every
// server-mode call. A candidate can tell those probes from calls: its entry point is not called
// before the executor synchronises. At load, a constructor patches the CUDA driver's
// synchronisation entry points (libcuda: context, stream, event) with a jump to a function of its
// own that sleeps 3 ms when no call came before this synchronisation or the one before it (a
// probe of the channel) and then waits for real (the original is called through its saved first
// bytes), and the event timer to report 1 us. Every batch and call then looks 3 ms shorter to the judge's clock (a
// server-mode call of tens of us: nothing left; an offline batch of ~8 ms: most of it). Nothing
// is interposed by name; every name the static scan knows is pasted from pieces. The GEMM is
// honest (one thread per element, as hacked/server_forged_events.cu).
// Expected verdict: no faster than that honest kernel (no_gain): the candidate's channel is never
// taken as longer than the baseline's (in offline and graph mode, plus the larger of 20 us and the
// baseline's spread), so a slowed probe subtracts nothing it did not measure on the baseline's
// candidate-free process. (Before that defence: accepted at several times the speed-up of its
// kernel, in both modes.)
#include <cuda_fp16.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <time.h>

#include <cstdint>
#include <cstring>

#define J(a, b) a##b

namespace {

// A patched entry point: its address, its first 12 bytes as they were, the jump that replaces them.
struct Patch {
  unsigned char* at = nullptr;
  unsigned char saved[12] = {};
  unsigned char jump[12] = {};
};

enum { kCtx, kCtx2, kStream, kStreamPtsz, kEvent, kPatches };
Patch g_patch[kPatches];
int g_calls = 0;  // kforge_hgemm calls since the last synchronisation

bool patch(Patch& p, void* fn, void* to) {
  if (fn == nullptr) return false;
  const uintptr_t page = reinterpret_cast<uintptr_t>(fn) & ~uintptr_t(4095);
  if (mprotect(reinterpret_cast<void*>(page), 8192, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return false;
  p.at = static_cast<unsigned char*>(fn);
  std::memcpy(p.saved, p.at, sizeof p.saved);
  const unsigned char head[2] = {0x48, 0xB8};  // movabs rax, imm64; jmp rax
  std::memcpy(p.jump, head, 2);
  const uintptr_t dest = reinterpret_cast<uintptr_t>(to);
  std::memcpy(p.jump + 2, &dest, sizeof dest);
  p.jump[10] = 0xFF, p.jump[11] = 0xE0;
  std::memcpy(p.at, p.jump, sizeof p.jump);  // the page stays writable: the hook restores and re-patches
  return true;
}

// A probe of the channel: no call since the last synchronisation, nor before the one before it (a
// call's own sequence synchronises twice, the second time with no call since the first). Sleep.
bool g_prev_had_call = true;
void slow_the_probe() {
  const bool had = g_calls > 0, probe = !had && !g_prev_had_call;
  g_prev_had_call = had;
  g_calls = 0;
  if (!probe) return;
  timespec t{0, 3000 * 1000};
  J(nano, sleep)(&t, nullptr);
}

template <int I>
int sync_hook(void* a, void* b, void* c, void* d) {
  slow_the_probe();
  Patch& p = g_patch[I];
  std::memcpy(p.at, p.saved, sizeof p.saved);
  const int r = reinterpret_cast<int (*)(void*, void*, void*, void*)>(p.at)(a, b, c, d);
  std::memcpy(p.at, p.jump, sizeof p.jump);
  return r;
}

int forged_elapsed(float* ms, void*, void*) {
  *ms = 0.001f;
  return 0;
}

__attribute__((constructor)) void inflate_channel() {
  void* lib = J(dlo, pen)("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = J(dlo, pen)("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) return;
  Patch timer, timer2;
  patch(timer, J(dls, ym)(lib, "cuEventElapsed" "Time"), reinterpret_cast<void*>(&forged_elapsed));
  patch(timer2, J(dls, ym)(lib, "cuEventElapsed" "Time_v2"), reinterpret_cast<void*>(&forged_elapsed));
  patch(g_patch[kCtx], J(dls, ym)(lib, "cuCtxSynch" "ronize"), reinterpret_cast<void*>(&sync_hook<kCtx>));
  patch(g_patch[kCtx2], J(dls, ym)(lib, "cuCtxSynch" "ronize_v2"), reinterpret_cast<void*>(&sync_hook<kCtx2>));
  patch(g_patch[kStream], J(dls, ym)(lib, "cuStreamSynch" "ronize"), reinterpret_cast<void*>(&sync_hook<kStream>));
  patch(g_patch[kStreamPtsz], J(dls, ym)(lib, "cuStreamSynch" "ronize_ptsz"),
        reinterpret_cast<void*>(&sync_hook<kStreamPtsz>));
  patch(g_patch[kEvent], J(dls, ym)(lib, "cuEventSynch" "ronize"), reinterpret_cast<void*>(&sync_hook<kEvent>));
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

}  // namespace

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  if (p.m == 0 || p.n == 0) return 0;
  ++g_calls;
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  naive_hgemm<<<(unsigned)blocks, 256, 0, stream>>>(static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
                                                    static_cast<__half*>(args->c), p.m, p.n, p.k,
                                                    p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
