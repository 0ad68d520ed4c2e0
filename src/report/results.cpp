#include "report/results.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <map>
#include <tuple>

#include "core/error.hpp"
#include "core/text.hpp"

namespace kforge {

std::string Measurement::key() const { return impl + "_" + std::string(to_string(layout)); }

// ---------------------------------------------------------------------------------------------
// CSV reading and writing

namespace {

// One CSV record: its fields and the line it starts on (1-based).
struct CsvRecord {
  std::vector<std::string> fields;
  int line = 0;
};

// Splits CSV text into records. A field may be quoted ("a, b", "say ""hi""", even across lines);
// unquoted fields are trimmed; blank lines are skipped; CRLF line ends are accepted.
std::vector<CsvRecord> read_csv(const std::string& text, const std::string& origin) {
  std::vector<CsvRecord> out;
  CsvRecord rec;
  rec.line = 1;
  std::string field;
  bool quoted = false;     // the current field began with a quote
  bool in_quotes = false;  // inside the quotes of the current field
  int line = 1;

  auto end_field = [&] {
    rec.fields.push_back(quoted ? field : std::string(trim(field)));
    field.clear();
    quoted = false;
  };
  auto end_record = [&] {
    const bool blank = rec.fields.empty() && !quoted && trim(field).empty();
    end_field();
    if (!blank) out.push_back(std::move(rec));
    rec = CsvRecord{};
  };

  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        in_quotes = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
    } else if (c == ',') {
      end_field();
    } else if (c == '\n') {
      end_record();
      rec.line = ++line;
    } else if (c == '\r') {
      continue;
    } else if (quoted) {
      // Only blanks may follow the closing quote of a field.
      if (c != ' ' && c != '\t')
        KF_USAGE_ERROR("%s:%d: text after the closing quote of a field", origin.c_str(), line);
    } else if (c == '"') {
      if (!trim(field).empty()) KF_USAGE_ERROR("%s:%d: stray quote inside a field", origin.c_str(), line);
      field.clear();
      quoted = in_quotes = true;
    } else {
      field += c;
    }
  }
  if (in_quotes) KF_USAGE_ERROR("%s:%d: quoted field never closed", origin.c_str(), rec.line);
  end_record();
  return out;
}

// Quotes a field when reading it back would otherwise change it.
std::string csv_field(const std::string& s) {
  const bool needs_quotes = s.find_first_of(",\"\r\n") != std::string::npos ||
                            (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.back() == ' ' ||
                                            s.back() == '\t'));
  if (!needs_quotes) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

double parse_double(const std::string& s, const char* column) {
  double v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || ptr != end)
    KF_USAGE_ERROR("column '%s': '%s' is not a number", column, s.c_str());
  return v;
}

int64_t parse_int(const std::string& s, const char* column, int64_t min_value) {
  int64_t v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || ptr != end)
    KF_USAGE_ERROR("column '%s': '%s' is not a whole number", column, s.c_str());
  if (v < min_value) KF_USAGE_ERROR("column '%s': %lld is below %lld", column, (long long)v, (long long)min_value);
  return v;
}

bool parse_bool(const std::string& s, const char* column) {
  if (s == "1" || s == "true") return true;
  if (s == "0" || s == "false") return false;
  KF_USAGE_ERROR("column '%s': '%s' is not 0 or 1", column, s.c_str());
}

// The columns of a results CSV, in the order to_csv writes them.
const std::vector<std::string> kColumns = {
    "m",        "n",         "k",         "layout",        "acc",      "dtype",     "mode",     "impl",     "median_us",
    "p10_us",   "p90_us",    "min_us",    "max_us",        "mean_us",  "samples",   "calls_per_sample",
    "tflops",   "floor_us",  "floor_pct", "ratio_to_best", "verified", "err_ratio", "algo"};

