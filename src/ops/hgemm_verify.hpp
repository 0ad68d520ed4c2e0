// Verification of one HGEMM implementation (a kernel variant, the dispatcher, the exported
// library) on one problem, short of the full evaluator: what the tuner runs on every winner and
// the kernel tests run on every variant. The checks are the judge's own (eval/hgemm_checks.hpp),
// in-process, for kforge's trusted kernels:
//
//   - the four input distributions of the judge (normal, uniform, small integers, biased), each
//     in a fresh arena slot with guard bands and a NaN-poisoned output;
//   - per call: guard bands, input hashes, the NaN scan of the whole output, 16 fp64-sampled
//     elements under the declared precision's tolerance, bit-exactness on small integers where
//     fp32 accumulation sums them exactly; then the output checked in full (4096 samples above
//     2^25 outputs);
//   - the workspace's guard bands;
//   - determinism: the normal inputs again give bit-identical outputs.
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
