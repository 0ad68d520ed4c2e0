#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "measure/ceilings.hpp"
#include "measure/stats.hpp"

namespace kforge {
namespace {

TEST(Stats, RobustSdIsScaledMadAndIgnoresAnOutlier) {
  // median 3, absolute deviations {2, 1, 0, 1, 97}: MAD 1
  EXPECT_DOUBLE_EQ(robust_sd({1, 2, 3, 4, 100}), 1.4826);
  EXPECT_DOUBLE_EQ(robust_sd({7, 7, 7}), 0.0);
  EXPECT_THROW(robust_sd({}), Error);
}

TEST(Stats, MedianAndPercentiles) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(percentile({0, 10}, 0.1), 1.0);
  Summary s = summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_NEAR(s.p10, 1.4, 1e-12);
  EXPECT_NEAR(s.p90, 4.6, 1e-12);
  EXPECT_NEAR(s.rel_spread(), (4.6 - 1.4) / 3, 1e-12);
  EXPECT_DOUBLE_EQ(summarize({7}).rel_spread(), 0);
  EXPECT_THROW(summarize({}), Error);
}

// A summary with the given median and a middle 80% of [p10, p90].
Summary timed(double median, double p10, double p90) {
  Summary s;
  s.n = 5;
  s.median = median;
  s.p10 = p10;
  s.p90 = p90;
  return s;
}

TEST(Stats, RunoffContendersAreTheBestAndThoseWithinNoiseOfIt) {
  // 0: 100 [99, 101]; 1: 102 (within 3%); 2: 104.5 [100.5, 108] (its p10 under the best's p90);
  // 3: 110 [106, 114] (neither); 4: untimed.
  const std::vector<Summary> t = {timed(100, 99, 101), timed(102, 101.5, 102.5), timed(104.5, 100.5, 108),
                                  timed(110, 106, 114), Summary{}};
  EXPECT_EQ(runoff_contenders(t, 0.03, 8), (std::vector<size_t>{0, 1, 2}));
  // The cap keeps the closest ones; the best always comes first.
  EXPECT_EQ(runoff_contenders(t, 0.03, 2), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(runoff_contenders(t, 0.03, 1), (std::vector<size_t>{0}));
  // A wider margin lets the 10% one in; none at all leaves only the overlapping one.
  EXPECT_EQ(runoff_contenders(t, 0.10, 8), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(runoff_contenders(t, 0.0, 8), (std::vector<size_t>{0, 2}));
}

TEST(Stats, RunoffContendersFindTheBestWhereverItIsAndSkipUntimedOnes) {
  const std::vector<Summary> t = {timed(120, 119, 121), Summary{}, timed(90, 89, 91), timed(91, 90.5, 91.5)};
  EXPECT_EQ(runoff_contenders(t, 0.02, 8), (std::vector<size_t>{2, 3}));
  // Ties keep index order.
  const std::vector<Summary> tie = {timed(50, 49, 51), timed(50, 49, 51)};
  EXPECT_EQ(runoff_contenders(tie, 0.0, 8), (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(runoff_contenders({}, 0.03, 4).empty());
  EXPECT_TRUE(runoff_contenders({Summary{}}, 0.03, 4).empty());
  EXPECT_THROW(runoff_contenders(t, -0.1, 4), Error);
  EXPECT_THROW(runoff_contenders(t, 0.03, 0), Error);
}

TEST(Stats, GeometricMean) {
  EXPECT_NEAR(geomean({1, 4}), 2, 1e-12);
  EXPECT_NEAR(geomean({2, 2, 2}), 2, 1e-12);
  EXPECT_TRUE(std::isnan(geomean({})));
  EXPECT_THROW(geomean({1, 0}), Error);
}

TEST(Ceilings, CountedFloorIsTheLargerOfComputeAndMemory) {
  Ceilings c;
  c.tensor_tflops = 500;   // 5e14 FLOP/s
  c.bandwidth_gbs = 4000;  // 4e12 B/s
  // Compute-bound: 1e12 FLOP -> 2000 us; 1e6 bytes -> 0.25 us.
  EXPECT_NEAR(counted_floor_us(1e12, 1e6, c), 2000, 1e-9);
  // Memory-bound: 1e6 FLOP -> 0.002 us; 4e9 bytes -> 1000 us.
  EXPECT_NEAR(counted_floor_us(1e6, 4e9, c), 1000, 1e-9);
  // Warm runs may take up to the L2-resident part of the traffic from L2 (at 4x the speed here).
  c.l2_bandwidth_gbs = 16000;
  EXPECT_NEAR(counted_floor_us(1e6, 4e9, c, 1e9), 750 + 62.5, 1e-9);
  EXPECT_NEAR(counted_floor_us(1e6, 4e9, c, 8e9), 250, 1e-9);  // never more than the traffic itself
  EXPECT_NEAR(counted_floor_us(1e6, 4e9, c, 0), 1000, 1e-9);
  nlohmann::json j = to_json(c);
  Ceilings back = ceilings_from_json(j);
  EXPECT_DOUBLE_EQ(back.tensor_tflops, 500);
  EXPECT_DOUBLE_EQ(back.bandwidth_gbs, 4000);
  EXPECT_DOUBLE_EQ(back.l2_bandwidth_gbs, 16000);
}

}  // namespace
}  // namespace kforge
