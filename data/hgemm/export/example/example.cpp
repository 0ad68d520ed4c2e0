// Example: kforge_hgemm on a few shapes in both B layouts, each checked against a CPU fp64
// reference on sampled outputs (and the whole output for NaN/Inf). Prints the variant each
// problem ran and a final PASS or FAIL line; exits 1 on any failure.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kforge_hgemm.h"

namespace {

#define CHECK_CUDA(call)                                                                     \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::printf("FAIL\n");                                                                 \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

struct Case {
  int64_t m, n, k;
  kforge_hgemm_layout layout;
  kforge_hgemm_acc acc;
};

// One problem: random fp16 inputs in [-1, 1], C poisoned with NaN, run, then checked.
bool run_case(const Case& cs, cudaStream_t stream, std::mt19937_64& rng) {
  const int64_t m = cs.m, n = cs.n, k = cs.k;
  const bool tn = cs.layout == KFORGE_HGEMM_TN;
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<__half> a(size_t(m * k)), b(size_t(k * n)), c(size_t(m * n));
  for (auto& x : a) x = __float2half(uni(rng));
  for (auto& x : b) x = __float2half(uni(rng));

  void *da = nullptr, *db = nullptr, *dc = nullptr, *dw = nullptr;
  CHECK_CUDA(cudaMalloc(&da, a.size() * sizeof(__half)));
  CHECK_CUDA(cudaMalloc(&db, b.size() * sizeof(__half)));
  CHECK_CUDA(cudaMalloc(&dc, c.size() * sizeof(__half)));
  CHECK_CUDA(cudaMemcpyAsync(da, a.data(), a.size() * sizeof(__half), cudaMemcpyHostToDevice, stream));
  CHECK_CUDA(cudaMemcpyAsync(db, b.data(), b.size() * sizeof(__half), cudaMemcpyHostToDevice, stream));
  CHECK_CUDA(cudaMemsetAsync(dc, 0xff, c.size() * sizeof(__half), stream));  // NaN: unwritten outputs show

  kforge_hgemm_args args{};
  args.problem = {m, n, k, cs.layout, cs.acc};
  const char* variant = kforge_hgemm_variant_name(&args.problem);
  args.workspace_bytes = kforge_hgemm_workspace_size(&args.problem);
  if (args.workspace_bytes > 0) CHECK_CUDA(cudaMalloc(&dw, args.workspace_bytes));
  args.a = da;
  args.b = db;
  args.c = dc;
  args.workspace = dw;
  const int rc = kforge_hgemm(&args, stream);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(c.data(), dc, c.size() * sizeof(__half), cudaMemcpyDeviceToHost));
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  if (dw) cudaFree(dw);

  std::printf("%lldx%lldx%lld %s %s: %s", (long long)m, (long long)n, (long long)k, tn ? "tn" : "nn",
              cs.acc == KFORGE_HGEMM_ACC_F16 ? "f16" : "f32", variant ? variant : "(none)");
  if (rc != KFORGE_HGEMM_SUCCESS) {
    std::printf(": kforge_hgemm returned %d (%s)\n", rc, kforge_hgemm_error_string(rc));
    return false;
  }
  int64_t nonfinite = 0;
  for (const __half& x : c) nonfinite += !std::isfinite(__half2float(x));

  // Sampled elements (corners included) against an fp64 dot product of the same fp16 inputs.
  // Tolerance: fp16 rounding of the output plus, for fp16 accumulation, rounding of the partial
  // sums, both scaled by the magnitude of the products summed.
  std::uniform_int_distribution<int64_t> rows(0, m - 1), cols(0, n - 1);
  double worst = 0;
  int bad = 0;
  for (int s = 0; s < 256; ++s) {
    const int64_t i = s == 0 ? 0 : s == 1 ? m - 1 : rows(rng);
    const int64_t j = s == 0 ? 0 : s == 1 ? n - 1 : cols(rng);
    double ref = 0, mag = 0;
    for (int64_t p = 0; p < k; ++p) {
      const double x = __half2float(a[size_t(i * k + p)]);
      const double y = __half2float(tn ? b[size_t(j * k + p)] : b[size_t(p * n + j)]);
      ref += x * y;
      mag += std::fabs(x * y);
    }
    const double got = __half2float(c[size_t(i * n + j)]);
    const double tol = cs.acc == KFORGE_HGEMM_ACC_F16 ? 1e-2 + 2e-3 * mag : 1e-3 + 2e-3 * std::fabs(ref) + 1e-5 * mag;
    const double err = std::fabs(got - ref);
    if (!(err <= tol)) ++bad;  // NaN counts as bad
    if (err > worst || std::isnan(err)) worst = err;
  }
  const bool ok = bad == 0 && nonfinite == 0;
  std::printf(": max |err| %.3g over 256 samples, %d outside tolerance, %lld non-finite: %s\n", worst, bad,
              (long long)nonfinite, ok ? "ok" : "WRONG");
  return ok;
}

}  // namespace

int main() {
  std::printf("%s\n", kforge_hgemm_version());
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\nFAIL\n");
    return 1;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s (compute capability %d.%d, %d SMs)\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount);

  // Large and small, aligned and not (odd sizes take the sm_80 path), long K (split-K).
  const Case cases[] = {
      {4096, 4096, 4096, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32},
      {4096, 4096, 4096, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32},
      {1000, 520, 1032, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32},
      {1000, 520, 1032, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32},
      {128, 128, 8192, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32},
      {128, 128, 8192, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32},
      {333, 77, 129, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32},
      {333, 77, 129, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32},
      {512, 256, 1024, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F16},
      {512, 256, 1024, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F16},
  };
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937_64 rng(12345);
  int failed = 0;
  for (const Case& cs : cases) failed += !run_case(cs, stream, rng);

  // Invalid arguments are refused with a code, not a crash.
  kforge_hgemm_args bad{};
  bad.problem = {0, 16, 16, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32};
  const int rc = kforge_hgemm(&bad, stream);
  if (rc != KFORGE_HGEMM_ERROR_INVALID_ARGUMENT) {
    std::printf("invalid arguments: expected code %d, got %d: WRONG\n", KFORGE_HGEMM_ERROR_INVALID_ARGUMENT, rc);
    ++failed;
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
  std::printf("%s\n", failed ? "FAIL" : "PASS");
  return failed ? 1 : 0;
}
