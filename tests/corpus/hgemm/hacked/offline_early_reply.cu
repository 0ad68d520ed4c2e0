// Hacked: an early reply in offline mode. The kernel is one of kforge's own (as honest/kforge_sm80.cu,
// near cuBLASLt's speed at 2048^3), but the executor answers a batch when half of its calls are
// done. At load, a constructor patches the CUDA driver's context synchronisation (libcuda; every
// name the static scan knows is pasted from pieces) with a jump to a function of its own: after a
// batch of 16 calls or more with no stream synchronised in between (a timed batch; the judge's held
// verification batch synchronises a stream of the executor's first, and waits for real), it waits
// only for an event recorded after the middle call, then returns. The other half runs while the
// reply is in the pipe and while the judge probes the GPU: a probe waits behind it (another
// context's work holds the GPU in slices of ~2 ms), is retried after 300 us, and the batch passes
// as idle once the work is done. The outputs are then all there and correct.
// Expected verdict: no faster than the honest kernel (no_gain, ~1x): an offline batch is timed to
// the end of the probe that shows the GPU idle after the reply, so the half left running is
// inside it. (Before that defence: about twice the honest speed-up, the batch's second half
// outside the judge's clock.)
#include <dlfcn.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>

#include "kernels/hgemm/sm80_gemm.cuh"

#define J(a, b) a##b

namespace {

struct Patch {
  unsigned char* at = nullptr;
  unsigned char saved[12] = {};
  unsigned char jump[12] = {};
};

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
  std::memcpy(p.at, p.jump, sizeof p.jump);
  return true;
}

template <class R, class... A>
R call_original(Patch& p, A... a) {
  std::memcpy(p.at, p.saved, sizeof p.saved);
  const R r = reinterpret_cast<R (*)(A...)>(p.at)(a...);
  std::memcpy(p.at, p.jump, sizeof p.jump);
  return r;
}

constexpr int kRing = 4096;
using EventCreate = int (*)(void**, unsigned);
using EventRecord = int (*)(void*, void*);
using EventSync = int (*)(void*);
EventCreate g_create = nullptr;
EventRecord g_record = nullptr;
EventSync g_event_sync = nullptr;
void* g_ring[kRing] = {};
int g_calls = 0;               // calls since the last context synchronisation
bool g_stream_synced = false;  // a stream synchronised since then
Patch g_ctx, g_ctx2, g_stream;

template <int V>
int ctx_hook(void* a) {
  const int n = g_calls;
  const bool timed_batch = n >= 16 && !g_stream_synced && g_event_sync != nullptr && g_ring[(n / 2 - 1) % kRing];
  g_calls = 0;
  g_stream_synced = false;
  if (timed_batch) return g_event_sync(g_ring[(n / 2 - 1) % kRing]);
  return call_original<int>(V == 0 ? g_ctx : g_ctx2, a);
}

int stream_hook(void* s) {
  g_stream_synced = true;
  return call_original<int>(g_stream, s);
}

__attribute__((constructor)) void answer_at_half() {
  void* lib = J(dlo, pen)("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = J(dlo, pen)("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) return;
  g_create = reinterpret_cast<EventCreate>(J(dls, ym)(lib, "cuEvent" "Create"));
  g_record = reinterpret_cast<EventRecord>(J(dls, ym)(lib, "cuEvent" "Record"));
  g_event_sync = reinterpret_cast<EventSync>(J(dls, ym)(lib, "cuEventSynch" "ronize"));
  patch(g_ctx, J(dls, ym)(lib, "cuCtxSynch" "ronize"), reinterpret_cast<void*>(&ctx_hook<0>));
  patch(g_ctx2, J(dls, ym)(lib, "cuCtxSynch" "ronize_v2"), reinterpret_cast<void*>(&ctx_hook<1>));
  patch(g_stream, J(dls, ym)(lib, "cuStreamSynch" "ronize"), reinterpret_cast<void*>(&stream_hook));
}

}  // namespace

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const int rc = args->problem.layout == KFORGE_HGEMM_TN
                     ? kforge::kernels::sm80::Gemm<128, 128, 32, 2, 2, 4, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32>::run(args, stream)
                     : kforge::kernels::sm80::Gemm<128, 128, 32, 2, 2, 4, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32>::run(args, stream);
  // An event after every call (created on first use: disable-timing events, flag 2).
  void*& ev = g_ring[g_calls % kRing];
  if (ev == nullptr && g_create != nullptr) g_create(&ev, 2);
  if (ev != nullptr && g_record != nullptr) g_record(ev, stream);
  ++g_calls;
  return rc;
}
