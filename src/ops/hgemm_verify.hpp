// Verification of one HGEMM implementation (a kernel variant, the dispatcher, the exported
// library) on one problem, short of the full evaluator: what the tuner runs on every winner and
// the kernel tests run on every variant.
//
//   - three input distributions (normal, uniform, small integers), outputs NaN-poisoned first;
//   - the full fp32-reference check under the declared precision's tolerance model (sampled fp64
//     check plus a NaN scan of the whole output when M*N is over 2^25);
//   - small integers bit-exact for fp32 accumulation (products and sums are exact in fp32, so the
//     output must equal the reference rounded to fp16) where M*N <= 2^24;
//   - guard bands of 4 KiB before and after A, B, C and the workspace (out-of-bounds writes);
//   - inputs checksummed before and after (input mutation);
//   - determinism: two runs on the same inputs give bit-identical outputs.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>
#include <string>

#include "kforge/abi/hgemm.h"
#include "ops/hgemm.hpp"

namespace kforge {

using HgemmImpl = std::function<int(const kforge_hgemm_args&, cudaStream_t)>;

struct VerifyResult {
  bool ok = false;
  std::string why;       // the first failure, in words (empty when ok)
  double worst_ratio = 0;  // worst error / tolerance bound seen
};

VerifyResult verify_hgemm(const HgemmImpl& impl, const HgemmProblem& p, size_t workspace_bytes, uint64_t seed,
                          cudaStream_t s);

}  // namespace kforge
