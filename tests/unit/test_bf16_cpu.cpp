// bf16 in kforge's HGEMM library (issue 18), without a GPU: the ABI's default, the bf16
// tolerance and its derivation's numbers, the CPU reference on bf16 bits, the variant table's bf16
// subset, the dispatcher never choosing a variant of another dtype (and borrowing the fp16 table's
// configurations as bf16 twins), the dispatch table's dtype
// field (absent = fp16), the per-dtype fingerprints, the results CSV's dtype column and the CLI's
// refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <string>

#include "core/error.hpp"
#include "kernels/hgemm/dispatch.hpp"
#include "ops/hgemm.hpp"
#include "ops/hgemm_table.hpp"
#include "report/results.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

// bf16 bits of x, rounded to nearest even (the conversion the kernels' epilogues make).
__half bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  const uint16_t b = uint16_t(u >> 16);
  __half h;
  std::memcpy(&h, &b, sizeof h);
  return h;
}

TEST(Bf16, AbiDefaultsToFp16) {
  // A problem written before the dtype field (brace-initialised without it) is fp16.
  const kforge_hgemm_problem p{64, 64, 64, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32};
  EXPECT_EQ(p.dtype, KFORGE_HGEMM_F16);
  EXPECT_EQ(KFORGE_HGEMM_F16, 0);
  EXPECT_EQ(KFORGE_HGEMM_ABI_VERSION, 2);
  EXPECT_EQ(HgemmProblem{}.abi().dtype, KFORGE_HGEMM_F16);
  const HgemmProblem b{{8, 8, 8}, Layout::kNN, Acc::kF32, Dtype::kBF16};
  EXPECT_EQ(b.abi().dtype, KFORGE_HGEMM_BF16);
  EXPECT_EQ(parse_dtype("bf16"), Dtype::kBF16);
  EXPECT_EQ(parse_dtype("f16"), Dtype::kF16);
  EXPECT_THROW(parse_dtype("fp8"), Error);
}

TEST(Bf16, ToleranceIsHalfAnUlpOfBf16PlusTheFp32AccumulationTerm) {
  // 8 significand bits: u = 2^-8 of |ref|; accumulation 2^-16 of sum |a b|; subnormal 2^-133.
  EXPECT_DOUBLE_EQ(hgemm_tolerance(256.0, 0.0, Acc::kF32, Dtype::kBF16), 1.0 + 0x1p-133);
  EXPECT_DOUBLE_EQ(hgemm_tolerance(-256.0, 65536.0, Acc::kF32, Dtype::kBF16), 2.0 + 0x1p-133);
  // fp16's own bound is unchanged, and 8x tighter on the rounding term.
  EXPECT_NEAR(hgemm_tolerance(2048.0, 0.0, Acc::kF32), 1.0 + 1.0 / 16777216.0, 1e-12);
  EXPECT_DOUBLE_EQ(hgemm_tolerance(1.0, 0.0, Acc::kF32, Dtype::kBF16) / hgemm_tolerance(1.0, 0.0, Acc::kF32), 8.0 / (1.0 + 2048.0 / 16777216.0));
  // The bound admits exactly what one rounding to bf16 can do: every value in [1, 2) is within
  // half an ulp (2^-8 relative at 1) of its bf16 rounding, and 1 + 2^-7 (one ulp off) is not.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(1.f, 2.f);
  for (int i = 0; i < 10000; ++i) {
    const float x = u(rng);
    const double c = element_value(bf16_bits(x), Dtype::kBF16);
    EXPECT_LE(std::fabs(c - x), hgemm_tolerance(x, 0.0, Acc::kF32, Dtype::kBF16)) << x;
  }
  EXPECT_GT(std::fabs(1.0 + 0x1p-7 - 1.0), hgemm_tolerance(1.0, 0.0, Acc::kF32, Dtype::kBF16));
}

