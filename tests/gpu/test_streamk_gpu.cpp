// The stream-K variants (KernelConfig::stream_k, stream_k_plan) on the GPU. Their correctness rests
// on a protocol between CTAs, not only on arithmetic: contributors park fp32 partials and raise a
// flag, owners wait for the flags, add the partials in CTA order and lower the flags again. So each
// variant is checked element by element (check_full_gpu) on shapes that take every path of the plan,
// and again where the protocol could break: launches back to back on one workspace (programmatic
// dependent launch lets the next grid start early), a CUDA graph replaying one launch (one epoch),
// a workspace full of garbage, a second call reading the first one's output, and two runs compared
// bit for bit (the owners' order of addition is fixed, so the output is deterministic).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test.hpp"
#include "kernels/hgemm/dispatch.hpp"
#include "ops/hgemm.hpp"

namespace kforge {
namespace {

using test::GpuTest;

// Shapes that take every path of the plan on 132 SMs (counted for 128 x 128 tiles; the wider tiles
// land in the all-stream-K regime more often): 16 tiles of 128 k tiles (each tile cut into ~8
// pieces: an owner waits for several contributors), 160 tiles (one round and a fraction: all
// stream-K), 360 tiles (one whole round data-parallel, the rest stream-K), 132 tiles (whole rounds
// only: all data-parallel), one k tile (no tile can be cut), edge tiles in M and N with a K that is
// not a multiple of 64, and 4096^3 (data-parallel rounds and stream-K for every tile size). Then
// decode shapes, where the short boxes load only M (or N) rows and the partials hold only the rows
// and columns inside the problem: M 7 and 1 (one row tile), M 31, and N 16 (one column tile).
const Shape kShapes[] = {{256, 1024, 8192}, {512, 5120, 5120}, {2304, 2560, 1032}, {1536, 1408, 512},
                         {384, 4096, 64},   {1000, 1000, 1000}, {4096, 4096, 4096}, {7, 12288, 4096},
                         {1, 4096, 4096},   {31, 5120, 3072},   {16384, 16, 4096}};

// The problem of shape `sh` in variant `v`'s layout and dtype (fp16 or bf16; fp32 accumulation).
HgemmProblem problem_for(const kernels::KernelVariant& v, const Shape& sh) {
  return {sh, v.layout == KFORGE_HGEMM_TN ? Layout::kTN : Layout::kNN, Acc::kF32,
          v.dtype == KFORGE_HGEMM_BF16 ? Dtype::kBF16 : Dtype::kF16};
}

// Device operands of `p` in its dtype: A and B random, C poisoned.
struct Operands {
  HgemmProblem p;
  DeviceBuffer a, b, c;
  Operands(const HgemmProblem& prob, uint64_t seed, cudaStream_t s)
      : p(prob), a(elems_a(prob.shape) * 2), b(elems_b(prob.shape) * 2), c(elems_c(prob.shape) * 2) {
    fill_random(a.as<__half>(), elems_a(p.shape), Dist::kUniform, seed, s, p.dtype);
    fill_random(b.as<__half>(), elems_b(p.shape), Dist::kUniform, seed + 1, s, p.dtype);
    poison(s);
  }
  void poison(cudaStream_t s) { poison_nan(c.as<__half>(), elems_c(p.shape), s, p.dtype); }
};

std::vector<const kernels::KernelVariant*> stream_k_variants() {
  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  std::vector<const kernels::KernelVariant*> out;
  for (size_t i = 0; i < count; ++i)
    if (all[i].config.stream_k) out.push_back(&all[i]);
  return out;
}

// Two calls of `v` back to back on one workspace, the second reading the first's C as its A
// (second.m == first.m, second.k == first.n), the second's output checked in full.
void chained(const kernels::KernelVariant& v, const Shape& first, const Shape& second, cudaStream_t s, int& checks) {
  const HgemmProblem p1 = problem_for(v, first), p2 = problem_for(v, second);
  const kforge_hgemm_problem a1 = p1.abi(), a2 = p2.abi();
  const size_t ws_bytes = std::max(v.workspace_size(&a1), v.workspace_size(&a2));
  DeviceBuffer ws(ws_bytes);
  Operands d1(p1, 5, s);
  DeviceBuffer b2(elems_b(p2.shape) * 2), c2(elems_c(p2.shape) * 2);
  fill_random(b2.as<__half>(), elems_b(p2.shape), Dist::kUniform, 6, s, p2.dtype);
  poison_nan(c2.as<__half>(), elems_c(p2.shape), s, p2.dtype);
  const kforge_hgemm_args x1{a1, d1.a.get(), d1.b.get(), d1.c.get(), ws.get(), ws_bytes};
  const kforge_hgemm_args x2{a2, d1.c.get(), b2.get(), c2.get(), ws.get(), ws_bytes};
  ASSERT_EQ(v.run(&x1, s), 0) << v.name;
  ASSERT_EQ(v.run(&x2, s), 0) << v.name;
  const CheckResult r = check_full_gpu(p2, d1.c.as<__half>(), b2.as<__half>(), c2.as<__half>(), s);
  ++checks;
  EXPECT_TRUE(r.ok()) << v.name << " (chained " << first.str() << " then " << second.str() << "): " << r.describe();
}

TEST_F(GpuTest, StreamKVariantsAreCorrectRepeatedlyInGraphsAndChained) {
  const DeviceInfo dev = query_device(0);
  if (dev.cc_major * 10 + dev.cc_minor != 90) GTEST_SKIP() << "the stream-K variants are sm_90a code";
  const auto sk = stream_k_variants();
  ASSERT_FALSE(sk.empty());
  Stream s;
  int checks = 0;
  for (const kernels::KernelVariant* v : sk) {
    for (const Shape& sh : kShapes) {
      const HgemmProblem p = problem_for(*v, sh);
      const kforge_hgemm_problem abi = p.abi();
      ASSERT_TRUE(v->supports(&abi)) << v->name << " " << sh.str();
      const size_t ws_bytes = v->workspace_size(&abi);
      ASSERT_GT(ws_bytes, 0u) << v->name << " " << sh.str();
      DeviceBuffer ws(ws_bytes);
      // Garbage where the flags and partials live: no flag may read as raised.
      KF_CUDA(cudaMemsetAsync(ws.get(), 0xA5, ws_bytes, s.get()));
      Operands d(p, 17 + uint64_t(sh.m), s.get());
      const kforge_hgemm_args args{abi, d.a.get(), d.b.get(), d.c.get(), ws.get(), ws_bytes};
      const std::string what = std::string(v->name) + " " + sh.str();
      auto check = [&](const char* how) {
        const CheckResult r = check_full_gpu(p, d.a.as<__half>(), d.b.as<__half>(), d.c.as<__half>(), s.get());
        ++checks;
        EXPECT_TRUE(r.ok()) << what << " (" << how << "): " << r.describe();
      };
      // One call, checked; then the same again, compared bit for bit.
      ASSERT_EQ(v->run(&args, s.get()), 0) << what;
      check("first call");
      const std::vector<__half> first = test::to_host(d.c.as<__half>(), elems_c(sh));
      d.poison(s.get());
      ASSERT_EQ(v->run(&args, s.get()), 0) << what;
      KF_CUDA(cudaStreamSynchronize(s.get()));
      const std::vector<__half> second = test::to_host(d.c.as<__half>(), elems_c(sh));
      EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(__half)), 0)
          << what << ": two runs differ (the owners' order of addition is fixed)";
      // Twelve launches back to back on one workspace, no synchronisation between them, each into a
      // C of its own, every one compared bit for bit with the first run (an owner that read a
      // partial too early in any of them shows, not only in the last).
      const size_t c_bytes = elems_c(sh) * 2;
      std::vector<DeviceBuffer> outs;
      for (int i = 0; i < 12; ++i) {
        outs.emplace_back(c_bytes);
        poison_nan(outs.back().as<__half>(), elems_c(sh), s.get(), p.dtype);
      }
      for (int i = 0; i < 12; ++i) {
        kforge_hgemm_args each = args;
        each.c = outs[size_t(i)].get();
        ASSERT_EQ(v->run(&each, s.get()), 0) << what;
      }
      KF_CUDA(cudaStreamSynchronize(s.get()));
      for (int i = 0; i < 12; ++i) {
        const std::vector<__half> got = test::to_host(outs[size_t(i)].as<__half>(), elems_c(sh));
        EXPECT_EQ(std::memcmp(first.data(), got.data(), c_bytes), 0) << what << ": launch " << i << " of 12 back to back";
      }
      // A graph of one launch (one epoch), replayed: each replay must find its flags lowered and
      // write the same output.
      GraphExec g;
      g.capture(s.get(), [&] { ASSERT_EQ(v->run(&args, s.get()), 0) << what; });
      for (int i = 0; i < 5; ++i) {
        d.poison(s.get());
        g.launch(s.get());
        KF_CUDA(cudaStreamSynchronize(s.get()));
        const std::vector<__half> got = test::to_host(d.c.as<__half>(), elems_c(sh));
        EXPECT_EQ(std::memcmp(first.data(), got.data(), c_bytes), 0) << what << ": graph replay " << i;
      }
      check("graph replayed five times");
    }
    // Chained: the second call's A is the first call's output, launched right behind it, on one
    // workspace; mid-size, then decode (the next layer's A is this one's 16-row output).
    chained(*v, {512, 5120, 5120}, {512, 2048, 5120}, s.get(), checks);
    chained(*v, {16, 4096, 4096}, {16, 2048, 4096}, s.get(), checks);
    // Too small a workspace is refused, not overrun.
    const HgemmProblem p1 = problem_for(*v, {512, 5120, 5120});
    const kforge_hgemm_problem a1 = p1.abi();
    DeviceBuffer ws(v->workspace_size(&a1));
    Operands d1(p1, 5, s.get());
    const kforge_hgemm_args small{a1, d1.a.get(), d1.b.get(), d1.c.get(), ws.get(), v->workspace_size(&a1) - 1};
    EXPECT_EQ(v->run(&small, s.get()), kernels::kRunUnsupported) << v->name;
    const kforge_hgemm_args none{a1, d1.a.get(), d1.b.get(), d1.c.get(), nullptr, 0};
    EXPECT_EQ(v->run(&none, s.get()), kernels::kRunUnsupported) << v->name;
  }
  std::printf("%zu stream-K variants (fp16 and bf16), %d full checks\n", sk.size(), checks);
}

