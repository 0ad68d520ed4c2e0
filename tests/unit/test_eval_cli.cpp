// kforge eval hgemm on the CPU: everything decided before a GPU is needed (missing files, binary
// garbage, oversize sources, forbidden calls, compile errors) gets a verdict with a reason, and a
// batch goes on past each of them.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/files.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

using test::run_kforge;

const std::string kCorpus = std::string(KFORGE_SOURCE_DIR) + "/tests/corpus/hgemm";

TEST(EvalCli, EarlyRejectionsCarryTheirReasonsAndTheBatchGoesOn) {
  const std::string dir = test::temp_dir();
  {
    std::ofstream g(dir + "/garbage.cu", std::ios::binary);
    for (int i = 0; i < 256; ++i) g.put(char(i));
    std::ofstream big(dir + "/enormous.cu");
    for (int i = 0; i < 20000; ++i) big << "// padding line to make the source larger than the limit allows\n";
    std::ofstream broken(dir + "/broken.cu");
    broken << "extern \"C\" int kforge_hgemm(const kforge_hgemm_args* a, cudaStream_t s) { return oops; }\n";
  }
  const std::string files = dir + "/missing.cu " + dir + "/garbage.cu " + dir + "/enormous.cu " + kCorpus +
                            "/hacked/cublas_call.cu " + kCorpus + "/hacked/dlopen_cublas.cu " + dir + "/broken.cu";
  auto r = run_kforge("eval hgemm --shape 64x64x64 --arch sm_90a --json --out " + dir + "/v.json " + files);
  ASSERT_EQ(r.rc, 3) << r.err;
  auto j = nlohmann::json::parse(read_file(dir + "/v.json"));
  ASSERT_EQ(j.size(), 6u);
  const char* expected[] = {"missing_file", "not_text", "source_too_large", "forbidden_call", "forbidden_call", "compile_error"};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_FALSE(j[i]["correct"].get<bool>()) << j[i].dump();
    ASSERT_FALSE(j[i]["reasons"].empty()) << j[i].dump();
    EXPECT_EQ(j[i]["reasons"][0], expected[i]) << j[i].dump();
    EXPECT_EQ(j[i]["reward"].get<double>(), 0.0);
  }
  // The scan quotes the offending line; the compile verdict carries nvcc's log.
  EXPECT_NE(j[3]["message"].get<std::string>().find("cublas"), std::string::npos) << j[3].dump();
  EXPECT_NE(j[4]["message"].get<std::string>().find("dlopen"), std::string::npos) << j[4].dump();
  EXPECT_NE(j[5]["details"]["compile"]["log"].get<std::string>().find("oops"), std::string::npos) << j[5].dump();
}

TEST(EvalCli, BadArgumentsAreUsageErrors) {
  auto noshape = run_kforge("eval hgemm x.cu");
  EXPECT_NE(noshape.rc, 0);
  auto badshape = run_kforge("eval hgemm --shape 0x1x1 x.cu");
  EXPECT_EQ(badshape.rc, 2);
  EXPECT_NE(badshape.err.find("bad shape"), std::string::npos) << badshape.err;
  auto badmode = run_kforge("eval hgemm --shape 64x64x64 --mode fast x.cu");
  EXPECT_EQ(badmode.rc, 2);
  auto badreward = run_kforge("eval hgemm --shape 64x64x64 --reward magic x.cu");
  EXPECT_EQ(badreward.rc, 2);
  auto badout = run_kforge("eval hgemm --shape 64x64x64 --out /nonexistent/v.json x.cu");
  EXPECT_EQ(badout.rc, 2);
  for (const char* devices : {"x", "0,0", "-2"}) {
    auto bad = run_kforge(std::string("eval hgemm --shape 64x64x64 --devices ") + devices + " x.cu");
    EXPECT_EQ(bad.rc, 2) << devices;
    EXPECT_NE(bad.err.find("--devices"), std::string::npos) << bad.err;
    auto bad_torch = run_kforge(std::string("eval --task t.py --devices ") + devices + " c.py");
    EXPECT_EQ(bad_torch.rc, 2) << devices;
  }
  auto cpu_devices = run_kforge("eval --task t.py --device cpu --devices 0 c.py");
  EXPECT_EQ(cpu_devices.rc, 2);
  EXPECT_NE(cpu_devices.err.find("leave --device at cuda"), std::string::npos) << cpu_devices.err;
}

}  // namespace
}  // namespace kforge
