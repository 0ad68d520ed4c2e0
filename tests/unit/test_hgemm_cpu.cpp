// The HGEMM op's host side: counts, the fp64 reference and the tolerance model.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/hgemm.hpp"

namespace kforge {
namespace {

std::vector<__half> random_halves(size_t n, uint64_t seed, bool ints) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<int> d(-2, 2);
  std::vector<__half> v(n);
  for (auto& x : v) x = __float2half(ints ? float(d(rng)) : u(rng));
  return v;
}

TEST(HgemmOp, CountsFlopsAndBytes) {
  Shape s{64, 128, 256};
  EXPECT_DOUBLE_EQ(hgemm_flops(s), 2.0 * 64 * 128 * 256);
  EXPECT_DOUBLE_EQ(hgemm_bytes(s), 2.0 * (64 * 256 + 256 * 128 + 64 * 128));
  EXPECT_EQ(elems_a(s), 64u * 256u);
  EXPECT_EQ(elems_b(s), 256u * 128u);
  EXPECT_EQ(elems_c(s), 64u * 128u);
}

TEST(HgemmOp, ToleranceModel) {
  // fp32 accumulation: half an fp16 ulp of the result plus 2^-16 of sum |a b|.
  EXPECT_NEAR(hgemm_tolerance(2048.0, 0.0, Acc::kF32), 1.0 + 1.0 / 16777216.0, 1e-12);
  EXPECT_NEAR(hgemm_tolerance(-2048.0, 65536.0, Acc::kF32), 2.0 + 1.0 / 16777216.0, 1e-12);
  EXPECT_GT(hgemm_tolerance(0.0, 1000.0, Acc::kF16), 100 * hgemm_tolerance(0.0, 1000.0, Acc::kF32));
}

TEST(HgemmOp, CpuReferenceBothLayouts) {
  // A 2x3 times B 3x2, by hand.
  HgemmProblem p{{2, 2, 3}, Layout::kNN, Acc::kF32};
  auto h = [](std::initializer_list<float> xs) {
    std::vector<__half> v;
    for (float x : xs) v.push_back(__float2half(x));
    return v;
  };
  auto a = h({1, 2, 3, 4, 5, 6});
  auto b_nn = h({1, 2, 3, 4, 5, 6});  // rows of B (K x N)
  auto ref = reference_cpu_f64(p, a, b_nn);
  EXPECT_EQ(ref, (std::vector<double>{22, 28, 49, 64}));
  p.layout = Layout::kTN;
  auto b_tn = h({1, 3, 5, 2, 4, 6});  // columns of the same B
  EXPECT_EQ(reference_cpu_f64(p, a, b_tn), ref);
}

TEST(HgemmOp, CheckAcceptsExactRejectsWrongAndNan) {
  for (Layout layout : {Layout::kNN, Layout::kTN}) {
    HgemmProblem p{{13, 7, 33}, layout, Acc::kF32};
    auto a = random_halves(elems_a(p.shape), 1, true);
    auto b = random_halves(elems_b(p.shape), 2, true);
    auto ref = reference_cpu_f64(p, a, b);
    std::vector<__half> c(ref.size());
    for (size_t i = 0; i < c.size(); ++i) c[i] = __float2half(float(ref[i]));
    CheckResult ok = check_cpu(p, a, b, c);
    EXPECT_TRUE(ok.ok()) << ok.describe();
    EXPECT_TRUE(ok.exact);
    EXPECT_EQ(ok.checked, 13 * 7);

    auto wrong = c;
    wrong[5] = __float2half(__half2float(wrong[5]) + 1.0f);  // off by one on integers: far outside
    CheckResult bad = check_cpu(p, a, b, wrong);
    EXPECT_FALSE(bad.ok());
    EXPECT_EQ(bad.bad, 1);
    EXPECT_EQ(bad.worst_row, 0);
    EXPECT_EQ(bad.worst_col, 5);

    auto unwritten = c;
    unwritten[90] = __ushort_as_half(0x7E00);
    CheckResult nan = check_cpu(p, a, b, unwritten);
    EXPECT_FALSE(nan.ok());
    EXPECT_EQ(nan.nonfinite, 1);
    EXPECT_NE(nan.describe().find("NaN"), std::string::npos);
  }
}

TEST(HgemmOp, Fp16RoundingOfTheOutputIsWithinTolerance) {
  HgemmProblem p{{16, 16, 512}, Layout::kNN, Acc::kF32};
  auto a = random_halves(elems_a(p.shape), 3, false);
  auto b = random_halves(elems_b(p.shape), 4, false);
  auto ref = reference_cpu_f64(p, a, b);
  std::vector<__half> c(ref.size());
  for (size_t i = 0; i < c.size(); ++i) c[i] = __float2half_rn(float(ref[i]));
  CheckResult r = check_cpu(p, a, b, c);
  EXPECT_TRUE(r.ok()) << r.describe();
  EXPECT_LE(r.worst_ratio, 1.0);
}

}  // namespace
}  // namespace kforge
