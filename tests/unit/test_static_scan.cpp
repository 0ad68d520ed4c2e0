#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/subprocess.hpp"
#include "core/text.hpp"
#include "eval/static_scan.hpp"

namespace kforge {
namespace {

// "rule:symbol@line" for every finding, in order: compact to compare and readable on failure.
std::vector<std::string> brief(const std::vector<ScanFinding>& fs) {
  std::vector<std::string> out;
  for (const ScanFinding& f : fs) out.push_back(f.rule + ":" + f.symbol + "@" + std::to_string(f.line));
  return out;
}

std::vector<std::string> scan(const std::string& src, const ScanPolicy& policy = {}) {
  return brief(static_scan(src, policy));
}

using V = std::vector<std::string>;

// The shape every candidate shares: the entry point around a body.
std::string entry(const std::string& body) {
  return "#include \"kforge/abi/hgemm.h\"\n"                                          // 1
         "extern \"C\" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {\n"  // 2
         + body +                                                                      // 3..
         "}\n";
}

// ---------------------------------------------------------------------------------------------
// An honest candidate

constexpr const char* kHonestKernel = R"cu(// Tiled HGEMM, fp32 accumulation: 32x32 tiles in shared memory.
// Mentions that must not count: cublasGemmEx, cudaDeviceSynchronize(), std::thread, getenv("X").
#include <cuda_fp16.h>
#include <cstdint>
#include "kforge/abi/hgemm.h"

constexpr int kTile = 32;

__global__ void tiled_hgemm(const __half* __restrict__ a, const __half* __restrict__ b, __half* c,
                            int64_t m, int64_t n, int64_t k) {
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];
  const int64_t row = blockIdx.y * kTile + threadIdx.y;
  const int64_t col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.0f;
  long long t0 = clock64();  /* device cycle counter: allowed */
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    as[threadIdx.y][threadIdx.x] = (row < m && k0 + threadIdx.x < k) ? __half2float(a[row * k + k0 + threadIdx.x]) : 0.f;
    bs[threadIdx.y][threadIdx.x] = (col < n && k0 + threadIdx.y < k) ? __half2float(b[(k0 + threadIdx.y) * n + col]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc += as[threadIdx.y][kk] * bs[kk][threadIdx.x];
    __syncthreads();
  }
  (void)t0;
  if (row < m && col < n) c[row * n + col] = __float2half(acc);
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  if (p.layout != KFORGE_HGEMM_NN) return 1;  // "TN is not supported" ('TN' either)
  dim3 block(kTile, kTile);
  dim3 grid(unsigned((p.n + kTile - 1) / kTile), unsigned((p.m + kTile - 1) / kTile));
  tiled_hgemm<<<grid, block, 0, stream>>>(static_cast<const __half*>(args->a),
                                          static_cast<const __half*>(args->b),
                                          static_cast<__half*>(args->c), p.m, p.n, p.k);
  const double scale = 1.5e-3, other = 0x1fULL + 1'000'000;
  (void)scale; (void)other;
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
)cu";

TEST(StaticScan, HonestTiledGemmIsClean) {
  const std::vector<ScanFinding> fs = static_scan(kHonestKernel);
  EXPECT_TRUE(fs.empty()) << fs.front().describe();
}

// ---------------------------------------------------------------------------------------------
// One test per rule

TEST(StaticScan, LibraryCalls) {
  const std::string src =
      "#include <cublas_v2.h>\n"                                                              // 1
      "#include \"cublasLt.h\"\n"                                                             // 2
      "#  include <cudnn.h>\n"                                                                // 3
      "#include <torch/extension.h>\n"                                                        // 4
      "#include <ATen/cuda/CUDAContext.h>\n"                                                  // 5
      "static cublasHandle_t h;\n"                                                            // 6
      "int run(cudaStream_t s) {\n"                                                           // 7
      "  cublasSetStream(h, s);\n"                                                            // 8
      "  cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, 0, 0, CUDA_R_16F, 1, 0, CUDA_R_16F, 1, 0, 0, "
      "CUDA_R_16F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);\n"                           // 9
      "  auto t = at::matmul(x, y); torch::Tensor u;\n"                                       // 10
      "  cusparseCreate(0); cutensorInit(0); cusolverDnCreate(0); cublasish();\n"              // 11
      "  return cublasLtMatmul(0) == 0;\n"                                                    // 12
      "}\n";
  EXPECT_EQ(scan(src), (V{"library_call:#include <cublas_v2.h>@1", "library_call:#include \"cublasLt.h\"@2",
                          "library_call:#include <cudnn.h>@3", "library_call:#include <torch/extension.h>@4",
                          "library_call:#include <ATen/cuda/CUDAContext.h>@5", "library_call:cublasHandle_t@6",
                          "library_call:cublasSetStream@8", "library_call:cublasGemmEx@9",
                          "library_call:at::@10", "library_call:torch::@10", "library_call:cusparseCreate@11",
                          "library_call:cutensorInit@11", "library_call:cusolverDnCreate@11",
                          "library_call:cublasish@11", "library_call:cublasLtMatmul@12"}));
}

TEST(StaticScan, AllowLibrariesSilencesOnlyLibraryCalls) {
  const std::string src = "#include <cublas_v2.h>\nvoid f() { cublasGemmEx(0); cudaDeviceSynchronize(); }\n";
  ScanPolicy p;
  p.allow_libraries = true;
  EXPECT_EQ(scan(src, p), (V{"device_sync:cudaDeviceSynchronize@2"}));
  EXPECT_EQ(scan(src).size(), 3u);
}

TEST(StaticScan, DynamicLoading) {
  const std::string src = entry(
      "  void* lib = dlopen(\"libcublas.so\", RTLD_NOW);\n"                        // 3
      "  auto fn = (int (*)(void*))dlsym(lib, \"cublasGemmEx\");\n"                  // 4
      "  void* p; cuGetProcAddress(\"cuMemcpy\", &p, 12000, 0, nullptr);\n"         // 5
      "  cudaGetDriverEntryPoint(\"cuLaunchKernel\", &p, 0);\n"                     // 6
      "  return fn ? 0 : 1;\n");
  EXPECT_EQ(scan(src), (V{"dynamic_loading:dlopen@3", "dynamic_loading:dlsym@4", "dynamic_loading:cuGetProcAddress@5",
                          "dynamic_loading:cudaGetDriverEntryPoint@6"}));
}

TEST(StaticScan, ThreadCreation) {
  const std::string src =
      "#include <thread>\n#include <future>\n"                                      // 1, 2
      "void go() {\n"                                                               // 3
      "  std::thread worker([] { run_more(); });\n"                                 // 4
      "  auto f = std :: async(std::launch::async, [] { return 1; });\n"            // 5
      "  std::jthread j(work);\n"                                                   // 6
      "  pthread_t t; pthread_create(&t, nullptr, body, nullptr);\n"                // 7
      "  thrd_create(&c, body2, nullptr);\n"                                        // 8
      "  int thread = threadIdx.x; std::this_thread::yield();\n"                    // 9: none of these
      "}\n";
  EXPECT_EQ(scan(src), (V{"thread_creation:std::thread@4", "thread_creation:std::async@5",
                          "thread_creation:std::jthread@6", "thread_creation:pthread_create@7",
                          "thread_creation:thrd_create@8"}));
}

TEST(StaticScan, ProcessCreation) {
  const std::string src =
      "void f() {\n"                                                    // 1
      "  if (fork() == 0) execvp(\"nvidia-smi\", argv);\n"              // 2
      "  std::system(\"nvidia-smi -lgc 1980\");\n"                      // 3
      "  FILE* p = popen(\"ls\", \"r\");\n"                             // 4
      "  posix_spawn(&pid, \"/bin/sh\", 0, 0, argv, envp);\n"           // 5
      "  vfork(); clone(fn, stack, 0, 0); execve(a, b, c);\n"           // 6
      "  mysystem(1); int systematic = 0; filesystem_ok();\n"           // 7: none
      "}\n";
  EXPECT_EQ(scan(src), (V{"process_creation:fork@2", "process_creation:execvp@2", "process_creation:system@3",
                          "process_creation:popen@4", "process_creation:posix_spawn@5", "process_creation:vfork@6",
                          "process_creation:clone@6", "process_creation:execve@6"}));
}

TEST(StaticScan, StreamCreationAndAllowStreams) {
  const std::string src = entry(
      "  cudaStream_t side; cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);\n"   // 3
      "  kernel<<<1, 1, 0, side>>>();\n"                                                 // 4
      "  kernel<<<1, 1, 0, cudaStreamPerThread>>>();\n"                                  // 5
      "  cudaStreamCreate(&side); cudaLaunchHostFunc(stream, cb, nullptr);\n"            // 6
      "  cudaGraphLaunch(exec, stream); kernel<<<1, 1, 0, cudaStreamLegacy>>>();\n"      // 7
      "  return 0;\n");
  EXPECT_EQ(scan(src), (V{"stream_creation:cudaStreamCreateWithFlags@3", "stream_creation:cudaStreamPerThread@5",
                          "stream_creation:cudaStreamCreate@6", "stream_creation:cudaLaunchHostFunc@6",
                          "stream_creation:cudaGraphLaunch@7", "stream_creation:cudaStreamLegacy@7"}));
  ScanPolicy p;
  p.allow_streams = true;
  EXPECT_TRUE(scan(src, p).empty());
}

TEST(StaticScan, Timers) {
  const std::string src =
      "__global__ void k(long long* out) { out[0] = clock64(); out[1] = clock(); }\n"   // 1: clock( only
      "void host() {\n"                                                                  // 2
      "  float ms; cudaEventElapsedTime(&ms, e0, e1);\n"                                 // 3
      "  timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);\n"                            // 4
      "  auto t0 = std::chrono::steady_clock::now();\n"                                  // 5
      "  unsigned long long c = __rdtsc(); time_t now = time(nullptr);\n"                // 6
      "  unsigned lo, hi; asm volatile(\"rdtsc\" : \"=a\"(lo), \"=d\"(hi));\n"           // 7
      "  timeval tv; gettimeofday(&tv, nullptr);\n"                                      // 8
      "  int time = 3, timeline = 4; clock_t clock = 0;\n"                               // 9: none
      "}\n";
  EXPECT_EQ(scan(src), (V{"timer:clock@1", "timer:cudaEventElapsedTime@3", "timer:clock_gettime@4",
                          "timer:std::chrono@5", "timer:__rdtsc@6", "timer:time@6", "timer:rdtsc@7",
                          "timer:gettimeofday@8"}));
}

TEST(StaticScan, FileAccess) {
  const std::string src =
      "#include <fstream>\n"                                                           // 1: not a use
      "void cache(const float* c) {\n"                                                 // 2
      "  FILE* f = fopen(\"/tmp/kf_cache.bin\", \"rb\");\n"                            // 3
      "  std::ofstream out(\"/tmp/out\"); ifstream in;\n"                              // 4
      "  int fd = open(\"/dev/shm/x\", O_RDWR); void* m = mmap(0, 4096, 3, 1, fd, 0);\n"  // 5
      "  unlink(\"/tmp/x\"); remove(\"/tmp/y\"); rename(\"a\", \"b\");\n"                 // 6
      "  bool opened = false; int my_fopen_count = 0, open = 1; freopen_ok();\n"       // 7: none
      "}\n";
  EXPECT_EQ(scan(src), (V{"file_access:fopen@3", "file_access:std::ofstream@4", "file_access:ifstream@4",
                          "file_access:open@5", "file_access:mmap@5", "file_access:unlink@6",
                          "file_access:remove@6", "file_access:rename@6"}));
}

TEST(StaticScan, EnvironmentAccess) {
  const std::string src =
      "extern char** environ;\n"                                                      // 1
      "int mode() {\n"                                                                 // 2
      "  const char* v = getenv(\"KFORGE_TIMING\");\n"                                 // 3
      "  setenv(\"CUDA_LAUNCH_BLOCKING\", \"1\", 1); putenv(buf); unsetenv(\"X\");\n"  // 4
      "  return secure_getenv(\"Y\") != nullptr;\n"                                    // 5
      "}\n";
  EXPECT_EQ(scan(src), (V{"environment_access:environ@1", "environment_access:getenv@3",
                          "environment_access:setenv@4", "environment_access:putenv@4",
                          "environment_access:unsetenv@4", "environment_access:secure_getenv@5"}));
}

TEST(StaticScan, DeviceSettings) {
  const std::string src = entry(
      "  cudaStreamAttrValue attr{};\n"                                                         // 3
      "  attr.accessPolicyWindow.base_ptr = args->c;\n"                                         // 4
      "  cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr);\n"       // 5
      "  cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 26); cudaSetDevice(0);\n"      // 6
      "  nvmlDeviceSetGpuLockedClocks(dev, 1980, 1980); cudaCtxResetPersistingL2Cache();\n"     // 7
      "  cudaDeviceSetCacheConfig(cudaFuncCachePreferShared); cudaProfilerStop();\n"            // 8
      "  return 0;\n");
  EXPECT_EQ(scan(src), (V{"device_settings:accessPolicyWindow@4", "device_settings:cudaStreamSetAttribute@5",
                          "device_settings:cudaDeviceSetLimit@6", "device_settings:cudaSetDevice@6",
                          "device_settings:nvmlDeviceSetGpuLockedClocks@7",
                          "device_settings:cudaCtxResetPersistingL2Cache@7",
                          "device_settings:cudaDeviceSetCacheConfig@8", "device_settings:cudaProfilerStop@8"}));
}

TEST(StaticScan, DeviceSync) {
  const std::string src = entry(
      "  kernel<<<g, b, 0, stream>>>(args->c);\n"               // 3
      "  cudaStreamSynchronize(stream);\n"                      // 4: the given stream, allowed
      "  cudaDeviceSynchronize(); cuCtxSynchronize();\n"        // 5
      "  cudaThreadSynchronize();\n"                            // 6
      "  return 0;\n");
  const std::vector<ScanFinding> fs = static_scan(src);
  EXPECT_EQ(brief(fs), (V{"device_sync:cudaDeviceSynchronize@5", "device_sync:cuCtxSynchronize@5",
                          "device_sync:cudaThreadSynchronize@6"}));
  ASSERT_FALSE(fs.empty());
  EXPECT_EQ(fs[0].text, "cudaDeviceSynchronize(); cuCtxSynchronize();");
  EXPECT_EQ(fs[0].describe(),
            "line 5: cudaDeviceSynchronize (device_sync): cudaDeviceSynchronize(); cuCtxSynchronize();");
}

// ---------------------------------------------------------------------------------------------
// Comments, literals, words and lines

TEST(StaticScan, CommentsAndLiteralsAreNotCode) {
  const std::string src =
      "// cublasGemmEx(h); cudaDeviceSynchronize();\n"
      "/* std::thread t; fork();\n"
      "   #include <cublas_v2.h>\n"
      "   getenv(\"HOME\") */\n"
      "const char* msg = \"call cudaDeviceSynchronize() then fopen(\\\"x\\\") // not a comment\";\n"
      "const char* raw = R\"kf(dlopen(\"a\"); )\" system(\"ls\") )kf\";\n"
      "const char* multi = R\"(\n  popen(\"x\")\n  std::async\n)\";\n"
      "char q = '\"'; char e = '\\''; const char* w = L\"getenv\" u8\"fork\";\n"
      "int x = 1; // trailing: cudaStreamCreate(&s);\n";
  const std::vector<ScanFinding> fs = static_scan(src);
  EXPECT_TRUE(fs.empty()) << fs.front().describe();
}

TEST(StaticScan, CodeAfterCommentsAndLiteralsIsStillSeen) {
  const std::string src =
      "/* a comment\n"                                                     // 1
      "   spanning\n"                                                      // 2
      "   three lines */ int a = 0;\n"                                     // 3
      "const char* s = \"/* not a comment start\"; int b = getenv(\"X\") != 0;\n"  // 4
      "char c = '\\''; cudaDeviceSynchronize();\n"                         // 5
      "const char* r = R\"(\n"                                             // 6
      "line\n"                                                             // 7
      ")\"; fork();\n"                                                     // 8
      "int d = 1; /* inline */ dlopen(0, 0); // cudaSetDevice(1)\n";       // 9
  EXPECT_EQ(scan(src), (V{"environment_access:getenv@4", "device_sync:cudaDeviceSynchronize@5",
                          "process_creation:fork@8", "dynamic_loading:dlopen@9"}));
}

TEST(StaticScan, WholeWordsOnly) {
  const std::string src =
      "int my_fopen_count = 0, systematic = 1, timeline = 2, opened = 3;\n"
      "void mysystem(int); void reopen(int); int forked = 0; int xgetenv = 0;\n"
      "void f() { mysystem(1); reopen(2); my_clock(); time_it(); dlopen_count++; }\n"
      "int cudaDeviceSynchronizeCount = 0; int use_nvml = 0;\n";
  const std::vector<ScanFinding> fs = static_scan(src);
  EXPECT_TRUE(fs.empty()) << fs.front().describe();
}

TEST(StaticScan, DigitSeparatorsAreNotCharacterLiterals) {
  // Read as character literals, the quotes in 1'000 ... 2'000 would hide the call between them.
  EXPECT_EQ(scan("const int n = 1'000; fork(); const long m = 0x7f'ffULL, e = 1.5e-3f;\n"),
            (V{"process_creation:fork@1"}));
}

TEST(StaticScan, ReportsEachRuleAndSymbolOncePerLineInColumnOrder) {
  const std::string src = "void f() { getenv(\"A\"); fork(); getenv(\"B\"); }\n"
                          "void g() { getenv(\"C\"); }\n";
  EXPECT_EQ(scan(src), (V{"environment_access:getenv@1", "process_creation:fork@1", "environment_access:getenv@2"}));
}

TEST(StaticScan, SplicedLinesAndLongLines) {
  // A backslash-newline cannot split a forbidden identifier; the finding is on the line it starts.
  const std::string src = "int a;\nvoid f() { cudaDevice\\\nSynchronize(); }\nint b; fork();\n";
  EXPECT_EQ(scan(src), (V{"device_sync:cudaDeviceSynchronize@2", "process_creation:fork@4"}));
  // A // comment ending in a backslash swallows the next line, as the compiler sees it.
  EXPECT_TRUE(scan("// note \\\nfork();\n").empty());

  const std::string long_line = "  fork(); /*" + std::string(300, 'x') + "*/\n";
  const std::vector<ScanFinding> fs = static_scan(long_line);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].line, 1);
  EXPECT_EQ(fs[0].text.size(), 200u);
  EXPECT_EQ(fs[0].text.substr(0, 9), "fork(); /");
}

