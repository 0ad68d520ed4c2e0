// kforge's HGEMM kernels without a GPU: the variant table, what each variant accepts, the
// dispatcher's choices, the dispatch-table file, and the tune command's bad-input handling.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "core/error.hpp"
#include "core/text.hpp"
#include "kernels/hgemm/dispatch.hpp"
#include "ops/hgemm_table.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

kforge_hgemm_problem prob(int64_t m, int64_t n, int64_t k, kforge_hgemm_layout l = KFORGE_HGEMM_TN,
                          kforge_hgemm_acc a = KFORGE_HGEMM_ACC_F32) {
  return {m, n, k, l, a};
}

TEST(HgemmKernels, VariantTableIsWellFormed) {
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  ASSERT_GT(count, 20u);
  std::set<std::string> names;
  int sm80 = 0, sm90 = 0;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    EXPECT_TRUE(names.insert(v.name).second) << "duplicate name " << v.name;
    EXPECT_EQ(kernels::find_variant(v.name), &v);
    EXPECT_GT(v.config.bm, 0);
    EXPECT_GT(v.config.bn, 0);
    EXPECT_GE(v.config.splitk, 1);
    (v.config.family == kernels::Family::kSm80 ? sm80 : sm90)++;
    // Each variant serves only its own layout and accumulation.
    const kforge_hgemm_problem other_layout = prob(256, 256, 256, v.layout == KFORGE_HGEMM_NN ? KFORGE_HGEMM_TN : KFORGE_HGEMM_NN, v.acc);
    EXPECT_FALSE(v.supports(&other_layout)) << v.name;
    const kforge_hgemm_problem mine = prob(256, 256, 256, v.layout, v.acc);
    EXPECT_TRUE(v.supports(&mine)) << v.name;
    const kforge_hgemm_problem empty = prob(0, 256, 256, v.layout, v.acc);
    EXPECT_FALSE(v.supports(&empty)) << v.name;
  }
  EXPECT_GT(sm80, 0);
  EXPECT_GT(sm90, 0);
  EXPECT_EQ(kernels::find_variant("no_such_variant"), nullptr);
  EXPECT_EQ(kernels::find_variant(nullptr), nullptr);
}

TEST(HgemmKernels, TmaVariantsRefuseUnalignedRowsAndTheSm80FamilyTakesThem) {
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  for (size_t i = 0; i < count; ++i) {
    const kforge_hgemm_problem odd_k = prob(64, 64, 60, all[i].layout, all[i].acc);
    const kforge_hgemm_problem odd_n = prob(64, 60, 64, all[i].layout, all[i].acc);
    if (all[i].config.family == kernels::Family::kSm90) {
      EXPECT_FALSE(all[i].supports(&odd_k)) << all[i].name;
      EXPECT_FALSE(all[i].supports(&odd_n)) << all[i].name;
    } else {
      EXPECT_TRUE(all[i].supports(&odd_k)) << all[i].name;
      EXPECT_TRUE(all[i].supports(&odd_n)) << all[i].name;
    }
  }
}

TEST(HgemmKernels, DispatcherAlwaysHasASoundChoice) {
  for (int cc : {80, 86, 90}) {
    for (auto l : {KFORGE_HGEMM_NN, KFORGE_HGEMM_TN}) {
      for (auto a : {KFORGE_HGEMM_ACC_F32, KFORGE_HGEMM_ACC_F16}) {
        for (auto [m, n, k] : {std::tuple{1, 1, 1}, {33, 17, 9}, {64, 64, 16384}, {8192, 8192, 8192}, {100, 104, 8},
                               {16384, 64, 64}, {777, 333, 555}}) {
          const kforge_hgemm_problem p = prob(m, n, k, l, a);
          const kernels::KernelVariant* v = kernels::choose(nullptr, 0, p, 132, cc);
          ASSERT_NE(v, nullptr) << m << "x" << n << "x" << k << " cc " << cc;
          EXPECT_TRUE(v->supports(&p)) << v->name;
          if (cc != 90) EXPECT_EQ(v->config.family, kernels::Family::kSm80) << v->name << " on cc " << cc;
        }
      }
    }
  }
  const kforge_hgemm_problem zero = prob(0, 8, 8);
  EXPECT_EQ(kernels::choose(nullptr, 0, zero, 132, 90), nullptr);
}

