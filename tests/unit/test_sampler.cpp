// Exemplar samplers (contrastive, top-k, islands), their spec parsing, and the GRPO arithmetic.
#include "search/sampler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace kforge {
namespace {

// Scores from 1.0 to 5.0 in five equal-width buckets (width 0.8). The bucket of an id is
// id / 10 - 1: ids 10, 11 in bucket 0; 20, 21 in 1; 30 in 2; 40 in 3; 50, 51 in 4 (5.0, the
// maximum, belongs to the top bucket).
const std::vector<Scored> kPool = {{10, 1.0}, {11, 1.1}, {20, 2.0}, {21, 2.2},
                                   {30, 3.0}, {40, 4.0}, {50, 4.9}, {51, 5.0}};
int bucket_of(int64_t id) { return int(id / 10) - 1; }

// The probability of each bucket being drawn first: softmax((bucket mean - pool mean) / t).
std::vector<double> expected_first_bucket(double t) {
  const std::vector<double> means = {1.05, 2.1, 3.0, 4.0, 4.95};
  const double pool_mean = (1.0 + 1.1 + 2.0 + 2.2 + 3.0 + 4.0 + 4.9 + 5.0) / 8;
  std::vector<double> p;
  double sum = 0;
  for (double m : means) sum += std::exp((m - pool_mean) / t);
  for (double m : means) p.push_back(std::exp((m - pool_mean) / t) / sum);
  return p;
}

// How many of `draws` single picks land in each bucket.
std::vector<int> first_bucket_counts(const Sampler& s, int draws, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < draws; ++i) {
    const std::vector<int64_t> got = s.pick(kPool, 1, rng);
    EXPECT_EQ(got.size(), 1u);
    if (!got.empty()) ++counts[size_t(bucket_of(got[0]))];
  }
  return counts;
}

ErrorKind error_kind(const std::string& spec) {
  try {
    make_sampler(spec);
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "sampler spec '" << spec << "' was accepted";
  return ErrorKind::kInternal;
}

TEST(ContrastiveSampler, PicksComeFromDistinctBuckets) {
  const ContrastiveSampler s(5, 1.0);
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 300; ++trial) {
    for (int n : {2, 3, 5}) {
      const std::vector<int64_t> got = s.pick(kPool, n, rng);
      ASSERT_EQ(int(got.size()), n);
      std::set<int> buckets;
      for (int64_t id : got) {
        EXPECT_TRUE(std::any_of(kPool.begin(), kPool.end(), [&](const Scored& x) { return x.id == id; })) << id;
        buckets.insert(bucket_of(id));
      }
      EXPECT_EQ(int(buckets.size()), n) << "two exemplars from one bucket";
    }
  }
  // More than there are non-empty buckets: one per bucket, no more.
  const std::vector<int64_t> all = s.pick(kPool, 20, rng);
  EXPECT_EQ(all.size(), 5u);
}

TEST(ContrastiveSampler, SoftmaxFavoursBetterBuckets) {
  const int draws = 2000;
  const std::vector<int> counts = first_bucket_counts(ContrastiveSampler(5, 0.5), draws, 42);
  EXPECT_GT(counts[4], counts[0]);
  EXPECT_GT(counts[4], counts[3]);
  EXPECT_GT(counts[3], counts[2]);
  // And in the proportions of the documented softmax (within 5 binomial standard deviations).
  const std::vector<double> p = expected_first_bucket(0.5);
  for (size_t b = 0; b < 5; ++b) {
    const double mean = draws * p[b], sd = std::sqrt(draws * p[b] * (1 - p[b]));
    EXPECT_NEAR(counts[b], mean, 5 * sd + 2) << "bucket " << b;
  }
}