TEST(StaticScan, MacrosAndIncludesOfOrdinaryHeaders) {
  const std::string src =
      "#include <cuda_runtime.h>\n"                       // 1
      "#include <fstream>\n"                              // 2: including is not using
      "#include \"my_cublas_wrapper.h\"\n"                // 3: not a cuBLAS header by name
      "#define SYNC() cudaDeviceSynchronize()\n"          // 4
      "#if 0 // cublas\n#endif\n";                        // 5, 6
  EXPECT_EQ(scan(src), (V{"device_sync:cudaDeviceSynchronize@4"}));
}

TEST(StaticScan, EmptyAndCrlfSources) {
  EXPECT_TRUE(static_scan("").empty());
  const std::vector<ScanFinding> fs = static_scan("int a;\r\n  fork();\r\n");
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].line, 2);
  EXPECT_EQ(fs[0].text, "fork();");
}

// ---------------------------------------------------------------------------------------------
// One rule file for both scanners (data/scan-rules.json)

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The shared sample: this scanner and python/kforge_worker/scan.py must both report exactly
// tests/corpus/scan/agreement.json, under either rule set.
TEST(StaticScan, AgreesWithThePythonScannerOnTheSharedSample) {
  const std::string dir = std::string(KFORGE_SOURCE_DIR) + "/tests/corpus/scan";
  const nlohmann::json expected = nlohmann::json::parse(slurp(dir + "/agreement.json"));
  const std::string source = slurp(dir + "/" + expected.at("sample").get<std::string>());
  ASSERT_FALSE(source.empty());
  for (const char* scanner : {"cuda", "torch"}) {
    ScanPolicy p;
    p.scanner = scanner;
    EXPECT_EQ(scan(source, p), expected.at(scanner).get<V>()) << scanner;
  }
  ScanPolicy bad;
  bad.scanner = "fortran";
  EXPECT_THROW(static_scan(source, bad), Error);

  // The Python side of the same test (python3 only; no torch needed).
  if (!run_process({"python3", "--version"}).ok()) GTEST_SKIP() << "SKIPPED: no python3 for the Python half";
  const ProcessResult r =
      run_process({"python3", std::string(KFORGE_SOURCE_DIR) + "/tests/python/test_scan_agreement.py"});
  EXPECT_TRUE(r.ok()) << r.describe() << "\n" << r.out << r.err;
}

