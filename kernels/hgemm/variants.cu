// The fp16 variants of kforge's HGEMM kernel families that are compiled into the library (the
// bf16 ones are in variants_bf16.cu, a translation unit of its own so that the two compile in
// parallel): the space the tuner searches and the dispatch table draws from. Adding a line here
// adds a variant for every layout and accumulation listed with it; invalid configs fail to compile
// with the reason their family's static_asserts state. The macros: variant_rows.cuh.
#include <cstring>
#include <iterator>
#include <vector>

#include "kernels/hgemm/variant_rows.cuh"

namespace kforge::kernels {
namespace {

// fp16, fp32 accumulation: the tuned space.
#define KF_SM90_F32(...) KF_BOTH_LAYOUTS(KF_SM90, KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SM90_PP_F32(...) KF_BOTH_LAYOUTS(KF_SM90_PP, KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SM90_MC_F32(...) KF_BOTH_LAYOUTS(KF_SM90_MC, KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, __VA_ARGS__)
// fp16 accumulation: a smaller space (correct and reasonably fast; not a performance target).
#define KF_SM90_F16(...) KF_BOTH_LAYOUTS(KF_SM90, KFORGE_HGEMM_ACC_F16, "f16", KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SM80_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_SM80, A, AN, KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SKINNY_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_SKINNY, A, AN, KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SKINNY_T_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_SKINNY_T, A, AN, KFORGE_HGEMM_F16, __VA_ARGS__)

const KernelVariant kVariants[] = {
    // Large shapes: persistent, two consumer warpgroups, grouped rasterisation.
    KF_SM90_F32(128, 256, 4, 2, 1, 8, true)
    KF_SM90_F32(128, 192, 4, 2, 1, 8, true)
    KF_SM90_F32(128, 128, 6, 2, 1, 8, true)
    KF_SM90_F32(256, 128, 4, 2, 1, 8, true)
    // Ping-pong: each consumer's epilogue hides under the other's main loop.
    KF_SM90_PP_F32(128, 128, 6, 8)
    KF_SM90_PP_F32(64, 256, 4, 8)
    KF_SM90_PP_F32(128, 64, 8, 8)
    // Multicast pairs: half the L2-to-SM traffic for B on shapes of several waves.
    KF_SM90_MC_F32(128, 256, 4, 8)
    KF_SM90_MC_F32(128, 128, 6, 8)
    // Mid-size shapes: one tile per CTA.
    KF_SM90_F32(128, 128, 4, 2, 1, 8, false)
    KF_SM90_F32(128, 64, 6, 2, 1, 8, false)
    KF_SM90_F32(64, 128, 6, 1, 1, 8, false)
    KF_SM90_F32(64, 64, 6, 1, 1, 0, false)
    KF_SM90_F32(64, 256, 4, 1, 1, 8, false)
    KF_SM90_F32(128, 256, 4, 2, 1, 8, false)
    // Small M*N, long K: split-K across a cluster, reduced through distributed shared memory.
    KF_SM90_F32(64, 64, 4, 1, 2, 0, false)
    KF_SM90_F32(64, 64, 4, 1, 4, 0, false)
    KF_SM90_F32(64, 64, 4, 1, 8, 0, false)
    KF_SM90_F32(64, 64, 8, 1, 8, 0, false)
    KF_SM90_F32(64, 64, 8, 1, 16, 0, false)
    KF_SM90_F32(64, 128, 4, 1, 4, 0, false)
    KF_SM90_F32(64, 128, 8, 1, 8, 0, false)
    KF_SM90_F32(128, 64, 8, 2, 4, 0, false)
    KF_SM90_F32(128, 128, 4, 2, 2, 0, false)
    KF_SM90_F32(128, 128, 4, 2, 4, 0, false)
    // Cluster sizes that fill the GPU with whole clusters. A cluster must sit in one GPC, so on the
    // H200 (one CTA per SM) 132 CTAs of 2-CTA clusters are resident at once, 117 of 3, 120 of 4
    // and 102 of 6: a 32-tile shape split 4 ways (128 CTAs) runs as two waves.
    KF_SM90_F32(128, 128, 4, 2, 3, 0, false)  // 32 tiles -> 96 CTAs
    KF_SM90_F32(128, 128, 4, 2, 6, 0, false)  // 16 tiles -> 96 CTAs
    KF_SM90_F32(128, 64, 8, 2, 2, 0, false)   // 64 tiles -> 128 CTAs
    KF_SM90_F32(128, 64, 8, 2, 3, 0, false)   // 32 tiles -> 96 CTAs
    KF_SM90_F32(128, 64, 8, 2, 6, 0, false)   // 16 tiles -> 96 CTAs

    KF_SM90_F16(128, 256, 4, 2, 1, 8, true)
    KF_SM90_F16(128, 128, 4, 2, 1, 8, false)
    KF_SM90_F16(64, 64, 6, 1, 1, 0, false)
    KF_SM90_F16(64, 64, 4, 1, 4, 0, false)

    // sm_80 family: Ampere, and the fallback for shapes the TMA kernels cannot take on Hopper.
    KF_SM80_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 128, 128, 32, 2, 2, 4)
    KF_SM80_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 64, 64, 32, 2, 2, 4)
    KF_SM80_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 32, 64, 64, 1, 2, 4)
    KF_SM80_LAYOUTS(KFORGE_HGEMM_ACC_F16, "f16", 64, 64, 32, 2, 2, 4)

    // Decode family (M <= 8, 16, 32): B streamed once, split-K filling the device in one wave.
    // 64-column tiles with 128-deep K tiles (16 KiB of B per stage), 128-column ones with 64-deep.
    KF_SKINNY_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 8, 64, 128, 4, 4)
    KF_SKINNY_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 8, 128, 64, 4, 6)
    KF_SKINNY_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 16, 64, 128, 4, 4)
    KF_SKINNY_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 16, 128, 64, 4, 6)
    KF_SKINNY_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 32, 64, 128, 4, 4)
    KF_SKINNY_LAYOUTS(KFORGE_HGEMM_ACC_F16, "f16", 8, 64, 128, 4, 4)
    KF_SKINNY_LAYOUTS(KFORGE_HGEMM_ACC_F16, "f16", 16, 64, 128, 4, 4)
    KF_SKINNY_LAYOUTS(KFORGE_HGEMM_ACC_F16, "f16", 32, 64, 128, 4, 4)
    // Small N (N <= 8, 16, 32): M x K of A streamed once.
    KF_SKINNY_T_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 8, 64, 128, 4, 4)
    KF_SKINNY_T_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 16, 64, 128, 4, 4)
    KF_SKINNY_T_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 32, 64, 128, 4, 4)
    KF_SKINNY_T_LAYOUTS(KFORGE_HGEMM_ACC_F16, "f16", 32, 64, 128, 4, 4)
};

}  // namespace

// fp16 first, in the order above, then bf16: the fp16 variants keep their indices and order (the
// fp16 fingerprint of a table's entries, variants_fingerprint, does not change when bf16 ones are added).
const KernelVariant* variants(size_t* count) {
  static const std::vector<KernelVariant> all = [] {
    std::vector<KernelVariant> v(std::begin(kVariants), std::end(kVariants));
    size_t n = 0;
    const KernelVariant* b = bf16_variants(&n);
    v.insert(v.end(), b, b + n);
    return v;
  }();
  if (count) *count = all.size();
  return all.data();
}

const KernelVariant* find_variant(const char* name) {
  if (!name) return nullptr;
  size_t count = 0;
  const KernelVariant* all = variants(&count);
  for (size_t i = 0; i < count; ++i)
    if (std::strcmp(all[i].name, name) == 0) return &all[i];
  return nullptr;
}

}  // namespace kforge::kernels
