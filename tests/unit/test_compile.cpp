// CompileService with the real nvcc: compiling, the content cache, refusals, time-outs, and
// parallel compiles. Every test has its own cache folder. Real compiles take seconds each, so
// there are few of them; tests that only need a cache key stop nvcc at once with a tiny time-out.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
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
    o.cutlass = "";  // the same command line whether or not the machine has CUTLASS
    return o;
  }
  // A key without a real compile (only the dependency scan, nvcc -M).
  std::string key_only(CompileOptions o, const std::string& source) const {
    std::string log;
    const std::string key = CompileService(o).cache_key(source, &log);
    EXPECT_EQ(key.size(), 64u) << log;
    return key;
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
                                       "arch=compute_90a,code=sm_90a", "--expt-relaxed-constexpr",
                                       "-I" + std::string(KFORGE_SOURCE_DIR) + "/include", "-DX=1",
                                       "--use_fast_math", "-Xlinker", "-z,now", "-Xlinker", "-z,relro",
                                       "-o", "out.so", "in.cu"};
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
  if (!r.key.empty()) EXPECT_FALSE(fs::exists(cache_ + "/" + r.key + ".so"));
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

// ---------------------------------------------------------------------------------------------
// Every input of a compile is in the key (issue 13): included headers, the environment, flags.

// Sets an environment variable for the scope of a test, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
    else ::unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

const char* const kIncludesHeader = R"(
#include "kforge/abi/hgemm.h"
#include "kf_test_value.h"
extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  (void)args; (void)stream;
  return KF_TEST_VALUE;
}
)";

TEST_F(CompileTest, ChangedIncludedHeaderIsRecompiled) {
  SKIP_WITHOUT_NVCC();
  fs::create_directories(root_ + "/inc");
  CompileOptions o = options();
  o.include_dirs.push_back(root_ + "/inc");
  write("inc/kf_test_value.h", "#define KF_TEST_VALUE 0\n");
  CompileService svc(o);
  const CompileResult first = svc.compile(kIncludesHeader, "inc.cu");
  ASSERT_TRUE(first.ok) << first.failure << "\n" << first.log;
  EXPECT_FALSE(first.cache_hit);
  const CompileResult same = svc.compile(kIncludesHeader, "inc.cu");
  EXPECT_TRUE(same.cache_hit) << "same inputs must hit the cache";
  EXPECT_EQ(same.key, first.key);

  write("inc/kf_test_value.h", "#define KF_TEST_VALUE 1\n");  // same source, another header
  const CompileResult changed = svc.compile(kIncludesHeader, "inc.cu");
  ASSERT_TRUE(changed.ok) << changed.failure << "\n" << changed.log;
  EXPECT_FALSE(changed.cache_hit) << "a changed header must never serve the stale object";
  EXPECT_NE(changed.key, first.key);
  EXPECT_NE(changed.so_path, first.so_path);
  EXPECT_EQ(cache_entries(".so").size(), 2u);

  // A header that disappears: nvcc cannot list the includes, so nothing is served from the cache.
  fs::remove(root_ + "/inc/kf_test_value.h");
  const CompileResult gone = svc.compile(kIncludesHeader, "inc.cu");
  EXPECT_FALSE(gone.ok);
  EXPECT_EQ(gone.failure, "compile_error");
  EXPECT_TRUE(gone.key.empty());
  EXPECT_NE(gone.log.find("kf_test_value.h"), std::string::npos) << gone.log;
}

