// Timer::batch_calls: how many calls each launch of an interleaved set gets per batch. No GPU.
#include <gtest/gtest.h>

#include "measure/timer.hpp"

namespace kforge {
namespace {

TimingConfig offline() {
  TimingConfig c;
  c.mode = Mode::kOffline;
  c.batch_target_us = 200;
  return c;
}

TEST(TimerBatches, ShortCallsFillTheTargetRoundedUp) {
  const std::vector<int> n = Timer::batch_calls({3.0, 7.0}, offline());
  EXPECT_EQ(n[0], 67);  // ceil(200 / 3)
  EXPECT_EQ(n[1], 29);  // ceil(200 / 7)
}

TEST(TimerBatches, NearlyEqualLongCallsGetTheSameCount) {
  // The bench's 3072x28672x4096 case: two ~1 ms sides, one 1% faster in the probe. The next whole
  // count gave the faster one 3 calls against 2 (a 50% longer batch); the nearest gives both 2.
  const std::vector<int> n = Timer::batch_calls({979.0, 970.0}, offline());
  EXPECT_EQ(n[0], 2);
  EXPECT_EQ(n[1], 2);
}

TEST(TimerBatches, LongCallBatchesLastAboutAsLongAsEachOther) {
  const std::vector<double> est = {1000.0, 700.0, 420.0, 250.0, 90.0};
  const std::vector<int> n = Timer::batch_calls(est, offline());
  const double longest_batch = 2 * 1000.0;
  for (size_t i = 0; i < est.size(); ++i) {
    const double batch = n[i] * est[i];
    EXPECT_GE(batch, 0.65 * longest_batch) << "launch " << i << ": " << n[i] << " calls";
    EXPECT_LE(batch, 1.35 * longest_batch) << "launch " << i << ": " << n[i] << " calls";
  }
  EXPECT_EQ(n[0], 2);
  EXPECT_EQ(n[1], 3);  // 2000 / 700 = 2.86
}

TEST(TimerBatches, OneLaunchOrServerModeKeepTheirOldRules) {
  EXPECT_EQ(Timer::batch_calls({979.0}, offline())[0], 1);  // alone: ceil(200 / 979)
  TimingConfig server = offline();
  server.mode = Mode::kServer;
  const std::vector<int> n = Timer::batch_calls({5.0, 900.0}, server);
  EXPECT_EQ(n[0], 1);
  EXPECT_EQ(n[1], 1);
}

TEST(TimerBatches, FlushedBatchesAreCappedAt32Calls) {
  TimingConfig c = offline();
  c.flush_l2 = true;
  const std::vector<int> n = Timer::batch_calls({2.0, 1000.0}, c);
  EXPECT_EQ(n[0], 32);
  EXPECT_EQ(n[1], 2);
}

}  // namespace
}  // namespace kforge
