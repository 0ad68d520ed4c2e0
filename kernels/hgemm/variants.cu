// The variants of kforge's HGEMM kernel families that are compiled into the library: the
// space the tuner searches and the dispatch table draws from. Adding a line here adds a variant
// for every layout and accumulation listed with it; invalid configs fail to compile with the
// reason their family's static_asserts state.
#include <cstring>

#include "kernels/hgemm/kernel_api.hpp"
#include "kernels/hgemm/sm80_gemm.cuh"
#include "kernels/hgemm/sm90_gemm.cuh"
#include "kernels/hgemm/skinny_gemm.cuh"

namespace kforge::kernels {
namespace {

#define KF_STR2(x) #x
#define KF_STR(x) KF_STR2(x)

// One table row from a kernel class: its name, configuration and entry points.
template <class G>
constexpr KernelVariant entry(const char* name, kforge_hgemm_layout layout, kforge_hgemm_acc acc) {
  return {name, G::config(), layout, acc, &G::supports, &G::workspace_size, &G::run, &G::resident_ctas};
}

// One row per B layout of a family's macro (its arguments after layout: acc, acc name, config).
#define KF_BOTH_LAYOUTS(FAMILY, A, AN, ...) \
  FAMILY(KFORGE_HGEMM_NN, A, "nn", AN, __VA_ARGS__) FAMILY(KFORGE_HGEMM_TN, A, "tn", AN, __VA_ARGS__)

// Every sm_90a kernel comes as two rows: the variant, and its padded twin ("pad_" + name), the same
// kernel on operands re-pitched into the workspace, which serves only K or N not a multiple of 8.
#define KF_SM90_ROWS(NAME, L, A, ...) \
  entry<__VA_ARGS__>(NAME, L, A), entry<sm90::Padded<__VA_ARGS__>>("pad_" NAME, L, A),

// sm_90a: BM, BN, stages, consumer warpgroups, split-K cluster, rasterisation group, persistent.
#define KF_SM90(L, A, LN, AN, BM, BN, ST, C, SK, G, P)                                                        \
  KF_SM90_ROWS("sm90_" LN "_" AN "_" KF_STR(BM) "x" KF_STR(BN) "_s" KF_STR(ST) "_c" KF_STR(C) "_k" KF_STR(SK) \
               "_g" KF_STR(G) "_" #P,                                                                         \
               L, A, sm90::Gemm<BM, BN, ST, C, SK, G, P, L, A>)

// Ping-pong schedule: two consumer warpgroups alternate whole tiles (persistent).
#define KF_SM90_PP(L, A, LN, AN, BM, BN, ST, G)                                                                   \
  KF_SM90_ROWS("sm90_" LN "_" AN "_" KF_STR(BM) "x" KF_STR(BN) "_s" KF_STR(ST) "_c2_k1_g" KF_STR(G) "_pp", L, A, \
               sm90::Gemm<BM, BN, ST, 2, 1, G, true, L, A, true>)
#define KF_SM90_PP_F32(...) KF_BOTH_LAYOUTS(KF_SM90_PP, KFORGE_HGEMM_ACC_F32, "f32", __VA_ARGS__)

// 2-CTA clusters along M sharing each B tile through TMA multicast (persistent, cooperative).
#define KF_SM90_MC(L, A, LN, AN, BM, BN, ST, G)                                                                    \
  KF_SM90_ROWS("sm90_" LN "_" AN "_" KF_STR(BM) "x" KF_STR(BN) "_s" KF_STR(ST) "_c2_k1_g" KF_STR(G) "_mc2", L, A, \
               sm90::Gemm<BM, BN, ST, 2, 1, G, true, L, A, false, 2>)
#define KF_SM90_MC_F32(...) KF_BOTH_LAYOUTS(KF_SM90_MC, KFORGE_HGEMM_ACC_F32, "f32", __VA_ARGS__)

// fp32 accumulation: the tuned space.
#define KF_SM90_F32(...) KF_BOTH_LAYOUTS(KF_SM90, KFORGE_HGEMM_ACC_F32, "f32", __VA_ARGS__)
// fp16 accumulation: a smaller space (correct and reasonably fast; not a performance target).
#define KF_SM90_F16(...) KF_BOTH_LAYOUTS(KF_SM90, KFORGE_HGEMM_ACC_F16, "f16", __VA_ARGS__)

// sm_80: BM, BN, BK, warps along M, warps along N, stages (every shape and alignment).
#define KF_SM80(L, A, LN, AN, BM, BN, BK, WM, WN, ST)                                                   \
  entry<sm80::Gemm<BM, BN, BK, WM, WN, ST, L, A>>("sm80_" LN "_" AN "_" KF_STR(BM) "x" KF_STR(BN) "x" KF_STR(BK) \
                                                  "_w" KF_STR(WM) "x" KF_STR(WN) "_s" KF_STR(ST),             \
                                                  L, A),
#define KF_SM80_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_SM80, A, AN, __VA_ARGS__)

// Decode (M <= MT): MT rows, BN columns, BK, warps, stages; split-K chosen per problem.
#define KF_SKINNY(L, A, LN, AN, MT, BN, BK, W, ST)                                                             \
  entry<skinny::Gemm<MT, BN, BK, W, ST, L, A>>("skinny_" LN "_" AN "_m" KF_STR(MT) "x" KF_STR(BN) "x" KF_STR(BK) \
                                               "_w" KF_STR(W) "_s" KF_STR(ST),                                  \
                                               L, A),
#define KF_SKINNY_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_SKINNY, A, AN, __VA_ARGS__)
// Small N (N <= MT): the same kernel with A streamed and B the small operand.
#define KF_SKINNY_T(L, A, LN, AN, MT, BN, BK, W, ST)                                                           \
  entry<skinny::Gemm<MT, BN, BK, W, ST, L, A, true>>("skinny_" LN "_" AN "_n" KF_STR(MT) "x" KF_STR(BN) "x"    \
                                                     KF_STR(BK) "_w" KF_STR(W) "_s" KF_STR(ST),                 \
                                                     L, A),
#define KF_SKINNY_T_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_SKINNY_T, A, AN, __VA_ARGS__)

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

const KernelVariant* variants(size_t* count) {
  if (count) *count = sizeof(kVariants) / sizeof(kVariants[0]);
  return kVariants;
}

const KernelVariant* find_variant(const char* name) {
  if (!name) return nullptr;
  for (const KernelVariant& v : kVariants)
    if (std::strcmp(v.name, name) == 0) return &v;
  return nullptr;
}

}  // namespace kforge::kernels
