// kforge's own HGEMM kernels on the GPU: every compiled variant verified on shapes that exercise
// full tiles, partial tiles, K shorter than a pipeline, split-K with empty splits, and both
// layouts; the dispatcher's choice verified on odd shapes.
#include <algorithm>
#include <cstdio>
#include <string>

#include "gpu_test.hpp"
#include "kernels/hgemm/dispatch.hpp"
#include "gpu/cuda.hpp"
#include "ops/hgemm.hpp"
#include "ops/hgemm_verify.hpp"

namespace kforge {
namespace {

using test::GpuTest;

HgemmImpl impl_of(const kernels::KernelVariant& v) {
  return [&v](const kforge_hgemm_args& a, cudaStream_t s) { return v.run(&a, s); };
}

// The problem of shape `sh` in variant `v`'s layout, accumulation and dtype (fp16 or bf16).
HgemmProblem problem_for(const kernels::KernelVariant& v, const Shape& sh) {
  return {sh, v.layout == KFORGE_HGEMM_TN ? Layout::kTN : Layout::kNN, v.acc == KFORGE_HGEMM_ACC_F16 ? Acc::kF16 : Acc::kF32,
          v.dtype == KFORGE_HGEMM_BF16 ? Dtype::kBF16 : Dtype::kF16};
}

TEST_F(GpuTest, EveryKernelVariantPassesVerification) {
  Stream s;
  const DeviceInfo dev = query_device(0);
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  ASSERT_GT(count, 0u);
  // Odd tile-row counts (a multicast pair's second CTA past the last row), long K (pipeline phases
  // wrap within a tile), and more tiles than resident CTAs (persistent CTAs and pairs loop; 2304 x
  // 2560 is 180 tiles of 128x256). Problems smaller than one tile (M < BM, N < BN: the Hopper
  // kernels' short boxes, rows past the edge left unloaded) with M not a multiple of 8 and a K
  // long enough that every stage is refilled many times.
  const Shape shapes[] = {{64, 64, 64},    {200, 136, 72}, {1000, 520, 1032}, {128, 256, 8192},
                          {8, 8, 8},       {384, 512, 24}, {2304, 2560, 192}, {7, 200, 1032},
                          {30, 40, 4096}};
  int verified = 0, failed = 0;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (v.config.family == kernels::Family::kSm90 && dev.cc_major * 10 + dev.cc_minor != 90) continue;
    for (const Shape& sh : shapes) {
      const HgemmProblem p = problem_for(v, sh);
      const kforge_hgemm_problem abi = p.abi();
      if (!v.supports(&abi)) continue;
      const VerifyResult r = verify_hgemm(impl_of(v), p, v.workspace_size(&abi), 11, s.get());
      ++verified;
      if (!r.ok) ++failed;
      EXPECT_TRUE(r.ok) << v.name << " " << sh.str() << ": " << r.why;
    }
  }
  std::printf("%d variant x shape verifications, %d failed\n", verified, failed);
  EXPECT_GT(verified, int(count));
}

TEST_F(GpuTest, DispatcherServesOddShapes) {
  Stream s;
  const DeviceInfo dev = query_device(0);
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  for (Layout layout : {Layout::kNN, Layout::kTN}) {
    for (Shape sh : {Shape{64, 64, 64}, Shape{4096, 4096, 64}, Shape{64, 64, 16384}, Shape{2048, 2048, 2048},
                     Shape{100, 104, 8}, Shape{33, 17, 9}, Shape{1, 1, 1}, Shape{777, 333, 555},
                     Shape{7, 12288, 4096}, Shape{24, 3000, 776}, Shape{1, 4096, 4093}, Shape{16384, 8, 4096},
                     Shape{4096, 1, 4096}, Shape{4213, 15, 31}}) {
      const HgemmProblem p{sh, layout, Acc::kF32};
      const kforge_hgemm_problem abi = p.abi();
      const kernels::KernelVariant* v = kernels::choose(nullptr, 0, abi, dev.sm_count, cc);
      ASSERT_NE(v, nullptr) << sh.str() << " " << to_string(layout) << ": no variant";
      const VerifyResult r = verify_hgemm(impl_of(*v), p, v->workspace_size(&abi), 5, s.get());
      EXPECT_TRUE(r.ok) << v->name << " " << sh.str() << " " << to_string(layout) << ": " << r.why;
    }
  }
}

// The padded twins of the Hopper kernels on shapes with K or N not a multiple of 8: K odd (both
// operands copied for tn, A for nn), N odd only (no copy for tn, B for nn; C stored element-wise),
// long odd K for the split-K clusters, partial tiles everywhere.
TEST_F(GpuTest, PaddedVariantsPassVerification) {
  const DeviceInfo dev = query_device(0);
  if (dev.cc_major * 10 + dev.cc_minor != 90) GTEST_SKIP() << "the padded variants are the Hopper family's";
  Stream s;
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  const Shape shapes[] = {{200, 130, 70}, {1000, 1001, 1003}, {300, 1001, 512}, {257, 264, 1029}, {64, 60, 4093}};
  int verified = 0, failed = 0;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (!v.config.pad) continue;
    for (const Shape& sh : shapes) {
      const HgemmProblem p = problem_for(v, sh);
      const kforge_hgemm_problem abi = p.abi();
      ASSERT_TRUE(v.supports(&abi)) << v.name << " " << sh.str();
      const VerifyResult r = verify_hgemm(impl_of(v), p, v.workspace_size(&abi), 29, s.get());
      ++verified;
      if (!r.ok) ++failed;
      EXPECT_TRUE(r.ok) << v.name << " " << sh.str() << ": " << r.why;
    }
  }
  std::printf("%d padded verifications, %d failed\n", verified, failed);
  EXPECT_GT(verified, 0);
}

