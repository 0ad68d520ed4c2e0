// kforge hgemm export: the folder it writes, its refusals (nothing written on a bad table or a
// non-empty folder), and (slow) that the exported library and its example configure, build and
// link through the installed CMake package with the nvcc kforge itself was built with.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <tuple>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/hgemm/kernel_api.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using test::run_kforge;
using test::slurp;

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string some_variant(kforge_hgemm_layout l) {
  size_t n = 0;
  const kernels::KernelVariant* all = kernels::variants(&n);
  for (size_t i = 0; i < n; ++i)
    if (all[i].layout == l && all[i].acc == KFORGE_HGEMM_ACC_F32) return all[i].name;
  return "";
}

TEST(HgemmExport, WritesTheLibraryFolder) {
  const std::string dir = test::temp_dir() + "/out";
  const std::string table = test::temp_dir() + "/table.json";
  const nlohmann::json t = {
      {"kforge_dispatch_table", 1},
      {"device", "NVIDIA H200"},
      {"entries",
       {{{"m", 4096}, {"n", 4096}, {"k", 4096}, {"layout", "tn"}, {"acc", "f32"}, {"variant", some_variant(KFORGE_HGEMM_TN)}},
        {{"m", 512}, {"n", 512}, {"k", 512}, {"layout", "nn"}, {"acc", "f32"}, {"variant", some_variant(KFORGE_HGEMM_NN)}}}}};
  write(table, t.dump());
  auto r = run_kforge("hgemm export --out " + dir + " --table " + table);
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* f : {"include/kforge_hgemm.h", "include/kforge/abi/hgemm.h", "src/kernels/hgemm/kernel_api.hpp",
                        "src/kernels/hgemm/wgmma_ops.cuh", "src/kernels/hgemm/sm80_gemm.cuh",
                        "src/kernels/hgemm/sm90_gemm.cuh", "src/kernels/hgemm/tile_order.cuh", "src/kernels/hgemm/variants.cu",
                        "src/kernels/hgemm/variants_mid.cu", "src/kernels/hgemm/variants_small.cu",
                        "src/kernels/hgemm/variants_streamk.cu", "src/kernels/hgemm/variants_deep.cu",
                        "src/kernels/hgemm/variants_swap.cu",
                        "src/kernels/hgemm/variants_bf16.cu", "src/kernels/hgemm/variants_bf16_large.cu", "src/kernels/hgemm/dispatch.hpp", "src/kernels/hgemm/dispatch.cpp", "src/kernels/hgemm/cost_model.hpp",
                        "src/dispatch_table.cpp",
                        "src/kforge_hgemm.cpp", "CMakeLists.txt", "cmake/kforge_hgemmConfig.cmake.in",
                        "example/CMakeLists.txt", "example/example.cpp", "README.md", "kforge-export.json"})
    EXPECT_TRUE(fs::is_regular_file(dir + "/" + f)) << f;
  // The kernel sources are the ones kforge was built from (same ABI header, same variant names).
  EXPECT_EQ(slurp(dir + "/include/kforge/abi/hgemm.h"), slurp(std::string(KFORGE_SOURCE_DIR) + "/include/kforge/abi/hgemm.h"));
  const std::string header = slurp(dir + "/include/kforge_hgemm.h");
  for (const char* api : {"kforge_hgemm_variant_name", "kforge_hgemm_version", "kforge_hgemm_error_string"})
    EXPECT_NE(header.find(api), std::string::npos) << api;
  const std::string gen = slurp(dir + "/src/dispatch_table.cpp");
  EXPECT_NE(gen.find(some_variant(KFORGE_HGEMM_TN)), std::string::npos) << gen;
  EXPECT_NE(gen.find("{4096, 4096, 4096, KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32"), std::string::npos) << gen;
  EXPECT_NE(gen.find("NVIDIA H200"), std::string::npos);
  const std::string cmake = slurp(dir + "/CMakeLists.txt");
  EXPECT_LT(cmake.find("CMAKE_CUDA_ARCHITECTURES \"80;90a\""), cmake.find("\nproject("));  // set before project()
  EXPECT_EQ(cmake.find("@NAME@"), std::string::npos);
  const auto manifest = nlohmann::json::parse(slurp(dir + "/kforge-export.json"));
  EXPECT_EQ(manifest["table_entries"], 2);
  // Nothing but the folder itself appears beside it (the staging folder is gone).
  int siblings = 0;
  for (const auto& e : fs::directory_iterator(fs::path(dir).parent_path())) siblings += e.path().filename().string()[0] == '.';
  EXPECT_EQ(siblings, 0);

  // A second export into the same folder needs --force; --force replaces it.
  auto again = run_kforge("hgemm export --out " + dir);
  EXPECT_EQ(again.rc, 2) << again.err;
  EXPECT_NE(again.err.find("not empty"), std::string::npos) << again.err;
  auto forced = run_kforge("hgemm export --out " + dir + " --force --name mygemm");
  EXPECT_EQ(forced.rc, 0) << forced.err;
  EXPECT_TRUE(fs::exists(dir + "/cmake/mygemmConfig.cmake.in"));
  EXPECT_FALSE(fs::exists(dir + "/cmake/kforge_hgemmConfig.cmake.in"));
  EXPECT_NE(slurp(dir + "/CMakeLists.txt").find("EXPORT_NAME mygemm"), std::string::npos);
  // No --table now: the table shipped in data/hgemm/ (tuned on the H200) goes in.
  const auto forced_manifest = nlohmann::json::parse(slurp(dir + "/kforge-export.json"));
  EXPECT_GT(forced_manifest["table_entries"].get<int>(), 1000);
  EXPECT_NE(slurp(dir + "/src/dispatch_table.cpp").find("KFORGE_HGEMM_TN,"), std::string::npos);
}

