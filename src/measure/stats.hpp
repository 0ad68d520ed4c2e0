// Statistics before verdicts: medians, spreads, geometric means.
#pragma once
#include <cstddef>
#include <vector>

namespace kforge {

struct Summary {
  int n = 0;
  double median = 0, mean = 0, min = 0, max = 0;
  double p10 = 0, p90 = 0;    // 10th and 90th percentiles (linear interpolation)
  double rel_spread() const;  // (p90 - p10) / median; 0 when n < 2
};

// Throws an internal error on an empty sample.
Summary summarize(std::vector<double> xs);
double median(std::vector<double> xs);
// A robust standard deviation: 1.4826 x the median absolute deviation from the median (the
// standard deviation for normal data, untouched by a few outliers). Throws on an empty sample.
double robust_sd(const std::vector<double>& xs);
// p in [0, 1], linear interpolation between order statistics.
double percentile(std::vector<double> xs, double p);
// Geometric mean of positive values; NaN on an empty input.
double geomean(const std::vector<double>& xs);

// The runoff (hgemm bench/tune): which of several timed alternatives of one implementation are
// within noise of the fastest, by median time. Alternative i is a contender when its median is
// within `margin` (relative) of the best median, or when its p10 lies at or below the best's p90
// (the middle 80% of their samples overlap). The best is always the first index; the others
// follow by median, at most `max_contenders` in all (>= 1). Non-positive or non-finite medians
// (an alternative that was not timed) never count. Empty input: empty output.
std::vector<std::size_t> runoff_contenders(const std::vector<Summary>& times, double margin, std::size_t max_contenders);

}  // namespace kforge
