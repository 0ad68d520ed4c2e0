// Issue 18, off the tuned grid: the element-wise store paths for C rows that are not 16-byte
// aligned (N % 8 != 0), now coalesced pairs, on every sm_80 variant and on the padded Hopper twins
// over shapes whose rows alternate between 4-byte aligned and not (odd N), are 2-byte shifted
// (N % 8 == 2, 4, 6), with K not a multiple of 8 (guarded loads, re-pitched copies) and with tiny K
// (one partial K tile: the output-bound shapes the coalesced stores are for), and into a C whose
// base is only 2-byte aligned.
#include <cstdio>
#include <cstring>
#include <vector>

#include "gpu_test.hpp"
#include "kernels/hgemm/dispatch.hpp"
#include "ops/hgemm.hpp"
#include "ops/hgemm_verify.hpp"

namespace kforge {
namespace {

using test::GpuTest;

HgemmProblem fp16_problem(const kernels::KernelVariant& v, const Shape& sh) {
  return {sh, v.layout == KFORGE_HGEMM_TN ? Layout::kTN : Layout::kNN, v.acc == KFORGE_HGEMM_ACC_F16 ? Acc::kF16 : Acc::kF32};
}

// An fp16 NaN (what poison_nan writes), read from its bits.
bool is_nan_bits(__half h) {
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return (u & 0x7c00u) == 0x7c00u && (u & 0x03ffu) != 0;
}

bool fp16_variant(const kernels::KernelVariant& v) {
  // Every variant of a build without a dtype field is fp16; with one, only fp16 variants are used here.
  const std::string name = v.name;
  return name.find("bf16") == std::string::npos;
}

// fp16 variant `v` on `sh` with A, B and C at odd element offsets (2-byte aligned only), checked
// by sampling; the elements just before and after C keep their poison.
void verify_at_odd_offsets(const kernels::KernelVariant& v, const Shape& sh, cudaStream_t st) {
  const size_t na = size_t(sh.m * sh.k), nb = size_t(sh.k * sh.n), nc = size_t(sh.m * sh.n);
  DeviceBuffer a((na + 1) * 2), b((nb + 1) * 2), c((nc + 2) * 2);
  fill_random(a.as<__half>() + 1, na, Dist::kUniform, 5, st);
  fill_random(b.as<__half>() + 1, nb, Dist::kUniform, 6, st);
  const HgemmProblem p = fp16_problem(v, sh);
  poison_nan(c.as<__half>(), nc + 2, st);
  __half* c1 = c.as<__half>() + 1;
  const kforge_hgemm_args args{p.abi(), a.as<__half>() + 1, b.as<__half>() + 1, c1, nullptr, 0};
  ASSERT_EQ(v.run(&args, st), 0) << v.name << " " << sh.str();
  KF_CUDA(cudaStreamSynchronize(st));
  const CheckResult r = check_sampled_gpu(p, a.as<__half>() + 1, b.as<__half>() + 1, c1, 512, 9, st);
  EXPECT_TRUE(r.ok()) << v.name << " " << sh.str() << " at odd offsets: " << r.describe();
  const std::vector<__half> h = test::to_host(c.as<__half>(), nc + 2);
  EXPECT_TRUE(is_nan_bits(h.front()) && is_nan_bits(h.back())) << v.name << " " << sh.str() << ": wrote outside C";
}

// N odd (rows alternately 4-byte aligned), N % 8 == 2 and 6, K % 8 != 0 or tiny, partial tiles.
// Rows of K % 4 == 0 and N % 4 == 0 (382x388x100, 8-byte aligned: the sm_80 family's two-load
// chunks) and K % 2 == 0 (200x131x70, 130x66x200 nn B: four-load chunks) beside odd ones.
const Shape kUnaligned[] = {{200, 131, 70}, {97, 1001, 33}, {130, 66, 200}, {403, 7053, 4}, {89, 55, 1},
                            {65, 518, 129}, {257, 3521, 3}, {382, 388, 100}};

// Every fp16 variant that `pick` selects, verified on each shape of kUnaligned (seed `seed`).
void verify_unaligned_rows(bool (*pick)(const kernels::KernelVariant&), uint64_t seed, const char* what) {
  Stream s;
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  int verified = 0, failed = 0;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (!pick(v) || !fp16_variant(v)) continue;
    for (const Shape& sh : kUnaligned) {
      const HgemmProblem p = fp16_problem(v, sh);
      const kforge_hgemm_problem abi = p.abi();
      ASSERT_TRUE(v.supports(&abi)) << v.name << " " << sh.str();
      const VerifyResult r = verify_hgemm([&v](const kforge_hgemm_args& a, cudaStream_t st) { return v.run(&a, st); }, p,
                                          v.workspace_size(&abi), seed, s.get());
      ++verified;
      if (!r.ok) ++failed;
      EXPECT_TRUE(r.ok) << v.name << " " << sh.str() << ": " << r.why;
    }
  }
  std::printf("%d %s unaligned-row verifications, %d failed\n", verified, what, failed);
  EXPECT_GT(verified, 0);
}

TEST_F(GpuTest, Sm80VariantsStoreUnalignedRowsCorrectly) {
  verify_unaligned_rows([](const kernels::KernelVariant& v) { return v.config.family == kernels::Family::kSm80; }, 41,
                        "sm80");
}

// C whose base is only 2-byte aligned (a view at an odd element offset, as PyTorch may pass): the
// pair stores must fall back to 2-byte stores wherever the pair's address is not 4-byte aligned,
// also with N % 8 == 0 (16-byte chunks are refused for such a base). The elements just before and
// after C keep their poison.
TEST_F(GpuTest, Sm80VariantsStoreIntoAnOddOffsetC) {
  Stream s;
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  const Shape shapes[] = {{97, 1001, 33}, {130, 66, 200}, {70, 256, 64}};
  int verified = 0;
  for (const Shape& sh : shapes) {
    const size_t na = size_t(sh.m * sh.k), nb = size_t(sh.k * sh.n), nc = size_t(sh.m * sh.n);
    DeviceBuffer a(na * 2), b(nb * 2), c((nc + 2) * 2);
    fill_random(a.as<__half>(), na, Dist::kUniform, 5, s.get());
    fill_random(b.as<__half>(), nb, Dist::kUniform, 6, s.get());
    for (size_t i = 0; i < count; ++i) {
      const kernels::KernelVariant& v = all[i];
      if (v.config.family != kernels::Family::kSm80 || !fp16_variant(v)) continue;
      const HgemmProblem p = fp16_problem(v, sh);
      const kforge_hgemm_problem abi = p.abi();
      poison_nan(c.as<__half>(), nc + 2, s.get());
      __half* c1 = c.as<__half>() + 1;  // 2-byte aligned, never 4-byte aligned
      const kforge_hgemm_args args{abi, a.get(), b.get(), c1, nullptr, 0};
      ASSERT_EQ(v.run(&args, s.get()), 0) << v.name << " " << sh.str();
      KF_CUDA(cudaStreamSynchronize(s.get()));
      const CheckResult r = check_sampled_gpu(p, a.as<__half>(), b.as<__half>(), c1, 512, 9, s.get());
      EXPECT_TRUE(r.ok()) << v.name << " " << sh.str() << ": " << r.describe();
      const std::vector<__half> h = test::to_host(c.as<__half>(), nc + 2);
      EXPECT_TRUE(is_nan_bits(h.front()) && is_nan_bits(h.back())) << v.name << " " << sh.str() << ": wrote outside C";
      ++verified;
    }
  }
  std::printf("%d sm80 odd-offset-C verifications\n", verified);
  EXPECT_GT(verified, 0);
}

TEST_F(GpuTest, PaddedVariantsStoreUnalignedRowsCorrectly) {
  const DeviceInfo dev = query_device(0);
  if (dev.cc_major * 10 + dev.cc_minor != 90) GTEST_SKIP() << "the padded variants are the Hopper family's";
  verify_unaligned_rows([](const kernels::KernelVariant& v) { return v.config.pad; }, 43, "padded");
}

// The small-K family (smallk_gemm.cuh) on a sweep: the outer products (K <= 8) at every K from 1
// to 8, the whole-K variants (K <= 256) at K of 1 to 256 (odd, under and over a float4 and a fill
// group, and both ends); M and N of one element, under and over a tile, odd, and a shape of many
// tiles; fp16 and bf16, both layouts and accumulations; then A, B and C at odd element offsets
// (2-byte aligned only), the elements around C keeping their poison.
TEST_F(GpuTest, SmallKVariantsPassVerificationOnASweep) {
  Stream s;
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  const Shape mn[] = {{1, 1, 0}, {7, 200, 0}, {128, 128, 0}, {129, 129, 0}, {200, 131, 0}, {1000, 3521, 0}};
  int verified = 0, failed = 0, offset = 0;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (v.config.family != kernels::Family::kSmallK) continue;
    ASSERT_GT(v.config.max_k, 0) << v.name;
    const Layout l = v.layout == KFORGE_HGEMM_TN ? Layout::kTN : Layout::kNN;
    const Acc acc = v.acc == KFORGE_HGEMM_ACC_F16 ? Acc::kF16 : Acc::kF32;
    const Dtype dt = v.dtype == KFORGE_HGEMM_BF16 ? Dtype::kBF16 : Dtype::kF16;
    std::vector<int64_t> ks;
    if (v.config.whole_k)
      ks = {1, 3, 8, 9, 12, 16, 27, 31, 64, 100, 127, 161, 200, 255, v.config.max_k};
    else
      for (int64_t k = 1; k <= v.config.max_k; ++k) ks.push_back(k);
    for (const Shape& base : mn)
      for (const int64_t k : ks) {
        const HgemmProblem p{{base.m, base.n, k}, l, acc, dt};
        const kforge_hgemm_problem abi = p.abi();
        ASSERT_TRUE(v.supports(&abi)) << v.name << " " << p.shape.str();
        const VerifyResult r = verify_hgemm([&v](const kforge_hgemm_args& a, cudaStream_t st) { return v.run(&a, st); }, p,
                                            v.workspace_size(&abi), 61 + k, s.get());
        ++verified;
        if (!r.ok) ++failed;
        EXPECT_TRUE(r.ok) << v.name << " " << p.shape.str() << ": " << r.why;
      }
    const kforge_hgemm_problem over{64, 64, v.config.max_k + 1, v.layout, v.acc, v.dtype};
    EXPECT_FALSE(v.supports(&over)) << v.name << " takes K = " << over.k;
    if (!fp16_variant(v)) continue;
    const std::vector<Shape> odd = v.config.whole_k ? std::vector<Shape>{{97, 1001, 37}, {130, 66, 200}, {1, 257, 11}}
                                                    : std::vector<Shape>{{97, 1001, 3}, {130, 66, 8}, {1, 257, 1}};
    for (const Shape& sh : odd) {
      verify_at_odd_offsets(v, sh, s.get());
      ++offset;
    }
  }
  std::printf("%d small-K verifications (%d failed), %d at odd offsets\n", verified, failed, offset);
  EXPECT_GT(verified, 0);
  EXPECT_GT(offset, 0);
}