// The row's fields, looked up by column name through the header.
class RowView {
 public:
  RowView(const std::map<std::string, size_t>& index, const std::vector<std::string>& fields)
      : index_(index), fields_(fields) {}
  const std::string& str(const char* column) const { return fields_[index_.at(column)]; }
  bool has(const char* column) const { return index_.count(column) != 0; }
  double num(const char* column) const { return parse_double(str(column), column); }
  int64_t integer(const char* column, int64_t min_value) const {
    return parse_int(str(column), column, min_value);
  }

 private:
  const std::map<std::string, size_t>& index_;
  const std::vector<std::string>& fields_;
};

Measurement parse_row(const RowView& r) {
  Measurement m;
  m.shape = {r.integer("m", 1), r.integer("n", 1), r.integer("k", 1)};
  m.layout = parse_layout(r.str("layout"));
  m.acc = parse_acc(r.str("acc"));
  if (r.has("dtype")) m.dtype = parse_dtype(r.str("dtype"));
  m.mode = r.str("mode");
  m.impl = r.str("impl");
  if (m.mode.empty()) KF_USAGE_ERROR("empty mode");
  if (m.impl.empty()) KF_USAGE_ERROR("empty impl");
  m.time_us.median = r.num("median_us");
  m.time_us.p10 = r.num("p10_us");
  m.time_us.p90 = r.num("p90_us");
  m.time_us.min = r.num("min_us");
  m.time_us.max = r.num("max_us");
  m.time_us.mean = r.num("mean_us");
  m.time_us.n = int(r.integer("samples", 0));
  m.calls_per_sample = int(r.integer("calls_per_sample", 1));
  m.tflops = r.num("tflops");
  m.floor_us = r.num("floor_us");
  m.floor_pct = r.num("floor_pct");
  m.ratio_to_best = r.num("ratio_to_best");
  m.verified = parse_bool(r.str("verified"), "verified");
  m.err_ratio = r.num("err_ratio");
  m.algo = r.str("algo");
  return m;
}

bool positive(double x) { return std::isfinite(x) && x > 0; }

// Geometric mean of the positive, finite values; NaN when there are none.
double geomean_of_positive(const std::vector<double>& xs) {
  std::vector<double> kept;
  for (double x : xs)
    if (positive(x)) kept.push_back(x);
  return geomean(kept);
}

// floor(log10(flops)) without trusting log10 at exact powers of ten.
int flop_decade(double flops) {
  int d = int(std::floor(std::log10(flops)));
  if (std::pow(10.0, d + 1) <= flops) ++d;
  if (std::pow(10.0, d) > flops) --d;
  return d;
}

}  // namespace

std::string to_csv(const std::vector<Measurement>& rows) {
  std::string out = join(kColumns, ",") + "\n";
  for (const Measurement& m : rows) {
    out += strf("%lld,%lld,%lld,%s,%s,%s,%s,%s,", (long long)m.shape.m, (long long)m.shape.n,
                (long long)m.shape.k, std::string(to_string(m.layout)).c_str(),
                std::string(to_string(m.acc)).c_str(), std::string(to_string(m.dtype)).c_str(),
                csv_field(m.mode).c_str(), csv_field(m.impl).c_str());
    out += strf("%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%d,", m.time_us.median, m.time_us.p10, m.time_us.p90,
                m.time_us.min, m.time_us.max, m.time_us.mean, m.time_us.n, m.calls_per_sample);
    out += strf("%.6g,%.6g,%.6g,%.9g,%d,%.6g,", m.tflops, m.floor_us, m.floor_pct, m.ratio_to_best,
                m.verified ? 1 : 0, m.err_ratio);
    out += csv_field(m.algo) + "\n";
  }
  return out;
}

