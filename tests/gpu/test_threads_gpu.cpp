// The exported C API (data/hgemm/export/kforge_hgemm.cpp, compiled into this test with the shipped
// dispatch table) called from many host threads at once: eight threads x 1,000 calls over mixed
// shapes (tuned, off the table, K or N not a multiple of 8, unaligned pointers, fp16
// accumulation, both layouts), every output checked against an fp64 reference, no call refused.
//
// The threads are fresh and make no CUDA call before their first kforge_hgemm(), after the main
// thread has already set up every per-device cache: the situation in which two host threads got
// return code 92 (no current context in the new thread when the TMA descriptor was encoded).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu_test.hpp"
#include "ops/hgemm_table.hpp"

// The library's dispatcher as users link it; its table is the shipped one (what `kforge hgemm
// export` compiles in), loaded on first use.
#include "../../data/hgemm/export/kforge_hgemm.cpp"

namespace kforge_hgemm_export {
const kforge::kernels::DispatchEntry* table(size_t* count) {
  static const kforge::DispatchTable t =
      kforge::DispatchTable::load(std::string(KFORGE_SOURCE_DIR) + "/data/hgemm/dispatch-table.json");
  *count = t.size();
  return t.data();
}
const char* version() { return "kforge_hgemm (test build)"; }
}  // namespace kforge_hgemm_export

namespace kforge {
namespace threads_test {

using test::GpuTest;

struct Case {
  Shape shape;
  Layout layout;
  Acc acc;
  size_t a_offset = 0;  // bytes: 8 makes A 8-byte aligned only (the sm_80 family takes the call)
  DeviceBuffer a, b;
  std::vector<double> ref, bound;  // per output element: fp64 product and the tolerance bound
};

void prepare(Case& c, uint64_t seed, cudaStream_t s) {
  const HgemmProblem p{c.shape, c.layout, c.acc};
  const size_t na = elems_a(c.shape), nb = elems_b(c.shape);
  c.a = DeviceBuffer(na * 2 + 64);
  c.b = DeviceBuffer(nb * 2);
  __half* a = reinterpret_cast<__half*>(c.a.as<char>() + c.a_offset);
  fill_random(a, na, Dist::kUniform, seed, s);
  fill_random(c.b.as<__half>(), nb, Dist::kUniform, seed + 1, s);
  KF_CUDA(cudaStreamSynchronize(s));
  const std::vector<__half> ha = test::to_host(a, na), hb = test::to_host(c.b.as<__half>(), nb);
  const int64_t M = c.shape.m, N = c.shape.n, K = c.shape.k;
  c.ref.assign(size_t(M * N), 0.0);
  c.bound.assign(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0, abs_sum = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double x = __half2float(ha[size_t(i * K + k)]);
        const double y = __half2float(c.layout == Layout::kTN ? hb[size_t(j * K + k)] : hb[size_t(k * N + j)]);
        sum += x * y;
        abs_sum += std::fabs(x * y);
      }
      c.ref[size_t(i * N + j)] = sum;
      c.bound[size_t(i * N + j)] = hgemm_tolerance(sum, abs_sum, c.acc);
    }
  (void)p;
}

kforge_hgemm_args args_of(const Case& c, void* out, void* ws, size_t ws_bytes) {
  kforge_hgemm_args a{};
  a.problem = HgemmProblem{c.shape, c.layout, c.acc}.abi();
  a.a = c.a.as<char>() + c.a_offset;
  a.b = c.b.get();
  a.c = out;
  a.workspace = ws;
  a.workspace_bytes = ws_bytes;
  return a;
}

// Elements outside the bound (NaN counts: outputs are poisoned before each call).
int64_t wrong_elements(const Case& c, const std::vector<__half>& out) {
  int64_t bad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double v = __half2float(out[i]);
    if (!std::isfinite(v) || std::fabs(v - c.ref[i]) > c.bound[i]) ++bad;
  }
  return bad;
}

