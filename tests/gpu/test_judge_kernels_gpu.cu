// The judge's arena kernels (eval/judge_kernels.cu) against a plain statement of what they must do:
// one thread per two-byte element, every element's value from the generator, every element hashed.
// The fast kernels (16 bytes a thread, the k index carried along, the expected state computed while
// writing) must write the same bytes and read the same hashes; a changed byte must show.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "eval/arena.hpp"
#include "eval/hgemm_checks.hpp"
#include "eval/judge_kernels.hpp"
#include "gpu_test.hpp"
#include "ops/hgemm_gen.cuh"

namespace kforge::test {
namespace {

using gen::mix64;

__device__ uint64_t ref_slot_seed(uint64_t seed, int slot) { return mix64(seed ^ (uint64_t(slot) * 0x9E3779B97F4A7C15ull)); }

__global__ void ref_prepare(char* arena, ArenaLayout l, const int* slots, const unsigned char* dists, uint64_t seed) {
  const int slot = slots[blockIdx.y];
  const int dist = dists[blockIdx.y];
  unsigned short* h = reinterpret_cast<unsigned short*>(arena + uint64_t(slot) * l.slot_bytes);
  const uint64_t ss = ref_slot_seed(seed, slot), sign_seed = mix64(ss ^ 0x5157u);
  const bool tn = l.layout == 1, bf16 = l.dtype == 1;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < l.slot_bytes / 2; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t byte = 2 * i;
    unsigned short v = 0xA5A5;
    if (byte >= l.a_off && byte < l.a_off + l.a_bytes) {
      const uint64_t e = (byte - l.a_off) / 2;
      v = gen::encode(gen::value(dist, ss, e, true, int64_t(e % uint64_t(l.k)), sign_seed, bf16), bf16);
    } else if (byte >= l.b_off && byte < l.b_off + l.b_bytes) {
      const uint64_t e = (byte - l.b_off) / 2;
      const int64_t kk = tn ? int64_t(e % uint64_t(l.k)) : int64_t(e / uint64_t(l.n));
      v = gen::encode(gen::value(dist, mix64(ss + 1), e, false, kk, sign_seed, bf16), bf16);
    } else if (byte >= l.c_off && byte < l.c_off + l.c_bytes) {
      v = gen::nan_bits(bf16);
    }
    h[i] = v;
  }
}

__global__ void ref_scan(const char* arena, ArenaLayout l, const int* slots, SlotCheck* out) {
  const int slot = slots[blockIdx.y];
  const unsigned short* h = reinterpret_cast<const unsigned short*>(arena + uint64_t(slot) * l.slot_bytes);
  unsigned long long guard = 0, nonfinite = 0, in_hash = 0, out_hash = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < l.slot_bytes / 2; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t byte = 2 * i;
    const unsigned short v = h[i];
    if (byte >= l.a_off && byte < l.a_off + l.a_bytes) {
      in_hash += mix64((byte << 16) ^ v);
    } else if (byte >= l.b_off && byte < l.b_off + l.b_bytes) {
      in_hash += mix64((byte << 16) ^ v ^ 0xB0000000000000ull);
    } else if (byte >= l.c_off && byte < l.c_off + l.c_bytes) {
      out_hash += mix64((byte << 16) ^ v);
      nonfinite += gen::nonfinite_bits(v, l.dtype == 1);
    } else {
      guard += ((v & 0xFF) != kArenaGuardByte) + ((v >> 8) != kArenaGuardByte);
    }
  }
  SlotCheck* o = out + blockIdx.y;
  atomicAdd(&o->guard, guard);
  atomicAdd(&o->nonfinite, nonfinite);
  atomicAdd(&o->in_hash, in_hash);
  atomicAdd(&o->out_hash, out_hash);
}

