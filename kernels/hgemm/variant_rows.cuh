// The rows of kforge's variant tables (fp16: variants.cu, variants_mid.cu, variants_small.cu; bf16:
// variants_bf16.cu, variants_bf16_large.cu): one KernelVariant per kernel class, named after its
// configuration, and the macros that list a configuration for both B layouts. Included by those sources only.
#pragma once
#include "kernels/hgemm/kernel_api.hpp"
#include "kernels/hgemm/sm80_gemm.cuh"
#include "kernels/hgemm/sm90_gemm.cuh"
#include "kernels/hgemm/skinny_gemm.cuh"
#include "kernels/hgemm/smallk_gemm.cuh"
#include "kernels/hgemm/gemv_gemm.cuh"

namespace kforge::kernels {

#define KF_STR2(x) #x
#define KF_STR(x) KF_STR2(x)

// One table row from a kernel class: its name, configuration, element type and entry points.
template <class G>
constexpr KernelVariant entry(const char* name, kforge_hgemm_layout layout, kforge_hgemm_acc acc) {
  return {name, G::config(), layout, acc, G::kDtype, &G::supports, &G::workspace_size, &G::run, &G::resident_ctas};
}

// One row per B layout of a family's macro (its arguments after layout: acc, acc name, dtype, config).
// The name's second field is the accumulation for fp16 ("f32", "f16") and "bf16" for bf16 (whose
// accumulation is always fp32).
#define KF_BOTH_LAYOUTS(FAMILY, A, AN, ...) \
  FAMILY(KFORGE_HGEMM_NN, A, "nn", AN, __VA_ARGS__) FAMILY(KFORGE_HGEMM_TN, A, "tn", AN, __VA_ARGS__)

// Every sm_90a kernel comes as two rows: the variant, and its padded twin ("pad_" + name), the same
// kernel on operands re-pitched into the workspace, which serves only K or N not a multiple of 8.
#define KF_SM90_ROWS(NAME, L, A, ...) \
  entry<__VA_ARGS__>(NAME, L, A), entry<sm90::Padded<__VA_ARGS__>>("pad_" NAME, L, A),

// sm_90a: dtype, BM, BN, stages, consumer warpgroups, split-K cluster, rasterisation group, persistent.
#define KF_SM90(L, A, LN, AN, DT, BM, BN, ST, C, SK, G, P)                                                    \
  KF_SM90_ROWS("sm90_" LN "_" AN "_" KF_STR(BM) "x" KF_STR(BN) "_s" KF_STR(ST) "_c" KF_STR(C) "_k" KF_STR(SK) \
               "_g" KF_STR(G) "_" #P,                                                                         \
               L, A, sm90::Gemm<BM, BN, ST, C, SK, G, P, L, A, false, 1, DT>)

// Ping-pong schedule: two consumer warpgroups alternate whole tiles (persistent).
#define KF_SM90_PP(L, A, LN, AN, DT, BM, BN, ST, G)                                                               \
  KF_SM90_ROWS("sm90_" LN "_" AN "_" KF_STR(BM) "x" KF_STR(BN) "_s" KF_STR(ST) "_c2_k1_g" KF_STR(G) "_pp", L, A, \
               sm90::Gemm<BM, BN, ST, 2, 1, G, true, L, A, true, 1, DT>)

// 2-CTA clusters along M sharing each B tile through TMA multicast (persistent, cooperative).
#define KF_SM90_MC(L, A, LN, AN, DT, BM, BN, ST, G)                                                                \
  KF_SM90_ROWS("sm90_" LN "_" AN "_" KF_STR(BM) "x" KF_STR(BN) "_s" KF_STR(ST) "_c2_k1_g" KF_STR(G) "_mc2", L, A, \
               sm90::Gemm<BM, BN, ST, 2, 1, G, true, L, A, false, 2, DT>)

// Stream-K (persistent, cooperative consumer warpgroups; stream_k_plan): the last rounds' K loops
// shared by every CTA. No padded twin: its workspace holds the partials, not re-pitched operands
// (K and N % 8 == 0 only).
#define KF_SM90_SK(L, A, LN, AN, DT, BM, BN, ST, C, G)                                                               \
  entry<sm90::Gemm<BM, BN, ST, C, 1, G, true, L, A, false, 1, DT, true>>(                                          \
      "sm90_" LN "_" AN "_" KF_STR(BM) "x" KF_STR(BN) "_s" KF_STR(ST) "_c" KF_STR(C) "_k1_g" KF_STR(G) "_sk", L, A),

// Swapped roles for decode shapes (tn, M <= min(2 BN, 32)): C^T = B^T A^T on BM rows of B (N) x BN
// rows of A (M), split-K cluster SK. No padded twin: N may be anything, K % 8 == 0 only.
#define KF_SM90_SWAP(L, A, LN, AN, DT, BM, BN, ST, C, SK)                                                   \
  entry<sm90::Gemm<BM, BN, ST, C, SK, 0, false, L, A, false, 1, DT, false, true>>(                          \
      "sm90_" LN "_" AN "_" KF_STR(BM) "x" KF_STR(BN) "_s" KF_STR(ST) "_c" KF_STR(C) "_k" KF_STR(SK) "_g0_sw", L, A),
#define KF_SM90_SWAP_F32(...) KF_SM90_SWAP(KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, "tn", "f32", KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SM90_SWAP_BF16(...) KF_SM90_SWAP(KFORGE_HGEMM_TN, KFORGE_HGEMM_ACC_F32, "tn", "bf16", KFORGE_HGEMM_BF16, __VA_ARGS__)

// sm_80: dtype, BM, BN, BK, warps along M, warps along N, stages (every shape and alignment).
#define KF_SM80(L, A, LN, AN, DT, BM, BN, BK, WM, WN, ST)                                                   \
  entry<sm80::Gemm<BM, BN, BK, WM, WN, ST, L, A, DT>>("sm80_" LN "_" AN "_" KF_STR(BM) "x" KF_STR(BN) "x" KF_STR(BK) \
                                                      "_w" KF_STR(WM) "x" KF_STR(WN) "_s" KF_STR(ST),             \
                                                      L, A),

// Decode (M <= MT): dtype, MT rows, BN columns, BK, warps, stages; split-K chosen per problem.
// KF_SKINNY_ROW is the one row behind the four below: SIDE names the small side ("m", or "n" with
// SWAP: small N, A streamed and B the small operand), WN the warp groups along N, SUFFIX ends the name.
#define KF_SKINNY_ROW(L, A, LN, AN, DT, SIDE, SWAP, WN, SUFFIX, MT, BN, BK, W, ST)                            \
  entry<skinny::Gemm<MT, BN, BK, W, ST, L, A, SWAP, DT, WN>>("skinny_" LN "_" AN "_" SIDE KF_STR(MT) "x"      \
                                                             KF_STR(BN) "x" KF_STR(BK) "_w" KF_STR(W) "_s"    \
                                                             KF_STR(ST) SUFFIX,                               \
                                                             L, A),
#define KF_SKINNY(L, A, LN, AN, DT, MT, BN, BK, W, ST) KF_SKINNY_ROW(L, A, LN, AN, DT, "m", false, 1, "", MT, BN, BK, W, ST)
// Small N (N <= MT): the same kernel with A streamed and B the small operand.
#define KF_SKINNY_T(L, A, LN, AN, DT, MT, BN, BK, W, ST) KF_SKINNY_ROW(L, A, LN, AN, DT, "n", true, 1, "", MT, BN, BK, W, ST)
// The same with the warps split along N as well (WN groups of WARPS / WN warps; name suffix _nw<WN>).
#define KF_SKINNY_NW(L, A, LN, AN, DT, MT, BN, BK, W, ST, WN) \
  KF_SKINNY_ROW(L, A, LN, AN, DT, "m", false, WN, "_nw" KF_STR(WN), MT, BN, BK, W, ST)
#define KF_SKINNY_T_NW(L, A, LN, AN, DT, MT, BN, BK, W, ST, WN) \
  KF_SKINNY_ROW(L, A, LN, AN, DT, "n", true, WN, "_nw" KF_STR(WN), MT, BN, BK, W, ST)

// Small K (K <= KMAX): BM x BN tiles of C on THREADS threads, on the CUDA cores.
#define KF_SMALLK(L, A, LN, AN, DT, BM, BN, KMAX, THREADS)                                                      \
  entry<smallk::Gemm<BM, BN, KMAX, THREADS, L, A, DT>>("smallk_" LN "_" AN "_" KF_STR(BM) "x" KF_STR(BN) "_k" \
                                                       KF_STR(KMAX) "_t" KF_STR(THREADS),                     \
                                                       L, A),

// Small K (K <= KMAX), the whole K of a BM x BN tile in shared memory (BM x BN / 4 threads).
#define KF_WHOLEK(L, A, LN, AN, DT, BM, BN, KMAX)                                                                  \
  entry<smallk::WholeK<BM, BN, KMAX, L, A, DT>>("wholek_" LN "_" AN "_" KF_STR(BM) "x" KF_STR(BN) "_k" KF_STR(KMAX), \
                                                L, A),

// GEMV-like (one side of C at most MT long, gemv_gemm.cuh): SIDE names it ("m": small M, tn only;
// "n" with SWAP: small N, A streamed), R rows of the streamed operand per warp, W warps per CTA.
#define KF_GEMV(L, A, LN, AN, DT, SIDE, SWAP, MT, R, W)                                                       \
  entry<gemv::Gemv<MT, R, W, SWAP, L, A, DT>>("gemv_" LN "_" AN "_" SIDE KF_STR(MT) "_r" KF_STR(R) "_w" KF_STR(W), \
                                              L, A),
// The three rows of one GEMV configuration: small M (tn), small N (nn and tn); R rows per warp.
#define KF_GEMV_ROWS(A, AN, DT, MT, R, W)                                                               \
  KF_GEMV(KFORGE_HGEMM_TN, A, "tn", AN, DT, "m", false, MT, R, W)                                      \
  KF_GEMV(KFORGE_HGEMM_NN, A, "nn", AN, DT, "n", true, MT, R, W) KF_GEMV(KFORGE_HGEMM_TN, A, "tn", AN, DT, "n", true, MT, R, W)

// GEMV-like with the small operand on chip (gemv_gemm.cuh GemvX): K <= KMAX (a multiple of 32),
// RW rows of W per warp per step.
#define KF_GEMVX(L, A, LN, AN, DT, SIDE, SWAP, MT, KMAX, RW, W, XS, XN)                                                     \
  entry<gemv::GemvX<MT, (KMAX) / 32, RW, W, SWAP, L, A, DT, XS>>("gemvx_" LN "_" AN "_" SIDE KF_STR(MT) "_k" KF_STR(KMAX) \
                                                                "_r" KF_STR(RW) "_w" KF_STR(W) XN,                       \
                                                                L, A),
// XS false: X in registers (no suffix); true: X in shared memory ("_xs").
#define KF_GEMVX_ROWS_X(A, AN, DT, MT, KMAX, RW, W, XS, XN)                    \
  KF_GEMVX(KFORGE_HGEMM_TN, A, "tn", AN, DT, "m", false, MT, KMAX, RW, W, XS, XN) \
  KF_GEMVX(KFORGE_HGEMM_NN, A, "nn", AN, DT, "n", true, MT, KMAX, RW, W, XS, XN)  \
  KF_GEMVX(KFORGE_HGEMM_TN, A, "tn", AN, DT, "n", true, MT, KMAX, RW, W, XS, XN)
#define KF_GEMVX_ROWS(A, AN, DT, MT, KMAX, RW, W) KF_GEMVX_ROWS_X(A, AN, DT, MT, KMAX, RW, W, false, "")
#define KF_GEMVXS_ROWS(A, AN, DT, MT, KMAX, RW, W) KF_GEMVX_ROWS_X(A, AN, DT, MT, KMAX, RW, W, true, "_xs")

// Shorthands of the tables, one configuration for both B layouts. fp16, fp32 accumulation (the
// tuned space) and fp16 accumulation (a smaller space: correct and reasonably fast, not a
// performance target); the sm_80 and decode ones take the accumulation and its name first.
#define KF_SM90_F32(...) KF_BOTH_LAYOUTS(KF_SM90, KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SM90_PP_F32(...) KF_BOTH_LAYOUTS(KF_SM90_PP, KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SM90_MC_F32(...) KF_BOTH_LAYOUTS(KF_SM90_MC, KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SM90_SK_F32(...) KF_BOTH_LAYOUTS(KF_SM90_SK, KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SM90_F16(...) KF_BOTH_LAYOUTS(KF_SM90, KFORGE_HGEMM_ACC_F16, "f16", KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SM80_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_SM80, A, AN, KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SKINNY_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_SKINNY, A, AN, KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SMALLK_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_SMALLK, A, AN, KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_WHOLEK_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_WHOLEK, A, AN, KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SKINNY_T_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_SKINNY_T, A, AN, KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SKINNY_NW_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_SKINNY_NW, A, AN, KFORGE_HGEMM_F16, __VA_ARGS__)
#define KF_SKINNY_T_NW_LAYOUTS(A, AN, ...) KF_BOTH_LAYOUTS(KF_SKINNY_T_NW, A, AN, KFORGE_HGEMM_F16, __VA_ARGS__)
// bf16 (fp32 accumulation only).
#define KF_SM90_BF16(...) KF_BOTH_LAYOUTS(KF_SM90, KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, __VA_ARGS__)
#define KF_SM90_PP_BF16(...) KF_BOTH_LAYOUTS(KF_SM90_PP, KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, __VA_ARGS__)
#define KF_SM90_MC_BF16(...) KF_BOTH_LAYOUTS(KF_SM90_MC, KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, __VA_ARGS__)
#define KF_SM90_SK_BF16(...) KF_BOTH_LAYOUTS(KF_SM90_SK, KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, __VA_ARGS__)
#define KF_SM80_BF16(...) KF_BOTH_LAYOUTS(KF_SM80, KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, __VA_ARGS__)
#define KF_SKINNY_BF16(...) KF_BOTH_LAYOUTS(KF_SKINNY, KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, __VA_ARGS__)
#define KF_SMALLK_BF16(...) KF_BOTH_LAYOUTS(KF_SMALLK, KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, __VA_ARGS__)
#define KF_WHOLEK_BF16(...) KF_BOTH_LAYOUTS(KF_WHOLEK, KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, __VA_ARGS__)
#define KF_SKINNY_T_BF16(...) KF_BOTH_LAYOUTS(KF_SKINNY_T, KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, __VA_ARGS__)
#define KF_SKINNY_NW_BF16(...) KF_BOTH_LAYOUTS(KF_SKINNY_NW, KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, __VA_ARGS__)

// The shares of the table in translation units of their own, appended by variants() (variants.cu) in
// this order after its own rows: fp16 (variants_mid.cu, variants_small.cu, variants_streamk.cu,
// variants_deep.cu, variants_swap.cu), then bf16 (variants_bf16.cu, variants_bf16_large.cu, then variants_streamk.cu's and variants_swap.cu's
// bf16 rows).
const KernelVariant* fp16_mid_variants(size_t* count);
const KernelVariant* fp16_small_variants(size_t* count);
const KernelVariant* fp16_streamk_variants(size_t* count);
const KernelVariant* fp16_deep_variants(size_t* count);
const KernelVariant* fp16_swap_variants(size_t* count);
const KernelVariant* bf16_variants(size_t* count);
const KernelVariant* bf16_large_variants(size_t* count);
const KernelVariant* bf16_streamk_variants(size_t* count);
const KernelVariant* bf16_swap_variants(size_t* count);

}  // namespace kforge::kernels
