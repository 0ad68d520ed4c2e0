// CompileService with the real nvcc: compiling, the content cache, refusals, time-outs, and
// parallel compiles. Every test has its own cache folder. Real compiles take seconds each, so
// there are few of them; tests that only need a cache key stop nvcc at once with a tiny time-out.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "compile/compile.hpp"
#include "core/error.hpp"
#include "core/subprocess.hpp"

#ifndef KFORGE_SOURCE_DIR
#error "KFORGE_SOURCE_DIR must name the kforge source tree (for include/kforge/abi/hgemm.h)"
#endif

namespace kforge {
namespace {

namespace fs = std::filesystem;

// A minimal HGEMM candidate: it only zeroes C, which is all a compile test needs.
const char* const kValidSource = R"(
#include "kforge/abi/hgemm.h"

__global__ void zero_c(unsigned short* c, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) c[i] = 0;
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  long long n = args->problem.m * args->problem.n;
  zero_c<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>((unsigned short*)args->c, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
)";

const char* const kBrokenSource = R"(
#include "kforge/abi/hgemm.h"
extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  return this is not C++;
}
)";

bool nvcc_on_path() {
  static const bool found = run_process({"nvcc", "--version"}).ok();
  return found;
}

#define SKIP_WITHOUT_NVCC() \
  if (!nvcc_on_path()) GTEST_SKIP() << "nvcc not found on PATH; skipping a test that compiles"

class CompileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "kforge_compile_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    root_ = templ;
    cache_ = root_ + "/cache";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  CompileOptions options() const {
    CompileOptions o;
    o.cache_dir = cache_;
    o.include_dirs = {std::string(KFORGE_SOURCE_DIR) + "/include"};
    return o;
  }
  // A key without a real compile: nvcc is started and killed almost at once.
  std::string key_only(CompileOptions o, const std::string& source) const {
    o.timeout_s = 0.001;
    CompileResult r = CompileService(o).compile(source, "k.cu");
    EXPECT_EQ(r.failure, "compile_timeout") << r.log;
    return r.key;
  }
  // Names in the cache folder ending with `suffix`, or starting with "tmp-" for suffix "tmp-".
  std::vector<std::string> cache_entries(const std::string& pattern) const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(cache_)) {
      std::string n = e.path().filename().string();
      bool match = pattern == "tmp-" ? n.rfind("tmp-", 0) == 0
                                     : n.size() >= pattern.size() &&
                                           n.compare(n.size() - pattern.size(), pattern.size(), pattern) == 0;
      if (match) names.push_back(n);
    }
    return names;
  }
  std::string write(const std::string& name, const std::string& content) const {
    std::string path = root_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  std::string root_, cache_;
};

TEST_F(CompileTest, CommandLine) {
  CompileOptions o = options();
  o.nvcc = "/nonexistent/nvcc";  // command_for needs no compiler
  o.extra_flags = {"-DX=1", "--use_fast_math"};
  CompileService svc(o);
  std::vector<std::string> expected = {"/nonexistent/nvcc", "-O3", "-std=c++17", "--shared", "-Xcompiler",
                                       "-fPIC", "-cudart", "shared", "-lineinfo", "-gencode",
                                       "arch=compute_90a,code=sm_90a",
                                       "-I" + std::string(KFORGE_SOURCE_DIR) + "/include", "-DX=1",
                                       "--use_fast_math", "-o", "out.so", "in.cu"};
  EXPECT_EQ(svc.command_for("in.cu", "out.so"), expected);
  EXPECT_TRUE(fs::is_directory(cache_));  // the constructor created the cache folder

  o.arch = "sm_80";
  std::vector<std::string> cmd = CompileService(o).command_for("in.cu", "out.so");
  EXPECT_EQ(cmd[10], "arch=compute_80,code=sm_80");

  o.arch = "not a target";
  EXPECT_THROW(CompileService{o}, Error);
}

TEST_F(CompileTest, CompilesThenHitsTheCache) {
  SKIP_WITHOUT_NVCC();
  CompileService svc(options());
  EXPECT_NE(svc.nvcc_version().find("release"), std::string::npos) << svc.nvcc_version();

  CompileResult first = svc.compile(kValidSource, "good.cu");
  ASSERT_TRUE(first.ok) << first.failure << "\n" << first.log;
  EXPECT_TRUE(first.failure.empty());
  EXPECT_FALSE(first.cache_hit);
  EXPECT_GT(first.seconds, 0);
  EXPECT_EQ(first.key.size(), 64u);
  EXPECT_EQ(first.so_path, cache_ + "/" + first.key + ".so");
  ASSERT_TRUE(fs::is_regular_file(first.so_path));
  std::ifstream so(first.so_path, std::ios::binary);
  char magic[4] = {};
  so.read(magic, 4);
  EXPECT_EQ(std::string(magic, 4), "\x7f" "ELF");
  EXPECT_TRUE(fs::is_regular_file(cache_ + "/" + first.key + ".log"));
  EXPECT_TRUE(cache_entries("tmp-").empty()) << "work folder left behind";
  ASSERT_FALSE(first.command.empty());
  EXPECT_EQ(first.command.front(), "nvcc");

  // Another service over the same cache (as another process would be): a hit, same key and path.
  CompileService again(options());
  CompileResult second = again.compile(kValidSource, "renamed.cu");
  EXPECT_TRUE(second.ok);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(second.so_path, first.so_path);
  EXPECT_EQ(second.seconds, 0);
  EXPECT_EQ(second.log, first.log);

  // compile_file of the same text: still the same entry.
  CompileResult from_file = svc.compile_file(write("same.cu", kValidSource));
  EXPECT_TRUE(from_file.cache_hit);
  EXPECT_EQ(from_file.key, first.key);
  EXPECT_EQ(cache_entries(".so").size(), 1u);
}

