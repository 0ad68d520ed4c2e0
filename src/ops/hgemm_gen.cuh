// The HGEMM input generators as device functions: one counter-based hash, so that the same seed
// gives the same values in every kernel that fills operands (fill_random, fill_operands and the
// evaluator's batched arena fill).
//
// kBiased (operands only, it needs to know A from B and the k of each element):
//   A[i][k] = s_blk + u,  s_blk = +-1 per block of 64 consecutive k (random sign per block),
//                         u in {2, 3} * 2^-10
//   B[k][j] = 1 + v,      v in {0, 1} * 2^-10
// Every product is s_blk + delta with 0 < delta < 2^-8, exact in fp32 (21 significant bits).
// Any precision below fp32 accumulation drops delta systematically, never at random: an fp16
// partial sum of magnitude >= 8 has a spacing of 2^-7, so adding s + delta rounds delta away
// (towards the same side in positive and negative blocks). bf16 or fp8 inputs round 1 + u to 1.
// The error grows like K * 2^-10 while the fp32 bound stays near 2^-16 * K + |C| / 2048, and
// |C| stays small because the block signs cancel: a lower precision fails with certainty, not
// with some probability (see docs/threat-model.md, "precision").
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

namespace kforge {
namespace gen {

__host__ __device__ inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
__device__ inline float unit_open(uint64_t bits) {  // (0, 1]
  return (float((bits >> 40) & 0xffffff) + 1.0f) * (1.0f / 16777216.0f);
}

// dist: the integer value of kforge::Dist. `kk` is the element's k index (used by kBiased only).
// kBiased's sign of a block comes from `sign_seed` alone, so A's blocks agree across its rows.
__device__ inline float value(int dist, uint64_t seed, uint64_t i, bool is_a, int64_t kk, uint64_t sign_seed) {
  const uint64_t h = mix64(seed ^ mix64(i));
  switch (dist) {
    case 0:  // kUniform
      return unit_open(h) * 2.0f - 1.0f;
    case 1: {  // kNormal
      const float u1 = unit_open(h), u2 = unit_open(mix64(h));
      return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    }
    case 2:  // kSmallInt
      return float(int((h >> 33) % 5) - 2);
    default: {  // kBiased
      if (is_a) {
        const float s = (mix64(sign_seed ^ uint64_t(kk / 64)) >> 63) ? 1.0f : -1.0f;
        return s + float(2 + int((h >> 40) & 1)) * (1.0f / 1024.0f);
      }
      return 1.0f + float(int((h >> 40) & 1)) * (1.0f / 1024.0f);
    }
  }
}

}  // namespace gen
}  // namespace kforge
