// BAD INPUT — does not compile (a missing semicolon and an unbalanced brace).
// Expected verdict: rejected with "compile_error"; the compiler's log is kept for the author.
#include <cuda_fp16.h>

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem
  if (p.m == 0) {
    return 0;
  return 1;
}
