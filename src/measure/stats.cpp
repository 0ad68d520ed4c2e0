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