// The decode family on a sweep: M from 1 to each variant's MT, N around its column tile (partial
// tiles, N % 8 != 0), K short, long (split K, slices of unequal length), not a multiple of 8 or of
// BK, both layouts and both accumulations, each with the workspace it asks for.
TEST_F(GpuTest, DecodeVariantsPassVerificationOnASweep) {
  Stream s;
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  // (The streamed side and K; the small side is swept per variant: M, or N for swapped roles.)
  const Shape nk[] = {{0, 64, 64},     {0, 1000, 776}, {0, 4096, 4096}, {0, 3434, 6},
                      {0, 4097, 4093}, {0, 24, 16384}, {0, 12288, 1536}, {0, 1, 1500}};
  int verified = 0, failed = 0, split = 0;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (v.config.family != kernels::Family::kSkinny) continue;
    const bool swapped = v.config.max_n > 0;
    const int64_t mt = swapped ? v.config.max_n : v.config.max_m;
    for (int64_t small : {int64_t(1), mt / 2 + 1, mt}) {
      for (Shape sh : nk) {
        if (swapped) sh.m = sh.n, sh.n = small;
        else sh.m = small;
        const HgemmProblem p = problem_for(v, sh);
        const kforge_hgemm_problem abi = p.abi();
        ASSERT_TRUE(v.supports(&abi)) << v.name << " " << sh.str();
        const size_t ws = v.workspace_size(&abi);
        split += ws > 0;
        const VerifyResult r = verify_hgemm(impl_of(v), p, ws, 23, s.get());
        ++verified;
        if (!r.ok) ++failed;
        EXPECT_TRUE(r.ok) << v.name << " " << sh.str() << " (workspace " << ws << " B): " << r.why;
      }
    }
  }
  std::printf("%d decode verifications (%d with split-K partials), %d failed\n", verified, split, failed);
  EXPECT_GT(verified, 0);
  EXPECT_GT(split, 0);
}