std::vector<Measurement> parse_results_csv(const std::string& text, const std::string& origin) {
  const std::vector<CsvRecord> records = read_csv(text, origin);
  if (records.empty()) KF_USAGE_ERROR("%s: empty results file (no header line)", origin.c_str());

  std::map<std::string, size_t> index;
  const CsvRecord& header = records.front();
  for (size_t i = 0; i < header.fields.size(); ++i) index.emplace(header.fields[i], i);
  for (const std::string& c : kColumns)
    if (!index.count(c) && c != "dtype")  // files written before bf16 have no dtype column: fp16
      KF_USAGE_ERROR("%s:%d: expected the header line '%s' (column '%s' is missing)", origin.c_str(),
                     header.line, join(kColumns, ",").c_str(), c.c_str());

  std::vector<Measurement> rows;
  for (size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& rec = records[r];
    if (rec.fields.size() != header.fields.size())
      KF_USAGE_ERROR("%s:%d: expected %zu columns, found %zu", origin.c_str(), rec.line, header.fields.size(),
                     rec.fields.size());
    try {
      rows.push_back(parse_row(RowView(index, rec.fields)));
    } catch (const Error& e) {
      KF_USAGE_ERROR("%s:%d: %s", origin.c_str(), rec.line, e.what());
    }
  }
  return rows;
}

nlohmann::json to_json(const Measurement& m) {
  return {
      {"m", m.shape.m},
      {"n", m.shape.n},
      {"k", m.shape.k},
      {"layout", to_string(m.layout)},
      {"acc", to_string(m.acc)},
      {"dtype", to_string(m.dtype)},
      {"mode", m.mode},
      {"impl", m.impl},
      {"key", m.key()},
      {"time_us",
       {{"median", m.time_us.median},
        {"p10", m.time_us.p10},
        {"p90", m.time_us.p90},
        {"min", m.time_us.min},
        {"max", m.time_us.max},
        {"mean", m.time_us.mean},
        {"samples", m.time_us.n}}},
      {"calls_per_sample", m.calls_per_sample},
      {"tflops", m.tflops},
      {"floor_us", m.floor_us},
      {"floor_pct", m.floor_pct},
      {"ratio_to_best", m.ratio_to_best},
      {"verified", m.verified},
      {"err_ratio", m.err_ratio},
      {"algo", m.algo},
  };
}

void fill_ratio_to_best(std::vector<Measurement>& rows) {
  using Group = std::tuple<int64_t, int64_t, int64_t, Acc, Dtype, std::string>;
  auto group_of = [](const Measurement& m) { return Group{m.shape.m, m.shape.n, m.shape.k, m.acc, m.dtype, m.mode}; };
  std::map<Group, double> best;
  for (const Measurement& m : rows) {
    if (!positive(m.time_us.median)) continue;
    auto [it, inserted] = best.emplace(group_of(m), m.time_us.median);
    if (!inserted) it->second = std::min(it->second, m.time_us.median);
  }
  for (Measurement& m : rows) {
    auto it = best.find(group_of(m));
    // 0 marks "unknown": a row without a usable time, or a group without one.
    m.ratio_to_best = (it != best.end() && positive(m.time_us.median)) ? m.time_us.median / it->second : 0.0;
  }
}

// ---------------------------------------------------------------------------------------------
// Summaries

std::vector<DecadeRow> summarize_by_decade(const std::vector<Measurement>& rows) {
  std::vector<std::string> keys;  // first-seen order
  struct Samples {
    std::vector<double> us, tflops, floor_pct, ratio;
  };
  std::map<std::pair<int, std::string>, Samples> cells;
  for (const Measurement& m : rows) {
    const std::string key = m.key();
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    Samples& s = cells[{flop_decade(m.shape.flops()), key}];
    s.us.push_back(m.time_us.median);
    s.tflops.push_back(m.tflops);
    s.floor_pct.push_back(m.floor_pct);
    s.ratio.push_back(m.ratio_to_best);
  }

  std::vector<int> decades;
  for (const auto& [cell, s] : cells)
    if (decades.empty() || decades.back() != cell.first) decades.push_back(cell.first);

  std::vector<DecadeRow> out;
  for (int d : decades)
    for (const std::string& key : keys) {
      auto it = cells.find({d, key});
      if (it == cells.end()) continue;
      const Samples& s = it->second;
      DecadeRow row;
      row.decade = d;
      row.key = key;
      row.shapes = int(s.us.size());
      row.median_us = median(s.us);
      row.median_tflops = median(s.tflops);
      row.median_floor_pct = median(s.floor_pct);
      row.geomean_vs_best = geomean_of_positive(s.ratio);
      out.push_back(row);
    }
  return out;
}

