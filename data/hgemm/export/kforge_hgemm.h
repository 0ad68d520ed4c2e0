/* kforge_hgemm: kforge's half-precision GEMM kernels as a library (written by `kforge hgemm export`).
 *
 *   C[M,N] = A[M,K] * B[K,N], fp16 in and out with fp32 or fp16 accumulation, or bf16 in and out
 *   with fp32 accumulation (kforge_hgemm_problem.dtype; 0, fp16, when left out).
 *
 * Operand layouts, the problem and argument structs are those of kforge's HGEMM ABI
 * (kforge/abi/hgemm.h, included below). Every call picks a kernel from a dispatch table tuned
 * on the exporting machine (exact M, N, K, layout, accumulation and dtype); a problem off the table
 * takes the tuned winners of its nearest neighbours in (log M, log N, log K), the cost model
 * choosing among them, or the cost model's best variant where no neighbour's serves it:
 * sm_90a kernels (TMA, wgmma) on compute capability 9.0 where K and N are multiples of 8 and
 * the pointers 16-byte aligned, the sm_80 kernels (mma.sync) everywhere else from compute
 * capability 8.0 on. The device is the calling thread's current CUDA device.
 *
 * Threads: every function is thread-safe. Per-device state is set up once per device; each
 * host thread keeps its own memo of resolved problems and encoded TMA descriptors (up to 4,096
 * each, no lock on the per-call path). A thread whose first CUDA call is kforge_hgemm() gets the
 * current device's primary context made current (a context the caller made current is kept).
 *
 *   int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream);
 *       Enqueues the GEMM on `stream` (never synchronises); returns KFORGE_HGEMM_SUCCESS or one
 *       of the codes below. Thread-safe.
 *   size_t kforge_hgemm_workspace_size(const kforge_hgemm_problem* problem);
 *       Device bytes of workspace the chosen kernel needs for `problem` on the current device
 *       (0 for most problems, and 0 when the problem is invalid or no kernel serves it). As cheap
 *       as the call's own dispatch: it reads the same per-thread memo.
 */
#ifndef KFORGE_HGEMM_H_
#define KFORGE_HGEMM_H_

#include "kforge/abi/hgemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of kforge_hgemm(). */
enum {
  KFORGE_HGEMM_SUCCESS = 0,
  /* args, a, b or c is NULL; m, n or k < 1; an unknown layout, accumulation or dtype; bf16 with
   * fp16 accumulation; a pointer that is not 2-byte aligned; or a workspace smaller than
   * kforge_hgemm_workspace_size(). */
  KFORGE_HGEMM_ERROR_INVALID_ARGUMENT = 1,
  /* No kernel of this library serves the problem on the current device (compute capability
   * below 8.0). */
  KFORGE_HGEMM_ERROR_NO_KERNEL = 2,
  /* The current device or its attributes could not be queried (cudaGetDevice failed). */
  KFORGE_HGEMM_ERROR_CUDA = 3,
  /* Codes of the kernel itself: the problem is outside what it supports (90), its launch failed
   * (91: see cudaGetLastError), the driver could not encode a TMA descriptor (92). */
  KFORGE_HGEMM_ERROR_KERNEL_UNSUPPORTED = 90,
  KFORGE_HGEMM_ERROR_LAUNCH_FAILED = 91,
  KFORGE_HGEMM_ERROR_TENSOR_MAP = 92
};

/* The name of the kernel variant kforge_hgemm() runs for `problem` on the current device (with
 * 16-byte aligned pointers; an unaligned pointer sends a call to the sm_80 family), or NULL when
 * the problem is invalid or no kernel serves it. The string is static. */
const char* kforge_hgemm_variant_name(const kforge_hgemm_problem* problem);

/* The library's version: kforge version, ABI version and the dispatch table it carries. Static. */
const char* kforge_hgemm_version(void);

/* A static one-line description of a return code of kforge_hgemm(). */
const char* kforge_hgemm_error_string(int code);

#ifdef __cplusplus
}
#endif

#endif /* KFORGE_HGEMM_H_ */
