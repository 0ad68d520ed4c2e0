// torch.ops.kforge.hgemm on the GPU (tests/python/test_hgemm_torch.py gpu): correctness against
// torch.matmul over a sweep of shapes in both B layouts, copied strides, unaligned pointers and
// empty sizes; the current stream; autograd; torch.compile; the Linear layers of a small MLP and a
// tiny transformer swapped and checked against the original. The op is built from a fresh
// `kforge hgemm export --torch` unless KFORGE_HGEMM_TORCH_EXPORT names one built before (the
// gpu-check torchop stage does). The fixture's name ends in TorchGpuTest: the `test` stage leaves
// it out (gpu-check.sh torchop runs it).
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpu_test.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

using test::run_shell;

class HgemmTorchGpuTest : public test::GpuTest {};

TEST_F(HgemmTorchGpuTest, MatchesMatmulBothLayoutsSwapsLinearsAndCompiles) {
  int rc = 0;
  run_shell("python3 -c 'import torch' >/dev/null 2>&1", &rc);
  if (rc != 0) GTEST_SKIP() << "SKIPPED: torch is not installed for python3";
  std::string dir;
  if (const char* e = std::getenv("KFORGE_HGEMM_TORCH_EXPORT"); e && *e) {
    dir = e;
  } else {
    dir = test::temp_dir() + "/export";
    auto r = test::run_kforge("hgemm export --torch --out " + dir);
    ASSERT_EQ(r.rc, 0) << r.err;
  }
  const char* archs = std::getenv("CUDAARCHS");
  const std::string cmd = std::string("CUDAARCHS=") + (archs && *archs ? archs : "90a") + " timeout 900 python3 " +
                          KFORGE_SOURCE_DIR + "/tests/python/test_hgemm_torch.py gpu " + dir + " 2>&1";
  const std::string out = run_shell(cmd, &rc);
  std::printf("%s", out.c_str());
  if (rc == 0 && out.rfind("SKIPPED:", 0) == 0) GTEST_SKIP() << out;
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("] OK"), std::string::npos) << out;
}

}  // namespace
}  // namespace kforge