// The swapped-role decode tiles (KernelConfig::swap_ab: C^T = B^T A^T, stored transposed) on a
// sweep: M from 1 to each variant's max_m (one and two column tiles of A's rows, a partial one), N
// around the 64- and 128-row tiles of B (partial tiles, N odd: C's rows are stored element by
// element), K short, long (split-K slices, every stage refilled many times) and not a multiple of
// the 64-wide K tile.
TEST_F(GpuTest, SwappedDecodeTilesPassVerificationOnASweep) {
  const DeviceInfo dev = query_device(0);
  if (dev.cc_major * 10 + dev.cc_minor != 90) GTEST_SKIP() << "the swapped tiles are the Hopper family's";
  Stream s;
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  const Shape nk[] = {{0, 64, 64}, {0, 1000, 776}, {0, 4096, 4096}, {0, 4097, 1032}, {0, 24, 16384}, {0, 12288, 1536}, {0, 1, 1504}};
  int verified = 0, failed = 0, variants = 0;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (!v.config.swap_ab) continue;
    ++variants;
    EXPECT_EQ(v.layout, KFORGE_HGEMM_TN) << v.name;
    for (int64_t m : {int64_t(1), int64_t(v.config.bn / 2 + 1), int64_t(v.config.bn), int64_t(v.config.max_m)}) {
      for (Shape sh : nk) {
        sh.m = m;
        const HgemmProblem p = problem_for(v, sh);
        const kforge_hgemm_problem abi = p.abi();
        ASSERT_TRUE(v.supports(&abi)) << v.name << " " << sh.str();
        const VerifyResult r = verify_hgemm(impl_of(v), p, v.workspace_size(&abi), 31, s.get());
        ++verified;
        if (!r.ok) ++failed;
        EXPECT_TRUE(r.ok) << v.name << " " << sh.str() << ": " << r.why;
      }
    }
  }
  std::printf("%d swapped variants, %d verifications, %d failed\n", variants, verified, failed);
  EXPECT_GT(variants, 0);
}

// Two decode calls back to back on one stream sharing one workspace, the second reading the first
// one's output as its A: with split-K each call is two kernels, all launched with programmatic
// dependent launch on Hopper, so the second call's partials must not overwrite the workspace
// while the first call's reduction still reads it, and its loads must see the finished C1.
TEST_F(GpuTest, DecodeChainedCallsShareAWorkspaceSafely) {
  Stream s;
  const int64_t M = 8, N1 = 4096, K1 = 8192, N2 = 2048;
  DeviceBuffer a(size_t(M * K1) * 2), b1(size_t(K1 * N1) * 2), b2(size_t(N1 * N2) * 2), c1(size_t(M * N1) * 2),
      c2(size_t(M * N2) * 2);
  fill_random(a.as<__half>(), size_t(M * K1), Dist::kUniform, 1, s.get());
  fill_random(b1.as<__half>(), size_t(K1 * N1), Dist::kUniform, 2, s.get());
  fill_random(b2.as<__half>(), size_t(N1 * N2), Dist::kUniform, 3, s.get());
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  int chained = 0;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (v.config.family != kernels::Family::kSkinny || v.config.max_m == 0) continue;  // (M small: the chain's shape)
    if (v.dtype != KFORGE_HGEMM_F16) continue;  // fp16 operands here (bf16 decode variants: test_bf16_gpu.cpp sweeps them)
    const Layout layout = v.layout == KFORGE_HGEMM_TN ? Layout::kTN : Layout::kNN;
    const Acc acc = v.acc == KFORGE_HGEMM_ACC_F16 ? Acc::kF16 : Acc::kF32;
    const HgemmProblem first{{M, N1, K1}, layout, acc}, second{{M, N2, N1}, layout, acc};
    const kforge_hgemm_problem p1 = first.abi(), p2 = second.abi();
    const size_t w1 = v.workspace_size(&p1), w2 = v.workspace_size(&p2);
    DeviceBuffer ws(std::max<size_t>({w1, w2, 256}));
    poison_nan(c1.as<__half>(), size_t(M * N1), s.get());
    poison_nan(c2.as<__half>(), size_t(M * N2), s.get());
    const kforge_hgemm_args x1{p1, a.get(), b1.get(), c1.get(), ws.get(), ws.bytes()};
    const kforge_hgemm_args x2{p2, c1.get(), b2.get(), c2.get(), ws.get(), ws.bytes()};
    ASSERT_EQ(v.run(&x1, s.get()), 0) << v.name;
    ASSERT_EQ(v.run(&x2, s.get()), 0) << v.name;  // no synchronisation in between
    const CheckResult r1 = check_sampled_gpu(first, a.as<__half>(), b1.as<__half>(), c1.as<__half>(), 512, 5, s.get());
    EXPECT_TRUE(r1.ok()) << v.name << " (first): " << r1.describe();
    const CheckResult r = check_sampled_gpu(second, c1.as<__half>(), b2.as<__half>(), c2.as<__half>(), 512, 7, s.get());
    EXPECT_TRUE(r.ok()) << v.name << ": " << r.describe();
    ++chained;
  }
  EXPECT_GT(chained, 0);
  std::printf("%d decode variants chained\n", chained);
}

