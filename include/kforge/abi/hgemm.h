/* kforge HGEMM ABI, version 2.
 *
 *   C[M,N] = A[M,K] * B[K,N]
 *
 *   A: row-major M x K, leading dimension K.
 *   B: layout KFORGE_HGEMM_NN: row-major K x N, leading dimension N;
 *      layout KFORGE_HGEMM_TN: column-major K x N (stored as N rows of K), leading dimension K.
 *   C: row-major M x N, leading dimension N.
 *   Inputs and output share one element type, the problem's dtype: IEEE fp16
 *   (KFORGE_HGEMM_F16, 0, the default) or bfloat16 (KFORGE_HGEMM_BF16). The accumulation
 *   precision is part of the problem: an implementation declared KFORGE_HGEMM_ACC_F32 must
 *   accumulate in fp32 (or better). bf16 is defined with fp32 accumulation only.
 *
 * A CUDA candidate is one .cu file that defines kforge_hgemm() (and optionally
 * kforge_hgemm_workspace_size()) with C linkage. It must enqueue all its work on `stream`,
 * must not synchronise the device, and returns 0 on success or a non-zero code of its own.
 * The workspace, when the candidate asks for one, is device memory of at least the size it
 * requested, valid for the duration of the call, contents undefined.
 *
 * Versions. 2 added kforge_hgemm_problem.dtype as its last member. Source code keeps its meaning:
 * a problem zero-initialised or brace-initialised without it ({m, n, k, layout, acc}) is fp16,
 * as in version 1. Binaries do not: the problem grew from 32 to 40 bytes and the pointers of
 * kforge_hgemm_args moved, so code compiled against version 1 must be recompiled (evaluator
 * candidates always are; check KFORGE_HGEMM_ABI_VERSION where both may meet).
 */
#ifndef KFORGE_ABI_HGEMM_H_
#define KFORGE_ABI_HGEMM_H_

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KFORGE_HGEMM_ABI_VERSION 2

typedef enum kforge_hgemm_layout {
  KFORGE_HGEMM_NN = 0, /* B row-major K x N */
  KFORGE_HGEMM_TN = 1  /* B column-major K x N */
} kforge_hgemm_layout;

typedef enum kforge_hgemm_acc {
  KFORGE_HGEMM_ACC_F32 = 0, /* fp32 accumulation */
  KFORGE_HGEMM_ACC_F16 = 1  /* fp16 accumulation */
} kforge_hgemm_acc;

typedef enum kforge_hgemm_dtype {
  KFORGE_HGEMM_F16 = 0, /* IEEE binary16 inputs and output */
  KFORGE_HGEMM_BF16 = 1 /* bfloat16 inputs and output (fp32 accumulation only) */
} kforge_hgemm_dtype;

typedef struct kforge_hgemm_problem {
  int64_t m, n, k;
  kforge_hgemm_layout layout;
  kforge_hgemm_acc acc;
  kforge_hgemm_dtype dtype; /* since ABI version 2; 0 (fp16) when left out */
} kforge_hgemm_problem;

typedef struct kforge_hgemm_args {
  kforge_hgemm_problem problem;
  const void* a;         /* problem.dtype, see above */
  const void* b;         /* problem.dtype, see above */
  void* c;               /* problem.dtype, see above */
  void* workspace;       /* may be NULL when workspace_bytes is 0 */
  size_t workspace_bytes;
} kforge_hgemm_args;

/* The entry point every HGEMM candidate defines. */
int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream);

/* Optional: bytes of workspace the candidate needs for `problem` (0 when absent). */
size_t kforge_hgemm_workspace_size(const kforge_hgemm_problem* problem);

typedef int (*kforge_hgemm_fn)(const kforge_hgemm_args*, cudaStream_t);
typedef size_t (*kforge_hgemm_workspace_size_fn)(const kforge_hgemm_problem*);

#ifdef __cplusplus
}
#endif

#endif /* KFORGE_ABI_HGEMM_H_ */
