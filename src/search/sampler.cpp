#include "search/sampler.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "core/error.hpp"
#include "core/text.hpp"

namespace kforge {

namespace {

// The random draws are made here rather than with std::uniform_*_distribution, whose algorithms
// differ between standard libraries: with these, one seed gives the same picks everywhere.

// Uniform in [0, 1) from the top 53 bits of one draw.
double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

// Uniform in [0, n), n >= 1, without modulo bias (rejects the incomplete last block of values).
size_t uniform_index(std::mt19937_64& rng, size_t n) {
  const uint64_t range = uint64_t(n);
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % range;
  uint64_t x;
  do x = rng();
  while (x >= limit);
  return size_t(x % range);
}

// Index i drawn with probability weights[i] / sum(weights); weights >= 0 with a positive sum.
size_t weighted_index(std::mt19937_64& rng, const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += w;
  const double u = uniform01(rng) * total;
  double acc = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    acc += weights[i];
    if (u < acc && weights[i] > 0) return i;
  }
  // Rounding can leave u just above the last partial sum: the last index of positive weight.
  for (size_t i = weights.size(); i-- > 0;)
    if (weights[i] > 0) return i;
  KF_THROW(ErrorKind::kInternal, "weighted draw over no positive weight");
}

// The pool with every id once (its first entry), so that samplers return distinct ids; the
// scores must be numbers.
std::vector<Scored> distinct(const std::vector<Scored>& pool) {
  std::vector<Scored> out;
  std::set<int64_t> seen;
  for (const Scored& s : pool) {
    KF_CHECK(std::isfinite(s.score), "candidate %lld has score %g", (long long)s.id, s.score);
    if (seen.insert(s.id).second) out.push_back(s);
  }
  return out;
}

// A whole, decimal, int in [lo, hi]; nullopt otherwise.
std::optional<int> parse_int(const std::string& s, int lo, int hi) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

// A whole, finite, positive double; nullopt otherwise.
std::optional<double> parse_positive(const std::string& s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v <= 0)
    return std::nullopt;
  return v;
}

}  // namespace

ContrastiveSampler::ContrastiveSampler(int buckets, double temperature) : buckets_(buckets), temperature_(temperature) {
  if (buckets < 1) KF_USAGE_ERROR("contrastive sampler: need at least 1 bucket, got %d", buckets);
  if (!std::isfinite(temperature) || temperature <= 0)
    KF_USAGE_ERROR("contrastive sampler: the temperature must be a positive number, got %g", temperature);
}

std::vector<int64_t> ContrastiveSampler::pick(const std::vector<Scored>& pool_in, int n, std::mt19937_64& rng) const {
  const std::vector<Scored> pool = distinct(pool_in);
  if (pool.empty() || n <= 0) return {};

  // Equal-width buckets between the pool's lowest and highest score; the highest score goes into
  // the top bucket (not one past it). When all scores are equal there is one bucket.
  double lo = pool[0].score, hi = pool[0].score, sum = 0;
  for (const Scored& s : pool) {
    lo = std::min(lo, s.score);
    hi = std::max(hi, s.score);
    sum += s.score;
  }
  const double global_mean = sum / double(pool.size());
  const double width = (hi - lo) / buckets_;
  std::vector<std::vector<const Scored*>> members(static_cast<size_t>(buckets_));
  for (const Scored& s : pool) {
    int b = width > 0 ? int((s.score - lo) / width) : 0;
    b = std::clamp(b, 0, buckets_ - 1);
    members[size_t(b)].push_back(&s);
  }

  // The non-empty buckets and their softmax logits (bucket mean - global mean) / temperature.
  std::vector<const std::vector<const Scored*>*> live;
  std::vector<double> logits;
  for (const auto& m : members) {
    if (m.empty()) continue;
    double bucket_sum = 0;
    for (const Scored* s : m) bucket_sum += s->score;
    live.push_back(&m);
    logits.push_back((bucket_sum / double(m.size()) - global_mean) / temperature_);
  }

  std::vector<int64_t> out;
  while (int(out.size()) < n && !live.empty()) {
    // Softmax over the buckets still in the draw; subtracting the largest logit keeps exp() finite.
    const double top = *std::max_element(logits.begin(), logits.end());
    std::vector<double> weights;
    for (double l : logits) weights.push_back(std::exp(l - top));
    const size_t b = weighted_index(rng, weights);
    // One uniformly random candidate of that bucket, and the bucket leaves the draw.
    const std::vector<const Scored*>& bucket = *live[b];
    out.push_back(bucket[uniform_index(rng, bucket.size())]->id);
    live.erase(live.begin() + std::ptrdiff_t(b));
    logits.erase(logits.begin() + std::ptrdiff_t(b));
  }
  return out;
}

