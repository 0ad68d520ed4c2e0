// fp16 and bf16 variants, Hopper: persistent stream-K (stream_k_plan in kernel_api.hpp). Where a shape's tiles
// leave the last round of a persistent grid partly empty (mid-size shapes: 80-160 tiles on 132 SMs),
// every CTA takes an equal share of the last rounds' K loops and the owner of each tile cut in pieces
// adds the others' fp32 partials. A translation unit of its own (variants.cu appends its fp16 rows
// after the other fp16 shares, its bf16 rows after the bf16 table). Macros: variant_rows.cuh.
#include "kernels/hgemm/variant_rows.cuh"

namespace kforge::kernels {
namespace {

// BM, BN, stages, consumer warpgroups, rasterisation group. The persistent cooperative tiles of
// variants.cu, stream-K, and two decode tiles: 64x128 on one consumer warpgroup for M <= 32 and
// 128x64 for N <= 32, eight stages each (a memory-bound tile keeps seven k tiles of loads in
// flight). A decode shape's tiles rarely fill whole rounds (12288 columns: 96 tiles of 128 on 132
// SMs; 4096: 32), which is why its table entries swing between unsplit, split-K 2, 4 and 8 and the
// decode family from one shape to the next; stream-K gives every SM the same share of B's bytes
// whatever the tile count. One list for both element types, so that every fp16 stream-K variant has
// its bf16 twin (dtype_twin: an fp16 entry's stream-K winner proposes it to bf16 problems).
#define KF_STREAMK_TILES(ROW) \
  ROW(128, 256, 4, 2, 8) ROW(128, 192, 4, 2, 8) ROW(128, 128, 6, 2, 8) ROW(64, 128, 8, 1, 8) ROW(128, 64, 8, 2, 8)

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