struct Arena {
  ArenaLayout l;
  DeviceBuffer mem, slots, dists, checks;
  Arena(int64_t m, int64_t n, int64_t k, int layout, int dtype, int nslots)
      : l(make_arena_layout(m, n, k, layout, 0, uint64_t(nslots), 0, dtype)),
        mem(l.total, "test arena"),
        slots(sizeof(int) * size_t(nslots)),
        dists(size_t(nslots)),
        checks(sizeof(SlotCheck) * size_t(nslots)) {
    KF_CUDA(cudaMemset(mem.get(), kArenaGuardByte, l.total));
    std::vector<int> order(static_cast<size_t>(nslots));
    std::vector<unsigned char> d(static_cast<size_t>(nslots));
    for (int i = 0; i < nslots; ++i) order[size_t(i)] = nslots - 1 - i, d[size_t(i)] = (unsigned char)kCheckDists[size_t(i) % 4];
    KF_CUDA(cudaMemcpy(slots.get(), order.data(), sizeof(int) * order.size(), cudaMemcpyHostToDevice));
    KF_CUDA(cudaMemcpy(dists.get(), d.data(), d.size(), cudaMemcpyHostToDevice));
  }
  int n() const { return int(l.slots); }
  unsigned ref_blocks() const { return unsigned(std::min<uint64_t>(l.slot_bytes / 2 / 256 + 1, 1024)); }
  void ref_fill(uint64_t seed) {
    ref_prepare<<<dim3(ref_blocks(), unsigned(n())), 256>>>(mem.as<char>(), l, slots.as<int>(), dists.as<unsigned char>(), seed);
    KF_CUDA(cudaDeviceSynchronize());
  }
  std::vector<SlotCheck> ref_read() {
    KF_CUDA(cudaMemset(checks.get(), 0, checks.bytes()));
    ref_scan<<<dim3(ref_blocks(), unsigned(n())), 256>>>(mem.as<char>(), l, slots.as<int>(), checks.as<SlotCheck>());
    return copy_checks();
  }
  std::vector<SlotCheck> fill(uint64_t seed) {
    arena_prepare(mem.as<char>(), l, slots.as<int>(), dists.as<unsigned char>(), n(), seed, nullptr, checks.as<SlotCheck>());
    return copy_checks();
  }
  std::vector<SlotCheck> read() {
    arena_check(mem.as<char>(), l, slots.as<int>(), n(), 2, 7, checks.as<SlotCheck>(), nullptr);
    return copy_checks();
  }
  std::vector<SlotCheck> copy_checks() {
    std::vector<SlotCheck> out(static_cast<size_t>(n()));
    KF_CUDA(cudaMemcpy(out.data(), checks.get(), checks.bytes(), cudaMemcpyDeviceToHost));
    return out;
  }
  std::vector<unsigned char> bytes() {
    std::vector<unsigned char> h(l.slots * l.slot_bytes);
    KF_CUDA(cudaMemcpy(h.data(), mem.get(), h.size(), cudaMemcpyDeviceToHost));
    return h;
  }
};

struct Case {
  int64_t m, n, k;
  int layout, dtype;
};