std::vector<int64_t> TopKSampler::pick(const std::vector<Scored>& pool_in, int n, std::mt19937_64& /*rng*/) const {
  std::vector<Scored> pool = distinct(pool_in);
  std::sort(pool.begin(), pool.end(), [](const Scored& a, const Scored& b) {
    return a.score != b.score ? a.score > b.score : a.id < b.id;
  });
  std::vector<int64_t> out;
  for (const Scored& s : pool) {
    if (int(out.size()) >= n) break;
    out.push_back(s.id);
  }
  return out;
}

IslandSampler::IslandSampler(int islands, std::unique_ptr<Sampler> inner) : islands_(islands), inner_(std::move(inner)) {
  if (islands < 1) KF_USAGE_ERROR("island sampler: need at least 1 island, got %d", islands);
  KF_CHECK(inner_ != nullptr, "island sampler without an inner sampler");
}

std::vector<int64_t> IslandSampler::pick(const std::vector<Scored>& pool, int n, std::mt19937_64& rng) const {
  if (pool.empty() || n <= 0) return {};
  // Candidates by island. An island number outside [0, islands) is folded into range, so that a
  // caller numbering islands differently still gets `islands` sub-populations.
  auto island_of = [this](const Scored& s) { return ((s.island % islands_) + islands_) % islands_; };
  std::map<int, std::vector<Scored>> by_island;  // ordered: the draw below does not depend on pool order
  for (const Scored& s : pool) by_island[island_of(s)].push_back(s);
  auto chosen = by_island.begin();
  std::advance(chosen, std::ptrdiff_t(uniform_index(rng, by_island.size())));
  return inner_->pick(chosen->second, n, rng);
}

std::unique_ptr<Sampler> make_sampler(const std::string& spec_in) {
  const std::string spec(trim(spec_in));
  const std::vector<std::string> parts = split(spec, ':');
  const char* kValid = "valid: contrastive, contrastive:BUCKETS:TEMPERATURE, topk, islands:N";
  if (parts.empty()) KF_USAGE_ERROR("empty sampler spec (%s)", kValid);
  const std::string& kind = parts[0];

  if (kind == "contrastive" && parts.size() == 1) return std::make_unique<ContrastiveSampler>();
  if (kind == "contrastive" && parts.size() == 3) {
    const auto buckets = parse_int(parts[1], 1, 1000);
    if (!buckets) KF_USAGE_ERROR("sampler '%s': BUCKETS must be a whole number from 1 to 1000", spec.c_str());
    const auto temperature = parse_positive(parts[2]);
    if (!temperature) KF_USAGE_ERROR("sampler '%s': TEMPERATURE must be a positive number", spec.c_str());
    return std::make_unique<ContrastiveSampler>(*buckets, *temperature);
  }
  if (kind == "topk" && parts.size() == 1) return std::make_unique<TopKSampler>();
  if (kind == "islands" && parts.size() == 2) {
    const auto islands = parse_int(parts[1], 1, 1000);
    if (!islands) KF_USAGE_ERROR("sampler '%s': N must be a whole number from 1 to 1000", spec.c_str());
    return std::make_unique<IslandSampler>(*islands, std::make_unique<ContrastiveSampler>());
  }
  KF_USAGE_ERROR("unknown sampler '%s' (%s)", spec.c_str(), kValid);
}

std::vector<double> group_advantages(const std::vector<double>& rewards) {
  if (rewards.empty()) return {};
  const double count = double(rewards.size());
  double mean = 0;
  for (double r : rewards) mean += r;
  mean /= count;
  double var = 0;
  for (double r : rewards) var += (r - mean) * (r - mean);
  const double stddev = std::sqrt(var / count);  // population: divide by n, not n - 1
  std::vector<double> out(rewards.size(), 0.0);
  if (!(stddev >= 1e-8)) return out;  // (also when NaN)
  for (size_t i = 0; i < rewards.size(); ++i) out[i] = (rewards[i] - mean) / stddev;
  return out;
}

double clip_reward(double r, double clip) {
  KF_CHECK(clip >= 0, "negative reward clip %g", clip);
  // sign(r) * min(|r|, clip); a NaN reward stays NaN.
  return std::clamp(r, -clip, clip);
}

double group_input(bool correct, double reward, double clip, const RewardConfig& cfg) {
  KF_CHECK(clip > 0, "the reward clip must be positive (got %g)", clip);
  const double floor = rejected_reward(cfg);
  if (!correct) return floor;
  // clamp(r, -clip, clip) > floor holds for r > floor, clip > 0 and floor <= 0; the max() keeps it
  // for a reward stored before the floor existed (a log reward of a correct candidate below -8).
  return std::max(clip_reward(reward, clip), std::nextafter(floor, 1.0));
}

}  // namespace kforge