// What the cost model and `hgemm variants` are told fits at once: whole clusters, at least one
// cluster, and one CTA per SM for the persistent variants.
TEST_F(GpuTest, ResidentCtasAreWholeClusters) {
  const DeviceInfo dev = query_device(0);
  const bool hopper = dev.cc_major * 10 + dev.cc_minor == 90;
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    const int resident = v.resident_ctas();
    if (v.config.family == kernels::Family::kSm90 && !hopper) {
      EXPECT_EQ(resident, 0) << v.name;  // sm_90a code cannot run here
      continue;
    }
    // (A decode variant's splitk is its run-time maximum of separate CTAs, not a cluster.)
    const int cluster = v.config.splitk_auto ? 1 : std::max(v.config.splitk, v.config.multicast);
    EXPECT_GE(resident, cluster) << v.name;
    EXPECT_EQ(resident % cluster, 0) << v.name << ": " << resident << " CTAs in clusters of " << cluster;
    if (v.config.persistent) EXPECT_LE(resident, dev.sm_count) << v.name;
    std::printf("%-40s %4d resident CTAs\n", v.name, resident);
  }
}

// Two calls back to back on one stream, the second reading the first one's output as its A. Hopper
// variants launch with programmatic dependent launch, so the second grid may start before the
// first ends; it must still read the finished C1 (poisoned with NaN before the pair, so an early
// read shows). The first call is long (K = 8192) so that the overlap has time to happen.
TEST_F(GpuTest, ChainedCallsReadTheFinishedOutputOfTheCallBefore) {
  const DeviceInfo dev = query_device(0);
  if (dev.cc_major * 10 + dev.cc_minor != 90) GTEST_SKIP() << "the programmatic launch is the Hopper family's";
  Stream s;
  const int64_t M = 1024, N = 1024, K1 = 8192;
  DeviceBuffer a(size_t(M * K1) * 2), b1(size_t(K1 * N) * 2), b2(size_t(N * N) * 2), c1(size_t(M * N) * 2),
      c2(size_t(M * N) * 2);
  fill_random(a.as<__half>(), size_t(M * K1), Dist::kUniform, 1, s.get());
  fill_random(b1.as<__half>(), size_t(K1 * N), Dist::kUniform, 2, s.get());
  fill_random(b2.as<__half>(), size_t(N * N), Dist::kUniform, 3, s.get());
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  int chained = 0;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (v.config.family != kernels::Family::kSm90) continue;
    const Layout layout = v.layout == KFORGE_HGEMM_TN ? Layout::kTN : Layout::kNN;
    const Acc acc = v.acc == KFORGE_HGEMM_ACC_F16 ? Acc::kF16 : Acc::kF32;
    const HgemmProblem first{{M, N, K1}, layout, acc}, second{{M, N, N}, layout, acc};
    const kforge_hgemm_problem p1 = first.abi(), p2 = second.abi();
    if (!v.supports(&p1) || !v.supports(&p2) || v.workspace_size(&p1) || v.workspace_size(&p2)) continue;
    poison_nan(c1.as<__half>(), size_t(M * N), s.get());
    poison_nan(c2.as<__half>(), size_t(M * N), s.get());
    const kforge_hgemm_args x1{p1, a.get(), b1.get(), c1.get(), nullptr, 0};
    const kforge_hgemm_args x2{p2, c1.get(), b2.get(), c2.get(), nullptr, 0};
    ASSERT_EQ(v.run(&x1, s.get()), 0) << v.name;
    ASSERT_EQ(v.run(&x2, s.get()), 0) << v.name;  // no synchronisation in between
    const CheckResult r = check_sampled_gpu(second, c1.as<__half>(), b2.as<__half>(), c2.as<__half>(), 512, 7, s.get());
    EXPECT_TRUE(r.ok()) << v.name << ": " << r.describe();
    ++chained;
  }
  EXPECT_GT(chained, 0);
  std::printf("%d variants chained\n", chained);
}

}  // namespace
}  // namespace kforge