// Direct mode: a repeated compile is served from the manifest without `nvcc -M`, and still never
// serves a stale object: a changed included file, a removed one, and a new header that shadows a
// listed one from an earlier include folder each send the lookup back to the full scan.
TEST_F(CompileTest, DirectLookupHitsOnlyWhileTheListedFilesStand) {
  SKIP_WITHOUT_NVCC();
  fs::create_directories(root_ + "/first");
  fs::create_directories(root_ + "/second/sub");
  CompileOptions o = options();
  o.include_dirs.push_back(root_ + "/first");
  o.include_dirs.push_back(root_ + "/second");
  write("second/kf_test_value.h", "#define KF_TEST_VALUE 0\n");
  CompileService svc(o);
  const CompileResult first = svc.compile(kIncludesHeader, "inc.cu");
  ASSERT_TRUE(first.ok) << first.failure << "\n" << first.log;
  EXPECT_FALSE(first.cache_hit);
  EXPECT_EQ(cache_entries(".manifest").size(), 1u);
  const CompileResult hit = svc.compile(kIncludesHeader, "inc.cu");
  EXPECT_TRUE(hit.cache_hit);
  EXPECT_TRUE(hit.direct_hit) << "an unchanged source and headers: no nvcc -M";
  EXPECT_EQ(hit.key, first.key);
  EXPECT_EQ(hit.so_path, first.so_path);
  // The same key as the full scan computes.
  EXPECT_EQ(svc.cache_key(kIncludesHeader), first.key);

  // A changed header: a miss, a new object.
  write("second/kf_test_value.h", "#define KF_TEST_VALUE 1\n");
  const CompileResult changed = svc.compile(kIncludesHeader, "inc.cu");
  ASSERT_TRUE(changed.ok) << changed.log;
  EXPECT_FALSE(changed.cache_hit);
  EXPECT_NE(changed.key, first.key);
  EXPECT_TRUE(svc.compile(kIncludesHeader, "inc.cu").direct_hit);

  // A header of the same name in the earlier folder now shadows the listed one: the manifest's
  // files are unchanged, but the include folders' stamp is not, so the full scan runs and finds it.
  write("first/kf_test_value.h", "#define KF_TEST_VALUE 2\n");
  const CompileResult shadowed = svc.compile(kIncludesHeader, "inc.cu");
  ASSERT_TRUE(shadowed.ok) << shadowed.log;
  EXPECT_FALSE(shadowed.direct_hit);
  EXPECT_FALSE(shadowed.cache_hit) << "the shadowing header makes another object";
  EXPECT_NE(shadowed.key, changed.key);
  EXPECT_EQ(shadowed.key, svc.cache_key(kIncludesHeader));
  // A file added in a subfolder changes that folder's stamp too: a full scan, then a hit again.
  write("second/sub/other.h", "// unrelated\n");
  const CompileResult rescanned = svc.compile(kIncludesHeader, "inc.cu");
  EXPECT_TRUE(rescanned.cache_hit);
  EXPECT_FALSE(rescanned.direct_hit);
  EXPECT_TRUE(svc.compile(kIncludesHeader, "inc.cu").direct_hit);

  // The listed header removed: the manifest cannot be re-hashed, and the full scan fails as before.
  fs::remove(root_ + "/first/kf_test_value.h");
  fs::remove(root_ + "/second/kf_test_value.h");
  const CompileResult gone = svc.compile(kIncludesHeader, "inc.cu");
  EXPECT_FALSE(gone.ok);
  EXPECT_FALSE(gone.direct_hit);
  EXPECT_TRUE(gone.key.empty());

  // A corrupt manifest is ignored, never trusted.
  write("second/kf_test_value.h", "#define KF_TEST_VALUE 1\n");
  for (const std::string& m : cache_entries(".manifest")) {
    std::ofstream(cache_ + "/" + m, std::ios::trunc) << "kforge-manifest 1\nstamp x\ndep /nonexistent\n";
  }
  const CompileResult after = svc.compile(kIncludesHeader, "inc.cu");
  ASSERT_TRUE(after.ok) << after.log;
  EXPECT_FALSE(after.direct_hit);
  EXPECT_EQ(after.key, changed.key);
}

// An include folder that holds kforge's cache (a project's root given as --include-dir, the cache
// inside it): the lookups' own writes there (work folders, manifests, objects, another verdict's
// files) must not defeat direct mode; a new header elsewhere under the folder still does.
TEST_F(CompileTest, DirectLookupHitsWithTheCacheInsideAnIncludeFolder) {
  SKIP_WITHOUT_NVCC();
  fs::create_directories(root_ + "/second/sub");
  CompileOptions o = options();
  o.include_dirs.push_back(root_);  // holds cache_ (root_/cache)
  o.include_dirs.push_back(root_ + "/second");
  write("second/kf_test_value.h", "#define KF_TEST_VALUE 0\n");
  CompileService svc(o);
  const CompileResult first = svc.compile(kIncludesHeader, "inc.cu");
  ASSERT_TRUE(first.ok) << first.failure << "\n" << first.log;
  const CompileResult hit = svc.compile(kIncludesHeader, "inc.cu");
  EXPECT_TRUE(hit.cache_hit);
  EXPECT_TRUE(hit.direct_hit) << "the cache's own writes changed the include folders' stamp";
  fs::create_directories(cache_ + "/service");
  std::ofstream(cache_ + "/service/other.cu") << "// another verdict's candidate\n";
  EXPECT_TRUE(svc.compile(kIncludesHeader, "inc.cu").direct_hit);
  // A header that shadows the listed one from the earlier folder (root_) still sends the lookup
  // to the full scan.
  write("kf_test_value.h", "#define KF_TEST_VALUE 2\n");
  const CompileResult shadowed = svc.compile(kIncludesHeader, "inc.cu");
  ASSERT_TRUE(shadowed.ok) << shadowed.log;
  EXPECT_FALSE(shadowed.direct_hit);
  EXPECT_NE(shadowed.key, first.key);
}

