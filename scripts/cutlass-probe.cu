// One CUTLASS 3.x Hopper GEMM against cublasGemmEx on this GPU, for docs/perf-notes.md's choice of
// own PTX wrappers over CUTLASS (compile time and speed). Not part of kforge's build: see
// scripts/cutlass-probe.sh, which fetches CUTLASS's headers (the nvidia-cutlass wheel) and runs it.
//
// The kernel: fp16 A (row-major) x fp16 B (column-major, layout tn) -> fp16 C, fp32 accumulation,
// 128x256x64 tiles, 2x1 clusters, TMA warp-specialised cooperative mainloop and epilogue, stage
// count from the shared memory the epilogue leaves. Timing: offline (back-to-back calls, events
// around batches of ~20 ms, median of 7 after 3 warm-up calls), both libraries on the same inputs;
// outputs compared element by element.
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

using namespace cute;

namespace {

using Tile = Shape<_128, _256, _64>;
using Cluster = Shape<_2, _1, _1>;
using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
    float, float, cutlass::half_t, cutlass::layout::RowMajor, 8, cutlass::half_t, cutlass::layout::RowMajor, 8,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;
using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::half_t, cutlass::layout::RowMajor, 8,
    cutlass::half_t, cutlass::layout::ColumnMajor, 8, float, Tile, Cluster,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

#define CHECK(x)                                                                          \
  do {                                                                                    \
    if (!(x)) {                                                                           \
      std::fprintf(stderr, "cutlass-probe: %s failed at line %d\n", #x, __LINE__);         \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

template <class F>
double median_us_per_call(F&& call, cudaStream_t s) {
  for (int i = 0; i < 3; ++i) call();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, s);
  call();
  cudaEventRecord(b, s);
  cudaEventSynchronize(b);
  float one = 0;
  cudaEventElapsedTime(&one, a, b);
  const int calls = std::max(1, int(20.0 / std::max(one, 1e-3f)));
  std::vector<double> us;
  for (int r = 0; r < 7; ++r) {
    cudaEventRecord(a, s);
    for (int i = 0; i < calls; ++i) call();
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    us.push_back(1000.0 * ms / calls);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {8192, 4096, 2048};
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s) == cudaSuccess);
  cublasHandle_t h;
  CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS);
  std::printf("%-18s %12s %12s %10s %10s %10s\n", "shape (tn)", "cutlass us", "cublas us", "cutlass TF", "cublas TF",
              "max |diff|");
  for (int n : sizes) {
    if (n <= 0 || n % 8) {
      std::fprintf(stderr, "cutlass-probe: sizes must be positive multiples of 8 (got %d)\n", n);
      return 2;
    }
    const int M = n, N = n, K = n;
    std::vector<__half> ha(size_t(M) * K), hb(size_t(N) * K);
    std::mt19937 rng(n);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (auto& x : ha) x = __float2half(u(rng));
    for (auto& x : hb) x = __float2half(u(rng));
    __half *a, *b, *d1, *d2;
    CHECK(cudaMalloc(&a, ha.size() * 2) == cudaSuccess);
    CHECK(cudaMalloc(&b, hb.size() * 2) == cudaSuccess);
    CHECK(cudaMalloc(&d1, size_t(M) * N * 2) == cudaSuccess);
    CHECK(cudaMalloc(&d2, size_t(M) * N * 2) == cudaSuccess);
    cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice);

    using SA = typename Gemm::GemmKernel::StrideA;
    using SB = typename Gemm::GemmKernel::StrideB;
    using SC = typename Gemm::GemmKernel::StrideC;
    using SD = typename Gemm::GemmKernel::StrideD;
    auto* ca = reinterpret_cast<cutlass::half_t*>(a);
    auto* cb = reinterpret_cast<cutlass::half_t*>(b);
    auto* cd = reinterpret_cast<cutlass::half_t*>(d1);
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {M, N, K, 1},
                                  {ca, cutlass::make_cute_packed_stride(SA{}, make_shape(M, K, 1)), cb,
                                   cutlass::make_cute_packed_stride(SB{}, make_shape(N, K, 1))},
                                  {{}, cd, cutlass::make_cute_packed_stride(SC{}, make_shape(M, N, 1)), cd,
                                   cutlass::make_cute_packed_stride(SD{}, make_shape(M, N, 1))},
                                  hw};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    Gemm gemm;
    CHECK(gemm.can_implement(args) == cutlass::Status::kSuccess);
    void* ws = nullptr;
    const size_t ws_bytes = Gemm::get_workspace_size(args);
    if (ws_bytes) CHECK(cudaMalloc(&ws, ws_bytes) == cudaSuccess);
    CHECK(gemm.initialize(args, ws, s) == cutlass::Status::kSuccess);
    const double t_cutlass = median_us_per_call([&] { CHECK(gemm.run(s) == cutlass::Status::kSuccess); }, s);

    // cuBLAS, column-major view: C^T (N x M) = B^T (N x K, B column-major K x N read transposed) * A^T.
    const float one = 1.f, zero = 0.f;
    auto cublas = [&] {
      CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, b, CUDA_R_16F, K, a, CUDA_R_16F, K, &zero, d2,
                         CUDA_R_16F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    };
    const double t_cublas = median_us_per_call(cublas, s);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    std::vector<__half> o1(size_t(M) * N), o2(size_t(M) * N);
    cudaMemcpy(o1.data(), d1, o1.size() * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(o2.data(), d2, o2.size() * 2, cudaMemcpyDeviceToHost);
    double diff = 0;
    for (size_t i = 0; i < o1.size(); ++i)
      diff = std::max(diff, double(std::abs(__half2float(o1[i]) - __half2float(o2[i]))));
    const double flop = 2.0 * M * N * double(K);
    std::printf("%-18s %12.1f %12.1f %10.1f %10.1f %10.4f\n", (std::to_string(n) + "^3").c_str(), t_cutlass, t_cublas,
                flop / t_cutlass / 1e6, flop / t_cublas / 1e6, diff);
    // Both sum K products of numbers in [-1, 1] in fp32 and round to fp16: they agree to a few ulps.
    if (!(diff <= 0.05 * std::sqrt(double(K)) / 8)) {
      std::fprintf(stderr, "cutlass-probe: outputs differ by %.4f at %d^3\n", diff, n);
      return 1;
    }
    cudaFree(a);
    cudaFree(b);
    cudaFree(d1);
    cudaFree(d2);
    if (ws) cudaFree(ws);
  }
  return 0;
}
