// GPU tests skip, with the reason, on a machine without a usable CUDA device.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "gpu/cuda.hpp"
#include "gpu/device.hpp"
#include "ops/hgemm.hpp"

namespace kforge::test {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = gpu_unavailable_reason()) GTEST_SKIP() << "GPU test skipped: " << *why;
  }
};

inline std::vector<__half> to_host(const __half* d, size_t n) {
  std::vector<__half> h(n);
  KF_CUDA(cudaMemcpy(h.data(), d, n * sizeof(__half), cudaMemcpyDeviceToHost));
  return h;
}

// Device operands of one problem, filled from `dist`.
struct DeviceProblem {
  HgemmProblem p;
  DeviceBuffer a, b, c;
  DeviceProblem(HgemmProblem prob, Dist dist, uint64_t seed, cudaStream_t s)
      : p(prob), a(elems_a(prob.shape) * 2), b(elems_b(prob.shape) * 2), c(elems_c(prob.shape) * 2) {
    fill_random(a.as<__half>(), elems_a(p.shape), dist, seed, s);
    fill_random(b.as<__half>(), elems_b(p.shape), dist, seed + 1, s);
    poison_nan(c.as<__half>(), elems_c(p.shape), s);
    KF_CUDA(cudaStreamSynchronize(s));
  }
};

}  // namespace kforge::test