TEST_F(CompileTest, SyntaxErrorIsACompileError) {
  SKIP_WITHOUT_NVCC();
  CompileResult r = CompileService(options()).compile(kBrokenSource, "broken.cu");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, "compile_error");
  EXPECT_NE(r.log.find("error"), std::string::npos) << r.log;
  EXPECT_TRUE(r.so_path.empty());
  EXPECT_TRUE(cache_entries(".so").empty());
  EXPECT_TRUE(cache_entries("tmp-").empty());
}

TEST_F(CompileTest, KeyCoversSourceFlagsTargetAndIncludes) {
  SKIP_WITHOUT_NVCC();
  const std::string base = key_only(options(), kValidSource);
  ASSERT_EQ(base.size(), 64u);
  EXPECT_EQ(key_only(options(), kValidSource), base) << "the key must not depend on temporary paths";

  EXPECT_NE(key_only(options(), std::string(kValidSource) + "// changed\n"), base);

  CompileOptions flags = options();
  flags.extra_flags = {"-DKFORGE_TEST=1"};
  EXPECT_NE(key_only(flags, kValidSource), base);

  CompileOptions arch = options();
  arch.arch = "sm_80";
  EXPECT_NE(key_only(arch, kValidSource), base);

  CompileOptions inc = options();
  inc.include_dirs.push_back("/usr/include");
  EXPECT_NE(key_only(inc, kValidSource), base);
}

TEST_F(CompileTest, TimeoutLeavesNothingInTheCache) {
  SKIP_WITHOUT_NVCC();
  CompileOptions o = options();
  o.timeout_s = 0.05;
  CompileResult r = CompileService(o).compile(kValidSource, "slow.cu");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, "compile_timeout");
  EXPECT_LT(r.seconds, 5.0);
  EXPECT_TRUE(r.so_path.empty());
  EXPECT_FALSE(fs::exists(cache_ + "/" + r.key + ".so"));
  EXPECT_TRUE(cache_entries(".so").empty());
  EXPECT_TRUE(cache_entries("tmp-").empty());
}

TEST_F(CompileTest, RefusesNulBytes) {
  CompileService svc(options());
  std::string src = std::string(kValidSource) + std::string("\0", 1);
  CompileResult r = svc.compile(src, "nul.cu");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, "not_text");
}

TEST_F(CompileTest, RefusesOversizedSources) {
  CompileOptions o = options();
  o.max_source_bytes = 100;
  CompileService svc(o);
  CompileResult r = svc.compile(std::string(101, 'x'), "big.cu");
  EXPECT_EQ(r.failure, "source_too_large");
  EXPECT_NE(r.log.find("101"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("100"), std::string::npos) << r.log;
  // Size is checked before content.
  EXPECT_EQ(svc.compile(std::string(200, '\0'), "big.cu").failure, "source_too_large");
  EXPECT_EQ(svc.compile_file(write("big.cu", std::string(101, 'x'))).failure, "source_too_large");
}

TEST_F(CompileTest, MissingFile) {
  CompileService svc(options());
  CompileResult r = svc.compile_file(root_ + "/does-not-exist.cu");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, "missing_file");
  EXPECT_NE(r.log.find("does-not-exist.cu"), std::string::npos);
  EXPECT_EQ(svc.compile_file(root_).failure, "missing_file");  // a folder is not a source file
}

TEST_F(CompileTest, NvccMissing) {
  CompileOptions o = options();
  o.nvcc = "/nonexistent/nvcc";
  CompileService svc(o);
  EXPECT_TRUE(svc.nvcc_version().empty());
  CompileResult r = svc.compile(kValidSource, "good.cu");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, "nvcc_missing");
  // Refusals of the source itself still come first.
  EXPECT_EQ(svc.compile(std::string("a\0b", 3), "nul.cu").failure, "not_text");
}

TEST_F(CompileTest, CompileAllKeepsInputOrder) {
  SKIP_WITHOUT_NVCC();
  CompileService svc(options());
  std::vector<std::pair<std::string, std::string>> inputs = {
      {"good.cu", kValidSource},
      {"broken.cu", kBrokenSource},
      {"nul.cu", std::string("x\0y", 3)},
  };
  std::vector<CompileResult> results = svc.compile_all(inputs, 2);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].ok) << results[0].failure << "\n" << results[0].log;
  EXPECT_EQ(results[1].failure, "compile_error");
  EXPECT_EQ(results[2].failure, "not_text");
  EXPECT_TRUE(cache_entries("tmp-").empty());
}

TEST_F(CompileTest, CompileAllClampsJobs) {
  // Inputs refused before nvcc runs, so any number of them is quick.
  CompileOptions o = options();
  o.max_source_bytes = 10;
  CompileService svc(o);
  std::vector<std::pair<std::string, std::string>> inputs;
  for (int i = 0; i < 20; ++i)
    inputs.emplace_back("s" + std::to_string(i) + ".cu", i % 2 ? std::string(11, 'x') : std::string("\0", 1));
  for (int jobs : {-3, 0, 1, 5, 1000}) {
    std::vector<CompileResult> results = svc.compile_all(inputs, jobs);
    ASSERT_EQ(results.size(), inputs.size());
    for (size_t i = 0; i < results.size(); ++i)
      EXPECT_EQ(results[i].failure, i % 2 ? "source_too_large" : "not_text") << "jobs " << jobs << " #" << i;
  }
  EXPECT_TRUE(svc.compile_all({}, 4).empty());
}

}  // namespace
}  // namespace kforge
