// Samplers choose the exemplars a prompt shows, from the correct candidates of a run, and the
// group-relative (GRPO) arithmetic on rewards.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "eval/verdict.hpp"

namespace kforge {

struct Scored {
  int64_t id = 0;
  double score = 0;  // higher is better (speed-up)
  int island = 0;    // for island sampling: which sub-population it belongs to
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  // Up to `n` distinct ids from `pool` (all correct candidates); fewer when the pool is small.
  virtual std::vector<int64_t> pick(const std::vector<Scored>& pool, int n, std::mt19937_64& rng) const = 0;
  virtual std::string name() const = 0;
};

// CUDA-L1's contrastive sampler: candidates grouped into `buckets` score buckets (equal-width in
// score between the pool's min and max); a bucket is drawn with probability softmax((bucket mean -
// global mean) / temperature) over the non-empty buckets; exemplars come from distinct buckets
// (a bucket once used is removed from the draw), one uniformly random candidate per bucket.
class ContrastiveSampler : public Sampler {
 public:
  ContrastiveSampler(int buckets = 5, double temperature = 1.0);
  std::vector<int64_t> pick(const std::vector<Scored>& pool, int n, std::mt19937_64& rng) const override;
  std::string name() const override { return "contrastive"; }

 private:
  int buckets_;
  double temperature_;
};

// The n best by score (ties by lower id).
class TopKSampler : public Sampler {
 public:
  std::vector<int64_t> pick(const std::vector<Scored>& pool, int n, std::mt19937_64& rng) const override;
  std::string name() const override { return "topk"; }
};

// Island sampling: picks one island uniformly among those with candidates, then applies the inner
// sampler within it (diversity: islands evolve apart).
class IslandSampler : public Sampler {
 public:
  IslandSampler(int islands, std::unique_ptr<Sampler> inner);
  std::vector<int64_t> pick(const std::vector<Scored>& pool, int n, std::mt19937_64& rng) const override;
  std::string name() const override { return "islands"; }
  int islands() const { return islands_; }

 private:
  int islands_;
  std::unique_ptr<Sampler> inner_;
};

// "contrastive", "contrastive:BUCKETS:TEMPERATURE", "topk", "islands:N" (contrastive inside).
// Throws a usage error on anything else.
std::unique_ptr<Sampler> make_sampler(const std::string& spec);

// GRPO: each reward minus the group mean, divided by the group's standard deviation (population);
// all zeros when the deviation is below 1e-8. Empty in, empty out.
std::vector<double> group_advantages(const std::vector<double>& rewards);
// Extreme rewards are smoothed and clipped before normalising: r -> sign(r) * min(|r|, clip).
double clip_reward(double r, double clip);
// What a candidate enters its group's normalisation with: a correct candidate's reward clipped to
// +-clip (clip > 0), a rejected or invalid one's rejected_reward(cfg), not clipped. Every correct
// value lies above every rejected one (a correct reward older than the floor of verdict.hpp is
// lifted just above it), so a rejection always gets the lowest advantage of its group.
double group_input(bool correct, double reward, double clip, const RewardConfig& cfg);

}  // namespace kforge
