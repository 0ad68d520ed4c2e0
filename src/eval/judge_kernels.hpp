// The judge's batched device work over an arena (eval/arena.hpp): fresh inputs and poisoned
// outputs for a batch of slots, content hashes, guard bands, and the sampled fp64 check of every
// output. One launch each for the whole batch, so that checking every call costs little.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "eval/arena.hpp"

namespace kforge {

struct SlotCheck {
  unsigned long long nonfinite = 0;  // NaN/inf anywhere in C (poison left: unwritten)
  unsigned long long bad = 0;        // sampled elements outside the tolerance
  unsigned long long inexact = 0;    // sampled elements that differ from the fp64 value at all
  unsigned long long guard = 0;      // guard-band bytes changed
  unsigned long long in_hash = 0, out_hash = 0;
  unsigned int worst_bits = 0;       // float bits of the worst sampled error / bound
};

// Guards to 0xA5, A and B of every listed slot from its distribution (`dists[i]`, a Dist value)
// and a seed derived from (seed, slot), C of every listed slot to NaN. Device arrays. `expect`
// (a device array of n, zeroed here; optional): per slot, what arena_check will read of it while
// nothing touches it (its hashes and NaN count; no guard changed; the sample fields 0), so that a
// batch's state before its calls is the judge's own, not a second reading of memory an executor maps.
void arena_prepare(char* arena, const ArenaLayout& l, const int* slots, const unsigned char* dists, int n,
                   uint64_t seed, cudaStream_t s, SlotCheck* expect = nullptr);
// The workspace to random bytes (its contents are undefined by the ABI), its guards to 0xA5.
void arena_prepare_workspace(char* arena, const ArenaLayout& l, uint64_t seed, cudaStream_t s);
// Per listed slot: guards, input hash, output hash, NaN scan of the whole output and `samples`
// sampled elements (the first and the last among them) recomputed in fp64. `out` is a device
// array of n, zeroed here.
void arena_check(const char* arena, const ArenaLayout& l, const int* slots, int n, int samples, uint64_t seed,
                 SlotCheck* out, cudaStream_t s);
// Per listed slot i: the digest (eval/output_digest.hpp) of its output under `keys[i]`, into
// `out[i]` (device arrays of n; `out` zeroed here). The server-mode replies' digests are compared
// with these.
void arena_digest(const char* arena, const ArenaLayout& l, const int* slots, const uint64_t* keys, int n,
                  unsigned long long* out, cudaStream_t s);
// Guard-band bytes of the workspace that changed. `scratch`: a device counter to use (optional; one
// is allocated, and freed, per call otherwise).
unsigned long long arena_workspace_damage(const char* arena, const ArenaLayout& l, cudaStream_t s,
                                          unsigned long long* scratch = nullptr);

}  // namespace kforge
