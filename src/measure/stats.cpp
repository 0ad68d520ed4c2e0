#include "measure/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.hpp"

namespace kforge {

static double sorted_percentile(const std::vector<double>& s, double p) {
  if (s.size() == 1) return s[0];
  const double pos = p * double(s.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, s.size() - 1);
  const double frac = pos - double(lo);
  return s[lo] + (s[hi] - s[lo]) * frac;
}

double percentile(std::vector<double> xs, double p) {
  KF_CHECK(!xs.empty(), "percentile of an empty sample");
  std::sort(xs.begin(), xs.end());
  return sorted_percentile(xs, std::clamp(p, 0.0, 1.0));
}

double median(std::vector<double> xs) { return percentile(std::move(xs), 0.5); }

double robust_sd(const std::vector<double>& xs) {
  const double m = median(xs);
  std::vector<double> dev;
  dev.reserve(xs.size());
  for (double x : xs) dev.push_back(std::fabs(x - m));
  return 1.4826 * median(std::move(dev));
}

Summary summarize(std::vector<double> xs) {
  KF_CHECK(!xs.empty(), "summary of an empty sample");
  std::sort(xs.begin(), xs.end());
  Summary s;
  s.n = int(xs.size());
  s.min = xs.front();
  s.max = xs.back();
  s.median = sorted_percentile(xs, 0.5);
  s.p10 = sorted_percentile(xs, 0.1);
  s.p90 = sorted_percentile(xs, 0.9);
  s.mean = std::accumulate(xs.begin(), xs.end(), 0.0) / double(xs.size());
  return s;
}

double Summary::rel_spread() const { return (n < 2 || median == 0) ? 0.0 : (p90 - p10) / median; }

std::vector<size_t> runoff_contenders(const std::vector<Summary>& times, double margin, size_t max_contenders) {
  KF_CHECK(margin >= 0 && std::isfinite(margin), "runoff margin %g is not a finite non-negative number", margin);
  KF_CHECK(max_contenders >= 1, "a runoff needs room for at least one contender");
  std::vector<size_t> order;
  for (size_t i = 0; i < times.size(); ++i)
    if (times[i].n > 0 && std::isfinite(times[i].median) && times[i].median > 0) order.push_back(i);
  // By median, ties by index (deterministic).
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return times[a].median < times[b].median; });
  if (order.empty()) return order;
  const Summary& best = times[order.front()];
  std::vector<size_t> out{order.front()};
  for (size_t j = 1; j < order.size() && out.size() < max_contenders; ++j) {
    const Summary& t = times[order[j]];
    if (t.median <= best.median * (1.0 + margin) || t.p10 <= best.p90) out.push_back(order[j]);
  }
  return out;
}

double geomean(const std::vector<double>& xs) {
  if (xs.empty()) return std::numeric_limits<double>::quiet_NaN();
  double acc = 0;
  for (double x : xs) {
    KF_CHECK(x > 0, "geometric mean of a non-positive value %g", x);
    acc += std::log(x);
  }
  return std::exp(acc / double(xs.size()));
}

}  // namespace kforge
