// bf16 variants, Hopper: the twins of the shipped fp16 table's large-shape winners that the bf16
// subset of variants_bf16.cu lacked. A translation unit of its own so that the bf16 kernels compile
// in two halves in parallel, as the fp16 ones do in three. Macros: variant_rows.cuh.
#include "kernels/hgemm/variant_rows.cuh"

namespace kforge::kernels {
namespace {

const KernelVariant kVariantsBf16Large[] = {
    // The twins of the shipped fp16 table's winners that the subset of variants_bf16.cu lacked (it
    // was chosen by the grid's wins before the fill, decode and layer training sets were tuned in
    // and 128x192 came to win large shapes): without a twin, a bf16 problem whose fp16 entry names
    // one of these was served from its neighbours' twins instead. Counted over the table's 3,926 entries (those
    // of >= 1e9 FLOP in brackets): 128x192 persistent 207 (175), 64x128 split-K 4 164 (44), 64x64
    // split-K 2 118 (59), 64x64 split-K 4 107 (21), 128x128 one tile per CTA 107 (72), 128x128
    // split-K 3 76 (52), 128x64 split-K 3 73 (46), 128x256 one tile per CTA 62 (61), 64x256 one
    // tile per CTA 48 (24), 128x128 split-K 6 38 (36), 128x128 split-K 2 28 (27). After the bf16
    // table's own rows (variants() appends them so), so that ties among neighbours keep those.
    KF_SM90_BF16(128, 192, 4, 2, 1, 8, true)
    KF_SM90_BF16(128, 256, 4, 2, 1, 8, false)
    KF_SM90_BF16(128, 128, 4, 2, 1, 8, false)
    KF_SM90_BF16(64, 256, 4, 1, 1, 8, false)
    KF_SM90_BF16(128, 128, 4, 2, 2, 0, false)
    KF_SM90_BF16(128, 128, 4, 2, 3, 0, false)
    KF_SM90_BF16(128, 128, 4, 2, 6, 0, false)
    KF_SM90_BF16(128, 64, 8, 2, 3, 0, false)
    KF_SM90_BF16(64, 128, 4, 1, 4, 0, false)
    KF_SM90_BF16(64, 64, 4, 1, 2, 0, false)
    KF_SM90_BF16(64, 64, 4, 1, 4, 0, false)
};

}  // namespace

const KernelVariant* bf16_large_variants(size_t* count) {
  if (count) *count = sizeof(kVariantsBf16Large) / sizeof(kVariantsBf16Large[0]);
  return kVariantsBf16Large;
}

}  // namespace kforge::kernels
