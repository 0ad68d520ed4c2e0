// Dispatch: from a problem (M, N, K, layout, accumulation) to the variant that runs it.
//
// A tuned table maps exact problems to the variant the tuner measured fastest on them; every
// other problem gets the heuristic choice, which is sound for any shape (the sm_90a variants
// where their alignment rules hold, the sm_80 family everywhere else).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/hgemm/kernel_api.hpp"

namespace kforge::kernels {

struct DispatchEntry {
  int64_t m, n, k;
  kforge_hgemm_layout layout;
  kforge_hgemm_acc acc;
  const char* variant;  // a name from variants()
};

// The variant the tuned table names for exactly this problem, if that variant supports it.
const KernelVariant* table_choice(const DispatchEntry* table, size_t n, const kforge_hgemm_problem& p);
// A sound choice for any problem from its sizes alone (never nullptr for m, n, k >= 1).
const KernelVariant* heuristic_choice(const kforge_hgemm_problem& p, int sm_count, int compute_capability);
// table_choice, else heuristic_choice.
const KernelVariant* choose(const DispatchEntry* table, size_t n, const kforge_hgemm_problem& p, int sm_count,
                            int compute_capability);
// choose(), memoised for the per-call path (the exported kforge_hgemm, `hgemm bench`'s "ours"): the
// table scan and the heuristic's name lookups cost ~1-1.5 us per call on a 1,780-entry table, as
// much as a small GEMM's launch. The last 16 problems of each thread (with the table, its size and
// the device's SM count and compute capability) are remembered; `table` must not change while it
// is used this way.
const KernelVariant* choose_cached(const DispatchEntry* table, size_t n, const kforge_hgemm_problem& p, int sm_count,
                                   int compute_capability);

}  // namespace kforge::kernels
