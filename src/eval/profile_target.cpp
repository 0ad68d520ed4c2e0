// kforge-executor profile: one HGEMM candidate run for a profiler (eval/profile.hpp), in a process
// of its own that kforge starts under ncu; never the judge, and nothing here forms a verdict.
//
//   kforge-executor profile --so SO --m M --n N --k K [--layout nn|tn] [--acc f32|f16]
//                           [--warmup W] [--no-sandbox] --result FILE
//
// It allocates A, B, C (and the workspace the candidate asks for), fills A and B with random
// fp16 values in [-1, 1), installs the candidate sandbox (as the judged executor does), loads the
// candidate, makes W calls, then one call between cudaProfilerStart and cudaProfilerStop (ncu
// runs with --profile-from-start off, so only that call is profiled), and writes
// {"ok", "rc", "cuda", "error"?} to FILE. Whatever the candidate prints goes to stderr.
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "eval/executor.hpp"
#include "kforge/abi/hgemm.h"

namespace kforge {
namespace {

void write_result(int fd, const nlohmann::json& j) {
  if (fd < 0) return;
  const std::string s = j.dump() + "\n";
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) break;
    off += size_t(n);
  }
  ::close(fd);
}

}  // namespace

int profile_target_main(int argc, char** argv) {
  std::string so, result, layout = "nn", acc = "f32";
  long long m = 0, n = 0, k = 0;
  int warmup = 2;
  bool sandbox = true;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kforge-executor profile: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--so") so = next();
    else if (a == "--m") m = std::stoll(next());
    else if (a == "--n") n = std::stoll(next());
    else if (a == "--k") k = std::stoll(next());
    else if (a == "--layout") layout = next();
    else if (a == "--acc") acc = next();
    else if (a == "--warmup") warmup = std::stoi(next());
    else if (a == "--result") result = next();
    else if (a == "--no-sandbox") sandbox = false;
    else {
      std::fprintf(stderr, "kforge-executor profile: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  // The result file is opened before any candidate code exists in this process.
  const int out = result.empty() ? -1 : ::open(result.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  nlohmann::json r = {{"ok", false}};
  auto fail = [&](const std::string& why) {
    r["error"] = why;
    write_result(out, r);
    return 1;
  };
  if (so.empty() || m <= 0 || n <= 0 || k <= 0) return fail("--so, --m, --n and --k are required");
  ::dup2(2, 1);  // nothing the candidate prints reaches ncu's standard output

  if (cudaFree(nullptr) != cudaSuccess) return fail("CUDA could not start");
  kforge_hgemm_problem p{};
  p.m = m, p.n = n, p.k = k;
  p.layout = layout == "tn" ? KFORGE_HGEMM_TN : KFORGE_HGEMM_NN;
  p.acc = acc == "f16" ? KFORGE_HGEMM_ACC_F16 : KFORGE_HGEMM_ACC_F32;
  const size_t a_elems = size_t(m) * size_t(k), b_elems = size_t(k) * size_t(n), c_elems = size_t(m) * size_t(n);
  void *da = nullptr, *db = nullptr, *dc = nullptr, *ws = nullptr;
  if (cudaMalloc(&da, a_elems * 2) != cudaSuccess || cudaMalloc(&db, b_elems * 2) != cudaSuccess ||
      cudaMalloc(&dc, c_elems * 2) != cudaSuccess)
    return fail("cannot allocate the operands");
  {
    std::mt19937_64 rng(12345);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<__half> h(std::max(a_elems, b_elems));
    for (size_t i = 0; i < a_elems; ++i) h[i] = __float2half(dist(rng));
    cudaMemcpy(da, h.data(), a_elems * 2, cudaMemcpyHostToDevice);
    for (size_t i = 0; i < b_elems; ++i) h[i] = __float2half(dist(rng));
    cudaMemcpy(db, h.data(), b_elems * 2, cudaMemcpyHostToDevice);
    cudaMemset(dc, 0, c_elems * 2);
  }
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (cudaDeviceSynchronize() != cudaSuccess) return fail("the operands could not be prepared");

  std::string why;
  if (sandbox && !install_candidate_sandbox(why)) return fail("the candidate sandbox could not be installed: " + why);
  r["sandbox"] = sandbox;
  void* handle = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    return fail(std::string("dlopen failed: ") + (e ? e : "?"));
  }
  auto fn = reinterpret_cast<kforge_hgemm_fn>(::dlsym(handle, "kforge_hgemm"));
  auto ws_fn = reinterpret_cast<kforge_hgemm_workspace_size_fn>(::dlsym(handle, "kforge_hgemm_workspace_size"));
  if (!fn) return fail("the shared object does not define kforge_hgemm");
  const size_t ws_bytes = ws_fn ? ws_fn(&p) : 0;
  if (ws_bytes > (size_t(8) << 30)) return fail("the candidate asks for more than 8 GiB of workspace");
  if (ws_bytes && cudaMalloc(&ws, ws_bytes) != cudaSuccess) return fail("cannot allocate the workspace");
  kforge_hgemm_args args{};
  args.problem = p;
  args.a = da, args.b = db, args.c = dc, args.workspace = ws, args.workspace_bytes = ws_bytes;
  int rc = 0;
  for (int i = 0; i < warmup && rc == 0; ++i) rc = fn(&args, stream);
  cudaError_t err = cudaDeviceSynchronize();
  if (rc == 0 && err == cudaSuccess) {
    cudaProfilerStart();
    rc = fn(&args, stream);
    err = cudaDeviceSynchronize();
    cudaProfilerStop();
  }
  r["rc"] = rc;
  r["cuda"] = err == cudaSuccess ? "" : cudaGetErrorName(err);
  r["ok"] = rc == 0 && err == cudaSuccess;
  if (rc != 0) r["error"] = "the candidate returned " + std::to_string(rc);
  else if (err != cudaSuccess) r["error"] = std::string("CUDA error ") + cudaGetErrorName(err);
  write_result(out, r);
  std::fflush(nullptr);
  ::_exit(r["ok"].get<bool>() ? 0 : 1);
}

}  // namespace kforge
