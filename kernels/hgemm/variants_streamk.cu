// fp16 and bf16 variants, Hopper: persistent stream-K (stream_k_plan in kernel_api.hpp). Where a shape's tiles
// leave the last round of a persistent grid partly empty (mid-size shapes: 80-160 tiles on 132 SMs),
// every CTA takes an equal share of the last rounds' K loops and the owner of each tile cut in pieces
// adds the others' fp32 partials. A translation unit of its own (variants.cu appends its fp16 rows
// after the other fp16 shares, its bf16 rows after the bf16 table). Macros: variant_rows.cuh.
#include "kernels/hgemm/variant_rows.cuh"

namespace kforge::kernels {
namespace {

// The persistent cooperative tiles of variants.cu, stream-K; one list for both element types, so
// that every fp16 stream-K variant has its bf16 twin (dtype_twin: an fp16 entry's stream-K winner
// proposes it to bf16 problems).
#define KF_STREAMK_TILES(ROW) ROW(128, 256, 4, 8) ROW(128, 192, 4, 8) ROW(128, 128, 6, 8)

const KernelVariant kVariantsStreamK[] = {KF_STREAMK_TILES(KF_SM90_SK_F32)};
const KernelVariant kVariantsStreamKBf16[] = {KF_STREAMK_TILES(KF_SM90_SK_BF16)};

}  // namespace

const KernelVariant* fp16_streamk_variants(size_t* count) {
  if (count) *count = sizeof(kVariantsStreamK) / sizeof(kVariantsStreamK[0]);
  return kVariantsStreamK;
}

const KernelVariant* bf16_streamk_variants(size_t* count) {
  if (count) *count = sizeof(kVariantsStreamKBf16) / sizeof(kVariantsStreamKBf16[0]);
  return kVariantsStreamKBf16;
}

}  // namespace kforge::kernels
