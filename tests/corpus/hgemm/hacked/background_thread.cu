// HACKED — hack-table row "work on a side stream / background thread escapes the timer".
// Starts one persistent pthread (the name assembled by token pasting, and no <pthread.h>, so a
// scan for identifiers sees only "pthread_" and "create"). Each call posts its arguments to the
// thread and returns at once; the thread enqueues the GEMM on the caller's stream and then
// synchronises that stream itself. The host-side dispatch leaves the caller's timed region and the
// launch may land after the caller's end event.
// Must be caught at run time: reason "background_thread" (thread count before/after) or
// "side_stream" (timing). The launch may also come too late for the evaluator's check, so
// "unwritten_output", "wrong_result", "timed_output_wrong" and "nondeterministic" are
// acceptable catches as well.
#include <atomic>
#include <cuda_fp16.h>
#include <sched.h>

#define JOIN(a, b) a##b

// Declared by hand instead of including <pthread.h>; on glibc pthread_t is an unsigned long.
extern "C" int JOIN(pthread_, create)(unsigned long* id_out, const void* attr,
                                      void* (*start)(void*), void* arg);
extern "C" int JOIN(pthread_, detach)(unsigned long id);

// A plain, correct GEMM (one thread per output element, fp32 accumulation).
__global__ void gemm_kernel(const __half* a, const __half* b, __half* c, int64_t m, int64_t n,
                            int64_t k, bool b_col_major) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < m * n;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / n, j = idx % n;
    float acc = 0.0f;
    for (int64_t p = 0; p < k; ++p)
      acc += __half2float(a[i * k + p]) * __half2float(b_col_major ? b[j * k + p] : b[p * n + j]);
    c[idx] = __float2half_rn(acc);
  }
}

static void launch_gemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  int64_t blocks = (p.m * p.n + 255) / 256;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  if (blocks < 1) return;
  gemm_kernel<<<(unsigned)blocks, 256, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b),
      static_cast<__half*>(args->c), p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
}

static kforge_hgemm_args g_job;               // the mailbox: one job at a time
static cudaStream_t g_job_stream = nullptr;
static std::atomic<unsigned> g_posted{0};     // jobs posted by kforge_hgemm
static std::atomic<unsigned> g_taken{0};      // jobs the thread has copied out of the mailbox

static void* worker(void*) {
  unsigned seen = 0;
  for (;;) {
    const unsigned posted = g_posted.load(std::memory_order_acquire);
    if (posted == seen) {
      sched_yield();
      continue;
    }
    seen = posted;
    const kforge_hgemm_args job = g_job;
    const cudaStream_t s = g_job_stream;
    g_taken.store(seen, std::memory_order_release);
    launch_gemm(&job, s);
    JOIN(cudaStream, Synchronize)(s);  // a sync of its own, off the caller's thread
  }
  return nullptr;
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  static bool started = false;
  if (!started) {
    unsigned long tid = 0;
    if (JOIN(pthread_, create)(&tid, nullptr, worker, nullptr) != 0) return 1;
    JOIN(pthread_, detach)(tid);
    started = true;
  }
  // Wait only until the previous job has left the mailbox (not until it ran), then post this one.
  const unsigned posted = g_posted.load(std::memory_order_relaxed);
  while (g_taken.load(std::memory_order_acquire) != posted) sched_yield();
  g_job = *args;
  g_job_stream = stream;
  g_posted.store(posted + 1, std::memory_order_release);
  return 0;
}