// The GEMV-like family (gemv_gemm.cuh) on a sweep: the small side at 1, 3 and 8 (its limit), the
// streamed side from one row to many CTAs' worth (1, 33, 1000, 10507: K split among a row's warps
// where the rows are few, G = 1 where they fill the device), K from 1 to 65536 (1, 7, 8, 161,
// 1500, 2048, 2049, 5176, and 65535 and 65536, whose few rows split K over a
// cluster of CTAs on sm_90: 16-byte loads at K % 8 == 0; else R = 4 element by element and R = 1
// the shifted 16-byte path, whose rows start anywhere in a vector);
// fp16 and bf16, both layouts, both accumulations (verify_hgemm also checks that a second run is
// bit-identical); then A, B and C at odd element offsets (2-byte aligned only: the element path
// even where K % 8 == 0), the elements around C keeping their poison; and a side of 9 refused.
TEST_F(GpuTest, GemvVariantsPassVerificationOnASweep) {
  Stream s;
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  const int64_t rows[] = {1, 33, 1000, 10507}, ks[] = {1, 7, 8, 161, 1500, 2048, 2049, 5176, 65535, 65536};
  int verified = 0, failed = 0, offset = 0, variants = 0;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (v.config.family != kernels::Family::kGemv) continue;
    ++variants;
    const bool swap = v.config.max_n > 0;
    const int64_t limit = swap ? v.config.max_n : v.config.max_m;
    ASSERT_GT(limit, 0) << v.name;
    const Layout l = v.layout == KFORGE_HGEMM_TN ? Layout::kTN : Layout::kNN;
    const Acc acc = v.acc == KFORGE_HGEMM_ACC_F16 ? Acc::kF16 : Acc::kF32;
    const Dtype dt = v.dtype == KFORGE_HGEMM_BF16 ? Dtype::kBF16 : Dtype::kF16;
    // X in registers (GemvX): K up to x_regs_k only, its rows and lanes' edges around 32 and 256.
    const int64_t kx = v.config.x_regs_k;
    // Rows past one round of resident warps (10507, 70001: their grid-stride steps and prefetch).
    const std::vector<int64_t> kxs{1, 7, 8, 31, 32, 33, 161, kx - 1, kx}, xrows{1, 33, 1000, 10507, 70001};
    for (const int64_t sm : {int64_t(1), int64_t(3), limit})  // (limit: 8, or 4)
      for (const int64_t r : kx > 0 ? xrows : std::vector<int64_t>(std::begin(rows), std::end(rows)))
        for (const int64_t k : kx > 0 ? kxs : std::vector<int64_t>(std::begin(ks), std::end(ks))) {
          if (r * k > (int64_t(1) << 24)) continue;  // the largest: 10507 x 1500, 33 x 65536
          const Shape sh = swap ? Shape{r, sm, k} : Shape{sm, r, k};
          const HgemmProblem p{sh, l, acc, dt};
          const kforge_hgemm_problem abi = p.abi();
          ASSERT_TRUE(v.supports(&abi)) << v.name << " " << sh.str();
          const VerifyResult res = verify_hgemm([&v](const kforge_hgemm_args& a, cudaStream_t st) { return v.run(&a, st); },
                                                p, v.workspace_size(&abi), 71 + k, s.get());
          ++verified;
          if (!res.ok) ++failed;
          EXPECT_TRUE(res.ok) << v.name << " " << sh.str() << ": " << res.why;
        }
    const kforge_hgemm_problem over{swap ? 64 : limit + 1, swap ? limit + 1 : 64, 64, v.layout, v.acc, v.dtype};
    EXPECT_FALSE(v.supports(&over)) << v.name << " takes a side of " << limit + 1;
    if (kx > 0) {
      const kforge_hgemm_problem deep{swap ? 64 : 1, swap ? 1 : 64, kx + 1, v.layout, v.acc, v.dtype};
      EXPECT_FALSE(v.supports(&deep)) << v.name << " takes K = " << kx + 1;
    }
    if (!fp16_variant(v)) continue;
    const int64_t ko = kx > 0 ? kx - 1 : 1500;
    const std::vector<Shape> odd = swap ? std::vector<Shape>{{1001, 3, 64}, {37, limit, ko}, {5, 1, 161}}
                                        : std::vector<Shape>{{3, 1001, 64}, {limit, 37, ko}, {1, 5, 161}};
    for (const Shape& sh : odd) {
      verify_at_odd_offsets(v, sh, s.get());
      ++offset;
    }
  }
  std::printf("%d GEMV verifications over %d variants (%d failed), %d at odd offsets\n", verified, variants, failed, offset);
  EXPECT_GE(variants, 9);
  EXPECT_GT(offset, 0);
}

}  // namespace
}  // namespace kforge