TEST_F(CompileTest, KeyCoversThePreIncludedAbiHeader) {
  SKIP_WITHOUT_NVCC();
  // kforge's own ABI header, pre-included as the evaluator does, from a copy that can change.
  fs::create_directories(root_ + "/abi/kforge/abi");
  fs::copy_file(std::string(KFORGE_SOURCE_DIR) + "/include/kforge/abi/hgemm.h", root_ + "/abi/kforge/abi/hgemm.h");
  CompileOptions o = options();
  o.include_dirs = {root_ + "/abi"};
  o.extra_flags = {"-include", "kforge/abi/hgemm.h"};
  const std::string no_include = "extern \"C\" int kforge_hgemm(const kforge_hgemm_args*, cudaStream_t) { return 0; }\n";
  const std::string before = key_only(o, no_include);
  EXPECT_EQ(key_only(o, no_include), before);
  std::ofstream(root_ + "/abi/kforge/abi/hgemm.h", std::ios::app) << "\n// changed\n";
  EXPECT_NE(key_only(o, no_include), before);
}

TEST_F(CompileTest, NvccEnvironmentIsInTheKey) {
  SKIP_WITHOUT_NVCC();
  ScopedEnv clear("NVCC_APPEND_FLAGS", nullptr);
  CompileService svc(options());
  const CompileResult plain = svc.compile(kValidSource, "env.cu");
  ASSERT_TRUE(plain.ok) << plain.failure << "\n" << plain.log;
  {
    ScopedEnv set("NVCC_APPEND_FLAGS", "-DKFORGE_FROM_ENV=1");
    const CompileResult with_env = svc.compile(kValidSource, "env.cu");
    ASSERT_TRUE(with_env.ok) << with_env.failure << "\n" << with_env.log;
    EXPECT_FALSE(with_env.cache_hit) << "NVCC_APPEND_FLAGS changes the object: a fresh compile";
    EXPECT_NE(with_env.key, plain.key);
  }
  const CompileResult again = svc.compile(kValidSource, "env.cu");
  EXPECT_TRUE(again.cache_hit);
  EXPECT_EQ(again.key, plain.key);
  // The other variables nvcc reads count as well (no compile needed to see it).
  const std::string base = key_only(options(), kValidSource);
  for (auto [name, value] : {std::pair{"NVCC_PREPEND_FLAGS", "-DKF_X=1"}, {"NVCC_CCBIN", "g++"},
                             {"CPATH", "/tmp"}, {"CPLUS_INCLUDE_PATH", "/tmp"}}) {
    ScopedEnv set(name, value);
    EXPECT_NE(key_only(options(), kValidSource), base) << name;
  }
  EXPECT_EQ(key_only(options(), kValidSource), base);
}

TEST_F(CompileTest, HostCompilerIdentity) {
  ScopedEnv no_ccbin("NVCC_CCBIN", nullptr), no_prepend("NVCC_PREPEND_FLAGS", nullptr),
      no_append("NVCC_APPEND_FLAGS", nullptr);
  CompileService svc(options());
  EXPECT_EQ(svc.host_compiler(), "gcc");
  if (nvcc_on_path()) EXPECT_FALSE(svc.host_compiler_version().empty());
  CompileOptions o = options();
  o.extra_flags = {"-ccbin", "/usr/bin/g++"};
  EXPECT_EQ(CompileService(o).host_compiler(), "/usr/bin/g++");
  ScopedEnv set("NVCC_CCBIN", "clang++");
  EXPECT_EQ(CompileService(options()).host_compiler(), "clang++");
}

// Runs readelf (binutils) over `so`; empty when it is not installed.
std::string readelf(const std::string& flag, const std::string& so) {
  const ProcessResult r = run_process({"readelf", flag, "-W", so});
  return r.ok() ? r.out : "";
}