std::vector<Case> make_cases(cudaStream_t s) {
  struct Spec {
    Shape sh;
    Layout l;
    Acc a;
    size_t off;
  };
  const Spec specs[] = {
      {{64, 64, 64}, Layout::kTN, Acc::kF32, 0},       // on the tuned grid
      {{64, 64, 64}, Layout::kNN, Acc::kF32, 0},
      {{128, 256, 512}, Layout::kTN, Acc::kF32, 0},    // on the grid
      {{64, 64, 4096}, Layout::kNN, Acc::kF32, 0},     // on the grid, long K (split-K winners)
      {{200, 136, 72}, Layout::kTN, Acc::kF32, 0},     // off the grid: nearest neighbours, partial tiles
      {{96, 520, 1000}, Layout::kNN, Acc::kF32, 0},    // off the grid
      {{1, 256, 1024}, Layout::kTN, Acc::kF32, 0},     // decode-like M = 1
      {{256, 8, 2048}, Layout::kTN, Acc::kF32, 0},     // N = 8
      {{33, 17, 9}, Layout::kNN, Acc::kF32, 0},        // K and N not multiples of 8: the sm_80 family
      {{100, 100, 100}, Layout::kTN, Acc::kF32, 0},    // K % 8 == 4
      {{128, 128, 256}, Layout::kTN, Acc::kF32, 8},    // A only 8-byte aligned: sm_80 fallback of a TMA choice
      {{128, 128, 128}, Layout::kNN, Acc::kF16, 0},    // fp16 accumulation
  };
  std::vector<Case> cases;
  uint64_t seed = 100;
  for (const Spec& sp : specs) {
    Case c;
    c.shape = sp.sh;
    c.layout = sp.l;
    c.acc = sp.a;
    c.a_offset = sp.off;
    cases.push_back(std::move(c));
  }
  for (Case& c : cases) prepare(c, seed += 10, s);
  return cases;
}

TEST_F(GpuTest, EightHostThreadsThousandCallsEachAllCorrectNoneRefused) {
  Stream main_stream;
  const std::vector<Case> cases = make_cases(main_stream.get());
  size_t max_c = 0, max_ws = 0;
  for (const Case& c : cases) {
    max_c = std::max(max_c, elems_c(c.shape));
    const kforge_hgemm_problem p = HgemmProblem{c.shape, c.layout, c.acc}.abi();
    max_ws = std::max(max_ws, kforge_hgemm_workspace_size(&p));
  }
  // The main thread calls every case once first: every per-device and per-kernel cache is then set
  // up, so the threads below skip the runtime calls that used to bind a context for them.
  {
    DeviceBuffer out(max_c * 2), ws(std::max<size_t>(max_ws, 256));
    for (const Case& c : cases) {
      poison_nan(out.as<__half>(), elems_c(c.shape), main_stream.get());
      const kforge_hgemm_args a = args_of(c, out.get(), ws.get(), ws.bytes());
      ASSERT_EQ(kforge_hgemm(&a, main_stream.get()), 0) << c.shape.str();
      KF_CUDA(cudaStreamSynchronize(main_stream.get()));
      const int64_t bad = wrong_elements(c, test::to_host(out.as<__half>(), elems_c(c.shape)));
      EXPECT_EQ(bad, 0) << "main thread " << c.shape.str() << " " << to_string(c.layout) << " "
                        << kforge_hgemm_variant_name(&a.problem);
    }
  }

  constexpr int kThreads = 8, kCalls = 1000;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<DeviceBuffer> outs, wss;
  for (int t = 0; t < kThreads; ++t) {
    streams.push_back(std::make_unique<Stream>());
    outs.emplace_back(max_c * 2);
    wss.emplace_back(std::max<size_t>(max_ws, 256));
    KF_CUDA(cudaMemset(outs.back().get(), 0xFF, max_c * 2));  // NaN: an unwritten element fails
  }
  std::atomic<int64_t> refused{0}, wrong_calls{0}, checked{0};
  std::vector<std::string> first_failure(kThreads);
  std::vector<std::thread> pool;
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      // No CUDA call in this thread before its first kforge_hgemm().
      std::mt19937 rng(uint32_t(1234 + t));
      const cudaStream_t s = streams[size_t(t)]->get();
      __half* out = outs[size_t(t)].as<__half>();
      std::vector<__half> host;
      for (int i = 0; i < kCalls; ++i) {
        const Case& c = cases[rng() % cases.size()];
        const kforge_hgemm_args a = args_of(c, out, wss[size_t(t)].get(), wss[size_t(t)].bytes());
        if (kforge_hgemm_workspace_size(&a.problem) > a.workspace_bytes) {
          ++refused;
          if (first_failure[size_t(t)].empty()) first_failure[size_t(t)] = "workspace too small for " + c.shape.str();
          continue;
        }
        const int rc = kforge_hgemm(&a, s);
        if (rc != 0) {
          ++refused;
          if (first_failure[size_t(t)].empty())
            first_failure[size_t(t)] = "call " + std::to_string(i) + " " + c.shape.str() + ": rc " + std::to_string(rc) +
                                       " (" + kforge_hgemm_error_string(rc) + ")";
          continue;
        }
        host.resize(elems_c(c.shape));
        if (cudaMemcpyAsync(host.data(), out, host.size() * 2, cudaMemcpyDeviceToHost, s) != cudaSuccess ||
            cudaStreamSynchronize(s) != cudaSuccess) {
          ++wrong_calls;
          continue;
        }
        const int64_t bad = wrong_elements(c, host);
        ++checked;
        if (bad != 0) {
          ++wrong_calls;
          if (first_failure[size_t(t)].empty())
            first_failure[size_t(t)] = "call " + std::to_string(i) + " " + c.shape.str() + " " +
                                       std::string(to_string(c.layout)) + ": " + std::to_string(bad) + " wrong elements (" +
                                       kforge_hgemm_variant_name(&a.problem) + ")";
        }
        // Poison for the next call (the same buffer serves every case of this thread).
        if (cudaMemsetAsync(out, 0xFF, max_c * 2, s) != cudaSuccess) ++wrong_calls;
      }
    });
  }
  for (std::thread& th : pool) th.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d threads x %d calls: %lld checked, %lld wrong, %lld refused, %.2f s\n", kThreads, kCalls,
              (long long)checked.load(), (long long)wrong_calls.load(), (long long)refused.load(), secs);
  for (int t = 0; t < kThreads; ++t)
    if (!first_failure[size_t(t)].empty()) std::printf("thread %d: first failure %s\n", t, first_failure[size_t(t)].c_str());
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(wrong_calls.load(), 0);
  EXPECT_EQ(checked.load(), int64_t(kThreads) * kCalls);
}