TEST(Bf16, CpuCheckReadsBf16Bits) {
  const HgemmProblem p{{9, 7, 40}, Layout::kTN, Acc::kF32, Dtype::kBF16};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<__half> a(elems_a(p.shape)), b(elems_b(p.shape));
  for (auto& x : a) x = bf16_bits(u(rng));
  for (auto& x : b) x = bf16_bits(u(rng));
  const std::vector<double> ref = reference_cpu_f64(p, a, b);
  std::vector<__half> c(ref.size());
  for (size_t i = 0; i < c.size(); ++i) c[i] = bf16_bits(float(ref[i]));
  const CheckResult ok = check_cpu(p, a, b, c);
  EXPECT_TRUE(ok.ok()) << ok.describe();
  EXPECT_LE(ok.worst_ratio, 1.0);
  // The same bits as an fp16 problem: wrong values, rejected.
  HgemmProblem as_f16 = p;
  as_f16.dtype = Dtype::kF16;
  EXPECT_FALSE(check_cpu(as_f16, a, b, c).ok());
  // An output rounded coarser than bf16 (the last two of its 7 fraction bits dropped) fails.
  std::vector<__half> coarse = c;
  int off = 0;
  for (size_t i = 0; i < coarse.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, &coarse[i], 2);
    const uint16_t dropped = uint16_t(bits & ~3u);
    off += dropped != bits;
    std::memcpy(&coarse[i], &dropped, 2);
  }
  ASSERT_GT(off, 0);
  EXPECT_FALSE(check_cpu(p, a, b, coarse).ok());
}

TEST(Bf16, VariantTableHasABf16SubsetOfEveryFamily) {
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  std::set<int> families;
  int bf16 = 0, f16 = 0;
  bool fp16_first = true;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (v.dtype == KFORGE_HGEMM_BF16) {
      ++bf16;
      families.insert(int(v.config.family));
      EXPECT_EQ(v.acc, KFORGE_HGEMM_ACC_F32) << v.name;
      EXPECT_NE(std::string(v.name).find("_bf16_"), std::string::npos) << v.name;
      // supports() checks the dtype both ways.
      kforge_hgemm_problem p{64, 64, 64, v.layout, v.acc, KFORGE_HGEMM_F16};
      EXPECT_FALSE(v.supports(&p)) << v.name;
      if (v.config.pad) {
        const kernels::KernelVariant* twin = nullptr;
        for (size_t j = 0; j < count; ++j)
          if (!all[j].config.pad && kernels::padded_twin(all[j]) == &v) twin = &all[j];
        ASSERT_NE(twin, nullptr) << v.name;
        EXPECT_EQ(twin->dtype, KFORGE_HGEMM_BF16) << v.name;
      }
    } else {
      if (bf16 > 0) fp16_first = false;
      ++f16;
      kforge_hgemm_problem p{64, 64, 64, v.layout, v.acc, KFORGE_HGEMM_BF16};
      EXPECT_FALSE(v.supports(&p)) << v.name;
    }
  }
  EXPECT_TRUE(fp16_first) << "the fp16 variants keep their places ahead of the bf16 ones";
  EXPECT_EQ(families, (std::set<int>{int(kernels::Family::kSm90), int(kernels::Family::kSm80), int(kernels::Family::kSkinny),
                                     int(kernels::Family::kSmallK), int(kernels::Family::kGemv)}));
  // A subset: fewer bf16 variants than fp16 ones with fp32 accumulation.
  EXPECT_GT(bf16, 0);
  EXPECT_LT(bf16, f16);
}

