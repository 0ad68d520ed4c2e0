// fp16 variants: split-K clusters sized to fill the GPU, fp16 accumulation, the sm_80 family and the decode
// family (the third share of the fp16 table, after variants.cu's and variants_mid.cu's).
// A translation unit of its own so that it compiles in parallel with the rest of the table; the rows
// keep the order they had in the one list (variants.cu appends them in that order). Macros: variant_rows.cuh.
#include "kernels/hgemm/variant_rows.cuh"

namespace kforge::kernels {
namespace {

const KernelVariant kVariantsSmall[] = {
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
    // Tiny problems with rows that are not 16-byte multiples: four warps of 16 x 16 each, a quarter
    // of 64 x 64's instructions per warp and four times its CTAs (Nsight Compute, H100, 382x387x100
    // tn on 64 x 64: 42 CTAs of ~1,900 instructions a warp at 6.4 cycles each, 9.0 us; cuBLASLt's
    // 32 x 32 align-1 kernel: 192 CTAs of ~760, 5.3 us).
    KF_SM80_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 32, 32, 32, 2, 2, 4)
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
    // M (or N) 17-32 with 128-column tiles: the warps split along N too (8 warps: 8 x 1 or 4 x 2),
    // so that 32 rows fit the registers and the small operand is re-read half as often as with 64
    // columns (the m32x64 variants above ran at 55-65% of cuBLASLt's bandwidth at 31x4096x4096).
    // Last in the table: where they tie with the variants above in the cost model, those stay first.
    KF_SKINNY_NW_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 32, 128, 64, 8, 6, 8)
    KF_SKINNY_NW_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 32, 128, 64, 8, 4, 4)
    KF_SKINNY_T_NW_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 32, 128, 64, 8, 4, 4)
    // Small K (K <= 8): outer products on the CUDA cores, bound by writing C (smallk_gemm.cuh), on
    // 128-column and (narrow N) 32-column tiles.
    KF_SMALLK_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 128, 128, 8, 256)
    KF_SMALLK_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 128, 32, 8, 256)
    KF_SMALLK_LAYOUTS(KFORGE_HGEMM_ACC_F16, "f16", 128, 128, 8, 256)
    KF_SMALLK_LAYOUTS(KFORGE_HGEMM_ACC_F16, "f16", 128, 32, 8, 256)
    // Small K up to 256 with the whole K of a tile in shared memory (smallk_gemm.cuh WholeK), for
    // tiny problems whose rows are not 16-byte multiples: square, decode-like (few rows) and
    // narrow (few columns) tiles. Last, so that the outer products keep their ties at K <= 8.
    KF_WHOLEK_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 32, 32, 256)
    KF_WHOLEK_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 8, 64, 256)
    KF_WHOLEK_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 16, 64, 256)
    KF_WHOLEK_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 64, 8, 256)
    KF_WHOLEK_LAYOUTS(KFORGE_HGEMM_ACC_F32, "f32", 64, 16, 256)
    KF_WHOLEK_LAYOUTS(KFORGE_HGEMM_ACC_F16, "f16", 32, 32, 256)
    KF_WHOLEK_LAYOUTS(KFORGE_HGEMM_ACC_F16, "f16", 8, 64, 256)
    KF_WHOLEK_LAYOUTS(KFORGE_HGEMM_ACC_F16, "f16", 64, 8, 256)
    // GEMV-like (M <= 8 tn, N <= 8 either layout): warps streaming the long operand's rows, K split
    // among a row's warps where the rows are few (gemv_gemm.cuh). Last: decode ties keep the above.
    KF_GEMV_ROWS(KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, 8, 1, 8)
    KF_GEMV_ROWS(KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, 8, 4, 8)
    KF_GEMV_ROWS(KFORGE_HGEMM_ACC_F16, "f16", KFORGE_HGEMM_F16, 8, 1, 8)
    KF_GEMV_ROWS(KFORGE_HGEMM_ACC_F16, "f16", KFORGE_HGEMM_F16, 8, 4, 8)
    // The same with the small operand in registers, for short K (<= 256) at any alignment: up to 8
    // rows of X, or up to 4 at half the FMAs and fewer registers (gemv_gemm.cuh GemvX).
    KF_GEMVX_ROWS(KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, 8, 256, 2, 8)
    KF_GEMVX_ROWS(KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, 4, 256, 2, 8)
    KF_GEMVX_ROWS(KFORGE_HGEMM_ACC_F16, "f16", KFORGE_HGEMM_F16, 8, 256, 2, 8)
    KF_GEMVX_ROWS(KFORGE_HGEMM_ACC_F16, "f16", KFORGE_HGEMM_F16, 4, 256, 2, 8)
    // X in shared memory, W's rows 6 (4 rows of X) or 4 (8) a warp a step: three times the rows a
    // step of the above in the same two CTAs per SM (gemv_gemm.cuh gemv_xsmem_kernel).
    KF_GEMVXS_ROWS(KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, 8, 256, 4, 8)
    KF_GEMVXS_ROWS(KFORGE_HGEMM_ACC_F32, "f32", KFORGE_HGEMM_F16, 4, 256, 6, 8)
    KF_GEMVXS_ROWS(KFORGE_HGEMM_ACC_F16, "f16", KFORGE_HGEMM_F16, 8, 256, 4, 8)
    KF_GEMVXS_ROWS(KFORGE_HGEMM_ACC_F16, "f16", KFORGE_HGEMM_F16, 4, 256, 6, 8)
};

}  // namespace

const KernelVariant* fp16_small_variants(size_t* count) {
  if (count) *count = sizeof(kVariantsSmall) / sizeof(kVariantsSmall[0]);
  return kVariantsSmall;
}

}  // namespace kforge::kernels
