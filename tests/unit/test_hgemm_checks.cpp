// The judge's reading of one call's device checks (eval/hgemm_checks.hpp), shared by the judge and
// verify_hgemm: which failure wins, which reason it is, and when small integers must be exact.
#include <gtest/gtest.h>

#include <cstring>

#include "eval/hgemm_checks.hpp"
#include "eval/verdict.hpp"

namespace kforge {
namespace {

SlotCheck clean(float worst = 0.5f) {
  SlotCheck c;
  c.in_hash = 42;
  c.out_hash = 7;
  std::memcpy(&c.worst_bits, &worst, sizeof worst);
  return c;
}

const HgemmProblem kF32{{256, 256, 256}, Layout::kNN, Acc::kF32};
const HgemmProblem kF32LongK{{256, 256, 8192}, Layout::kNN, Acc::kF32};
const HgemmProblem kF16{{256, 256, 256}, Layout::kNN, Acc::kF16};

TEST(HgemmChecks, ACleanCallPassesAndReportsItsWorstError) {
  double worst = 0;
  EXPECT_FALSE(judge_call(kF32, Dist::kNormal, clean(), clean(0.25f), false, "call 1", &worst));
  EXPECT_DOUBLE_EQ(worst, 0.25);
}

TEST(HgemmChecks, EachFailureHasItsReasonAndTheFirstOneWins) {
  SlotCheck after = clean();
  after.guard = 3, after.in_hash = 1, after.nonfinite = 5, after.bad = 2;
  EXPECT_EQ(judge_call(kF32, Dist::kNormal, clean(), after, false, "c").code, reason::kOutOfBounds);
  after.guard = 0;
  EXPECT_EQ(judge_call(kF32, Dist::kNormal, clean(), after, false, "c").code, reason::kInputMutated);
  after.in_hash = 42;
  const CallFailure unwritten = judge_call(kF32, Dist::kNormal, clean(), after, false, "call 3 of 8");
  EXPECT_EQ(unwritten.code, reason::kUnwrittenOutput);
  EXPECT_NE(unwritten.why.find("(call 3 of 8)"), std::string::npos) << unwritten.why;
  after.nonfinite = 0;
  EXPECT_EQ(judge_call(kF32, Dist::kNormal, clean(), after, false, "c").code, reason::kWrongResult);
  // The same wrong output in a timed batch: right when checked, wrong when timed.
  EXPECT_EQ(judge_call(kF32, Dist::kNormal, clean(), after, true, "c").code, reason::kTimedOutputWrong);
}

TEST(HgemmChecks, SmallIntegersExactOnlyWhereFp32SumsThemExactly) {
  SlotCheck after = clean();
  after.inexact = 1;
  EXPECT_EQ(judge_call(kF32, Dist::kSmallInt, clean(), after, false, "c").code, reason::kWrongResult);
  EXPECT_FALSE(judge_call(kF32, Dist::kNormal, clean(), after, false, "c"));    // other inputs: within tolerance
  EXPECT_FALSE(judge_call(kF16, Dist::kSmallInt, clean(), after, false, "c"));  // fp16 accumulation rounds
  EXPECT_FALSE(judge_call(kF32LongK, Dist::kSmallInt, clean(), after, false, "c"));  // sums past 2^11 round
  EXPECT_TRUE(exact_small_ints(kF32));
  EXPECT_FALSE(exact_small_ints(kF32LongK));
  EXPECT_FALSE(exact_small_ints(kF16));
}

TEST(HgemmChecks, TheJudgeChecksInFullUpTo4e9Flop) {
  EXPECT_TRUE(judge_checks_in_full({{1024, 1024, 1024}, Layout::kNN, Acc::kF32}));
  EXPECT_FALSE(judge_checks_in_full({{4096, 4096, 4096}, Layout::kNN, Acc::kF32}));
}

}  // namespace
}  // namespace kforge
