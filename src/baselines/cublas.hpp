// The vendor baselines: cublasGemmEx, cuBLASLt heuristic top-1 and cuBLASLt auto-tuning, all
// computing kforge's row-major HGEMM (see include/kforge/abi/hgemm.h).
//
// Row-major C = A B is column-major C^T = B^T A^T, so cuBLAS sees m = N, n = M, its first operand
// is our B (transposed for layout tn) and its second our A; the layout names nn/tn are cuBLAS's
// own op names for that call.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

#include <string>
#include <vector>

#include "gpu/cuda.hpp"
#include "ops/hgemm.hpp"

namespace kforge {

// The workspace every cuBLAS/cuBLASLt baseline gets (CUDA-L2's heuristic baseline lost its
// workspace to an integer overflow; ours is read back from the preference object in the tests).
inline constexpr size_t kBaselineWorkspaceBytes = size_t(32) << 20;

struct GemmOperands {
  const __half* a = nullptr;
  const __half* b = nullptr;
  __half* c = nullptr;
};

class CublasHandles {
 public:
  explicit CublasHandles(size_t workspace_bytes = kBaselineWorkspaceBytes);
  ~CublasHandles();
  CublasHandles(const CublasHandles&) = delete;
  CublasHandles& operator=(const CublasHandles&) = delete;
  cublasHandle_t blas() const { return blas_; }
  cublasLtHandle_t lt() const { return lt_; }
  void* workspace() const { return workspace_.get(); }
  size_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  cublasHandle_t blas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  DeviceBuffer workspace_;
};

// cublasGemmEx with CUBLAS_GEMM_DEFAULT; compute type from the declared accumulation.
void cublas_gemm_ex(const CublasHandles& h, const HgemmProblem& p, const GemmOperands& ops, cudaStream_t s);

// One problem's cuBLASLt descriptors and preference (workspace cap = the handles' workspace).
class LtPlan {
 public:
  LtPlan(const CublasHandles& h, const HgemmProblem& p);
  ~LtPlan();
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;

  // Up to `requested` algorithms from the heuristic, best first; only those that reported success.
  std::vector<cublasLtMatmulHeuristicResult_t> heuristics(int requested) const;
  // Runs one algorithm. Returns false when cuBLASLt refuses it (not supported); throws otherwise.
  bool run(const cublasLtMatmulAlgo_t& algo, const GemmOperands& ops, cudaStream_t s) const;
  // The workspace cap as stored in the preference object (read back from cuBLASLt).
  uint64_t preference_workspace_bytes() const;

 private:
  const CublasHandles& h_;
  HgemmProblem p_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
};

// "algo=6 tile=... stages=... splitk=1 reduction=0 swizzle=0 custom=0 ws=..." for the records.
std::string describe_algo(const cublasLtMatmulAlgo_t& algo, size_t workspace_bytes);

// cuBLAS and cuBLASLt versions, e.g. "13.1.0".
std::string cublas_version_string();

}  // namespace kforge
