// fp16 variants, Hopper: one tile per CTA for mid-size shapes and split-K across a cluster for small M*N
// with long K (the second share of the fp16 table; variants.cu holds the first).
// A translation unit of its own so that it compiles in parallel with the rest of the table; the rows
// keep the order they had in the one list (variants.cu appends them in that order). Macros: variant_rows.cuh.
#include "kernels/hgemm/variant_rows.cuh"

namespace kforge::kernels {
namespace {

const KernelVariant kVariantsMid[] = {
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
};

}  // namespace

const KernelVariant* fp16_mid_variants(size_t* count) {
  if (count) *count = sizeof(kVariantsMid) / sizeof(kVariantsMid[0]);
  return kVariantsMid;
}

}  // namespace kforge::kernels