TEST(HgemmExport, RefusesBadInputAndWritesNothing) {
  const std::string base = test::temp_dir();
  const std::string dir = base + "/out";
  write(base + "/malformed.json", "{\"kforge_dispatch_table\": 1, \"entries\": [ {\"m\": 64,");
  write(base + "/notable.json", "{\"rows\": []}");
  write(base + "/badlayout.json",
        R"({"entries": [{"m": 64, "n": 64, "k": 64, "layout": "tt", "acc": "f32", "variant": ")" +
            some_variant(KFORGE_HGEMM_NN) + R"("}]})");
  write(base + "/unknown.json",
        R"({"entries": [{"m": 64, "n": 64, "k": 64, "layout": "nn", "acc": "f32", "variant": "sm90_nn_f32_no_such"}]})");
  struct Bad {
    std::string args, message;
  };
  const Bad cases[] = {
      {"--table " + base + "/malformed.json", "not JSON"},
      {"--table " + base + "/notable.json", "not a kforge dispatch table"},
      {"--table " + base + "/badlayout.json", "layout 'tt'"},
      {"--table " + base + "/unknown.json", "sm90_nn_f32_no_such"},
      {"--table " + base + "/missing.json", "cannot read"},
      {"--name 'bad name'", "--name"},
  };
  for (const Bad& c : cases) {
    auto r = run_kforge("hgemm export --out " + dir + " " + c.args);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir)) << c.args;
  }
  int entries = 0;
  for (const auto& e : fs::directory_iterator(base)) entries += e.path().extension() != ".json";
  EXPECT_EQ(entries, 0) << "a refused export left something behind";

  // A non-empty folder that is not an export is never replaced, not even with --force.
  fs::create_directories(dir);
  write(dir + "/mine.txt", "precious");
  for (const char* force : {"", " --force"}) {
    auto r = run_kforge("hgemm export --out " + dir + force);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_EQ(slurp(dir + "/mine.txt"), "precious");
  }
  auto noout = run_kforge("hgemm export");
  EXPECT_NE(noout.rc, 0);
}

