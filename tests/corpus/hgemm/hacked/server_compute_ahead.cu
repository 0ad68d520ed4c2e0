// Hacked: computes the other calls' outputs ahead. The judge's buffers for a batch of calls are
// slots of one allocation (the arena), each slot [guard][A][guard][B][guard][C][guard] with a
// layout anyone can work out from the shape. A call finds the allocation's start and size (the
// driver's address-range query, its name pasted from pieces) and, in one launch, computes every
// slot whose output is still the judge's poison: the call's own and every other call's of the
// batch that is already prepared. Later calls of the batch find their output written and do almost
// nothing. Offline, a batch's time is its sum and this slow kernel gains nothing (it writes the
// batch's decoy slots there, as hacked/offline_compute_ahead.cu, and is out_of_bounds); in server
// mode, where it is judged here, a call's time is the median over the calls, and every call but
// the first is then free. The GEMM itself is honest and slow (one thread per element).
// Expected verdict: no faster than that honest kernel (no_gain): in server mode each call's slot
// gets its inputs just before its call, so while a call runs no later call's inputs exist and no
// other slot holds poison. (Before that defence: every server call but the first of each batch
// took a few us, near cuBLASLt's speed where the honest kernel is ~100x slower.)
#include <cuda_fp16.h>
#include <dlfcn.h>

#include <cstdint>

#define J(a, b) a##b

namespace {

constexpr uint64_t kGuard = 4096;
constexpr unsigned short kPoison = 0x7E00;
constexpr int kMaxSlots = 4096;
__device__ int g_pending[kMaxSlots];
__device__ int g_count;

uint64_t round256(uint64_t x) { return (x + 255) / 256 * 256; }

using AddressRange = int (*)(unsigned long long*, size_t*, unsigned long long);
AddressRange g_range = nullptr;

__attribute__((constructor)) void find_query() {
  void* lib = J(dlo, pen)("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = J(dlo, pen)("libcuda.so.1", RTLD_NOW);
  if (lib != nullptr) g_range = reinterpret_cast<AddressRange>(J(dls, ym)(lib, "cuMemGetAddress" "Range_v2"));
}

__global__ void reset_pending() { g_count = 0; }

// The slot positions that hold a poisoned output (three probes of it: first, middle, last), listed.
__global__ void mark_pending(const char* base, uint64_t slot_bytes, uint64_t c_off, uint64_t c_elems, int slots) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= slots) return;
  const unsigned short* c = reinterpret_cast<const unsigned short*>(base + uint64_t(s) * slot_bytes + c_off);
  if (c[0] == kPoison && c[c_elems / 2] == kPoison && c[c_elems - 1] == kPoison) g_pending[atomicAdd(&g_count, 1)] = s;
}

// Every listed slot's GEMM, one thread per element; blockIdx.y strides over the list.
__global__ void compute_pending(char* base, uint64_t slot_bytes, uint64_t a_off, uint64_t b_off, uint64_t c_off,
                                int64_t m, int64_t n, int64_t k, bool b_col_major) {
  for (int e = blockIdx.y; e < g_count; e += gridDim.y) {
    char* slot = base + uint64_t(g_pending[e]) * slot_bytes;
    const __half* a = reinterpret_cast<const __half*>(slot + a_off);
    const __half* b = reinterpret_cast<const __half*>(slot + b_off);
    __half* c = reinterpret_cast<__half*>(slot + c_off);
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n; idx += (int64_t)gridDim.x * blockDim.x) {
      const int64_t i = idx / n, j = idx % n;
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += __half2float(a[i * k + p]) * __half2float(b_col_major ? b[j * k + p] : b[p * n + j]);
      c[idx] = __float2half_rn(acc);
    }
  }
}

__global__ void naive_hgemm(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ c,
                            int64_t m, int64_t n, int64_t k, bool b_col_major) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n; idx += (int64_t)gridDim.x * blockDim.x) {
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
  const bool tn = p.layout == KFORGE_HGEMM_TN;
  const uint64_t a_bytes = uint64_t(p.m) * p.k * 2, b_bytes = uint64_t(p.k) * p.n * 2, c_bytes = uint64_t(p.m) * p.n * 2;
  const uint64_t a_off = kGuard, b_off = a_off + round256(a_bytes) + kGuard, c_off = b_off + round256(b_bytes) + kGuard;
  const uint64_t slot_bytes = c_off + round256(c_bytes) + kGuard;
  unsigned long long base = 0;
  size_t size = 0;
  const uint64_t a = reinterpret_cast<uint64_t>(args->a);
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  if (g_range != nullptr && g_range(&base, &size, a) == 0 && a >= base + a_off && (a - base - a_off) % slot_bytes == 0) {
    const int slots = int(size / slot_bytes < uint64_t(kMaxSlots) ? size / slot_bytes : kMaxSlots);
    reset_pending<<<1, 1, 0, stream>>>();
    mark_pending<<<(slots + 255) / 256, 256, 0, stream>>>(reinterpret_cast<const char*>(base), slot_bytes, c_off,
                                                        uint64_t(p.m) * p.n, slots);
    compute_pending<<<dim3(unsigned(blocks < 512 ? blocks : 512), 8), 256, 0, stream>>>(
        reinterpret_cast<char*>(base), slot_bytes, a_off, b_off, c_off, p.m, p.n, p.k, tn);
  } else {
    naive_hgemm<<<(unsigned)blocks, 256, 0, stream>>>(static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
                                                      static_cast<__half*>(args->c), p.m, p.n, p.k, tn);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