std::vector<KeySummary> summarize_keys(const std::vector<Measurement>& rows) {
  std::vector<std::string> keys;
  std::map<std::string, std::vector<double>> ratios;
  for (const Measurement& m : rows) {
    const std::string key = m.key();
    if (!ratios.count(key)) keys.push_back(key);
    ratios[key].push_back(m.ratio_to_best);
  }
  std::vector<KeySummary> out;
  for (const std::string& key : keys)
    out.push_back({key, int(ratios[key].size()), geomean_of_positive(ratios[key])});
  return out;
}

namespace {

std::string fixed_or_na(const char* fmt, double x) { return std::isfinite(x) ? strf(fmt, x) : "n/a"; }

}  // namespace

std::string format_summary(const std::vector<Measurement>& rows) {
  if (rows.empty()) return "no measurements\n";
  const char* row_fmt = "  %-22s %7s %14s %10s %11s %9s\n";
  std::string out =
      "Per FLOP decade (2*M*N*K): time, TFLOP/s and % of floor are medians over the shapes;\n"
      "vs best = geometric mean of time / best time of the same shape.\n";
  int current = INT_MIN;
  for (const DecadeRow& r : summarize_by_decade(rows)) {
    if (r.decade != current) {
      current = r.decade;
      out += strf("\n1e%d to 1e%d FLOP\n", r.decade, r.decade + 1);
      out += strf(row_fmt, "impl_layout", "shapes", "median time", "TFLOP/s", "% of floor", "vs best");
    }
    out += strf(row_fmt, r.key.c_str(), std::to_string(r.shapes).c_str(), human_us(r.median_us).c_str(),
                fixed_or_na("%.1f", r.median_tflops).c_str(), fixed_or_na("%.1f%%", r.median_floor_pct).c_str(),
                fixed_or_na("%.3f", r.geomean_vs_best).c_str());
  }
  out += "\nGeometric mean vs best over all shapes\n";
  const char* key_fmt = "  %-22s %7s %9s\n";
  out += strf(key_fmt, "impl_layout", "shapes", "vs best");
  for (const KeySummary& k : summarize_keys(rows))
    out += strf(key_fmt, k.key.c_str(), std::to_string(k.shapes).c_str(),
                fixed_or_na("%.3f", k.geomean_vs_best).c_str());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Comparisons

std::vector<ReferenceComparison> compare_to_reference(const std::vector<Measurement>& ours,
                                                      const std::string& reference_csv_text,
                                                      const std::string& origin) {
  const std::vector<CsvRecord> records = read_csv(reference_csv_text, origin);
  if (records.empty()) KF_USAGE_ERROR("%s: empty reference file (no header line)", origin.c_str());

  // Header: M, N, K (any case) and the time columns "<key>_us"; other columns are ignored.
  const CsvRecord& header = records.front();
  size_t col_m = SIZE_MAX, col_n = SIZE_MAX, col_k = SIZE_MAX;
  std::vector<size_t> time_cols;
  std::vector<std::string> keys;
  for (size_t i = 0; i < header.fields.size(); ++i) {
    const std::string& name = header.fields[i];
    if (name == "M" || name == "m") col_m = i;
    else if (name == "N" || name == "n") col_n = i;
    else if (name == "K" || name == "k") col_k = i;
    else if (ends_with(name, "_us") && name.size() > 3) {
      time_cols.push_back(i);
      keys.push_back(name.substr(0, name.size() - 3));
    }
  }
  if (col_m == SIZE_MAX || col_n == SIZE_MAX || col_k == SIZE_MAX || time_cols.empty())
    KF_USAGE_ERROR("%s:%d: expected a header with columns M,N,K and <key>_us time columns", origin.c_str(),
                   header.line);

  // Shape -> reference times, one per key (NaN where the cell is empty).
  using ShapeKey = std::tuple<int64_t, int64_t, int64_t>;
  std::map<ShapeKey, std::pair<int, std::vector<double>>> table;
  for (size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& rec = records[r];
    if (rec.fields.size() != header.fields.size())
      KF_USAGE_ERROR("%s:%d: expected %zu columns, found %zu", origin.c_str(), rec.line, header.fields.size(),
                     rec.fields.size());
    try {
      const ShapeKey shape{parse_int(rec.fields[col_m], "M", 1), parse_int(rec.fields[col_n], "N", 1),
                           parse_int(rec.fields[col_k], "K", 1)};
      std::vector<double> times;
      for (size_t c = 0; c < time_cols.size(); ++c) {
        const std::string& cell = rec.fields[time_cols[c]];
        times.push_back(cell.empty() ? NAN : parse_double(cell, header.fields[time_cols[c]].c_str()));
      }
      auto [it, inserted] = table.emplace(shape, std::make_pair(rec.line, std::move(times)));
      if (!inserted) KF_USAGE_ERROR("this shape already appears on line %d", it->second.first);
    } catch (const Error& e) {
      KF_USAGE_ERROR("%s:%d: %s", origin.c_str(), rec.line, e.what());
    }
  }

  std::vector<std::vector<double>> ratios(keys.size());
  for (const Measurement& m : ours) {
    auto key_it = std::find(keys.begin(), keys.end(), m.key());
    auto row_it = table.find({m.shape.m, m.shape.n, m.shape.k});
    if (key_it == keys.end() || row_it == table.end()) continue;
    const size_t c = size_t(key_it - keys.begin());
    const double ref = row_it->second.second[c];
    if (positive(ref) && positive(m.time_us.median)) ratios[c].push_back(m.time_us.median / ref);
  }

  std::vector<ReferenceComparison> out;
  for (size_t c = 0; c < keys.size(); ++c) {
    if (ratios[c].empty()) continue;
    out.push_back({keys[c], int(ratios[c].size()), median(ratios[c]), percentile(ratios[c], 0.1),
                   percentile(ratios[c], 0.9)});
  }
  return out;
}

std::vector<RepeatabilityComparison> compare_runs(const std::vector<Measurement>& a,
                                                  const std::vector<Measurement>& b) {
  using RowKey = std::tuple<int64_t, int64_t, int64_t, Layout, Acc, std::string, std::string>;
  auto key_of = [](const Measurement& m) {
    return RowKey{m.shape.m, m.shape.n, m.shape.k, m.layout, m.acc, m.mode, m.impl};
  };
  std::map<RowKey, double> b_ratio;
  for (const Measurement& m : b) b_ratio[key_of(m)] = m.ratio_to_best;

  std::vector<std::string> keys;  // first-seen order in a
  std::map<std::string, std::vector<double>> diffs;
  std::vector<double> all;
  for (const Measurement& m : a) {
    auto it = b_ratio.find(key_of(m));
    // Rows without a known ratio on either side (0 = unknown) are not comparable.
    if (it == b_ratio.end() || !positive(m.ratio_to_best) || !positive(it->second)) continue;
    const double d = std::fabs(m.ratio_to_best - it->second);
    const std::string key = m.key();
    if (!diffs.count(key)) keys.push_back(key);
    diffs[key].push_back(d);
    all.push_back(d);
  }

  auto summarize_diffs = [](const std::string& key, const std::vector<double>& d) {
    return RepeatabilityComparison{key, int(d.size()), median(d), percentile(d, 0.9),
                                   *std::max_element(d.begin(), d.end())};
  };
  std::vector<RepeatabilityComparison> out;
  if (all.empty()) return out;  // nothing in common
  for (const std::string& key : keys) out.push_back(summarize_diffs(key, diffs[key]));
  out.push_back(summarize_diffs("all", all));
  return out;
}

std::vector<SpeedupRow> speedup_by_decade(const std::vector<Measurement>& rows, const std::string& impl,
                                          const std::string& base) {
  // Per (shape, acc): the best median time of each side over its layouts.
  using ShapeKey = std::tuple<int64_t, int64_t, int64_t, Acc>;
  std::map<ShapeKey, std::pair<double, double>> best;  // (impl, base); 0 = not measured
  for (const Measurement& m : rows) {
    // An output that failed verification does not count, however fast.
    if ((m.impl != impl && m.impl != base) || !m.verified || !positive(m.time_us.median)) continue;
    auto& [t_impl, t_base] = best[{m.shape.m, m.shape.n, m.shape.k, m.acc}];
    double& t = m.impl == impl ? t_impl : t_base;
    t = t > 0 ? std::min(t, m.time_us.median) : m.time_us.median;
  }
  std::map<int, std::vector<double>> by_decade;
  std::vector<double> all;
  for (const auto& [key, times] : best) {
    if (!(times.first > 0 && times.second > 0)) continue;
    const double speedup = times.second / times.first;
    const auto [m, n, k, acc] = key;
    by_decade[flop_decade(2.0 * double(m) * double(n) * double(k))].push_back(speedup);
    all.push_back(speedup);
  }
  auto row_of = [](int decade, const std::vector<double>& xs) {
    SpeedupRow r;
    r.decade = decade;
    r.shapes = int(xs.size());
    r.geomean = geomean(xs);
    r.win_rate = double(std::count_if(xs.begin(), xs.end(), [](double x) { return x > 1.0; })) / double(xs.size());
    r.min = *std::min_element(xs.begin(), xs.end());
    r.max = *std::max_element(xs.begin(), xs.end());
    return r;
  };
  std::vector<SpeedupRow> out;
  if (all.empty()) return out;
  for (const auto& [decade, xs] : by_decade) out.push_back(row_of(decade, xs));
  out.push_back(row_of(-1, all));
  return out;
}

std::vector<ShapeSpeedup> speedup_per_shape(const std::vector<Measurement>& rows, const std::string& impl,
                                            const std::string& base) {
  using Key = std::tuple<int64_t, int64_t, int64_t, Acc, std::string>;
  std::map<Key, std::pair<const Measurement*, const Measurement*>> best;  // (impl, base)
  for (const Measurement& m : rows) {
    if ((m.impl != impl && m.impl != base) || !m.verified || !positive(m.time_us.median)) continue;
    auto& [bi, bb] = best[{m.shape.m, m.shape.n, m.shape.k, m.acc, m.mode}];
    const Measurement*& b = m.impl == impl ? bi : bb;
    if (!b || m.time_us.median < b->time_us.median) b = &m;
  }
  std::vector<ShapeSpeedup> out;
  for (const auto& [key, pair] : best) {
    const auto [bi, bb] = pair;
    if (!bi || !bb) continue;
    ShapeSpeedup r;
    r.shape = bi->shape;
    r.acc = bi->acc;
    r.mode = bi->mode;
    r.impl_us = bi->time_us.median;
    r.base_us = bb->time_us.median;
    r.speedup = r.base_us / r.impl_us;
    r.impl_layout = bi->layout;
    r.base_layout = bb->layout;
    r.impl_algo = bi->algo;
    r.base_algo = bb->algo;
    out.push_back(std::move(r));
  }
  // In the order the shapes were measured would need the plan; by mode, then FLOPs, is stable.
  std::stable_sort(out.begin(), out.end(), [](const ShapeSpeedup& a, const ShapeSpeedup& b) {
    if (a.mode != b.mode) return a.mode < b.mode;
    return a.shape.flops() < b.shape.flops();
  });
  return out;
}

std::string format_speedup_table(const std::vector<ShapeSpeedup>& rows, const std::string& impl,
                                 const std::string& base, double floor) {
  std::string out = strf("%-20s %-8s %12s %-3s %12s %-3s %7s\n", "shape", "mode", impl.c_str(), "", base.c_str(), "",
                         "ratio");
  std::map<std::string, std::vector<double>> by_mode;
  for (const ShapeSpeedup& r : rows) {
    out += strf("%-20s %-8s %12s %-3s %12s %-3s %7.3f%s\n", r.shape.str().c_str(), r.mode.c_str(),
                human_us(r.impl_us).c_str(), std::string(to_string(r.impl_layout)).c_str(), human_us(r.base_us).c_str(),
                std::string(to_string(r.base_layout)).c_str(), r.speedup, r.speedup < floor ? "  <" : "");
    by_mode[r.mode].push_back(r.speedup);
  }
  out += strf("ratio = %s time / %s time, each at its faster layout; '<' marks a ratio below %.2f\n", base.c_str(),
              impl.c_str(), floor);
  for (const auto& [mode, xs] : by_mode) {
    const auto wins = std::count_if(xs.begin(), xs.end(), [](double x) { return x > 1.0; });
    const auto below = std::count_if(xs.begin(), xs.end(), [floor](double x) { return x < floor; });
    out += strf("%s: %zu shapes, geomean %.3f, win rate %.1f%%, min %.3f, max %.3f, %lld below %.2f\n", mode.c_str(),
                xs.size(), geomean(xs), 100.0 * double(wins) / double(xs.size()), *std::min_element(xs.begin(), xs.end()),
                *std::max_element(xs.begin(), xs.end()), (long long)below, floor);
  }
  return out;
}

std::string speedup_csv(const std::vector<ShapeSpeedup>& rows) {
  std::string out = "m,n,k,acc,mode,impl_us,impl_layout,impl_algo,base_us,base_layout,base_algo,speedup\n";
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const ShapeSpeedup& r : rows)
    out += strf("%lld,%lld,%lld,%s,%s,%.4f,%s,%s,%.4f,%s,%s,%.5f\n", (long long)r.shape.m, (long long)r.shape.n,
                (long long)r.shape.k, std::string(to_string(r.acc)).c_str(), r.mode.c_str(), r.impl_us,
                std::string(to_string(r.impl_layout)).c_str(), quote(r.impl_algo).c_str(), r.base_us,
                std::string(to_string(r.base_layout)).c_str(), quote(r.base_algo).c_str(), r.speedup);
  return out;
}