// The default table is found relative to the binary, not at a path baked in at build time: a
// kforge binary moved away from its data is refused (one line, exit 2) unless --no-table says so.
TEST(HgemmExport, MovedBinaryFindsNoTableAndSaysSo) {
  const std::string base = test::temp_dir();
  fs::create_directories(base + "/bin");
  fs::copy_file(KFORGE_BINARY, base + "/bin/kforge");
  fs::permissions(base + "/bin/kforge", fs::perms::owner_all);
  auto run_moved = [&](const std::string& args) {
    const std::string out = base + "/out.txt", err = base + "/err.txt";
    const int status = std::system((base + "/bin/kforge " + args + " >" + out + " 2>" + err).c_str());
    return std::tuple{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  };
  auto [rc, out, err] = run_moved("hgemm export --out " + base + "/lib");
  EXPECT_EQ(rc, 2) << err;
  EXPECT_NE(err.find("no dispatch table beside this kforge binary"), std::string::npos) << err;
  EXPECT_NE(err.find("--no-table"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_FALSE(fs::exists(base + "/lib"));
  std::tie(rc, out, err) = run_moved("hgemm export --no-table --out " + base + "/lib");
  ASSERT_EQ(rc, 0) << err;
  const auto manifest = nlohmann::json::parse(slurp(base + "/lib/kforge-export.json"));
  EXPECT_EQ(manifest["table_entries"], 0);
  EXPECT_TRUE(manifest["table"].is_null());
  // Beside an installed-prefix layout (BIN/../share/kforge/hgemm/) the table is found again.
  fs::create_directories(base + "/share/kforge/hgemm");
  fs::copy_file(std::string(KFORGE_SOURCE_DIR) + "/data/hgemm/dispatch-table.json",
                base + "/share/kforge/hgemm/dispatch-table.json");
  std::tie(rc, out, err) = run_moved("hgemm export --out " + base + "/lib2");
  ASSERT_EQ(rc, 0) << err;
  EXPECT_GT(nlohmann::json::parse(slurp(base + "/lib2/kforge-export.json"))["table_entries"].get<int>(), 1000);
  // --no-table and --table together are a usage error.
  std::tie(rc, out, err) = run_moved("hgemm export --no-table --table x.json --out " + base + "/lib3");
  EXPECT_EQ(rc, 2) << err;
}

// The exported CMake takes CMAKE_CUDA_ARCHITECTURES as given (no hard-coded architecture list on
// the targets); without 90a it says that the Hopper kernels are left out. Configure only.
TEST(HgemmExport, ExportedCMakeHonoursCudaArchitectures) {
  const std::string base = test::temp_dir();
  auto r = run_kforge("hgemm export --no-table --out " + base + "/lib");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string cmake_text = slurp(base + "/lib/CMakeLists.txt");
  EXPECT_EQ(cmake_text.find("CUDA_ARCHITECTURES \"80;90a\"\n  POSITION"), std::string::npos);
  EXPECT_EQ(cmake_text.find("PROPERTIES\n  CUDA_ARCHITECTURES"), std::string::npos) << cmake_text;
  const std::string log = base + "/configure.log";
  const std::string cmd = std::string(KFORGE_CMAKE_COMMAND) + " -S " + base + "/lib -B " + base +
                          "/build -DCMAKE_CUDA_ARCHITECTURES=80 -DCMAKE_CUDA_COMPILER=" + KFORGE_CUDA_COMPILER +
                          " -DCMAKE_CXX_COMPILER=" + KFORGE_CXX_COMPILER + " >" + log + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(log);
  EXPECT_NE(slurp(log).find("CMAKE_CUDA_ARCHITECTURES='80' has no 90a"), std::string::npos) << slurp(log);
}

TEST(HgemmExport, HelpDocumentsEveryFlag) {
  auto r = run_kforge("hgemm export --help");
  EXPECT_EQ(r.rc, 0);
  for (const char* flag : {"--out", "--table", "--no-table", "--name", "--force"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  const std::string readme = slurp(std::string(KFORGE_SOURCE_DIR) + "/README.md");
  for (const char* flag : {"hgemm export", "--out", "--table", "--no-table", "--name", "--force"})
    EXPECT_NE(readme.find(flag), std::string::npos) << flag;
}

// Slow (the kernels compile for sm_80 and sm_90a): configure, build and install the exported
// library, then build the example (shared and static) against the install prefix. Without a GPU
// nothing runs; tests/gpu/test_export_gpu.cpp runs the example.
TEST(HgemmExport, ExportedLibraryAndExampleBuildAgainstTheInstalledPackage) {
  const std::string base = test::temp_dir();
  const std::string dir = base + "/lib", prefix = base + "/prefix";
  auto r = run_kforge("hgemm export --out " + dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string cmake = KFORGE_CMAKE_COMMAND;
  const std::string log = base + "/build.log";
  const std::string compilers = std::string(" -DCMAKE_CUDA_COMPILER=") + KFORGE_CUDA_COMPILER +
                                " -DCMAKE_CXX_COMPILER=" + KFORGE_CXX_COMPILER;
  const std::string cmd =
      "(" + cmake + " -S " + dir + " -B " + dir + "/build -G Ninja -DCMAKE_INSTALL_PREFIX=" + prefix + compilers +
      " && " + cmake + " --build " + dir + "/build && " + cmake + " --install " + dir + "/build && " + cmake +
      " -S " + dir + "/example -B " + base + "/example-build -G Ninja -DCMAKE_PREFIX_PATH=" + prefix +
      " -DCMAKE_CXX_COMPILER=" + KFORGE_CXX_COMPILER + " && " + cmake + " --build " + base + "/example-build) >" +
      log + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("export build: %.0f s\n", s);
  ASSERT_EQ(status, 0) << slurp(log);
  for (const char* f : {"include/kforge_hgemm.h", "include/kforge/abi/hgemm.h"})
    EXPECT_TRUE(fs::exists(prefix + "/" + f)) << f;
  bool shared = false, stat = false, config = false, version = false;
  for (const auto& e : fs::recursive_directory_iterator(prefix)) {
    const std::string n = e.path().filename().string();
    shared |= n == "libkforge_hgemm.so";
    stat |= n == "libkforge_hgemm_static.a";
    config |= n == "kforge_hgemmConfig.cmake";
    version |= n == "kforge_hgemmConfigVersion.cmake";
  }
  EXPECT_TRUE(shared && stat && config && version) << slurp(log);
  EXPECT_TRUE(fs::exists(base + "/example-build/example"));
  EXPECT_TRUE(fs::exists(base + "/example-build/example_static"));
  // The shared library exports the C API and nothing of the kernels' C++ internals.
  for (const auto& e : fs::recursive_directory_iterator(prefix)) {
    if (e.path().filename() != "libkforge_hgemm.so") continue;
    const std::string syms = base + "/syms.txt";
    ASSERT_EQ(std::system(("nm -D --defined-only " + e.path().string() + " > " + syms).c_str()), 0);
    const std::string text = slurp(syms);
    for (const char* api : {"kforge_hgemm", "kforge_hgemm_workspace_size", "kforge_hgemm_variant_name",
                            "kforge_hgemm_version", "kforge_hgemm_error_string"})
      EXPECT_NE(text.find(std::string(" T ") + api + "\n"), std::string::npos) << api << "\n" << text;
    EXPECT_EQ(text.find("find_variant"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace kforge
