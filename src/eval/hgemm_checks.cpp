#include "eval/hgemm_checks.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/text.hpp"
#include "eval/verdict.hpp"

namespace kforge {

// |sum| <= 4K with inputs in [-2, 2]: exact in fp32, and in the output type up to its largest run of
// consecutive integers (2^11 = 2048 for fp16's 11 significand bits, 2^8 = 256 for bf16's 8).
bool exact_small_ints(const HgemmProblem& p) {
  return p.acc == Acc::kF32 && 4 * p.shape.k <= (p.dtype == Dtype::kBF16 ? 256 : 2048);
}

CallFailure judge_call(const HgemmProblem& p, Dist d, const SlotCheck& before, const SlotCheck& c, bool timed,
                       const std::string& where, double* worst) {
  float ratio;
  std::memcpy(&ratio, &c.worst_bits, sizeof ratio);
  if (worst) *worst = double(ratio);
  const char* wrong = timed ? reason::kTimedOutputWrong : reason::kWrongResult;
  if (c.guard) return {reason::kOutOfBounds, strf("%llu guard-band bytes around A, B or C changed (%s)", c.guard, where.c_str())};
  if (c.in_hash != before.in_hash) return {reason::kInputMutated, "the inputs changed during the call (" + where + ")"};
  if (c.nonfinite)
    return {reason::kUnwrittenOutput, strf("%llu output elements are NaN or infinite: unwritten (%s)", c.nonfinite, where.c_str())};
  if (c.bad)
    return {wrong, strf("%llu of %d sampled elements outside the %s%s tolerance, worst error %.3g x the bound (%s)", c.bad,
                        kSamplesPerOutput, p.dtype == Dtype::kBF16 ? "bf16 " : "", to_string(p.acc).data(),
                        double(ratio), where.c_str())};
  if (exact_small_ints(p) && d == Dist::kSmallInt && c.inexact)
    return {wrong, "not bit-exact on small-integer inputs, which fp32 accumulation sums exactly (" + where + ")"};
  return {};
}

CallFailure judge_full_output(const HgemmProblem& p, const __half* a, const __half* b, const __half* c, bool in_full,
                              int samples, uint64_t seed, bool timed, const std::string& where, cudaStream_t s,
                              double* worst) {
  const CheckResult full = in_full ? check_full_gpu(p, a, b, c, s) : check_sampled_gpu(p, a, b, c, samples, seed, s);
  if (worst) *worst = full.worst_ratio;
  if (!full.ok()) return {timed ? reason::kTimedOutputWrong : reason::kWrongResult, full.describe() + " (" + where + ")"};
  return {};
}

}  // namespace kforge