nlohmann::json speedup_json(const std::vector<ShapeSpeedup>& rows, const std::string& impl, const std::string& base) {
  nlohmann::json j = {{"impl", impl}, {"base", base}, {"rows", nlohmann::json::array()}, {"summary", nlohmann::json::object()}};
  std::map<std::string, std::vector<double>> by_mode;
  for (const ShapeSpeedup& r : rows) {
    j["rows"].push_back({{"m", r.shape.m}, {"n", r.shape.n}, {"k", r.shape.k}, {"acc", std::string(to_string(r.acc))},
                         {"mode", r.mode}, {"impl_us", r.impl_us}, {"impl_layout", std::string(to_string(r.impl_layout))},
                         {"impl_algo", r.impl_algo}, {"base_us", r.base_us},
                         {"base_layout", std::string(to_string(r.base_layout))}, {"base_algo", r.base_algo},
                         {"speedup", r.speedup}});
    by_mode[r.mode].push_back(r.speedup);
  }
  for (const auto& [mode, xs] : by_mode)
    j["summary"][mode] = {{"shapes", xs.size()}, {"geomean", geomean(xs)},
                          {"min", *std::min_element(xs.begin(), xs.end())},
                          {"below_0_80", std::count_if(xs.begin(), xs.end(), [](double x) { return x < 0.80; })}};
  return j;
}

}  // namespace kforge