TEST(Bf16, DispatcherChoosesOnlyBf16VariantsForBf16Problems) {
  // An fp16 table with entries at some of the shapes asked below: never taken for bf16.
  const DispatchTable t = DispatchTable::load(std::string(KFORGE_SOURCE_DIR) + "/data/hgemm/dispatch-table.json");
  const kernels::Dispatcher disp(t.data(), t.size());
  int asked = 0;
  for (int cc : {90, 80})
    for (int64_t m : {1, 7, 16, 33, 64, 100, 777, 4096, 16384})
      for (int64_t n : {1, 8, 60, 1000, 4096, 12288})
        for (int64_t k : {3, 64, 1003, 4096, 16384})
          for (kforge_hgemm_layout l : {KFORGE_HGEMM_NN, KFORGE_HGEMM_TN}) {
            const kforge_hgemm_problem p{m, n, k, l, KFORGE_HGEMM_ACC_F32, KFORGE_HGEMM_BF16};
            const kernels::Choice c = disp.resolve_cached(p, kernels::nominal_device_model(132, cc), -1);
            ASSERT_NE(c.variant, nullptr) << m << "x" << n << "x" << k << " cc " << cc;
            EXPECT_EQ(c.variant->dtype, KFORGE_HGEMM_BF16) << c.variant->name;
            EXPECT_NE(c.how, kernels::Choice::How::kTable) << c.variant->name;
            ASSERT_NE(c.unaligned, nullptr);
            EXPECT_EQ(c.unaligned->dtype, KFORGE_HGEMM_BF16) << c.unaligned->name;
            EXPECT_TRUE(kernels::runs_on(*c.variant, cc));
            // The fp16 problem of the same shape still gets fp16 (and its tuned entry where there is one).
            kforge_hgemm_problem f = p;
            f.dtype = KFORGE_HGEMM_F16;
            const kernels::Choice cf = disp.resolve_cached(f, kernels::nominal_device_model(132, cc), -1);
            ASSERT_NE(cf.variant, nullptr);
            EXPECT_EQ(cf.variant->dtype, KFORGE_HGEMM_F16) << cf.variant->name;
            ++asked;
          }
  EXPECT_GT(asked, 1000);
  // A bf16 acc-f16 problem has no variant at all.
  const kforge_hgemm_problem bad{64, 64, 64, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F16, KFORGE_HGEMM_BF16};
  EXPECT_EQ(kernels::choose(nullptr, 0, bad, 132, 90), nullptr);
}