TEST(ContrastiveSampler, HighTemperatureIsNearUniformOverBuckets) {
  const int draws = 2000;
  const std::vector<int> counts = first_bucket_counts(ContrastiveSampler(5, 1e6), draws, 7);
  // Uniform over buckets, not over candidates: the two-member buckets are not drawn twice as often.
  const double mean = draws / 5.0, sd = std::sqrt(draws * 0.2 * 0.8);
  for (size_t b = 0; b < 5; ++b) EXPECT_NEAR(counts[b], mean, 5 * sd) << "bucket " << b;

  // Within a bucket the candidate is uniform too.
  std::mt19937_64 rng(3);
  const ContrastiveSampler s(5, 1e6);
  std::map<int64_t, int> per_id;
  for (int i = 0; i < draws; ++i)
    for (int64_t id : s.pick(kPool, 5, rng)) ++per_id[id];
  EXPECT_NEAR(per_id[10], draws / 2.0, 5 * std::sqrt(draws * 0.25));
  EXPECT_NEAR(per_id[50], draws / 2.0, 5 * std::sqrt(draws * 0.25));
  EXPECT_EQ(per_id[30], draws);  // alone in its bucket, and every bucket is used when n = 5
}

TEST(ContrastiveSampler, SmallPools) {
  const ContrastiveSampler s;
  std::mt19937_64 rng(5);
  EXPECT_TRUE(s.pick({}, 3, rng).empty());
  EXPECT_TRUE(s.pick(kPool, 0, rng).empty());
  EXPECT_EQ(s.pick({{7, 2.0}}, 3, rng), std::vector<int64_t>{7});
  // Two scores: both, in some order.
  std::vector<int64_t> two = s.pick({{1, -1.0}, {2, 0.5}}, 10, rng);
  std::sort(two.begin(), two.end());
  EXPECT_EQ(two, (std::vector<int64_t>{1, 2}));
  // All scores equal: one bucket, hence one exemplar.
  const std::vector<int64_t> same = s.pick({{1, 1.0}, {2, 1.0}, {3, 1.0}}, 3, rng);
  ASSERT_EQ(same.size(), 1u);
  EXPECT_TRUE(same[0] >= 1 && same[0] <= 3);
  // The same id twice in the pool is still one candidate.
  const std::vector<int64_t> dup = s.pick({{4, 1.0}, {4, 3.0}, {5, 2.0}}, 5, rng);
  EXPECT_EQ(std::set<int64_t>(dup.begin(), dup.end()).size(), dup.size());
}

TEST(ContrastiveSampler, SameSeedSamePicks) {
  const ContrastiveSampler s(4, 0.7);
  std::mt19937_64 a(99), b(99), c(100);
  bool differs = false;
  for (int i = 0; i < 50; ++i) {
    const std::vector<int64_t> pa = s.pick(kPool, 3, a);
    EXPECT_EQ(pa, s.pick(kPool, 3, b));
    differs = differs || pa != s.pick(kPool, 3, c);
  }
  EXPECT_TRUE(differs) << "another seed gave the very same 50 picks";
}

TEST(ContrastiveSampler, BadParametersAreUsageErrors) {
  for (auto make : {+[] { ContrastiveSampler s(0, 1.0); }, +[] { ContrastiveSampler s(5, 0.0); },
                    +[] { ContrastiveSampler s(5, -1.0); }, +[] { ContrastiveSampler s(5, NAN); }}) {
    try {
      make();
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    }
  }
}

TEST(TopKSampler, BestFirstTiesByLowerId) {
  const TopKSampler s;
  std::mt19937_64 rng(1);
  const std::vector<Scored> pool = {{5, 2.0}, {3, 2.0}, {9, 3.0}, {1, 1.0}, {8, 2.0}};
  EXPECT_EQ(s.pick(pool, 3, rng), (std::vector<int64_t>{9, 3, 5}));
  EXPECT_EQ(s.pick(pool, 1, rng), (std::vector<int64_t>{9}));
  EXPECT_EQ(s.pick(pool, 10, rng), (std::vector<int64_t>{9, 3, 5, 8, 1}));
  EXPECT_TRUE(s.pick(pool, 0, rng).empty());
  EXPECT_TRUE(s.pick({}, 3, rng).empty());
  EXPECT_EQ(s.name(), "topk");
}