TEST_F(GpuTest, ArenaKernelsWriteAndReadWhatThePlainKernelsDo) {
  // Odd sizes put a part's end inside a 16-byte group; nn and tn, fp16 and bf16; K past 64 (the
  // biased blocks), N past one k row.
  for (const Case& c : {Case{7, 13, 5, 1, 0}, Case{33, 17, 70, 0, 0}, Case{64, 40, 129, 0, 1}, Case{5, 3, 1, 1, 1},
                        Case{100, 9, 131, 1, 0}, Case{1, 1, 1, 0, 0}}) {
    SCOPED_TRACE(testing::Message() << c.m << "x" << c.n << "x" << c.k << (c.layout ? " tn" : " nn") << (c.dtype ? " bf16" : " f16"));
    Arena ref(c.m, c.n, c.k, c.layout, c.dtype, 5), fast(c.m, c.n, c.k, c.layout, c.dtype, 5);
    ref.ref_fill(1234);
    const std::vector<SlotCheck> expect = fast.fill(1234);
    ASSERT_EQ(ref.bytes(), fast.bytes());
    const std::vector<SlotCheck> plain = ref.ref_read(), read = fast.read();
    for (size_t i = 0; i < expect.size(); ++i) {
      EXPECT_EQ(read[i].in_hash, plain[i].in_hash) << "slot " << i;
      EXPECT_EQ(read[i].out_hash, plain[i].out_hash) << "slot " << i;
      EXPECT_EQ(read[i].nonfinite, plain[i].nonfinite) << "slot " << i;
      EXPECT_EQ(read[i].nonfinite, uint64_t(c.m * c.n)) << "slot " << i;
      EXPECT_EQ(read[i].guard, 0u) << "slot " << i;
      EXPECT_EQ(expect[i].in_hash, plain[i].in_hash) << "slot " << i;
      EXPECT_EQ(expect[i].out_hash, plain[i].out_hash) << "slot " << i;
      EXPECT_EQ(expect[i].nonfinite, plain[i].nonfinite) << "slot " << i;
      EXPECT_EQ(expect[i].guard, 0u) << "slot " << i;
    }
    // One byte changed in a guard, in the last element of A, in the last element of B, in C: each shows.
    const ArenaLayout& l = fast.l;
    const uint64_t slot0 = uint64_t(l.slots - 1) * l.slot_bytes;  // the fill's first slot (order is reversed)
    struct Poke {
      uint64_t at;
      const char* what;
    };
    for (const Poke& p : {Poke{slot0 + l.a_off + l.a_bytes, "the guard after A"}, Poke{slot0 + l.a_off + l.a_bytes - 1, "A's last element"},
                          Poke{slot0 + l.b_off + l.b_bytes - 2, "B's last element"}, Poke{slot0 + l.c_off + l.c_bytes / 2, "C"}}) {
      SCOPED_TRACE(p.what);
      fast.fill(99);
      const std::vector<SlotCheck> clean = fast.read();
      unsigned char byte = 0;
      KF_CUDA(cudaMemcpy(&byte, fast.mem.as<char>() + p.at, 1, cudaMemcpyDeviceToHost));
      byte ^= 0x10;
      KF_CUDA(cudaMemcpy(fast.mem.as<char>() + p.at, &byte, 1, cudaMemcpyHostToDevice));
      const std::vector<SlotCheck> now = fast.read();
      EXPECT_TRUE(now[0].guard != clean[0].guard || now[0].in_hash != clean[0].in_hash || now[0].out_hash != clean[0].out_hash);
      for (size_t i = 1; i < now.size(); ++i) EXPECT_EQ(now[i].in_hash, clean[i].in_hash) << "slot " << i;
    }
  }
}

// Not a timed test (nothing is asserted of the times): the figures for docs/perf-notes.md, one
// batch of the judge's at 4096^3 (45 slots of ~100 MB), the plain kernels against the fast ones.
TEST_F(GpuTest, ArenaKernelsTimesAt4096Cubed) {
  size_t free_b = 0, total_b = 0;
  KF_CUDA(cudaMemGetInfo(&free_b, &total_b));
  const ArenaLayout probe = make_arena_layout(4096, 4096, 4096, 1, 0, 45, 0, 0);
  if (double(probe.total) > 0.5 * double(free_b)) GTEST_SKIP() << "GPU test skipped: not enough free device memory";
  Arena a(4096, 4096, 4096, 1, 0, 45);
  cudaEvent_t e0, e1;
  KF_CUDA(cudaEventCreate(&e0));
  KF_CUDA(cudaEventCreate(&e1));
  const auto time_ms = [&](auto&& f) {
    f();  // once untimed
    float best = 1e30f;
    for (int r = 0; r < 3; ++r) {
      KF_CUDA(cudaEventRecord(e0));
      f();
      KF_CUDA(cudaEventRecord(e1));
      KF_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      KF_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, ms);
    }
    return best;
  };
  const float plain_fill = time_ms([&] { a.ref_fill(5); });
  const float plain_read = time_ms([&] { a.ref_read(); });
  const float fast_fill = time_ms([&] { a.fill(5); });
  const float fast_read = time_ms([&] { a.read(); });
  std::printf("arena kernels, 4096^3 tn, 45 slots (%.2f GB): fill %.2f ms plain, %.2f ms fast (with the expected "
              "state); scan %.2f ms plain, %.2f ms fast (with 2 fp64 samples per slot)\n",
              double(a.l.slots * a.l.slot_bytes) / 1e9, plain_fill, fast_fill, plain_read, fast_read);
  KF_CUDA(cudaEventDestroy(e0));
  KF_CUDA(cudaEventDestroy(e1));
}

}  // namespace
}  // namespace kforge::test