TEST(HgemmKernels, TableEntriesWinOnlyForTheirExactProblem) {
  const kforge_hgemm_problem p = prob(4096, 4096, 4096);
  const kernels::DispatchEntry table[] = {{4096, 4096, 4096, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, "sm90_tn_f32_64x64_s6_c1_k1_g0_false"},
                                          {4096, 4096, 4096, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32, "sm90_nn_f32_128x128_s6_c2_k1_g8_true"}};
  const kernels::KernelVariant* v = kernels::choose(table, 2, p, 132, 90);
  ASSERT_NE(v, nullptr);
  EXPECT_STREQ(v->name, "sm90_tn_f32_64x64_s6_c1_k1_g0_false");
  // Another K: the heuristic.
  const kforge_hgemm_problem q = prob(4096, 4096, 4104);
  EXPECT_EQ(kernels::table_choice(table, 2, q), nullptr);
  // A Hopper entry on an Ampere device is not used.
  const kernels::KernelVariant* amp = kernels::choose(table, 2, p, 108, 80);
  ASSERT_NE(amp, nullptr);
  EXPECT_EQ(amp->config.family, kernels::Family::kSm80);
  // A table naming a variant of the wrong layout is ignored for that problem.
  const kernels::DispatchEntry wrong[] = {{4096, 4096, 4096, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, "sm90_nn_f32_128x128_s6_c2_k1_g8_true"}};
  EXPECT_EQ(kernels::table_choice(wrong, 1, p), nullptr);
}

TEST(HgemmKernels, DispatchTableFileIsValidatedAndRoundTrips) {
  const std::string dir = test::temp_dir();
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  EXPECT_THROW(DispatchTable::load(write("a.json", "{not json")), Error);
  EXPECT_THROW(DispatchTable::load(write("b.json", "{\"x\": 1}")), Error);
  EXPECT_THROW(DispatchTable::load(write("c.json", R"({"entries":[{"m":1,"n":1,"k":1,"layout":"tt","acc":"f32","variant":"sm80_tn_f32_64x64x32_w2x2_s4"}]})")), Error);
  EXPECT_THROW(DispatchTable::load(write("d.json", R"({"entries":[{"m":1,"n":1,"k":1,"layout":"tn","acc":"f32","variant":"nope"}]})")), Error);
  EXPECT_THROW(DispatchTable::load(write("e.json", R"({"entries":[{"m":0,"n":1,"k":1,"layout":"tn","acc":"f32","variant":"sm80_tn_f32_64x64x32_w2x2_s4"}]})")), Error);
  DispatchTable t = DispatchTable::load(write("ok.json", R"({"device":"X","entries":[{"m":64,"n":64,"k":64,"layout":"tn","acc":"f32","variant":"sm80_tn_f32_64x64x32_w2x2_s4"}]})"));
  EXPECT_EQ(t.size(), 1u);
  EXPECT_TRUE(t.has(64, 64, 64, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32));
  EXPECT_FALSE(t.has(64, 64, 64, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32));
  // put() replaces the entry of the same problem and adds others.
  t.put({{"m", 64}, {"n", 64}, {"k", 64}, {"layout", "tn"}, {"acc", "f32"}, {"variant", "sm80_tn_f32_32x64x64_w1x2_s4"}});
  t.put({{"m", 64}, {"n", 64}, {"k", 64}, {"layout", "nn"}, {"acc", "f32"}, {"variant", "sm80_nn_f32_32x64x64_w1x2_s4"}});
  EXPECT_EQ(t.size(), 2u);
  const kforge_hgemm_problem p = prob(64, 64, 64);
  ASSERT_NE(kernels::table_choice(t.data(), t.size(), p), nullptr);
  EXPECT_STREQ(kernels::table_choice(t.data(), t.size(), p)->name, "sm80_tn_f32_32x64x64_w1x2_s4");
  const DispatchTable back = DispatchTable::from_json(t.to_json(), "round trip");
  EXPECT_EQ(back.size(), 2u);
  EXPECT_EQ(back.device, "X");
  // row(): the stored row of a problem (tune --retune-stale reads its "variants" stamp).
  t.put({{"m", 128}, {"n", 64}, {"k", 64}, {"layout", "tn"}, {"acc", "f32"}, {"variant", "sm80_tn_f32_32x64x64_w1x2_s4"},
         {"variants", variants_fingerprint()}});
  const nlohmann::json* r = t.row(128, 64, 64, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->value("variants", ""), variants_fingerprint());
  EXPECT_EQ(t.row(128, 64, 64, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32), nullptr);
  EXPECT_EQ(t.row(64, 64, 64, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32)->value("variant", ""), "sm80_nn_f32_32x64x64_w1x2_s4");
}

