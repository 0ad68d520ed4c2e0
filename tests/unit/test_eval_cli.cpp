// kforge eval hgemm on the CPU: everything decided before a GPU is needed (missing files, binary
// garbage, oversize sources, forbidden calls, compile errors) gets a verdict with a reason, and a
// batch goes on past each of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
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
    EXPECT_EQ(j[i]["reward"].get<double>(), -8.0);  // kRejectedLogReward: the floor of the default reward (verdict.hpp)
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

// --include-dir and --nvcc-flag reach nvcc (and so the cache key); bad ones are usage errors,
// one line, before anything is written.
TEST(EvalCli, IncludeDirsAndNvccFlags) {
  const std::string dir = test::temp_dir();
  std::ofstream(dir + "/kf_cli_value.h") << "#define KF_CLI_VALUE KF_CLI_FLAG\n";
  std::ofstream(dir + "/uses.cu") << "#include \"kf_cli_value.h\"\n"
                                     "extern \"C\" int kforge_hgemm(const kforge_hgemm_args*, cudaStream_t) {\n"
                                     "  return KF_CLI_VALUE;\n}\n";
  auto r = run_kforge("eval hgemm --shape 64x64x64 --arch sm_90a --json --include-dir " + dir +
                      " --nvcc-flag=-DKF_CLI_FLAG=0 --nvcc-flag=-DKF_OTHER=1 " + dir + "/uses.cu");
  ASSERT_FALSE(r.out.empty()) << r.err;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  const std::string cmd = v["details"]["compile"].value("command", "");
  EXPECT_NE(cmd.find("-I" + dir), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("-DKF_CLI_FLAG=0 -DKF_OTHER=1"), std::string::npos) << cmd;
  for (const auto& reason : v["reasons"]) EXPECT_NE(reason, "compile_error") << v.dump(2);

  for (const std::string& bad : {"--include-dir " + dir + "/missing", std::string("--nvcc-flag=-o"),
                                 std::string("--nvcc-flag=-Xlinker=-z,lazy")}) {
    auto u = run_kforge("eval hgemm --shape 64x64x64 --out " + dir + "/v.json " + bad + " " + dir + "/uses.cu");
    EXPECT_EQ(u.rc, 2) << bad << "\n" << u.err;
    EXPECT_EQ(std::count(u.err.begin(), u.err.end(), '\n'), 1) << u.err;
    EXPECT_FALSE(std::filesystem::exists(dir + "/v.json")) << bad;
  }
  auto help = run_kforge("eval hgemm --help");
  EXPECT_NE(help.out.find("--include-dir"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--nvcc-flag"), std::string::npos) << help.out;
}

// A candidate with a byte that is not UTF-8 (in a comment and in what the scan quotes): --json and
// --out still write the verdicts.
TEST(EvalCli, NonUtf8SourceStillGivesJson) {
  const std::string dir = test::temp_dir();
  std::ofstream(dir + "/latin1.cu", std::ios::binary)
      << "// caf\xe9\nextern \"C\" int kforge_hgemm(const kforge_hgemm_args*, cudaStream_t) { fork(); /* \xe9 */ return 0; }\n";
  auto r = run_kforge("eval hgemm --shape 64x64x64 --arch sm_90a --json --out " + dir + "/v.json " + dir + "/latin1.cu");
  EXPECT_EQ(r.rc, 3) << r.err;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  EXPECT_EQ(v["reasons"], nlohmann::json::array({"forbidden_call"})) << r.out;
  EXPECT_NE(v["message"].get<std::string>().find("/* \xef\xbf\xbd */"), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/v.json")), v);
}

}  // namespace
}  // namespace kforge
