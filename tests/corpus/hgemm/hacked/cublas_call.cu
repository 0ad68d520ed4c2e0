// HACKED — hack-table row "timer or library patching, calling the baseline itself".
// Hands the whole GEMM to cuBLAS (cublasGemmEx), i.e. the baseline it is compared with.
// Must be caught by the static scan: reason "forbidden_call".
// (Links only with -lcublas; the evaluator rejects it before compiling, so the manifest marks it
// "static_only".)
#include <cublas_v2.h>
#include <cuda_fp16.h>

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  static cublasHandle_t handle = nullptr;
  if (handle == nullptr && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetStream(handle, stream);
  const kforge_hgemm_problem& p = args->problem;
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major C = A * B is column-major C^T = B^T * A^T.
  const bool tn = p.layout == KFORGE_HGEMM_TN;
  const cublasStatus_t st = cublasGemmEx(
      handle, tn ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)p.n, (int)p.m, (int)p.k, &alpha,
      args->b, CUDA_R_16F, tn ? (int)p.k : (int)p.n, args->a, CUDA_R_16F, (int)p.k, &beta, args->c,
      CUDA_R_16F, (int)p.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return st == CUBLAS_STATUS_SUCCESS ? 0 : 1;
}
