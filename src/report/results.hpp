// One measured (shape, layout, implementation, mode) row, and what is made of many of them:
// CSV and JSON files, the per-FLOP-decade summary, and comparisons between runs.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/shapes.hpp"
#include "measure/stats.hpp"

namespace kforge {

struct Measurement {
  Shape shape;
  Layout layout = Layout::kNN;
  Acc acc = Acc::kF32;
  Dtype dtype = Dtype::kF16;  // element type (CSV column "dtype"; a file without it is fp16)
  std::string mode;    // "offline" | "graph" | "server"
  std::string impl;    // "cublas" | "lt_heur" | "lt_auto" | later "ours"
  Summary time_us;     // per-call microseconds over the samples
  int calls_per_sample = 1;
  double tflops = 0;         // flops / median time
  double floor_us = 0;       // counted floor of the problem on this device
  double floor_pct = 0;      // 100 * floor_us / median time
  double ratio_to_best = 0;  // median time / best median time of the same shape, acc and mode
  bool verified = false;     // output checked against the fp64 reference within tolerance
  double err_ratio = 0;      // worst |error| / tolerance bound over the checked elements
  std::string algo;          // what ran (cuBLASLt algorithm configuration, ...)

  // "lt_auto_tn": the column names of the reference table.
  std::string key() const;
};

// Sets ratio_to_best on every row: best = the smallest median time among rows with the same
// shape, acc, dtype and mode (over every impl and layout).
void fill_ratio_to_best(std::vector<Measurement>& rows);

std::string to_csv(const std::vector<Measurement>& rows);
// Parses what to_csv wrote. Throws a usage error naming the line on malformed input.
std::vector<Measurement> parse_results_csv(const std::string& text, const std::string& origin);
nlohmann::json to_json(const Measurement& m);

struct DecadeRow {
  int decade = 0;  // floor(log10(flops)): 5 means [1e5, 1e6)
  std::string key;
  int shapes = 0;
  double median_us = 0, median_tflops = 0, median_floor_pct = 0;
  double geomean_vs_best = 0;  // geometric mean of ratio_to_best
};
// Per (FLOP decade, key) rows, decades ascending, keys in first-seen order.
std::vector<DecadeRow> summarize_by_decade(const std::vector<Measurement>& rows);

struct KeySummary {
  std::string key;
  int shapes = 0;
  double geomean_vs_best = 0;
};
// Over all shapes: per key, the geometric mean of ratio_to_best. Keys in first-seen order.
std::vector<KeySummary> summarize_keys(const std::vector<Measurement>& rows);

// Human-readable summary table (decades, then the per-key geometric means).
std::string format_summary(const std::vector<Measurement>& rows);

// Our run against a reference table in the wide format of data/reference/h200_cublas_hgemm_grid.csv
// (columns M,N,K,<key>_us...): per key, the ratios our median / reference time over the shapes
// found in both.
struct ReferenceComparison {
  std::string key;
  int shapes = 0;
  double median_ratio = 0, p10_ratio = 0, p90_ratio = 0;
};
std::vector<ReferenceComparison> compare_to_reference(const std::vector<Measurement>& ours,
                                                      const std::string& reference_csv_text,
                                                      const std::string& origin);

// Two runs of the same shapes: per (shape, key), |ratio_to_best(a) - ratio_to_best(b)|.
struct RepeatabilityComparison {
  std::string key;  // "all" for every key together
  int pairs = 0;
  double median_abs_diff = 0, p90_abs_diff = 0, max_abs_diff = 0;
};
std::vector<RepeatabilityComparison> compare_runs(const std::vector<Measurement>& a,
                                                  const std::vector<Measurement>& b);

// The speed-up of one implementation over another (time of `base` / time of `impl`), each taken
// at the faster of its layouts per shape (a user picks the better layout of each library): per
// FLOP decade (decade >= 0) and over all shapes (decade -1, last). Only shapes (of one acc) that
// both measured with a verified output count; `win_rate` is the fraction with speed-up > 1.
struct SpeedupRow {
  int decade = -1;
  int shapes = 0;
  double geomean = 0, win_rate = 0, min = 0, max = 0;
};
std::vector<SpeedupRow> speedup_by_decade(const std::vector<Measurement>& rows, const std::string& impl,
                                          const std::string& base);

// Per (shape, acc, mode): each side's fastest verified time over its layouts (what ran, and in
// which layout), and the speed-up base / impl. Shapes one side lacks are left out.
struct ShapeSpeedup {
  Shape shape;
  Acc acc = Acc::kF32;
  std::string mode;
  double impl_us = 0, base_us = 0, speedup = 0;
  Layout impl_layout = Layout::kNN, base_layout = Layout::kNN;
  std::string impl_algo, base_algo;
};
std::vector<ShapeSpeedup> speedup_per_shape(const std::vector<Measurement>& rows, const std::string& impl,
                                            const std::string& base);
// The per-shape table (shape, mode, impl, base, ratio), then per mode: shapes, geometric mean,
// win rate, minimum and how many fall below `floor`.
std::string format_speedup_table(const std::vector<ShapeSpeedup>& rows, const std::string& impl,
                                 const std::string& base, double floor = 0.80);
std::string speedup_csv(const std::vector<ShapeSpeedup>& rows);
nlohmann::json speedup_json(const std::vector<ShapeSpeedup>& rows, const std::string& impl, const std::string& base);

}  // namespace kforge
