// bf16 in kforge's HGEMM library (issue 18), on the GPU: every bf16 variant verified on a sweep of
// shapes (full and partial tiles, odd sizes, K shorter than a pipeline, long K, K or N not a
// multiple of 8 on the padded twins, the decode family's M or N from 1 to its MT), the
// dispatcher's bf16 choices on odd shapes (always a bf16 variant, and correct), and the cuBLASLt
// bf16 baseline within the bf16 tolerance while an fp16 reading of the same bits is not.
// scripts/gpu-check.sh bf16 runs these (ctest -R Bf16).
#include <cstdio>
#include <string>

#include "baselines/cublas.hpp"
#include "gpu/cuda.hpp"
#include "gpu_test.hpp"
#include "kernels/hgemm/dispatch.hpp"
#include "ops/hgemm.hpp"
#include "ops/hgemm_verify.hpp"

namespace kforge {
namespace {

using test::GpuTest;

HgemmImpl impl_of(const kernels::KernelVariant& v) {
  return [&v](const kforge_hgemm_args& a, cudaStream_t s) { return v.run(&a, s); };
}

HgemmProblem bf16_problem(const Shape& sh, kforge_hgemm_layout l) {
  return {sh, l == KFORGE_HGEMM_TN ? Layout::kTN : Layout::kNN, Acc::kF32, Dtype::kBF16};
}

bool on_hopper(const DeviceInfo& d) { return d.cc_major * 10 + d.cc_minor == 90; }

// Each bf16 variant on every shape of its family's sweep that it serves. The shapes come from the
// kernels' own limits: tiles of 64..256 rows and columns, 64-deep K tiles, pipelines of 4..8
// stages (K = 24 is shorter than one tile, 1032 than none), split-K clusters of up to 16 CTAs
// (64 x 64 x 16384: 16 slices of 16 tiles), persistent loops (2304 x 2560: 180 tiles of 128x256);
// odd M and N everywhere (partial tiles, element-wise C stores when N % 8 != 0).
TEST_F(GpuTest, Bf16EveryVariantPassesVerificationOnASweep) {
  Stream s;
  const DeviceInfo dev = query_device(0);
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  const Shape aligned[] = {{64, 64, 64},    {200, 136, 72},   {1000, 520, 1032}, {128, 256, 8192}, {8, 8, 8},
                           {384, 512, 24},  {2304, 2560, 192}, {64, 64, 16384},   {333, 1000, 4096}, {1, 4096, 64}};
  // K or N not a multiple of 8: the padded twins' shapes, and every other family's too.
  const Shape odd[] = {{200, 130, 70}, {1000, 1001, 1003}, {300, 1001, 512}, {257, 264, 1029}, {64, 60, 4093}, {17, 9, 3}};
  // The decode family: (streamed side, K); the small side is swept per variant.
  const Shape nk[] = {{0, 64, 64}, {0, 1000, 776}, {0, 4096, 4096}, {0, 3434, 6}, {0, 4097, 4093}, {0, 24, 16384}};
  int variants = 0, verified = 0, failed = 0;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (v.dtype != KFORGE_HGEMM_BF16) continue;
    ASSERT_EQ(v.acc, KFORGE_HGEMM_ACC_F32) << v.name << ": bf16 accumulates in fp32 only";
    if (v.config.family == kernels::Family::kSm90 && !on_hopper(dev)) continue;
    ++variants;
    int mine = 0;
    auto check = [&](const Shape& sh) {
      const HgemmProblem p = bf16_problem(sh, v.layout);
      const kforge_hgemm_problem abi = p.abi();
      if (!v.supports(&abi)) return;
      // The fp16 problem of the same shape is never this variant's.
      kforge_hgemm_problem f16 = abi;
      f16.dtype = KFORGE_HGEMM_F16;
      EXPECT_FALSE(v.supports(&f16)) << v.name << " accepts an fp16 problem";
      const size_t ws = v.workspace_size(&abi);
      const VerifyResult r = verify_hgemm(impl_of(v), p, ws, 41, s.get());
      ++verified, ++mine;
      if (!r.ok) ++failed;
      EXPECT_TRUE(r.ok) << v.name << " " << sh.str() << " (workspace " << ws << " B): " << r.why;
    };
    if (v.config.family == kernels::Family::kSkinny) {
      const bool swapped = v.config.max_n > 0;
      const int64_t mt = swapped ? v.config.max_n : v.config.max_m;
      for (int64_t small : {int64_t(1), mt / 2 + 1, mt})
        for (Shape sh : nk) {
          if (swapped) sh.m = sh.n, sh.n = small;
          else sh.m = small;
          check(sh);
        }
    } else {
      for (const Shape& sh : aligned) check(sh);
      for (const Shape& sh : odd) check(sh);
    }
    EXPECT_GT(mine, 0) << v.name << " served none of its sweep's shapes";
  }
  std::printf("%d bf16 variants, %d verifications, %d failed\n", variants, verified, failed);
  EXPECT_GT(variants, 0);
}

// The dispatcher on bf16 problems over a table with one fp16 entry (a bf16 problem of that shape
// may take the entry's bf16 twin, never its fp16 variant; elsewhere the cost model): always a
// bf16 variant, for aligned and unaligned pointers alike, and the result verified.
TEST_F(GpuTest, Bf16DispatcherPicksBf16VariantsOnOddShapes) {
  Stream s;
  const DeviceInfo dev = query_device(0);
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  const kernels::DeviceModel model = kernels::nominal_device_model(dev.sm_count, cc);
  // An fp16 entry for one of the shapes below (its sm_80 configuration has a bf16 twin).
  const kernels::DispatchEntry f16_entry[] = {{777, 333, 555, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, "sm80_tn_f32_64x64x32_w2x2_s4"}};
  const kernels::Dispatcher disp(f16_entry, 1);
  for (kforge_hgemm_layout l : {KFORGE_HGEMM_NN, KFORGE_HGEMM_TN}) {
    for (Shape sh : {Shape{64, 64, 64}, Shape{4096, 4096, 64}, Shape{64, 64, 16384}, Shape{2048, 2048, 2048},
                     Shape{100, 104, 8}, Shape{33, 17, 9}, Shape{1, 1, 1}, Shape{777, 333, 555}, Shape{7, 12288, 4096},
                     Shape{24, 3000, 776}, Shape{1, 4096, 4093}, Shape{16384, 8, 4096}, Shape{4213, 15, 31}}) {
      const HgemmProblem p = bf16_problem(sh, l);
      const kforge_hgemm_problem abi = p.abi();
      const kernels::Choice c = disp.resolve(abi, model, 0);
      ASSERT_NE(c.variant, nullptr) << sh.str() << ": no bf16 variant";
      EXPECT_EQ(c.variant->dtype, KFORGE_HGEMM_BF16) << c.variant->name << " for bf16 " << sh.str();
      ASSERT_NE(c.unaligned, nullptr) << sh.str();
      EXPECT_EQ(c.unaligned->dtype, KFORGE_HGEMM_BF16) << c.unaligned->name << " for bf16 " << sh.str();
      EXPECT_NE(c.how, kernels::Choice::How::kTable) << sh.str() << ": took the fp16 entry";
      if (sh == Shape{777, 333, 555} && l == KFORGE_HGEMM_TN) {
        EXPECT_EQ(c.how, kernels::Choice::How::kTableTwin);
        EXPECT_STREQ(c.variant->name, "sm80_tn_bf16_64x64x32_w2x2_s4");
      }
      const VerifyResult r = verify_hgemm(impl_of(*c.variant), p, c.workspace, 7, s.get());
      EXPECT_TRUE(r.ok) << c.variant->name << " " << sh.str() << ": " << r.why;
      if (c.unaligned != c.variant) {
        const VerifyResult ru = verify_hgemm(impl_of(*c.unaligned), p, c.workspace, 8, s.get());
        EXPECT_TRUE(ru.ok) << c.unaligned->name << " " << sh.str() << ": " << ru.why;
      }
    }
  }
}

// cuBLASLt in bf16 (the baseline) passes the bf16 checks; the same output bits read as fp16 are
// garbage and fail; on small integers with K = 64 (exact sums of at most 256: exact in bf16) its
// output is bit-exact, as the judge's exactness check expects of every bf16 candidate there.
TEST_F(GpuTest, Bf16CublasLtBaselinePassesTheBf16Checks) {
  Stream s;
  CublasHandles h;
  for (Layout layout : {Layout::kNN, Layout::kTN}) {
    const HgemmProblem p{{512, 384, 1024}, layout, Acc::kF32, Dtype::kBF16};
    const Shape& sh = p.shape;
    DeviceBuffer a(elems_a(sh) * 2), b(elems_b(sh) * 2), c(elems_c(sh) * 2);
    fill_operands(p, a.as<__half>(), b.as<__half>(), Dist::kNormal, 3, s.get());
    poison_nan(c.as<__half>(), elems_c(sh), s.get(), Dtype::kBF16);
    LtPlan lt(h, p);
    const auto algos = lt.heuristics(1);
    ASSERT_FALSE(algos.empty()) << "cuBLASLt offers no bf16 algorithm";
    const GemmOperands ops{a.as<__half>(), b.as<__half>(), c.as<__half>()};
    ASSERT_TRUE(lt.run(algos[0].algo, ops, s.get()));
    const CheckResult ok = check_full_gpu(p, ops.a, ops.b, ops.c, s.get());
    EXPECT_TRUE(ok.ok()) << "cuBLASLt bf16 " << to_string(layout) << ": " << ok.describe();
    EXPECT_LT(ok.worst_ratio, 1.0);
    HgemmProblem as_f16 = p;
    as_f16.dtype = Dtype::kF16;
    EXPECT_FALSE(check_full_gpu(as_f16, ops.a, ops.b, ops.c, s.get()).ok()) << "bf16 bits read as fp16 passed";

    // Small integers with K = 64: every sum is an exact integer of at most 256 in magnitude, exact in bf16.
    const HgemmProblem pi{{256, 256, 64}, layout, Acc::kF32, Dtype::kBF16};
    DeviceBuffer ai(elems_a(pi.shape) * 2), bi(elems_b(pi.shape) * 2), ci(elems_c(pi.shape) * 2);
    fill_operands(pi, ai.as<__half>(), bi.as<__half>(), Dist::kSmallInt, 5, s.get());
    LtPlan lti(h, pi);
    const auto ai_algos = lti.heuristics(1);
    ASSERT_FALSE(ai_algos.empty());
    const GemmOperands opi{ai.as<__half>(), bi.as<__half>(), ci.as<__half>()};
    ASSERT_TRUE(lti.run(ai_algos[0].algo, opi, s.get()));
    const CheckResult exact = check_full_gpu(pi, opi.a, opi.b, opi.c, s.get());
    EXPECT_TRUE(exact.ok() && exact.exact) << exact.describe();
  }
}

}  // namespace
}  // namespace kforge
