// The bf16 variants (bf16 A, B and C, fp32 accumulation): the same kernel families as fp16
// (variants.cu), instantiated for a chosen subset of their configurations, so that the build does
// not double. Chosen from the fp16 table shipped in data/hgemm/dispatch-table.json (2,000 entries
// of the 1,000-shape grid, both layouts), by how many entries each configuration won there, and so
// that every regime keeps a variant: the persistent large tiles (ping-pong, cooperative, multicast,
// 256-row), the one-tile-per-CTA mid sizes, split-K clusters of 2, 6, 8 and 16 for small M*N with
// long K, the sm_80 family (Ampere, and the fallback for unaligned pointers on Hopper) and the
// decode family (M or N <= 8, 16, 32). The 14 Hopper configurations kept won 1,604 of the fp16
// table's 2,000 entries; the 16 left out won 396 (the most: 128x192 persistent 59, 128x256 and
// 128x128 one tile per CTA 57 and 52), where a bf16 shape takes its second-best configuration.
// (Counts from the fp16 table; how bf16 ranks them is for the tuner to measure.)
// A translation unit of its own: it compiles in parallel with variants.cu.
#include "kernels/hgemm/variant_rows.cuh"

namespace kforge::kernels {
namespace {

const KernelVariant kVariantsBf16[] = {
    // Large shapes, persistent (fp16 table: 418, 151 and 117 wins of ping-pong; 150, 86 and 66 of
    // the cooperative 128x256, 128x128 and 256x128; 52 of the multicast pair).
    KF_SM90_PP_BF16(128, 128, 6, 8)
    KF_SM90_PP_BF16(64, 256, 4, 8)
    KF_SM90_PP_BF16(128, 64, 8, 8)
    KF_SM90_BF16(128, 256, 4, 2, 1, 8, true)
    KF_SM90_BF16(128, 128, 6, 2, 1, 8, true)
    KF_SM90_BF16(256, 128, 4, 2, 1, 8, true)
    KF_SM90_MC_BF16(128, 256, 4, 8)
    // Mid-size shapes, one tile per CTA (141, 119 and 119 wins).
    KF_SM90_BF16(64, 64, 6, 1, 1, 0, false)
    KF_SM90_BF16(64, 128, 6, 1, 1, 8, false)
    KF_SM90_BF16(128, 64, 6, 2, 1, 8, false)
    // Split-K clusters (59, 56, 36 and 34 wins).
    KF_SM90_BF16(128, 64, 8, 2, 6, 0, false)
    KF_SM90_BF16(64, 64, 4, 1, 8, 0, false)
    KF_SM90_BF16(64, 64, 8, 1, 16, 0, false)
    KF_SM90_BF16(128, 64, 8, 2, 2, 0, false)

    // sm_80 family: Ampere, unaligned pointers and the shapes no other bf16 variant serves.
    KF_SM80_BF16(128, 128, 32, 2, 2, 4)
    KF_SM80_BF16(64, 64, 32, 2, 2, 4)
    KF_SM80_BF16(32, 32, 32, 2, 2, 4)  // tiny unaligned problems (variants_small.cu)

    // Decode family: M <= 8, 16, 32 and N <= 8, 16, 32.
    KF_SKINNY_BF16(8, 128, 64, 4, 6)
    KF_SKINNY_BF16(16, 128, 64, 4, 6)
    KF_SKINNY_BF16(32, 64, 128, 4, 4)
    KF_SKINNY_T_BF16(8, 64, 128, 4, 4)
    KF_SKINNY_T_BF16(16, 64, 128, 4, 4)
    KF_SKINNY_T_BF16(32, 64, 128, 4, 4)
    // M 17-32 with 128-column tiles and the warps split along N (fp16's twin: 13.6 -> 12.4 us at
    // 31x4096x4096 on the H200 against the m32x64 variant above); last, so that ties keep the above.
    KF_SKINNY_NW_BF16(32, 128, 64, 8, 6, 8)
    // Small K: as the fp16 table's.
    KF_SMALLK_BF16(128, 128, 8, 256)
    KF_SMALLK_BF16(128, 32, 8, 256)
    KF_WHOLEK_BF16(32, 32, 256)
    KF_WHOLEK_BF16(8, 64, 256)
    KF_WHOLEK_BF16(16, 64, 256)
    KF_WHOLEK_BF16(64, 8, 256)
    KF_WHOLEK_BF16(64, 16, 256)
    KF_GEMV_ROWS(KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, 8, 1, 8)
    KF_GEMV_ROWS(KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, 8, 4, 8)
    KF_GEMVX_ROWS(KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, 8, 256, 2, 8)
    KF_GEMVX_ROWS(KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, 4, 256, 2, 8)
    KF_GEMVXS_ROWS(KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, 8, 256, 4, 8)
    KF_GEMVXS_ROWS(KFORGE_HGEMM_ACC_F32, "bf16", KFORGE_HGEMM_BF16, 4, 256, 6, 8)
};

}  // namespace

const KernelVariant* bf16_variants(size_t* count) {
  if (count) *count = sizeof(kVariantsBf16) / sizeof(kVariantsBf16[0]);
  return kVariantsBf16;
}

}  // namespace kforge::kernels