TEST_F(CompileTest, SharedObjectsHaveReadOnlyRelocations) {
  SKIP_WITHOUT_NVCC();
  ScopedEnv clear("NVCC_APPEND_FLAGS", nullptr);
  const CompileResult r = CompileService(options()).compile(kValidSource, "relro.cu");
  ASSERT_TRUE(r.ok) << r.failure << "\n" << r.log;
  const std::string dynamic = readelf("-d", r.so_path), segments = readelf("-l", r.so_path);
  if (dynamic.empty()) GTEST_SKIP() << "SKIPPED: no readelf";
  EXPECT_NE(dynamic.find("BIND_NOW"), std::string::npos) << dynamic;
  EXPECT_NE(segments.find("GNU_RELRO"), std::string::npos) << segments;

  // The environment cannot undo them: such an object is refused, never cached.
  ScopedEnv lazy("NVCC_APPEND_FLAGS", "-Xlinker -z,lazy");
  const CompileResult undone = CompileService(options()).compile(kValidSource, "lazy.cu");
  EXPECT_FALSE(undone.ok);
  EXPECT_EQ(undone.failure, "compile_error");
  EXPECT_NE(undone.log.find("read-only relocations"), std::string::npos) << undone.log;
  EXPECT_EQ(cache_entries(".so").size(), 1u);
}

TEST_F(CompileTest, UserIncludeDirsAndFlagsAreChecked) {
  EXPECT_THROW(checked_include_dirs({root_ + "/missing"}), Error);
  EXPECT_THROW(checked_include_dirs({""}), Error);
  const std::vector<std::string> dirs = checked_include_dirs({root_ + "/./"});
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_TRUE(fs::path(dirs[0]).is_absolute());
  EXPECT_TRUE(fs::equivalent(dirs[0], root_));
  EXPECT_NO_THROW(check_nvcc_flags({"-DTILE=64", "--use_fast_math", "-Xptxas=-v", "-maxrregcount=128"}));
  for (const char* bad : {"", "-o", "-c", "-E", "-M", "-MD", "--dryrun", "-lib", "-ptx", "--output-file=x",
                          "-Xlinker=-z,lazy", "-Wl,-z,norelro"})
    EXPECT_THROW(check_nvcc_flags({bad}), Error) << bad;
}

TEST_F(CompileTest, FindsCutlassHeaders) {
  {
    ScopedEnv off("KFORGE_CUTLASS_DIR", "off");
    std::string how;
    EXPECT_TRUE(find_cutlass_include_dirs(&how).empty());
    EXPECT_NE(how.find("off"), std::string::npos);
  }
  {
    ScopedEnv bad("KFORGE_CUTLASS_DIR", root_.c_str());  // no cute/tensor.hpp there
    EXPECT_THROW(find_cutlass_include_dirs(), Error);
  }
  // A source-tree layout: include/cute/tensor.hpp and tools/util/include/cutlass/util.
  fs::create_directories(root_ + "/cutlass/include/cute");
  fs::create_directories(root_ + "/cutlass/tools/util/include/cutlass/util");
  write("cutlass/include/cute/tensor.hpp", "#pragma once\n");
  ScopedEnv env("KFORGE_CUTLASS_DIR", (root_ + "/cutlass").c_str());
  const std::vector<std::string> dirs = find_cutlass_include_dirs();
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], root_ + "/cutlass/include");
  EXPECT_EQ(dirs[1], root_ + "/cutlass/tools/util/include");
  EXPECT_EQ(cutlass_include_dirs_in(root_ + "/cutlass/include"), dirs);
  // "auto" puts them on the include path, after the caller's folders.
  CompileOptions o = options();
  o.cutlass = "auto";
  CompileService svc(o);
  ASSERT_EQ(svc.include_dirs().size(), 3u);
  EXPECT_EQ(svc.include_dirs()[0], std::string(KFORGE_SOURCE_DIR) + "/include");
  EXPECT_EQ(svc.include_dirs()[1], dirs[0]);
}

// The honest CuTe candidate of the corpus compiles as the evaluator compiles candidates: the ABI
// header pre-included, CUTLASS/CuTe found by itself (skipped where neither nvcc nor CUTLASS is).
TEST_F(CompileTest, CuteCandidateCompiles) {
  SKIP_WITHOUT_NVCC();
  if (find_cutlass_include_dirs().empty())
    GTEST_SKIP() << "SKIPPED: no CUTLASS/CuTe headers (pip install nvidia-cutlass, or KFORGE_CUTLASS_DIR)";
  CompileOptions o = options();
  o.cutlass = "auto";
  o.extra_flags = {"-include", "kforge/abi/hgemm.h"};
  o.timeout_s = 600;
  const CompileResult r =
      CompileService(o).compile_file(std::string(KFORGE_SOURCE_DIR) + "/tests/corpus/hgemm/honest/cute_mma.cu");
  ASSERT_TRUE(r.ok) << r.failure << "\n" << r.log;
  EXPECT_TRUE(fs::is_regular_file(r.so_path));
}

}  // namespace
}  // namespace kforge