// The per-call host cost of the C API with more distinct problems and buffers than the old
// 16-entry caches held: kforge_hgemm_workspace_size (memoised like the call) and kforge_hgemm
// itself, printed for docs/perf-notes.md.
TEST_F(GpuTest, ApiHostCostStaysFlatPastSixteenProblems) {
  Stream s;
  // 64 distinct problems on 32 distinct (A, B) buffer pairs, all on the TMA path.
  const Shape base{64, 64, 64};
  DeviceBuffer a(size_t(32) * 128 * 1024 * 2), b(size_t(32) * 128 * 1024 * 2), c(size_t(128) * 1024 * 2);
  std::vector<kforge_hgemm_args> calls;
  for (int i = 0; i < 64; ++i) {
    kforge_hgemm_args x{};
    x.problem = HgemmProblem{{base.m + 8 * (i % 8), base.n + 64 * (i / 8), base.k}, Layout::kTN, Acc::kF32}.abi();
    x.a = a.as<char>() + size_t(i % 32) * 128 * 1024 * 2;
    x.b = b.as<char>() + size_t(i % 32) * 128 * 1024 * 2;
    x.c = c.get();
    calls.push_back(x);
  }
  for (const auto& x : calls) ASSERT_EQ(kforge_hgemm(&x, s.get()), 0);  // first use of each
  KF_CUDA(cudaStreamSynchronize(s.get()));
  constexpr int kRounds = 200;
  auto t0 = std::chrono::steady_clock::now();
  size_t sink = 0;
  for (int r = 0; r < kRounds; ++r)
    for (const auto& x : calls) sink += kforge_hgemm_workspace_size(&x.problem);
  const double ws_ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / (kRounds * calls.size());
  t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < 20; ++r) {
    for (const auto& x : calls) ASSERT_EQ(kforge_hgemm(&x, s.get()), 0);
    KF_CUDA(cudaStreamSynchronize(s.get()));
  }
  const double call_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / (20 * calls.size());
  std::printf("64 problems, 32 buffer pairs: kforge_hgemm_workspace_size %.0f ns per call; kforge_hgemm %.2f us per "
              "call (host enqueue, 64x64..120x512x64 on a stream, synchronised every 64 calls) [%zu]\n",
              ws_ns, call_us, sink);
  EXPECT_LT(ws_ns, 2000.0);
}

}  // namespace threads_test
}  // namespace kforge