TEST(HgemmKernels, MemoisedDispatchAgreesWithTheDispatcher) {
  const kernels::DispatchEntry table[] = {{4096, 4096, 4096, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, "sm90_tn_f32_64x64_s6_c1_k1_g0_false"},
                                          {64, 64, 64, KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32, "sm80_nn_f32_32x64x64_w1x2_s4"}};
  // More problems than the memo holds, each asked twice, on two devices: always choose()'s answer.
  for (int round = 0; round < 2; ++round)
    for (int cc : {90, 80})
      for (int64_t m : {64, 100, 4096, 777})
        for (int64_t n : {64, 8, 4096})
          for (int64_t k : {64, 4096, 4104})
            for (kforge_hgemm_layout l : {KFORGE_HGEMM_NN, KFORGE_HGEMM_TN}) {
              kforge_hgemm_problem p = prob(m, n, k);
              p.layout = l;
              const kernels::KernelVariant* want = kernels::choose(table, 2, p, 132, cc);
              EXPECT_EQ(kernels::choose_cached(table, 2, p, 132, cc), want) << m << "x" << n << "x" << k << " cc " << cc;
            }
  // The table is part of the key: the same problem without it gets the heuristic's choice.
  const kforge_hgemm_problem p = prob(4096, 4096, 4096);
  EXPECT_STREQ(kernels::choose_cached(table, 2, p, 132, 90)->name, "sm90_tn_f32_64x64_s6_c1_k1_g0_false");
  EXPECT_EQ(kernels::choose_cached(nullptr, 0, p, 132, 90), kernels::heuristic_choice(p, 132, 90));
}

TEST(HgemmKernels, VariantsFingerprintNamesThisBuildsSet) {
  const std::string fp = variants_fingerprint();
  EXPECT_EQ(fp.size(), 16u);
  EXPECT_EQ(fp, variants_fingerprint());
  EXPECT_EQ(fp.find_first_not_of("0123456789abcdef"), std::string::npos) << fp;
}

TEST(HgemmKernels, ShippedDispatchTableLoads) {
  const DispatchTable t = DispatchTable::load(std::string(KFORGE_SOURCE_DIR) + "/data/hgemm/dispatch-table.json");
  EXPECT_GT(t.size(), 1000u);
  for (const auto& row : t.rows()) EXPECT_TRUE(row.value("verified", false)) << row.dump();
}

TEST(HgemmKernels, TuneAndBenchRefuseBadInputBeforeAnyGpuWork) {
  const std::string dir = test::temp_dir();
  auto r = test::run_kforge("hgemm tune --baselines lt_auto --shapes 64x64x64 --out " + dir + "/t.json");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("ours_all"), std::string::npos) << r.err;
  r = test::run_kforge("hgemm tune --max-variants -1 --shapes 64x64x64 --out " + dir + "/t.json");
  EXPECT_EQ(r.rc, 2);
  r = test::run_kforge("hgemm tune --shapes 64x64x64 --out /no/such/dir/t.json");
  EXPECT_EQ(r.rc, 2);
  r = test::run_kforge("hgemm bench --ours --table " + dir + "/missing.json --shapes 64x64x64 --no-db");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("no such dispatch table"), std::string::npos) << r.err;
  r = test::run_kforge("hgemm bench --baselines ours,bogus --shapes 64x64x64 --no-db");
  EXPECT_EQ(r.rc, 2);
  r = test::run_kforge("hgemm bench --ours --shapes 64x64x64 --no-db --variants-out " + dir + "/v.json");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("must end in .csv"), std::string::npos) << r.err;
  r = test::run_kforge("hgemm tune --shapes 64x64x64 --out " + dir + "/t.json --variants-out /no/such/dir/v.csv");
  EXPECT_EQ(r.rc, 2);
  EXPECT_FALSE(std::filesystem::exists(dir + "/t.json"));  // nothing written
  auto help = test::run_kforge("hgemm tune --help");
  EXPECT_EQ(help.rc, 0);
  for (const char* flag : {"--shapes", "--layouts", "--acc", "--mode", "--out", "--retune", "--max-variants", "--budget",
                           "--baselines", "--db", "--no-db", "--samples", "--seed", "--results", "--variants-out"})
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  help = test::run_kforge("hgemm bench --help");
  for (const char* flag : {"--ours", "--table", "--max-variants", "--variants-out"}) EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
}

TEST(HgemmKernels, VariantsCommandListsTheCompiledSpace) {
  size_t count = 0;
  kernels::variants(&count);
  auto r = test::run_kforge("hgemm variants");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find(strf("%zu variant(s)", count)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sm90_tn_f32_128x256_s4_c2_k1_g8_true"), std::string::npos) << r.out;
  // One problem: only the variants that serve it (an sm90 split-K variant needs K % 8 == 0).
  r = test::run_kforge("hgemm variants --layout tn --acc f32 --shape 512x1024x16384");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("sm90_tn_f32_128x128_s4_c2_k4_g0_false"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("_nn_"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("_f16_"), std::string::npos) << r.out;
  r = test::run_kforge("hgemm variants --layout tn --acc f32 --shape 512x1024x1020");  // K % 8 != 0: sm80 only
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find("sm90_"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sm80_tn_f32_"), std::string::npos) << r.out;
  for (const char* bad : {"--layout xx", "--acc f64", "--shape 512x1024x16384", "--layout tn --acc f32 --shape 0x1x1",
                          "--table t.json"}) {
    r = test::run_kforge(std::string("hgemm variants ") + bad);
    EXPECT_EQ(r.rc, 2) << bad << "\n" << r.err;
  }
}

}  // namespace
}  // namespace kforge