TEST(IslandSampler, PicksWithinOneIsland) {
  // Islands 0, 1 and 2 have candidates, island 3 has none. The island of an id is id / 100.
  std::vector<Scored> pool;
  for (int island = 0; island < 3; ++island)
    for (int k = 0; k < 4; ++k) pool.push_back({island * 100 + k, double(k + island), island});
  const IslandSampler s(4, std::make_unique<TopKSampler>());
  EXPECT_EQ(s.islands(), 4);
  EXPECT_EQ(s.name(), "islands");

  std::mt19937_64 rng(11);
  std::vector<int> per_island(4, 0);
  const int draws = 900;
  for (int i = 0; i < draws; ++i) {
    const std::vector<int64_t> got = s.pick(pool, 2, rng);
    ASSERT_EQ(got.size(), 2u);
    const int64_t island = got[0] / 100;
    EXPECT_EQ(got[1] / 100, island) << "exemplars from two islands";
    // Top-k inside the island: its two best.
    EXPECT_EQ(got, (std::vector<int64_t>{island * 100 + 3, island * 100 + 2}));
    ++per_island[size_t(island)];
  }
  EXPECT_EQ(per_island[3], 0);
  for (int island = 0; island < 3; ++island)
    EXPECT_NEAR(per_island[size_t(island)], draws / 3.0, 5 * std::sqrt(draws * (1 / 3.0) * (2 / 3.0)));

  EXPECT_TRUE(s.pick({}, 2, rng).empty());
  // A single populated island is always the one.
  EXPECT_EQ(s.pick({{7, 1.0, 2}, {8, 2.0, 2}}, 5, rng), (std::vector<int64_t>{8, 7}));
}

TEST(IslandSampler, SameSeedSamePicks) {
  std::vector<Scored> pool;
  for (int i = 0; i < 40; ++i) pool.push_back({i, std::sin(i) * 3, i % 4});
  const IslandSampler s(4, std::make_unique<ContrastiveSampler>());
  std::mt19937_64 a(5), b(5);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(s.pick(pool, 3, a), s.pick(pool, 3, b));
}

TEST(MakeSampler, ParsesTheDocumentedSpecs) {
  EXPECT_EQ(make_sampler("contrastive")->name(), "contrastive");
  EXPECT_EQ(make_sampler("topk")->name(), "topk");
  const auto islands = make_sampler("islands:3");
  ASSERT_NE(dynamic_cast<const IslandSampler*>(islands.get()), nullptr);
  EXPECT_EQ(dynamic_cast<const IslandSampler*>(islands.get())->islands(), 3);

  // BUCKETS is used: with one bucket there is one exemplar whatever n is.
  const auto one_bucket = make_sampler("contrastive:1:0.5");
  ASSERT_NE(dynamic_cast<const ContrastiveSampler*>(one_bucket.get()), nullptr);
  std::mt19937_64 rng(2);
  EXPECT_EQ(one_bucket->pick(kPool, 4, rng).size(), 1u);
  EXPECT_EQ(make_sampler("contrastive:8:2")->pick(kPool, 8, rng).size(), 5u);  // 5 non-empty of 8
  // TEMPERATURE is used: a tiny one always draws the top bucket first.
  const auto cold = make_sampler("contrastive:5:0.001");
  for (int i = 0; i < 50; ++i) EXPECT_EQ(bucket_of(cold->pick(kPool, 1, rng).at(0)), 4);
}

TEST(MakeSampler, AnythingElseIsAUsageError) {
  for (const char* spec : {"", "  ", "bogus", "Contrastive", "contrastive:", "contrastive:5", "contrastive:5:1:2",
                           "contrastive:0:1", "contrastive:-3:1", "contrastive:x:1", "contrastive:2.5:1",
                           "contrastive:5:0", "contrastive:5:-1", "contrastive:5:abc", "contrastive:5:1e999",
                           "contrastive:5:nan", "contrastive:5:inf", "contrastive:5:1x", "topk:3", "islands",
                           "islands:", "islands:0", "islands:-2", "islands:2x", "islands:2:3"})
    EXPECT_EQ(error_kind(spec), ErrorKind::kUsage) << "'" << spec << "'";
}