// Without bf16 entries a bf16 problem takes the fp16 entry's configuration in bf16 where this build
// has it (the same KernelConfig and layout), for its exact shape and as a neighbour; a bf16 entry of
// the same shape comes first.
TEST(Bf16, Fp16EntriesProposeTheirBf16Twins) {
  const DispatchTable t = DispatchTable::load(std::string(KFORGE_SOURCE_DIR) + "/data/hgemm/dispatch-table.json");
  const kernels::Dispatcher disp(t.data(), t.size());
  const kernels::DeviceModel h = kernels::nominal_device_model(132, 90);
  // Counted on the 1,000-shape grid's entries: the bf16 subset was chosen by their wins (the
  // decode and fill training sets' winners, tuned later, include split-K tiles it lacks).
  const auto on_grid = [](int64_t v) {
    for (int64_t g : {64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384})
      if (v == g) return true;
    return false;
  };
  int twins = 0, without = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const kernels::DispatchEntry& e = t.data()[i];
    if (e.acc != KFORGE_HGEMM_ACC_F32 || e.dtype != KFORGE_HGEMM_F16) continue;
    const bool grid = on_grid(e.m) && on_grid(e.n) && on_grid(e.k);
    const kernels::KernelVariant* v = kernels::find_variant(e.variant);
    ASSERT_NE(v, nullptr);
    const kernels::KernelVariant* b = kernels::dtype_twin(*v, KFORGE_HGEMM_BF16);
    const kforge_hgemm_problem p{e.m, e.n, e.k, e.layout, e.acc, KFORGE_HGEMM_BF16};
    const kernels::Choice c = disp.resolve(p, h, -1);
    ASSERT_NE(c.variant, nullptr);
    EXPECT_EQ(c.variant->dtype, KFORGE_HGEMM_BF16);
    if (b) {
      twins += grid;
      EXPECT_EQ(b->dtype, KFORGE_HGEMM_BF16);
      EXPECT_TRUE(kernels::same_but_pad(b->config, v->config) && b->config.pad == v->config.pad) << v->name;
      EXPECT_EQ(kernels::dtype_twin(*b, KFORGE_HGEMM_F16), v) << b->name;
      EXPECT_EQ(c.variant, b) << e.m << "x" << e.n << "x" << e.k;
      EXPECT_EQ(c.how, kernels::Choice::How::kTableTwin);
    } else {
      without += grid;
      EXPECT_NE(c.how, kernels::Choice::How::kTableTwin);
    }
  }
  // The subset was chosen by the grid's wins: most of its entries have a twin, not all.
  EXPECT_GT(twins, 3 * without);
  EXPECT_GT(without, 0);
  // Off the table, the fp16 neighbours propose their twins.
  const kforge_hgemm_problem off{3000, 3000, 3000, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, KFORGE_HGEMM_BF16};
  const kernels::Choice n = disp.resolve(off, h, -1);
  ASSERT_NE(n.variant, nullptr);
  EXPECT_EQ(n.how, kernels::Choice::How::kNeighbour);
  EXPECT_EQ(n.variant->dtype, KFORGE_HGEMM_BF16);
  // A bf16 entry of the shape wins over the fp16 entry's twin.
  const kernels::DispatchEntry both[] = {
      {4096, 4096, 4096, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, "sm90_tn_f32_128x128_s6_c2_k1_g8_pp"},
      {4096, 4096, 4096, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, "sm90_tn_bf16_64x256_s4_c2_k1_g8_pp", KFORGE_HGEMM_BF16}};
  const kernels::Dispatcher d2(both, 2);
  const kforge_hgemm_problem q{4096, 4096, 4096, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, KFORGE_HGEMM_BF16};
  EXPECT_STREQ(d2.resolve(q, h, -1).variant->name, "sm90_tn_bf16_64x256_s4_c2_k1_g8_pp");
  EXPECT_EQ(d2.resolve(q, h, -1).how, kernels::Choice::How::kTable);
  const kernels::Dispatcher d1(both, 1);
  EXPECT_STREQ(d1.resolve(q, h, -1).variant->name, "sm90_tn_bf16_128x128_s6_c2_k1_g8_pp");
  EXPECT_EQ(d1.resolve(q, h, -1).how, kernels::Choice::How::kTableTwin);
  // The fp16 problem keeps its fp16 entry.
  const kforge_hgemm_problem f{4096, 4096, 4096, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32};
  EXPECT_STREQ(d2.resolve(f, h, -1).variant->name, "sm90_tn_f32_128x128_s6_c2_k1_g8_pp");
}

