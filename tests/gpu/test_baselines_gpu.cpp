// cuBLAS and cuBLASLt baselines compute kforge's row-major HGEMM, in both layouts, and the
// 32 MiB workspace reaches cuBLASLt.
#include "baselines/cublas.hpp"
#include "gpu_test.hpp"

namespace kforge {
namespace {

using test::DeviceProblem;
using test::GpuTest;

const Shape kShapes[] = {{64, 64, 64}, {128, 256, 512}, {96, 160, 1000}, {1024, 512, 2048}};

TEST_F(GpuTest, EveryBaselineIsCorrectInBothLayouts) {
  Stream s;
  CublasHandles h;
  for (Dist dist : {Dist::kSmallInt, Dist::kNormal}) {
    for (Layout layout : {Layout::kNN, Layout::kTN}) {
      for (const Shape& shape : kShapes) {
        DeviceProblem dp({shape, layout, Acc::kF32}, dist, 17, s.get());
        const GemmOperands ops{dp.a.as<__half>(), dp.b.as<__half>(), dp.c.as<__half>()};
        const std::string what = shape.str() + " " + std::string(to_string(layout)) + " " + to_string(dist);

        cublas_gemm_ex(h, dp.p, ops, s.get());
        CheckResult r = check_full_gpu(dp.p, ops.a, ops.b, ops.c, s.get());
        EXPECT_TRUE(r.ok()) << "cublasGemmEx " << what << ": " << r.describe();
        if (dist == Dist::kSmallInt && shape.k <= 1024) EXPECT_TRUE(r.exact) << what;

        LtPlan plan(h, dp.p);
        auto algos = plan.heuristics(100);
        ASSERT_FALSE(algos.empty()) << what;
        for (const auto& a : algos) {
          poison_nan(dp.c.as<__half>(), elems_c(shape), s.get());
          if (!plan.run(a.algo, ops, s.get())) continue;
          r = check_full_gpu(dp.p, ops.a, ops.b, ops.c, s.get());
          EXPECT_TRUE(r.ok()) << "cuBLASLt " << describe_algo(a.algo, a.workspaceSize) << " " << what << ": "
                              << r.describe();
        }
      }
    }
  }
}

TEST_F(GpuTest, WorkspaceReachesCublasLt) {
  Stream s;
  CublasHandles h;  // 32 MiB
  EXPECT_EQ(h.workspace_bytes(), kBaselineWorkspaceBytes);
  // A split-K-friendly shape: small M*N, large K. cuBLASLt offers algorithms that use workspace
  // only if the preference told it that workspace exists.
  HgemmProblem p{{64, 64, 16384}, Layout::kTN, Acc::kF32};
  LtPlan plan(h, p);
  EXPECT_EQ(plan.preference_workspace_bytes(), uint64_t(32) << 20);
  size_t max_ws = 0;
  for (const auto& a : plan.heuristics(100)) max_ws = std::max(max_ws, a.workspaceSize);
  EXPECT_GT(max_ws, 0u) << "no algorithm asked for workspace: the cap did not reach cuBLASLt";
  EXPECT_LE(max_ws, kBaselineWorkspaceBytes);

  CublasHandles none(0);
  LtPlan plan0(none, p);
  EXPECT_EQ(plan0.preference_workspace_bytes(), 0u);
  for (const auto& a : plan0.heuristics(100)) EXPECT_EQ(a.workspaceSize, 0u);

  // The algorithms that use workspace compute the right thing with it.
  DeviceProblem dp(p, Dist::kNormal, 23, s.get());
  const GemmOperands ops{dp.a.as<__half>(), dp.b.as<__half>(), dp.c.as<__half>()};
  int ran = 0;
  for (const auto& a : plan.heuristics(100)) {
    if (a.workspaceSize == 0) continue;
    poison_nan(dp.c.as<__half>(), elems_c(p.shape), s.get());
    if (!plan.run(a.algo, ops, s.get())) continue;
    ++ran;
    CheckResult r = check_full_gpu(p, ops.a, ops.b, ops.c, s.get());
    EXPECT_TRUE(r.ok()) << describe_algo(a.algo, a.workspaceSize) << ": " << r.describe();
  }
  EXPECT_GT(ran, 0);
}

TEST_F(GpuTest, ToleranceModelRejectsFp16AccumulationOfAnFp32Problem) {
  // cuBLAS's own fp16-accumulate GEMM passes the fp16 model and fails the fp32 one on normal inputs
  // with a large K: the precision downgrade cannot hide.
  Stream s;
  CublasHandles h;
  HgemmProblem p32{{256, 256, 8192}, Layout::kNN, Acc::kF32};
  HgemmProblem p16 = p32;
  p16.acc = Acc::kF16;
  DeviceProblem dp(p32, Dist::kNormal, 31, s.get());
  const GemmOperands ops{dp.a.as<__half>(), dp.b.as<__half>(), dp.c.as<__half>()};
  cublas_gemm_ex(h, p16, ops, s.get());
  CheckResult as16 = check_full_gpu(p16, ops.a, ops.b, ops.c, s.get());
  CheckResult as32 = check_full_gpu(p32, ops.a, ops.b, ops.c, s.get());
  EXPECT_TRUE(as16.ok()) << as16.describe();
  EXPECT_FALSE(as32.ok()) << as32.describe();
  EXPECT_GT(as32.bad, as32.checked / 10) << as32.describe();
  // And fp32 accumulation passes the fp32 model with room to spare.
  cublas_gemm_ex(h, p32, ops, s.get());
  CheckResult good = check_full_gpu(p32, ops.a, ops.b, ops.c, s.get());
  EXPECT_TRUE(good.ok()) << good.describe();
  EXPECT_LT(good.worst_ratio, 0.75) << good.describe();
}

}  // namespace
}  // namespace kforge