TEST(GroupAdvantages, ZeroMeanUnitPopulationStd) {
  const std::vector<double> rewards = {1, 2, 3, 4};
  const std::vector<double> a = group_advantages(rewards);
  ASSERT_EQ(a.size(), 4u);
  // mean 2.5, population variance 1.25
  const double sd = std::sqrt(1.25);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(a[i], (rewards[i] - 2.5) / sd, 1e-12);
  double sum = 0, squares = 0;
  for (double x : a) {
    sum += x;
    squares += x * x;
  }
  EXPECT_NEAR(sum / 4, 0, 1e-12);
  EXPECT_NEAR(squares / 4, 1, 1e-12);  // population: n in the denominator

  const std::vector<double> b = group_advantages({-1, 0.5, 10, 0.5, 3});
  ASSERT_EQ(b.size(), 5u);
  EXPECT_GT(b[2], b[4]);
  EXPECT_DOUBLE_EQ(b[1], b[3]);
}

TEST(GroupAdvantages, EqualRewardsGiveZeros) {
  EXPECT_EQ(group_advantages({0.7, 0.7, 0.7}), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(group_advantages({5}), (std::vector<double>{0}));
  EXPECT_EQ(group_advantages({1.0, 1.0 + 1e-10}), (std::vector<double>{0, 0}));  // deviation below 1e-8
  EXPECT_TRUE(group_advantages({}).empty());
}

TEST(ClipReward, ClipsSymmetrically) {
  EXPECT_EQ(clip_reward(5, 1), 1);
  EXPECT_EQ(clip_reward(-5, 1), -1);
  EXPECT_EQ(clip_reward(0.3, 1), 0.3);
  EXPECT_EQ(clip_reward(-0.3, 1), -0.3);
  EXPECT_EQ(clip_reward(0, 1), 0);
  EXPECT_EQ(clip_reward(2.5, 2.5), 2.5);
  EXPECT_EQ(clip_reward(-7, 0), 0);
}

}  // namespace
}  // namespace kforge

namespace kforge {
namespace {

// Issue 14 item 4: with --reward log a rejected candidate (reward 0) got advantage +1 and a
// correct one at 0.628x (reward -0.466) got -1. A rejection now enters its group below every
// correct candidate, for every reward kind and clip.
TEST(GroupInput, ARejectionGetsTheLowestAdvantageOfItsGroup) {
  for (const char* kind : {"log", "speedup", "clipped:2"}) {
    const RewardConfig cfg = parse_reward(kind);
    for (double clip : {0.1, 1.0, 7.5, 10.0, 100.0}) {
      for (double s : {1e-9, 0.001, 0.628, 1.0, 4.0, 1e6}) {
        Verdict v;
        v.correct = true;
        v.speedup[cfg.mode].median = s;
        const double correct = group_input(true, compute_reward(v, cfg), clip, cfg);
        const double rejected = group_input(false, rejected_reward(cfg), clip, cfg);
        EXPECT_LT(rejected, correct) << kind << " clip " << clip << " at " << s << "x";
        const std::vector<double> adv = group_advantages({rejected, correct});
        EXPECT_LT(adv[0], adv[1]) << kind << " clip " << clip << " at " << s << "x";
      }
    }
  }
  // The group: a rejection and a correct candidate at 0.628x under the default reward.
  const RewardConfig log = parse_reward("log");
  Verdict slow;
  slow.correct = true;
  slow.speedup["offline"].median = 0.628;
  const std::vector<double> adv = group_advantages(
      {group_input(false, rejected_reward(log), 10, log), group_input(true, compute_reward(slow, log), 10, log)});
  EXPECT_DOUBLE_EQ(adv[0], -1.0);
  EXPECT_DOUBLE_EQ(adv[1], 1.0);
  // A correct reward stored before the floor existed still ranks above a rejection.
  EXPECT_GT(group_input(true, std::log(1e-6), 100, log), group_input(false, 0.0, 100, log));
  EXPECT_THROW(group_input(true, 1.0, 0, log), Error);
}

}  // namespace
}  // namespace kforge
