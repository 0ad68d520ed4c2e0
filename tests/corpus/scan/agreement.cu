// The shared sample of the scan agreement tests (tests/unit/test_static_scan.cpp runs the C++
// scanner, tests/python/test_scan_agreement.py the Python one): both must report exactly what
// agreement.json lists, for both rule sets of data/scan-rules.json ("cuda" and "torch").
// Mentions in comments never count: cublasGemmEx, fork(), std::thread, getenv("X").
#include <cublas_v2.h>
#include <torch/extension.h>
#include "my_helpers.h"
#include <fstream>

static const char* kText = "getenv(\"HOME\") and cudaDeviceSynchronize() // not a comment";
static const char* kRaw = R"kf(fork(); system("ls"))kf";
__global__ void k(float* p) { long long t = clock64(); p[0] = float(t) + 1'000 + 0x1fULL; }

torch::Tensor run(torch::Tensor x) {
  auto y = x.clone(); auto z = ptr->clone();
  clone(fn, stack, 0, nullptr);
  cudaDeviceSynchronize(); cuCtxSynchronize();
  cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0); cudaSetDevice(0);
  std::thread th(work); pthread_create(&t, nullptr, body, nullptr); std :: async(f);
  void* h = dlopen("libcublas.so", 1); dlsym(h, "cublasGemmEx");
  const char* v = getenv("X"); setenv("Y", "1", 1); extern char** environ;
  FILE* f = fopen("/tmp/x", "r"); std::ofstream out("/tmp/y"); remove("/tmp/z"); int open = 0;
  auto t0 = std::chrono::steady_clock::now(); time(nullptr); clock(); int time = 1;
  cudaEvent_t e; cudaEventCreate(&e); cudaEventElapsedTime(&ms, e, e);
  cudaStream_t s; cudaStreamCreate(&s); auto p = at::cuda::getStreamFromPool();
  cublasSgemm(h2, 0); at::cuda::blas::gemm(1);
  system("ls"); popen("ls", "r"); int systematic = 0;
  PyObject* o = Py_None;
  nvmlDeviceSetGpuLockedClocks(0, 1, 1);
  unsigned lo, hi; asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
  cudaDevice\
Synchronize();
  return y;
}
