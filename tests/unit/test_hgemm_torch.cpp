// kforge hgemm export --torch: the PyTorch op's package is written only when asked for, with the
// library's name filled in; and (slow: the library and the op compile here) the op builds against
// the export with torch.utils.cpp_extension and refuses CPU tensors (fp16 and bf16), bad dtypes
// (fp32, mixed) and bad shapes clearly (tests/python/test_hgemm_torch.py cpu). The GPU half is
// tests/gpu/test_hgemm_torch_gpu.cpp. KFORGE_HGEMM_TORCH_EXPORT=DIR reuses an export built before.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "../support/process.hpp"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using test::run_kforge;
using test::run_shell;
using test::slurp;

TEST(HgemmTorch, ExportWritesTheOpPackageOnlyWithTorch) {
  const std::string base = test::temp_dir();
  auto r = run_kforge("hgemm export --no-table --out " + base + "/plain");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(fs::exists(base + "/plain/torch"));
  EXPECT_EQ(nlohmann::json::parse(slurp(base + "/plain/kforge-export.json"))["torch"], false);

  r = run_kforge("hgemm export --no-table --torch --name kforge_mygemm --out " + base + "/t");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string pkg = base + "/t/torch/kforge_mygemm_torch";
  for (const char* f : {"__init__.py", "hgemm_op.cpp", "bench.py"}) EXPECT_TRUE(fs::exists(pkg + "/" + f)) << f;
  EXPECT_TRUE(fs::exists(base + "/t/torch/README.md"));
  const std::string init = slurp(pkg + "/__init__.py"), op = slurp(pkg + "/hgemm_op.cpp");
  EXPECT_NE(init.find("\"kforge_mygemm_static\""), std::string::npos);
  EXPECT_EQ(init.find("@NAME@"), std::string::npos);
  EXPECT_EQ(op.find("@NAME@"), std::string::npos);
  EXPECT_NE(op.find("TORCH_LIBRARY(kforge, m)"), std::string::npos);
  EXPECT_NE(op.find("getCurrentCUDAStream"), std::string::npos);
  const auto manifest = nlohmann::json::parse(slurp(base + "/t/kforge-export.json"));
  EXPECT_EQ(manifest["torch"], true);
  bool listed = false;
  for (const auto& f : manifest["files"]) listed |= f == "torch/kforge_mygemm_torch/hgemm_op.cpp";
  EXPECT_TRUE(listed) << manifest.dump();
  EXPECT_NE(r.out.find("torch:"), std::string::npos) << r.out;

  r = run_kforge("hgemm export --help");
  EXPECT_NE(r.out.find("--torch"), std::string::npos);
  EXPECT_NE(slurp(std::string(KFORGE_SOURCE_DIR) + "/README.md").find("--torch"), std::string::npos);
}

// Every quoted #include of the exported sources resolves inside the export (include/ or src/, as
// its CMakeLists.txt searches): a header added to kernels/hgemm/ and included by variants.cu, but
// not exported, would otherwise fail only in the slow library build (the op's and the example's).
TEST(HgemmTorch, EveryQuotedIncludeOfTheExportIsInTheExport) {
  const std::string base = test::temp_dir() + "/lib";
  auto r = run_kforge("hgemm export --no-table --torch --out " + base);
  ASSERT_EQ(r.rc, 0) << r.err;
  int checked = 0;
  for (const auto& e : fs::recursive_directory_iterator(base)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".cu" && ext != ".cuh" && ext != ".hpp" && ext != ".h" && ext != ".cpp"))
      continue;
    const std::string text = slurp(e.path().string());
    for (size_t at = text.find("#include \""); at != std::string::npos; at = text.find("#include \"", at + 1)) {
      const size_t open = at + 10, close = text.find('"', open);
      const std::string inc = text.substr(open, close - open);
      const bool found = fs::exists(e.path().parent_path() / inc) || fs::exists(base + "/include/" + inc) ||
                         fs::exists(base + "/src/" + inc);
      EXPECT_TRUE(found) << e.path() << " includes \"" << inc << "\", which the export lacks";
      ++checked;
    }
  }
  EXPECT_GT(checked, 5);
}

// Slow where nothing is built yet: the library (sm_90a only, unless CUDAARCHS says otherwise) and
// the op compile on this machine's cores.
TEST(HgemmTorch, OpBuildsAndRefusesCpuTensorsBadDtypesAndShapes) {
  int rc = 0;
  run_shell("python3 -c 'import torch' >/dev/null 2>&1", &rc);
  if (rc != 0) GTEST_SKIP() << "SKIPPED: torch is not installed for python3 (KFORGE_WITH_TORCH=1 scripts/install-deps.sh)";
  std::string dir;
  if (const char* e = std::getenv("KFORGE_HGEMM_TORCH_EXPORT"); e && *e) {
    dir = e;
  } else {
    dir = test::temp_dir() + "/export";
    auto r = run_kforge("hgemm export --torch --out " + dir);
    ASSERT_EQ(r.rc, 0) << r.err;
  }
  const char* archs = std::getenv("CUDAARCHS");
  const std::string cmd = std::string("CUDAARCHS=") + (archs && *archs ? archs : "90a") + " timeout 1500 python3 " +
                          KFORGE_SOURCE_DIR + "/tests/python/test_hgemm_torch.py cpu " + dir + " 2>&1";
  const std::string out = run_shell(cmd, &rc);
  std::printf("%s", out.c_str());
  if (rc == 0 && out.rfind("SKIPPED:", 0) == 0) GTEST_SKIP() << out;
  EXPECT_EQ(rc, 0) << out << "\n(library build log: " << dir << "/build/torch-op-library.log)";
  EXPECT_NE(out.find("] OK"), std::string::npos) << out;
}

}  // namespace
}  // namespace kforge