// Two stream-K GEMMs on two streams at once, each with its own workspace, many times: neither may
// wait for the other (owners spin on contributors, so a grid only partly resident beside another
// one's would wait forever: the launches are cooperative, the whole grid resident or not started).
// Both outputs checked in full. A hang here is the defect (ctest's time-out ends it).
TEST_F(GpuTest, StreamKOnTwoStreamsAtOnceNeitherWaitsForTheOther) {
  const DeviceInfo dev = query_device(0);
  if (dev.cc_major * 10 + dev.cc_minor != 90) GTEST_SKIP() << "the stream-K variants are sm_90a code";
  for (const kernels::KernelVariant* v : stream_k_variants()) {
    if (v->dtype != KFORGE_HGEMM_F16) continue;
    const HgemmProblem p = problem_for(*v, {512, 5120, 5120});
    const kforge_hgemm_problem abi = p.abi();
    const size_t ws_bytes = v->workspace_size(&abi);
    Stream s1, s2;
    DeviceBuffer w1(ws_bytes), w2(ws_bytes);
    Operands d1(p, 21, s1.get()), d2(p, 22, s2.get());
    KF_CUDA(cudaStreamSynchronize(s1.get()));
    KF_CUDA(cudaStreamSynchronize(s2.get()));
    const kforge_hgemm_args x1{abi, d1.a.get(), d1.b.get(), d1.c.get(), w1.get(), ws_bytes};
    const kforge_hgemm_args x2{abi, d2.a.get(), d2.b.get(), d2.c.get(), w2.get(), ws_bytes};
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ(v->run(&x1, s1.get()), 0) << v->name;
      ASSERT_EQ(v->run(&x2, s2.get()), 0) << v->name;
    }
    KF_CUDA(cudaStreamSynchronize(s1.get()));
    KF_CUDA(cudaStreamSynchronize(s2.get()));
    for (Operands* d : {&d1, &d2}) {
      const CheckResult r = check_full_gpu(p, d->a.as<__half>(), d->b.as<__half>(), d->c.as<__half>(), s1.get());
      EXPECT_TRUE(r.ok()) << v->name << " (two streams): " << r.describe();
    }
  }
}

}  // namespace
}  // namespace kforge
