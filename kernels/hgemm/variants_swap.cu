// fp16 variants, Hopper: swapped-role decode tiles (tn, M <= 32), the fifth share of the fp16 table
// (after variants_deep.cu's rows).
//
// Why: a decode shape (M of a few tokens) on the plain tiles puts M on the wgmma's 64-row side, so
// that 15x4096x4096 computes 64 rows for 15 and spends ~3 us of tensor time per SM against ~6 of
// loads; it ran 8.9 us on the best of them (64x64 split-K 2) where cuBLASLt took 7.7 (H100, graph
// mode), with a 64x8 tile of C^T: B's N on the 64-row side and M on the 8-wide one (two column
// tiles for M = 15). These are that orientation on the same pipeline: BM rows of B (N) per tile,
// BN = 8, 16 or 32 rows of A (M) on the wgmma's N side, deep pipelines (a stage is the B tile and
// a few rows of A: 10 KiB for 64x16), split-K clusters where the N tiles are fewer than the SMs.
// A translation unit of its own so that it compiles in parallel with the rest of the table.
// Macros: variant_rows.cuh.
#include "kernels/hgemm/variant_rows.cuh"

namespace kforge::kernels {
namespace {

const KernelVariant kVariantsSwap[] = {
    KF_SM90_SWAP_F32(64, 8, 12, 1, 1)    // M <= 16; 4096 columns -> 64 tiles per 8 rows of M
    KF_SM90_SWAP_F32(64, 8, 12, 1, 2)
    KF_SM90_SWAP_F32(64, 16, 12, 1, 1)   // M <= 32
    KF_SM90_SWAP_F32(64, 16, 12, 1, 2)
    KF_SM90_SWAP_F32(64, 16, 8, 1, 4)
    KF_SM90_SWAP_F32(64, 32, 8, 1, 1)
    KF_SM90_SWAP_F32(64, 32, 8, 1, 2)
    KF_SM90_SWAP_F32(128, 16, 8, 2, 1)   // two consumer warpgroups of 64 rows of B each
    KF_SM90_SWAP_F32(128, 16, 8, 2, 2)
    KF_SM90_SWAP_F32(128, 32, 8, 2, 1)
};

}  // namespace

const KernelVariant* fp16_swap_variants(size_t* count) {
  if (count) *count = sizeof(kVariantsSwap) / sizeof(kVariantsSwap[0]);
  return kVariantsSwap;
}

}  // namespace kforge::kernels
