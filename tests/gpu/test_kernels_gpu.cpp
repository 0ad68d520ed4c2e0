// kforge's own HGEMM kernels on the GPU: every compiled variant verified on shapes that exercise
// full tiles, partial tiles, K shorter than a pipeline, split-K with empty splits, and both
// layouts; the dispatcher's choice verified on odd shapes.
#include <cstdio>
#include <string>

#include "gpu_test.hpp"
#include "kernels/hgemm/dispatch.hpp"
#include "ops/hgemm_verify.hpp"

namespace kforge {
namespace {

using test::GpuTest;

HgemmImpl impl_of(const kernels::KernelVariant& v) {
  return [&v](const kforge_hgemm_args& a, cudaStream_t s) { return v.run(&a, s); };
}

TEST_F(GpuTest, EveryKernelVariantPassesVerification) {
  Stream s;
  const DeviceInfo dev = query_device(0);
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  ASSERT_GT(count, 0u);
  // Odd tile-row counts (a multicast pair's second CTA past the last row), long K (pipeline phases
  // wrap within a tile), and more tiles than resident CTAs (persistent CTAs and pairs loop; 2304 x
  // 2560 is 180 tiles of 128x256).
  const Shape shapes[] = {{64, 64, 64},    {200, 136, 72}, {1000, 520, 1032}, {128, 256, 8192},
                          {8, 8, 8},       {384, 512, 24}, {2304, 2560, 192}};
  int verified = 0, failed = 0;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (v.config.family == kernels::Family::kSm90 && dev.cc_major * 10 + dev.cc_minor != 90) continue;
    for (const Shape& sh : shapes) {
      const HgemmProblem p{sh, v.layout == KFORGE_HGEMM_TN ? Layout::kTN : Layout::kNN,
                           v.acc == KFORGE_HGEMM_ACC_F16 ? Acc::kF16 : Acc::kF32};
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
                     Shape{100, 104, 8}, Shape{33, 17, 9}, Shape{1, 1, 1}, Shape{777, 333, 555}}) {
      const HgemmProblem p{sh, layout, Acc::kF32};
      const kforge_hgemm_problem abi = p.abi();
      const kernels::KernelVariant* v = kernels::choose(nullptr, 0, abi, dev.sm_count, cc);
      ASSERT_NE(v, nullptr) << sh.str() << " " << to_string(layout) << ": no variant";
      const VerifyResult r = verify_hgemm(impl_of(*v), p, v->workspace_size(&abi), 5, s.get());
      EXPECT_TRUE(r.ok) << v->name << " " << sh.str() << " " << to_string(layout) << ": " << r.why;
    }
  }
}

}  // namespace
}  // namespace kforge
