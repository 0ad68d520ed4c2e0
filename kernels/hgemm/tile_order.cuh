// The order in which kforge's HGEMM kernels visit output tiles (both kernel families).
#pragma once

namespace kforge::kernels {

// Tile coordinates (tm, tn) of linear tile `t` in grouped order: GROUP_M tile rows sweep the
// columns together, column by column, so that their A and B tiles are reused from L2 (GROUP_M
// == 0: plain row-major order). `I` is int or int64_t, as the kernel's tile counts need.
template <int GROUP_M, class I>
__device__ __forceinline__ void tile_coords(I t, I tiles_m, I tiles_n, I& tm, I& tn) {
  if constexpr (GROUP_M == 0) {
    tm = t / tiles_n;
    tn = t % tiles_n;
  } else {
    const I per_group = I(GROUP_M) * tiles_n;
    const I group = t / per_group;
    const I first = group * GROUP_M;
    const I rows = tiles_m - first < I(GROUP_M) ? tiles_m - first : I(GROUP_M);
    const I in = t - group * per_group;
    tm = first + in % rows;
    tn = in / rows;
  }
}

}  // namespace kforge::kernels
