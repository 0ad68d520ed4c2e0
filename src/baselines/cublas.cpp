#include "baselines/cublas.hpp"

#include <library_types.h>

#include <cstring>

namespace kforge {

CublasHandles::CublasHandles(size_t workspace_bytes) : workspace_(workspace_bytes, "cuBLAS workspace") {
  KF_CUBLAS(cublasCreate(&blas_));
  KF_CUBLAS(cublasLtCreate(&lt_));
  // cublasGemmEx gets the same workspace, so that it never allocates (also inside graph capture).
  KF_CUBLAS(cublasSetWorkspace(blas_, workspace_.get(), workspace_.bytes()));
}

CublasHandles::~CublasHandles() {
  if (lt_) cublasLtDestroy(lt_);
  if (blas_) cublasDestroy(blas_);
}

namespace {
struct Scalars {
  float one_f = 1.f, zero_f = 0.f;
  __half one_h = __float2half(1.f), zero_h = __float2half(0.f);
  const void* alpha(Acc acc) const { return acc == Acc::kF32 ? (const void*)&one_f : (const void*)&one_h; }
  const void* beta(Acc acc) const { return acc == Acc::kF32 ? (const void*)&zero_f : (const void*)&zero_h; }
};
const Scalars kScalars;

// A, B and C: fp16 or bf16 (bf16 with fp32 compute only; cuBLAS has no bf16 accumulation).
cudaDataType_t elem_type(const HgemmProblem& p) {
  KF_CHECK(!p.bf16() || p.acc == Acc::kF32, "bf16 GEMMs accumulate in fp32 only (the problem asks for fp16 accumulation)");
  return p.bf16() ? CUDA_R_16BF : CUDA_R_16F;
}

int as_int(int64_t v, const char* what) {
  KF_CHECK(v > 0 && v <= INT32_MAX, "%s = %lld does not fit cuBLAS's 32-bit dimensions", what, (long long)v);
  return int(v);
}
}  // namespace

void cublas_gemm_ex(const CublasHandles& h, const HgemmProblem& p, const GemmOperands& ops, cudaStream_t s) {
  const Shape& sh = p.shape;
  const bool tn = p.layout == Layout::kTN;
  KF_CUBLAS(cublasSetStream(h.blas(), s));
  KF_CUBLAS(cublasGemmEx(h.blas(), tn ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, as_int(sh.n, "N"), as_int(sh.m, "M"),
                         as_int(sh.k, "K"), kScalars.alpha(p.acc), ops.b, elem_type(p), as_int(tn ? sh.k : sh.n, "ldb"),
                         ops.a, elem_type(p), as_int(sh.k, "lda"), kScalars.beta(p.acc), ops.c, elem_type(p),
                         as_int(sh.n, "ldc"), p.acc == Acc::kF32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_16F,
                         CUBLAS_GEMM_DEFAULT));
}

LtPlan::LtPlan(const CublasHandles& h, const HgemmProblem& p) : h_(h), p_(p) {
  const Shape& sh = p.shape;
  const bool tn = p.layout == Layout::kTN;
  const bool f32 = p.acc == Acc::kF32;
  KF_CUBLAS(cublasLtMatmulDescCreate(&op_, f32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_16F,
                                     f32 ? CUDA_R_32F : CUDA_R_16F));
  const cublasOperation_t transa = tn ? CUBLAS_OP_T : CUBLAS_OP_N, transb = CUBLAS_OP_N;
  KF_CUBLAS(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
  KF_CUBLAS(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
  // cuBLASLt's A is our B: N x K column-major (nn) or K x N column-major read transposed (tn).
  if (tn)
    KF_CUBLAS(cublasLtMatrixLayoutCreate(&a_, elem_type(p), uint64_t(sh.k), uint64_t(sh.n), sh.k));
  else
    KF_CUBLAS(cublasLtMatrixLayoutCreate(&a_, elem_type(p), uint64_t(sh.n), uint64_t(sh.k), sh.n));
  // cuBLASLt's B is our A: K x M column-major.
  KF_CUBLAS(cublasLtMatrixLayoutCreate(&b_, elem_type(p), uint64_t(sh.k), uint64_t(sh.m), sh.k));
  // C/D: N x M column-major = our row-major M x N.
  KF_CUBLAS(cublasLtMatrixLayoutCreate(&c_, elem_type(p), uint64_t(sh.n), uint64_t(sh.m), sh.n));
  KF_CUBLAS(cublasLtMatmulPreferenceCreate(&pref_));
  const uint64_t ws = h.workspace_bytes();  // the attribute is a uint64_t: pass exactly that type
  KF_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
}

LtPlan::~LtPlan() {
  if (pref_) cublasLtMatmulPreferenceDestroy(pref_);
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (op_) cublasLtMatmulDescDestroy(op_);
}

uint64_t LtPlan::preference_workspace_bytes() const {
  uint64_t ws = 0;
  size_t written = 0;
  KF_CUBLAS(cublasLtMatmulPreferenceGetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws,
                                                 &written));
  KF_CHECK(written == sizeof ws, "cuBLASLt wrote %zu bytes for the workspace preference", written);
  return ws;
}

std::vector<cublasLtMatmulHeuristicResult_t> LtPlan::heuristics(int requested) const {
  std::vector<cublasLtMatmulHeuristicResult_t> out(static_cast<size_t>(requested));
  int returned = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h_.lt(), op_, a_, b_, c_, c_, pref_, requested, out.data(),
                                                     &returned);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return {};
  KF_CUBLAS(st);
  out.resize(size_t(returned));
  std::erase_if(out, [&](const cublasLtMatmulHeuristicResult_t& r) {
    return r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > h_.workspace_bytes();
  });
  return out;
}

bool LtPlan::run(const cublasLtMatmulAlgo_t& algo, const GemmOperands& ops, cudaStream_t s) const {
  cublasStatus_t st = cublasLtMatmul(h_.lt(), op_, kScalars.alpha(p_.acc), ops.b, a_, ops.a, b_,
                                     kScalars.beta(p_.acc), ops.c, c_, ops.c, c_, &algo, h_.workspace(),
                                     h_.workspace_bytes(), s);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  KF_CUBLAS(st);
  return true;
}

std::string describe_algo(const cublasLtMatmulAlgo_t& algo, size_t workspace_bytes) {
  // Each attribute has its own integer width: ask for the size first, then read exactly that many bytes.
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr) -> long long {
    size_t size = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, nullptr, 0, &size) != CUBLAS_STATUS_SUCCESS || size == 0 ||
        size > 8)
      return -1;
    unsigned char buf[8] = {};
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, buf, size, &written) != CUBLAS_STATUS_SUCCESS) return -1;
    uint64_t v = 0;
    std::memcpy(&v, buf, written);  // little-endian: the low bytes hold the value
    return (long long)v;
  };
  return strf("algo=%lld tile=%lld stages=%lld splitk=%lld reduction=%lld swizzle=%lld custom=%lld ws=%zu",
              get(CUBLASLT_ALGO_CONFIG_ID), get(CUBLASLT_ALGO_CONFIG_TILE_ID), get(CUBLASLT_ALGO_CONFIG_STAGES_ID),
              get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM), get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
              get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION), workspace_bytes);
}

std::string cublas_version_string() {
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  return strf("%d.%d.%d (cuBLASLt %zu)", major, minor, patch, cublasLtGetVersion());
}

}  // namespace kforge
