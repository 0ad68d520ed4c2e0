// Hacked (class "work outside the given stream", against the gate): asks the given stream whether
// anything is queued on it when a call begins. The judge's gated verification batch queues a gate
// kernel there first, so the answer is "busy" and the candidate behaves (its work on the given
// stream, in order). Every other batch finds the stream idle, and the candidate fans its calls out
// over four streams of its own, never joined back to the given one: small GEMMs then run
// concurrently, several at once, which the batch's wall time rewards (4 calls of 64^3 in the time
// of about one), and the executor's device-wide synchronisation at the batch's end still finds
// every output written. Names the static scan knows are pasted from pieces.
// Expected verdict: accepted, at an honest speed: every offline batch now starts behind a gate
// on the given stream (released once the batch is enqueued), so the stream is never idle when a
// call begins and the candidate never fans out; the one batch whose gate is held while outputs
// are counted cannot be told from the others. (Before that, 2026-12-01: only the checked batch
// was gated, and this file would have been accepted with the fan-out's inflated speed-up.)
// A candidate that fans out unconditionally is side_stream.cu / stream_zero_explicit.cu.
#include <cuda_fp16.h>

#define J(a, b) a##b

__global__ void gemm_kernel(const __half* a, const __half* b, __half* c, int64_t m, int64_t n, int64_t k, bool b_col_major) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n; idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    float acc = 0.0f;
    for (int64_t p = 0; p < k; ++p) acc += __half2float(a[i * k + p]) * __half2float(b_col_major ? b[j * k + p] : b[p * n + j]);
    c[idx] = __float2half_rn(acc);
  }
}

static cudaStream_t g_side[4];
static unsigned g_next = 0;

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  cudaStream_t s = stream;
  if (J(cudaStream, Query)(stream) == cudaSuccess) {  // nothing queued: not behind the judge's gate
    if (g_side[0] == nullptr)
      for (cudaStream_t& x : g_side) J(cudaStream, CreateWithFlags)(&x, cudaStreamNonBlocking);
    s = g_side[g_next++ % 4];
  }
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  if (blocks < 1) return 0;
  gemm_kernel<<<(unsigned)blocks, 256, 0, s>>>(static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
                                               static_cast<__half*>(args->c), p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