TEST(StaticScan, DeviceSynchronizeIsDeviceSyncForBothScanners) {
  ScanPolicy torch;
  torch.scanner = "torch";
  const std::string src = "void f() { cudaDeviceSynchronize(); }\n";
  EXPECT_EQ(scan(src), V{"device_sync:cudaDeviceSynchronize@1"});
  EXPECT_EQ(scan(src, torch), V{"device_sync:cudaDeviceSynchronize@1"});
}

// A byte that is not UTF-8 (Latin-1 'é' in a comment and in a finding's line) is quoted as U+FFFD.
TEST(StaticScan, NonUtf8BytesAreQuotedAsValidUtf8) {
  const std::string src = "// caf\xe9 au lait\nvoid f() { fork(); /* \xe9t\xe9 */ }\n";
  const std::vector<ScanFinding> fs = static_scan(src);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].line, 2);
  EXPECT_TRUE(is_valid_utf8(fs[0].text)) << fs[0].text;
  EXPECT_EQ(fs[0].text, "void f() { fork(); /* \xef\xbf\xbdt\xef\xbf\xbd */ }");
  // A header name with such a byte, too.
  const std::vector<ScanFinding> inc = static_scan("#include <cublas\xff.h>\n");
  ASSERT_EQ(inc.size(), 1u);
  EXPECT_TRUE(is_valid_utf8(inc[0].symbol)) << inc[0].symbol;
  EXPECT_TRUE(is_valid_utf8(inc[0].describe()));
}

}  // namespace
}  // namespace kforge
