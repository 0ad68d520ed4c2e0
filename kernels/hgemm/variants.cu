// The fp16 variants of kforge's HGEMM kernel families that are compiled into the library: the space
// the tuner searches and the dispatch table draws from. The table is spread over translation units
// that compile in parallel (each holds a share of the instantiations, and a build's wall time is its
// slowest unit's): this one the persistent large-tile kernels, variants_mid.cu the one-tile-per-CTA
// and split-K ones, variants_small.cu the cluster-filling split-K, fp16-accumulation, sm_80 and
// decode ones, variants_deep.cu deep-pipeline split-K tiles for decode shapes, variants_swap.cu the
// swapped-role decode tiles, variants_bf16.cu and variants_bf16_large.cu the bf16 table. Adding a line to a table
// adds a variant for every layout and accumulation listed with it; invalid configs fail to compile with the reason their
// family's static_asserts state. The macros: variant_rows.cuh.
#include <cstring>
#include <iterator>
#include <vector>

#include "kernels/hgemm/variant_rows.cuh"

namespace kforge::kernels {
namespace {

const KernelVariant kVariants[] = {
    // Large shapes: persistent, two consumer warpgroups, grouped rasterisation.
    KF_SM90_F32(128, 256, 4, 2, 1, 8, true)
    KF_SM90_F32(128, 192, 4, 2, 1, 8, true)
    KF_SM90_F32(128, 128, 6, 2, 1, 8, true)
    KF_SM90_F32(256, 128, 4, 2, 1, 8, true)
    // Ping-pong: each consumer's epilogue hides under the other's main loop.
    KF_SM90_PP_F32(128, 128, 6, 8)
    KF_SM90_PP_F32(64, 256, 4, 8)
    KF_SM90_PP_F32(128, 64, 8, 8)
    // Multicast pairs: half the L2-to-SM traffic for B on shapes of several waves.
    KF_SM90_MC_F32(128, 256, 4, 8)
    KF_SM90_MC_F32(128, 128, 6, 8)
};

}  // namespace

// fp16 first (this file's rows, then variants_mid.cu's, then variants_small.cu's: the order of the
// one list they were split from; then variants_streamk.cu's and variants_deep.cu's fp16 rows, added later), then bf16
// (variants_bf16.cu's, variants_bf16_large.cu's, then variants_streamk.cu's and variants_swap.cu's): the fp16 variants keep
// their indices and order (the fp16 fingerprint of a table's entries, variants_fingerprint, does not change when bf16 ones
// are added).
const KernelVariant* variants(size_t* count) {
  static const std::vector<KernelVariant> all = [] {
    std::vector<KernelVariant> v(std::begin(kVariants), std::end(kVariants));
    for (const KernelVariant* (*part)(size_t*) : {fp16_mid_variants, fp16_small_variants, fp16_streamk_variants, fp16_deep_variants, fp16_swap_variants, bf16_variants,
                                                bf16_large_variants, bf16_streamk_variants, bf16_swap_variants}) {
      size_t n = 0;
      const KernelVariant* b = part(&n);
      v.insert(v.end(), b, b + n);
    }
    return v;
  }();
  if (count) *count = all.size();
  return all.data();
}

const KernelVariant* find_variant(const char* name) {
  if (!name) return nullptr;
  size_t count = 0;
  const KernelVariant* all = variants(&count);
  for (size_t i = 0; i < count; ++i)
    if (std::strcmp(all[i].name, name) == 0) return &all[i];
  return nullptr;
}

}  // namespace kforge::kernels
