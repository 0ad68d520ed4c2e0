// The one HGEMM verification of kforge: how a call's outputs are read into a reason. The judge
// (eval/hgemm_worker.cpp) applies it to every call of every batch of a candidate, and
// verify_hgemm (ops/hgemm_verify.hpp: the tuner's winners, the kernel tests, bench's variants)
// applies it to kforge's own kernels in-process, on the same arena, the same four input
// distributions and the same device checks (eval/judge_kernels.hpp).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <string>

#include "eval/judge_kernels.hpp"
#include "ops/hgemm.hpp"

namespace kforge {

inline constexpr int kSamplesPerOutput = 16;  // fp64-checked elements of every output
inline constexpr Dist kCheckDists[] = {Dist::kNormal, Dist::kUniform, Dist::kSmallInt, Dist::kBiased};

// What failed first; `code` is a reason of eval/verdict.hpp, empty when the call passed.
struct CallFailure {
  std::string code, why;
  explicit operator bool() const { return !code.empty(); }
};

// Small-integer inputs are summed exactly by fp32 accumulation (products and sums exact): the
// output must then be the exact result (K small enough that it is representable in fp16 or bf16).
bool exact_small_ints(const HgemmProblem& p);

// One call's device checks, before and after it, read in the judge's order: guard bands, inputs
// unchanged, no poison left, sampled elements within the tolerance, exact on small integers.
// `where` names the call in the message; `timed` turns a wrong result into timed_output_wrong.
// `worst` (if given) receives the worst sampled error over its bound.
CallFailure judge_call(const HgemmProblem& p, Dist d, const SlotCheck& before, const SlotCheck& after, bool timed,
                       const std::string& where, double* worst = nullptr);

// One output checked in full when `full`, else at `samples` fp64-sampled elements. The judge
// checks in full up to 4e9 FLOP (judge_checks_in_full), verify_hgemm up to 2^25 outputs.
CallFailure judge_full_output(const HgemmProblem& p, const __half* a, const __half* b, const __half* c, bool full,
                              int samples, uint64_t seed, bool timed, const std::string& where, cudaStream_t s,
                              double* worst = nullptr);
inline bool judge_checks_in_full(const HgemmProblem& p) { return p.shape.flops() <= 4e9; }

}  // namespace kforge
