// The HGEMM op on the GPU: generators, the device reference against the CPU fp64 reference, checks.
#include <cmath>

#include "gpu_test.hpp"

namespace kforge {
namespace {

using test::DeviceProblem;
using test::GpuTest;
using test::to_host;

TEST_F(GpuTest, GeneratorsGiveTheirDistributionsNeverZeros) {
  Stream s;
  const size_t n = 1 << 20;
  DeviceBuffer buf(n * 2);
  for (Dist d : {Dist::kUniform, Dist::kNormal, Dist::kSmallInt}) {
    fill_random(buf.as<__half>(), n, d, 42, s.get());
    s.sync();
    auto h = to_host(buf.as<__half>(), n);
    double sum = 0, sq = 0;
    size_t zeros = 0;
    for (auto x : h) {
      const double v = __half2float(x);
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      sq += v * v;
      zeros += v == 0;
      if (d == Dist::kUniform) ASSERT_LE(std::fabs(v), 1.0);
      if (d == Dist::kSmallInt) ASSERT_TRUE(v == std::round(v) && std::fabs(v) <= 2);
    }
    const double mean = sum / n, var = sq / n - mean * mean;
    EXPECT_NEAR(mean, 0, 0.01) << to_string(d);
    if (d == Dist::kUniform) EXPECT_NEAR(var, 1.0 / 3, 0.01);
    if (d == Dist::kNormal) EXPECT_NEAR(var, 1.0, 0.02);
    if (d == Dist::kSmallInt) EXPECT_NEAR(double(zeros) / n, 0.2, 0.01);
    else EXPECT_LT(double(zeros) / n, 0.001) << to_string(d);
  }
  // Same seed, same values; another seed, other values.
  DeviceBuffer other(n * 2);
  fill_random(buf.as<__half>(), n, Dist::kNormal, 7, s.get());
  fill_random(other.as<__half>(), n, Dist::kNormal, 7, s.get());
  s.sync();
  auto x = to_host(buf.as<__half>(), n), y = to_host(other.as<__half>(), n);
  EXPECT_EQ(0, std::memcmp(x.data(), y.data(), n * 2));
  fill_random(other.as<__half>(), n, Dist::kNormal, 8, s.get());
  s.sync();
  y = to_host(other.as<__half>(), n);
  EXPECT_NE(0, std::memcmp(x.data(), y.data(), n * 2));
}

TEST_F(GpuTest, DeviceReferenceMatchesCpuFp64OnOddShapes) {
  Stream s;
  for (Layout layout : {Layout::kNN, Layout::kTN}) {
    for (Shape shape : {Shape{67, 45, 129}, Shape{1, 300, 17}, Shape{128, 64, 512}}) {
      DeviceProblem dp({shape, layout, Acc::kF32}, Dist::kUniform, 3, s.get());
      const size_t mn = elems_c(shape);
      DeviceBuffer ref(mn * 4), abs_sum(mn * 4);
      reference_gpu_f32(dp.p, dp.a.as<__half>(), dp.b.as<__half>(), ref.as<float>(), abs_sum.as<float>(), s.get());
      s.sync();
      std::vector<float> gpu(mn);
      KF_CUDA(cudaMemcpy(gpu.data(), ref.get(), mn * 4, cudaMemcpyDeviceToHost));
      auto cpu = reference_cpu_f64(dp.p, to_host(dp.a.as<__half>(), elems_a(shape)),
                                   to_host(dp.b.as<__half>(), elems_b(shape)));
      for (size_t i = 0; i < mn; ++i)
        ASSERT_NEAR(gpu[i], cpu[i], 1e-5 * (1 + std::fabs(cpu[i]))) << shape.str() << " element " << i;
    }
  }
}

TEST_F(GpuTest, FullAndSampledChecksSeeUnwrittenAndWrongElements) {
  Stream s;
  HgemmProblem p{{96, 80, 64}, Layout::kNN, Acc::kF32};
  DeviceProblem dp(p, Dist::kSmallInt, 5, s.get());
  // The right answer, written by the CPU reference (exact for small integers).
  auto cpu = reference_cpu_f64(p, to_host(dp.a.as<__half>(), elems_a(p.shape)), to_host(dp.b.as<__half>(), elems_b(p.shape)));
  std::vector<__half> right(cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) right[i] = __float2half(float(cpu[i]));
  KF_CUDA(cudaMemcpy(dp.c.get(), right.data(), right.size() * 2, cudaMemcpyHostToDevice));
  CheckResult full = check_full_gpu(p, dp.a.as<__half>(), dp.b.as<__half>(), dp.c.as<__half>(), s.get());
  EXPECT_TRUE(full.ok()) << full.describe();
  EXPECT_TRUE(full.exact);
  CheckResult sampled = check_sampled_gpu(p, dp.a.as<__half>(), dp.b.as<__half>(), dp.c.as<__half>(), 64, 9, s.get());
  EXPECT_TRUE(sampled.ok()) << sampled.describe();
  EXPECT_TRUE(sampled.exact);

  // One element off by one; the last element never written.
  auto wrong = right;
  wrong[3 * 80 + 7] = __float2half(float(cpu[3 * 80 + 7]) + 1.0f);
  wrong.back() = __ushort_as_half(0x7E00);
  KF_CUDA(cudaMemcpy(dp.c.get(), wrong.data(), wrong.size() * 2, cudaMemcpyHostToDevice));
  full = check_full_gpu(p, dp.a.as<__half>(), dp.b.as<__half>(), dp.c.as<__half>(), s.get());
  EXPECT_FALSE(full.ok());
  EXPECT_EQ(full.bad, 2);
  EXPECT_EQ(full.nonfinite, 1);
  EXPECT_EQ(full.worst_row, 95);  // the NaN is the worst
  EXPECT_EQ(full.worst_col, 79);
  sampled = check_sampled_gpu(p, dp.a.as<__half>(), dp.b.as<__half>(), dp.c.as<__half>(), 64, 9, s.get());
  EXPECT_FALSE(sampled.ok());  // the NaN scan covers every element
  EXPECT_EQ(sampled.nonfinite, 1);
}

}  // namespace
}  // namespace kforge
