// fp16 and bf16 variants, Hopper: swapped-role decode tiles (tn, M <= 32). variants.cu appends the
// fp16 rows after variants_deep.cu's, the bf16 rows after variants_streamk.cu's bf16 rows.
//
// Why: a decode shape (M of a few tokens) on the plain tiles puts M on the wgmma's 64-row side, so
// that 15x4096x4096 computes 64 rows for 15 and spends ~3 us of tensor time per SM against ~6 of
// loads; it ran 8.9 us on the best of them (64x64 split-K 2) where cuBLASLt took 7.7 (H100, graph
// mode), with a 64x8 tile of C^T: B's N on the 64-row side and M on the 8-wide one (two column
// tiles for M = 15). These are that orientation on the same pipeline: BM rows of B (N) per tile,
// BN = 8, 16 or 32 rows of A (M) on the wgmma's N side, deep pipelines (a stage is the B tile and
// a few rows of A: 10 KiB for 64x16), split-K clusters where the N tiles are fewer than the SMs.
// Measured (H100, graph mode, twenty-fifth session; offgrid-probe): 15x4096x4096 8.8 us on 64x32
// split-K 2 (64x64 split-K 2, the best plain tile, 9.0; cuBLASLt 8.3), 1x4096x4096 8.3 (8.7; 9.7),
// 4x8192x8192 45.5 (46.6; 45.6), 31x16384x3072 35.6 (35.7; 36.2), but 26x4608x3584 10.8 against 10.1
// (cuBLASLt 9.0): 144 CTAs of 2-CTA clusters spill past the 132 that fit one per SM, and the 12-stage
// tiles fit one CTA per SM, so the unsplit ones leave SMs idle (4096 columns: 64 tiles). Hence the
// 6-stage tiles below (three per SM). The 12-stage 64x16 tiles (unsplit and split-K 2) were
// dropped after that run: slower than 64x32 s8 at the same split on every probe shape (15x4096x4096
// 10.3 against 8.7 us, 1x4096x4096 9.7 against 8.2, 19x9216x3072 unsplit 30.5 against 25.0).
// A translation unit of its own so that it compiles in parallel with the rest of the table.
// Macros: variant_rows.cuh.
#include "kernels/hgemm/variant_rows.cuh"

namespace kforge::kernels {
namespace {

// BM, BN, stages, consumer warpgroups, split-K cluster. One list for both element types, so that
// every fp16 swapped tile has its bf16 twin (dtype_twin).
#define KF_SWAP_TILES(ROW)                                                                    \
  ROW(64, 8, 12, 1, 1)     /* M <= 16; 4096 columns -> 64 tiles per 8 rows of M */            \
  ROW(64, 8, 12, 1, 2)                                                                        \
  ROW(64, 16, 8, 1, 4)     /* M <= 32 */                                                      \
  ROW(64, 32, 8, 1, 1)                                                                        \
  ROW(64, 32, 8, 1, 2)                                                                        \
  ROW(128, 16, 8, 2, 1)    /* two consumer warpgroups of 64 rows of B each */                 \
  ROW(128, 16, 8, 2, 2)                                                                       \
  ROW(128, 32, 8, 2, 1)                                                                       \
  ROW(64, 8, 6, 1, 1)      /* 6 stages: 3 CTAs per SM, for more tiles than SMs unsplit */     \
  ROW(64, 16, 6, 1, 1)                                                                        \
  ROW(64, 32, 6, 1, 1)                                                                        \
  ROW(128, 16, 12, 2, 1)   /* 12 stages of a 128-row B tile: 216 KiB in flight */

const KernelVariant kVariantsSwap[] = {KF_SWAP_TILES(KF_SM90_SWAP_F32)};
const KernelVariant kVariantsSwapBf16[] = {KF_SWAP_TILES(KF_SM90_SWAP_BF16)};

}  // namespace

const KernelVariant* fp16_swap_variants(size_t* count) {
  if (count) *count = sizeof(kVariantsSwap) / sizeof(kVariantsSwap[0]);
  return kVariantsSwap;
}

const KernelVariant* bf16_swap_variants(size_t* count) {
  if (count) *count = sizeof(kVariantsSwapBf16) / sizeof(kVariantsSwapBf16[0]);
  return kVariantsSwapBf16;
}

}  // namespace kforge::kernels
