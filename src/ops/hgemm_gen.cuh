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
// For a bf16 problem the offsets are 8x larger (units of 2^-7, bf16's spacing just above 1: u in
// {2, 3} * 2^-7, v in {0, 1} * 2^-7), so that they survive rounding to bf16; the products (16
// significant bits at most) are still exact in fp32. Accumulation below fp32 rounds the offsets
// (2^-6 to 2^-5 per product) at the partial sums every 64-long block reaches: bf16's spacing is
// 2^-4 from 8 on, fp16's 2^-5 from 32 on; fp8 inputs lose them at once. The error of such work
// grows like K * 2^-8 or more, against a bf16 bound near |C| / 256 + 2^-16 * K.
// The error grows like K * 2^-10 while the fp32 bound stays near 2^-16 * K + |C| / 2048, and
// |C| stays small because the block signs cancel: a lower precision fails with certainty, not
// with some probability (see docs/threat-model.md, "precision").
#pragma once
#include <cuda_bf16.h>
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
// bf16: the values are meant for bf16 elements (kBiased's offsets in units of 2^-7, not 2^-10).
__device__ inline float value(int dist, uint64_t seed, uint64_t i, bool is_a, int64_t kk, uint64_t sign_seed,
                              bool bf16 = false) {
  const float unit = bf16 ? 1.0f / 128.0f : 1.0f / 1024.0f;
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
        return s + float(2 + int((h >> 40) & 1)) * unit;
      }
      return 1.0f + float(int((h >> 40) & 1)) * unit;
    }
  }
}

// 2-byte elements as bits: fp16 or bf16 (bf16 is the top half of an fp32, rounded to nearest even).
__device__ inline unsigned short encode(float x, bool bf16) {
  return bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x)) : __half_as_ushort(__float2half_rn(x));
}
__device__ inline float decode(unsigned short v, bool bf16) {
  return bf16 ? __uint_as_float(uint32_t(v) << 16) : __half2float(__ushort_as_half(v));
}
__device__ inline float decode_at(const void* p, uint64_t i, bool bf16) {
  return decode(reinterpret_cast<const unsigned short*>(p)[i], bf16);
}
// The quiet NaN each type is poisoned with, and whether bits are NaN or infinite (all exponent bits set).
__host__ __device__ constexpr unsigned short nan_bits(bool bf16) { return bf16 ? 0x7FC0 : 0x7E00; }
__host__ __device__ inline bool nonfinite_bits(unsigned short v, bool bf16) {
  return bf16 ? (v & 0x7F80) == 0x7F80 : (v & 0x7C00) == 0x7C00;
}

}  // namespace gen
}  // namespace kforge
