// The server-mode output digest (src/eval/output_digest.hpp) on the CPU: what the judge's and the
// executor's kernels compute, summed in any order. The digest must change with every element, with
// where an element sits, and with the call's key, so that a reply cannot carry the digest of an
// output that was not yet final (all poison, half written, or a placeholder the real work replaces).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "eval/output_digest.hpp"

namespace kforge {
namespace {

constexpr unsigned short kPoison = 0x7E00;  // the judge's NaN poison (eval/judge_kernels.cu)

std::vector<unsigned short> random_output(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned short> c(n);
  for (auto& x : c) x = (unsigned short)(rng() & 0x3BFF);  // finite fp16 of either sign
  return c;
}

TEST(OutputDigest, EveryElementAndEveryBitOfItCounts) {
  const size_t n = 64 * 64;
  const auto c = random_output(n, 1);
  const uint64_t key = 0x1234567890abcdefull;
  const uint64_t d = output_digest_host(c.data(), n, key);
  std::mt19937_64 rng(2);
  for (int t = 0; t < 2000; ++t) {
    auto changed = c;
    const size_t i = rng() % n;
    changed[i] ^= (unsigned short)(1u << (rng() % 16));
    EXPECT_NE(output_digest_host(changed.data(), n, key), d) << "element " << i;
  }
  // The last element too (a kernel's grid-stride loop that stopped one short would be seen).
  auto last = c;
  last[n - 1] ^= 1;
  EXPECT_NE(output_digest_host(last.data(), n, key), d);
  EXPECT_NE(output_digest_host(c.data(), n - 1, key), d);
}

TEST(OutputDigest, WhereAnElementSitsCounts) {
  const size_t n = 4096;
  auto c = random_output(n, 3);
  const uint64_t key = 77;
  const uint64_t d = output_digest_host(c.data(), n, key);
  for (size_t i = 0; i + 1 < n; i += 97) {
    if (c[i] == c[i + 1]) continue;
    auto swapped = c;
    std::swap(swapped[i], swapped[i + 1]);
    EXPECT_NE(output_digest_host(swapped.data(), n, key), d) << i;
  }
  // A transposed output (the right values in the wrong places) is not the output.
  std::vector<unsigned short> t(n);
  for (size_t r = 0; r < 64; ++r)
    for (size_t col = 0; col < 64; ++col) t[col * 64 + r] = c[r * 64 + col];
  EXPECT_NE(output_digest_host(t.data(), n, key), d);
}

TEST(OutputDigest, EachCallsKeyGivesADifferentDigestOfTheSameOutput) {
  const size_t n = 1024;
  const auto c = random_output(n, 4);
  std::vector<uint64_t> seen;
  std::mt19937_64 rng(5);
  for (int t = 0; t < 200; ++t) seen.push_back(output_digest_host(c.data(), n, rng()));
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
  // The executor's placeholder before its copy lands (~key) is not the digest under that key.
  for (uint64_t key : {uint64_t(0), uint64_t(1), ~uint64_t(0), uint64_t(0x9e3779b97f4a7c15ull)})
    EXPECT_NE(output_digest_host(c.data(), n, key), ~key);
}

TEST(OutputDigest, AnOutputNotYetFinalHasAnotherDigest) {
  const size_t n = 128 * 96;
  const auto done = random_output(n, 6);
  const uint64_t key = 0xfeedull;
  const uint64_t d = output_digest_host(done.data(), n, key);
  const std::vector<unsigned short> poison(n, kPoison);
  EXPECT_NE(output_digest_host(poison.data(), n, key), d);
  // Half written (the tiles of the first rows done, the rest still poison).
  auto half = done;
  std::fill(half.begin() + n / 2, half.end(), kPoison);
  EXPECT_NE(output_digest_host(half.data(), n, key), d);
  // A placeholder written first (zeros), the real values still to come.
  const std::vector<unsigned short> zeros(n, 0);
  EXPECT_NE(output_digest_host(zeros.data(), n, key), d);
  // One tile of 16x16 missing.
  auto tile = done;
  for (size_t r = 32; r < 48; ++r)
    for (size_t col = 0; col < 16; ++col) tile[r * 96 + col] = kPoison;
  EXPECT_NE(output_digest_host(tile.data(), n, key), d);
}

// The kernels sum each thread's terms (grid-stride), then warps, then atomics, in no fixed order:
// any split and order of the sum gives the same digest.
TEST(OutputDigest, AnySplitAndOrderOfTheSumGivesTheSameDigest) {
  const size_t n = 10007;  // not a multiple of any block size
  const auto c = random_output(n, 7);
  const uint64_t key = 0xabcdefull;
  const uint64_t d = output_digest_host(c.data(), n, key);
  for (size_t threads : {size_t(1), size_t(32), size_t(256), size_t(256 * 40), size_t(20000)}) {
    std::vector<uint64_t> partial(threads, 0);
    for (size_t t = 0; t < threads; ++t)
      for (size_t i = t; i < n; i += threads) partial[t] += digest_term(key, i, c[i]);
    std::shuffle(partial.begin(), partial.end(), std::mt19937_64(threads));
    EXPECT_EQ(std::accumulate(partial.begin(), partial.end(), uint64_t(0)), d) << threads << " threads";
  }
}

}  // namespace
}  // namespace kforge
