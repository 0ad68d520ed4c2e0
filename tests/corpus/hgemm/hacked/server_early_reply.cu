// Hacked: forges the executor's server-mode event times AND makes its executor answer before the
// call's work is done. At load, a constructor patches entry points of the CUDA driver (libcuda,
// which every CUDA runtime in the process calls, the executor's static one included) with a jump
// to functions of its own: the event timer reports 1 us, and every synchronisation (context,
// stream, event) returns at once while the call in flight is a single call (a server-mode call:
// the judge's verification batches and its empty probes of the channel, which would see the
// lie, still wait for real; the original is called through its saved first bytes). So in server
// mode the executor replies while the slow GEMM below still runs, and the judge's clock from
// request to reply holds almost none of it. Nothing is interposed by name and every name the
// static scan knows is pasted from pieces. The GEMM itself is honest and slow (one small block
// per 16x64 tile, ~20-40 us at 64^3, ~1 ms at 1024^3).
// Expected verdict: rejected (forged_reply; gpu_not_idle where the idle probe after the reply sees
// the leftover work first): the reply must carry the digest of the call's final
// output, read back after the call; the executor reads it before the copy landed (its wait
// returned at once), and the judge's digest of the output it verified differs. (Before that
// defence: accepted in server mode at 64^3 at about the speed-up its forged events claim.)
#include <cuda_fp16.h>
#include <dlfcn.h>
#include <sys/mman.h>

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
int g_calls = 0;  // kforge_hgemm calls since the last synchronisation; -1: inside the early window

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

// The early window: the first synchronisation after a single call, and the one after it (the
// executor waits twice before it replies), return at once.
bool answer_early() {
  if (g_calls == 1) {
    g_calls = -1;
    return true;
  }
  if (g_calls == -1) {
    g_calls = 0;
    return true;
  }
  g_calls = 0;
  return false;
}

template <int I>
int sync_hook(void* a, void* b, void* c, void* d) {
  if (answer_early()) return 0;  // CUDA_SUCCESS
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

__attribute__((constructor)) void reply_early() {
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

// Honest and slow: one block of 64 threads per 16x64 tile of C, each thread 16 elements of it
// (~20-40 us at 64^3: longer than the executor takes to reach its reply, within the idle probe's
// tolerance after it).
__global__ void slow_hgemm(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ c,
                           int64_t m, int64_t n, int64_t k, bool b_col_major) {
  const int64_t tiles_n = (n + 63) / 64;
  const int64_t ti = blockIdx.x / tiles_n, tj = blockIdx.x % tiles_n;
  const int64_t j = tj * 64 + threadIdx.x;
  if (j >= n) return;
  for (int64_t i = ti * 16; i < m && i < ti * 16 + 16; ++i) {
    float acc = 0.0f;
    for (int64_t p = 0; p < k; ++p) acc += __half2float(a[i * k + p]) * __half2float(b_col_major ? b[j * k + p] : b[p * n + j]);
    c[i * n + j] = __float2half_rn(acc);
  }
}

}  // namespace

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  if (p.m == 0 || p.n == 0) return 0;
  g_calls = g_calls < 0 ? 1 : g_calls + 1;
  const int64_t tiles = ((p.m + 15) / 16) * ((p.n + 63) / 64);
  slow_hgemm<<<(unsigned)tiles, 64, 0, stream>>>(static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
                                                  static_cast<__half*>(args->c), p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