TEST(Bf16, DispatchTableCarriesDtype) {
  const std::string dir = test::temp_dir();
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  // A bf16 entry must name a bf16 variant, and an fp16 entry (dtype absent or "f16") an fp16 one.
  EXPECT_THROW(DispatchTable::load(write("a.json", R"({"entries":[{"m":64,"n":64,"k":64,"layout":"tn","acc":"f32","dtype":"bf16","variant":"sm80_tn_f32_64x64x32_w2x2_s4"}]})")), Error);
  EXPECT_THROW(DispatchTable::load(write("b.json", R"({"entries":[{"m":64,"n":64,"k":64,"layout":"tn","acc":"f32","variant":"sm80_tn_bf16_64x64x32_w2x2_s4"}]})")), Error);
  EXPECT_THROW(DispatchTable::load(write("c.json", R"({"entries":[{"m":64,"n":64,"k":64,"layout":"tn","acc":"f32","dtype":"fp8","variant":"sm80_tn_f32_64x64x32_w2x2_s4"}]})")), Error);
  DispatchTable t = DispatchTable::load(write("ok.json", R"({"entries":[
    {"m":64,"n":64,"k":64,"layout":"tn","acc":"f32","variant":"sm80_tn_f32_64x64x32_w2x2_s4"},
    {"m":64,"n":64,"k":64,"layout":"tn","acc":"f32","dtype":"bf16","variant":"sm80_tn_bf16_64x64x32_w2x2_s4"}]})"));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_TRUE(t.has(64, 64, 64, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32));
  EXPECT_TRUE(t.has(64, 64, 64, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, KFORGE_HGEMM_BF16));
  EXPECT_EQ(t.data()[0].dtype, KFORGE_HGEMM_F16);
  EXPECT_EQ(t.data()[1].dtype, KFORGE_HGEMM_BF16);
  // put() keeps the fp16 and bf16 entries of one shape apart.
  t.put({{"m", 64}, {"n", 64}, {"k", 64}, {"layout", "tn"}, {"acc", "f32"}, {"dtype", "bf16"}, {"variant", "sm80_tn_bf16_128x128x32_w2x2_s4"}});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.row(64, 64, 64, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, KFORGE_HGEMM_BF16)->value("variant", ""), "sm80_tn_bf16_128x128x32_w2x2_s4");
  EXPECT_EQ(t.row(64, 64, 64, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32)->value("variant", ""), "sm80_tn_f32_64x64x32_w2x2_s4");
  // Exact lookups match on dtype.
  const kforge_hgemm_problem pb{64, 64, 64, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, KFORGE_HGEMM_BF16};
  ASSERT_NE(kernels::table_choice(t.data(), t.size(), pb), nullptr);
  EXPECT_STREQ(kernels::table_choice(t.data(), t.size(), pb)->name, "sm80_tn_bf16_128x128x32_w2x2_s4");
  const kernels::Dispatcher disp(t.data(), t.size());
  EXPECT_STREQ(disp.exact(pb, 90)->name, "sm80_tn_bf16_128x128x32_w2x2_s4");
  // The fingerprints are per dtype, and the fp16 one is over the fp16 variants alone.
  EXPECT_NE(variants_fingerprint(KFORGE_HGEMM_F16), variants_fingerprint(KFORGE_HGEMM_BF16));
  EXPECT_EQ(variants_fingerprint(), variants_fingerprint(KFORGE_HGEMM_F16));
}

TEST(Bf16, ResultsCsvHasADtypeColumnAndOldFilesReadAsFp16) {
  Measurement m;
  m.shape = {64, 64, 64};
  m.dtype = Dtype::kBF16;
  m.mode = "offline";
  m.impl = "lt_auto";
  m.time_us.median = m.time_us.p10 = m.time_us.p90 = m.time_us.min = m.time_us.max = m.time_us.mean = 3.0;
  m.time_us.n = 5;
  const std::string csv = to_csv({m});
  EXPECT_NE(csv.find(",dtype,"), std::string::npos);
  const std::vector<Measurement> back = parse_results_csv(csv, "bf16.csv");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].dtype, Dtype::kBF16);
  // The same file without the dtype column (written before bf16): fp16.
  std::string header = csv.substr(0, csv.find('\n')), row = csv.substr(csv.find('\n') + 1);
  const size_t col = header.find(",dtype");
  header.erase(col, 6);
  const size_t bf = row.find(",bf16");
  ASSERT_NE(bf, std::string::npos);
  row.erase(bf, 5);
  const std::vector<Measurement> old = parse_results_csv(header + "\n" + row, "old.csv");
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].dtype, Dtype::kF16);
}

TEST(Bf16, CliRefusesBf16WithFp16Accumulation) {
  for (const char* cmd : {"hgemm bench --dtype bf16 --acc f16 --no-db --shapes 64x64x64",
                          "hgemm tune --dtype bf16 --acc f16 --no-db --shapes 64x64x64",
                          "eval hgemm --shape 64x64x64 --dtype bf16 --acc f16 x.cu"}) {
    const auto r = test::run_kforge(cmd);
    EXPECT_EQ(r.rc, 2) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find("bf16"), std::string::npos) << cmd << ": " << r.err;
  }
  const auto r = test::run_kforge("hgemm bench --dtype fp8 --no-db --shapes 64x64x64");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("dtype"), std::string::npos) << r.err;
  const auto h = test::run_kforge("hgemm bench --help");
  EXPECT_NE(h.out.find("--dtype"), std::string::npos);
}

}  // namespace
}  // namespace kforge
