// fp16 variants, Hopper: split-K cluster tiles for decode shapes (M <= 32 of a 64-row tile) with
// deep pipelines (the fourth share of the fp16 table, after variants_streamk.cu's fp16 rows).
//
// Why: a decode tile's CTA streams B and keeps (STAGES - 1) stages of loads in flight; a split-K
// cluster runs one CTA per SM, so the device's bytes in flight are CTAs x (STAGES - 1) x stage
// bytes, and by Little's law that over the loaded DRAM latency bounds the bandwidth. The shipped
// split-K decode tiles have 4 stages: 64x64 split-K 2 at 32x12288x3072 holds 132 x 3 x (4 KiB of A
// + 8 KiB of B) = 4.8 MB in flight and ran at 3.3 TB/s (H200, tuned table), where the 6- and
// 8-stage tiles reached 3.8-3.9 (32x16384x4096 on 64x128 s6, 32x4096x32768 on 128x64 s8 split-K 2)
// and cuBLASLt 3.9-4.3 on the off-grid set's decode shapes. These hold twice the bytes in flight
// of their 4-stage twins, in cluster sizes that fit whole (132 CTAs of 2-CTA clusters, 117 of 3).
// A translation unit of its own so that it compiles in parallel with the rest of the table.
// Macros: variant_rows.cuh.
#include "kernels/hgemm/variant_rows.cuh"

namespace kforge::kernels {
namespace {

const KernelVariant kVariantsDeep[] = {
    KF_SM90_F32(64, 64, 8, 1, 2, 0, false)   // 4096 columns -> 128 CTAs, 7 x 8 KiB of B in flight each
    KF_SM90_F32(64, 64, 8, 1, 3, 0, false)   // 2048 columns -> 96 CTAs
    KF_SM90_F32(64, 128, 8, 1, 2, 0, false)  // 8192 columns -> 128 CTAs, 7 x 16 KiB each
    KF_SM90_F32(64, 128, 8, 1, 3, 0, false)  // 4096 columns -> 96 CTAs
};

}  // namespace

const KernelVariant* fp16_deep_variants(size_t* count) {
  if (count) *count = sizeof(kVariantsDeep) / sizeof(kVariantsDeep[0]);
  return kVariantsDeep;
}

}  // namespace kforge::kernels
