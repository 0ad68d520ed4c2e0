// kforge hgemm export on the GPU: the exported library is configured, built and installed, the
// example is built against the installed package and run (shared and static), and must print PASS.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpu_test.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

using test::GpuTest;
using test::slurp;

TEST_F(GpuTest, ExportedLibraryExampleRunsAndPasses) {
  const std::string base = test::temp_dir();
  const std::string dir = base + "/lib", prefix = base + "/prefix", ex = base + "/example-build";
  auto r = test::run_kforge("hgemm export --out " + dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string cmake = KFORGE_CMAKE_COMMAND;
  const std::string log = base + "/build.log";
  const std::string build =
      "(" + cmake + " -S " + dir + " -B " + dir + "/build -G Ninja -DCMAKE_INSTALL_PREFIX=" + prefix +
      " -DCMAKE_CUDA_COMPILER=" + KFORGE_CUDA_COMPILER + " -DCMAKE_CXX_COMPILER=" + KFORGE_CXX_COMPILER + " && " +
      cmake + " --build " + dir + "/build && " + cmake + " --install " + dir + "/build && " + cmake + " -S " + dir +
      "/example -B " + ex + " -G Ninja -DCMAKE_PREFIX_PATH=" + prefix + " -DCMAKE_CXX_COMPILER=" +
      KFORGE_CXX_COMPILER + " && " + cmake + " --build " + ex + ") >" + log + " 2>&1";
  ASSERT_EQ(std::system(build.c_str()), 0) << slurp(log);
  for (const char* exe : {"example", "example_static"}) {
    const std::string out = base + "/" + exe + ".out";
    const int status = std::system((ex + "/" + exe + " >" + out + " 2>&1").c_str());
    const std::string text = slurp(out);
    std::printf("%s:\n%s", exe, text.c_str());
    EXPECT_EQ(status, 0) << exe << "\n" << text;
    EXPECT_NE(text.find("\nPASS\n"), std::string::npos) << exe << "\n" << text;
    EXPECT_EQ(text.find("WRONG"), std::string::npos) << exe << "\n" << text;
  }
}

}  // namespace
}  // namespace kforge
