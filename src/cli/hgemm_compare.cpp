// `kforge hgemm compare`: checks a bench run against a reference table (is our baseline timing
// what the machine is known to deliver?) and/or against a second run (is it repeatable?), and
// reports one implementation's speed-up over another per FLOP decade.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/text.hpp"
#include "report/results.hpp"

namespace kforge {

namespace {

struct CompareOptions {
  std::string run;
  std::string reference;
  std::string against;
  std::string mode = "offline";
  std::string ratio_band = "0.95,1.05";
  double max_median_diff = 0.02;
  std::string speedup;      // "IMPL:BASE", e.g. ours:lt_auto
  double min_geomean = 0;   // with speedup: fail below this overall geometric mean (0: report only)
  bool summary = false;     // print the run's per-decade summary
};

struct Band {
  double lo = 0, hi = 0;
};

Band parse_band(const std::string& text) {
  const std::vector<std::string> parts = split(text, ',');
  Band b;
  char* end = nullptr;
  bool ok = parts.size() == 2;
  if (ok) {
    b.lo = std::strtod(parts[0].c_str(), &end);
    ok = !parts[0].empty() && *end == '\0';
  }
  if (ok) {
    b.hi = std::strtod(parts[1].c_str(), &end);
    ok = !parts[1].empty() && *end == '\0';
  }
  if (!ok || !std::isfinite(b.lo) || !std::isfinite(b.hi) || b.lo <= 0 || b.lo > b.hi)
    KF_USAGE_ERROR("bad --ratio-band '%s': expected LO,HI with 0 < LO <= HI, e.g. 0.95,1.05", text.c_str());
  return b;
}

// One table line, without trailing blanks.
void print_row(const std::string& line) {
  std::printf("%.*s\n", int(line.find_last_not_of(' ') + 1), line.c_str());
}

void require_file(const std::string& path, const char* what) { check_input_file(what, path); }

// A time that is negative, zero, NaN or infinite is no measurement: the file was edited or broken.
void check_times(const std::vector<Measurement>& rows, const std::string& path) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const Measurement& m = rows[i];
    const std::pair<const char*, double> times[] = {{"median_us", m.time_us.median}, {"p10_us", m.time_us.p10},
                                                    {"p90_us", m.time_us.p90},       {"min_us", m.time_us.min},
                                                    {"max_us", m.time_us.max},       {"mean_us", m.time_us.mean}};
    for (const auto& [column, t] : times)
      if (!std::isfinite(t) || t <= 0)
        KF_USAGE_ERROR("%s: result row %zu (%s %s %s %s) has %s %g: every time must be a positive number (rerun "
                       "`kforge hgemm bench --out`, or fix the file)", path.c_str(), i + 1, m.shape.str().c_str(),
                       std::string(to_string(m.layout)).c_str(), m.impl.c_str(), m.mode.c_str(), column, t);
  }
}

// Reads a results CSV and keeps the rows of `mode`.
std::vector<Measurement> load_run(const std::string& path, const std::string& mode) {
  std::vector<Measurement> kept;
  std::set<std::string> modes;
  std::vector<Measurement> all = parse_results_csv(read_file(path), path);
  check_times(all, path);
  for (Measurement& m : all) {
    modes.insert(m.mode);
    if (m.mode == mode) kept.push_back(std::move(m));
  }
  if (kept.empty())
    KF_USAGE_ERROR("'%s' has no rows of mode '%s' (modes present: %s)", path.c_str(), mode.c_str(),
                   modes.empty() ? "none" : join({modes.begin(), modes.end()}, ", ").c_str());
  return kept;
}

// Prints the reference comparison; returns the violated bounds.
std::vector<std::string> check_reference(const std::vector<Measurement>& run, const CompareOptions& o,
                                         const Band& band) {
  // The reference was measured with fp32 accumulation.
  std::vector<Measurement> f32;
  for (const Measurement& m : run)
    if (m.acc == Acc::kF32) f32.push_back(m);
  if (f32.empty())
    KF_USAGE_ERROR("'%s' has no f32-accumulation rows of mode '%s' to compare with the reference", o.run.c_str(),
                   o.mode.c_str());
  const std::vector<ReferenceComparison> cmp = compare_to_reference(f32, read_file(o.reference), o.reference);
  if (cmp.empty())
    KF_USAGE_ERROR("no (shape, impl_layout) of '%s' appears in the reference '%s'", o.run.c_str(),
                   o.reference.c_str());

  std::vector<std::string> violations;
  std::printf("\nAgainst the reference %s\n", o.reference.c_str());
  const char* fmt = "  %-22s %7s %13s %10s %10s   %s";
  print_row(strf(fmt, "impl_layout", "shapes", "median ratio", "p10", "p90", "verdict"));
  for (const ReferenceComparison& c : cmp) {
    const bool inside = c.median_ratio >= band.lo && c.median_ratio <= band.hi;
    print_row(strf(fmt, c.key.c_str(), std::to_string(c.shapes).c_str(), strf("%.3f", c.median_ratio).c_str(),
                   strf("%.3f", c.p10_ratio).c_str(), strf("%.3f", c.p90_ratio).c_str(),
                   inside ? "ok" : "OUTSIDE"));
    if (!inside)
      violations.push_back(strf("%s: median ratio %.3f to the reference lies outside [%g, %g]", c.key.c_str(),
                                c.median_ratio, band.lo, band.hi));
  }
  std::printf("  ratio = our median time / reference time; the median must lie in [%g, %g]\n", band.lo, band.hi);
  return violations;
}

// Prints the repeatability comparison; returns the violated bounds.
std::vector<std::string> check_against(const std::vector<Measurement>& run, const CompareOptions& o) {
  const std::vector<Measurement> other = load_run(o.against, o.mode);
  const std::vector<RepeatabilityComparison> cmp = compare_runs(run, other);
  if (cmp.empty())
    KF_USAGE_ERROR("'%s' and '%s' have no measured rows of mode '%s' in common", o.run.c_str(), o.against.c_str(),
                   o.mode.c_str());

  std::vector<std::string> violations;
  std::printf("\nRepeatability against %s\n", o.against.c_str());
  const char* fmt = "  %-22s %7s %10s %10s %10s   %s";
  print_row(strf(fmt, "impl_layout", "pairs", "median", "p90", "max", "verdict"));
  for (const RepeatabilityComparison& c : cmp) {
    const bool is_all = c.key == "all";
    const bool ok = !is_all || c.median_abs_diff <= o.max_median_diff;
    print_row(strf(fmt, c.key.c_str(), std::to_string(c.pairs).c_str(), strf("%.4f", c.median_abs_diff).c_str(),
                   strf("%.4f", c.p90_abs_diff).c_str(), strf("%.4f", c.max_abs_diff).c_str(),
                   is_all ? (ok ? "ok" : "EXCEEDED") : ""));
    if (!ok)
      violations.push_back(strf("median |ratio difference| over all rows %.4f exceeds %g", c.median_abs_diff,
                                o.max_median_diff));
  }
  std::printf("  |ratio-to-best difference| per shape; the median over all rows must not exceed %g\n",
              o.max_median_diff);
  return violations;
}

// Prints the speed-up of IMPL over BASE per FLOP decade; returns the violated bound, if any.
std::vector<std::string> check_speedup(const std::vector<Measurement>& run, const CompareOptions& o) {
  const std::vector<std::string> sides = split(o.speedup, ':');
  const std::string& impl = sides[0];
  const std::string& base = sides[1];
  const std::vector<SpeedupRow> rows = speedup_by_decade(run, impl, base);
  if (rows.empty())
    KF_USAGE_ERROR("'%s' has no shape of mode '%s' measured by both '%s' and '%s'", o.run.c_str(), o.mode.c_str(),
                   impl.c_str(), base.c_str());
  std::printf("\nSpeed-up of %s over %s (time of %s / time of %s; each at the faster of its verified layouts per shape)\n",
              impl.c_str(), base.c_str(), base.c_str(), impl.c_str());
  const char* fmt = "  %-14s %7s %9s %9s %9s %9s";
  print_row(strf(fmt, "FLOP decade", "shapes", "geomean", "win rate", "min", "max"));
  for (const SpeedupRow& r : rows)
    print_row(strf(fmt, r.decade < 0 ? "all" : strf("1e%d", r.decade).c_str(), std::to_string(r.shapes).c_str(),
                   strf("%.3f", r.geomean).c_str(), strf("%.1f%%", 100 * r.win_rate).c_str(),
                   strf("%.3f", r.min).c_str(), strf("%.3f", r.max).c_str()));
  std::vector<std::string> violations;
  const SpeedupRow& all = rows.back();
  if (o.min_geomean > 0 && all.geomean < o.min_geomean)
    violations.push_back(strf("geometric-mean speed-up of %s over %s is %.3f, below %g", impl.c_str(), base.c_str(),
                              all.geomean, o.min_geomean));
  return violations;
}

void run_compare(const CompareOptions& o) {
  if (o.reference.empty() && o.against.empty() && o.speedup.empty() && !o.summary)
    KF_USAGE_ERROR("hgemm compare needs --reference FILE, --against RUN2.csv, --speedup IMPL:BASE or --summary");
  if (!o.speedup.empty()) {
    const std::vector<std::string> sides = split(o.speedup, ':');
    if (sides.size() != 2 || sides[0].empty() || sides[1].empty() || sides[0] == sides[1])
      KF_USAGE_ERROR("bad --speedup '%s': expected IMPL:BASE with two different implementations, e.g. ours:lt_auto",
                     o.speedup.c_str());
  }
  if (!std::isfinite(o.min_geomean) || o.min_geomean < 0)
    KF_USAGE_ERROR("bad --min-geomean %g: expected a number >= 0", o.min_geomean);
  if (o.min_geomean > 0 && o.speedup.empty()) KF_USAGE_ERROR("--min-geomean needs --speedup IMPL:BASE");
  if (o.mode != "offline" && o.mode != "graph" && o.mode != "server")
    KF_USAGE_ERROR("bad --mode '%s': expected offline, graph or server", o.mode.c_str());
  const Band band = parse_band(o.ratio_band);
  if (!std::isfinite(o.max_median_diff) || o.max_median_diff < 0)
    KF_USAGE_ERROR("bad --max-median-diff %g: expected a number >= 0", o.max_median_diff);
  require_file(o.run, "run file");
  if (!o.reference.empty()) require_file(o.reference, "reference file");
  if (!o.against.empty()) require_file(o.against, "run file");

  const std::vector<Measurement> run = load_run(o.run, o.mode);
  std::printf("Run %s: %zu rows of mode %s\n", o.run.c_str(), run.size(), o.mode.c_str());

  if (o.summary) std::printf("\n%s", format_summary(run).c_str());
  std::vector<std::string> violations;
  if (!o.speedup.empty())
    for (std::string& v : check_speedup(run, o)) violations.push_back(std::move(v));
  if (!o.reference.empty())
    for (std::string& v : check_reference(run, o, band)) violations.push_back(std::move(v));
  if (!o.against.empty())
    for (std::string& v : check_against(run, o)) violations.push_back(std::move(v));

  if (violations.empty()) {
    const bool bounded = !o.reference.empty() || !o.against.empty() || o.min_geomean > 0;
    if (bounded) std::printf("\nAll bounds hold.\n");
    return;
  }
  std::fflush(stdout);
  std::fprintf(stderr, "\nkforge: hgemm compare: %zu bound(s) violated:\n", violations.size());
  for (const std::string& v : violations) std::fprintf(stderr, "  %s\n", v.c_str());
  throw ExitStatus{1};
}

}  // namespace

void register_hgemm_compare(CLI::App& hgemm) {
  auto opts = std::make_shared<CompareOptions>();
  CLI::App* cmd =
      hgemm.add_subcommand("compare", "Check a bench run against a reference table and/or another run");
  cmd->add_option("RUN", opts->run, "Results CSV written by `kforge hgemm bench --out RUN.csv`")->required();
  cmd->add_option("--reference", opts->reference,
                  "Wide reference table M,N,K,<impl>_<layout>_us,... (f32 rows compared)")
      ->type_name("FILE");
  cmd->add_option("--against", opts->against, "Second results CSV of the same shapes, to check repeatability")
      ->type_name("RUN2.csv");
  cmd->add_option("--mode", opts->mode, "Compare only rows of this mode: offline, graph or server")
      ->type_name("MODE")
      ->capture_default_str();
  cmd->add_option("--ratio-band", opts->ratio_band,
                  "With --reference: fail if a median ratio ours/reference is outside")
      ->type_name("LO,HI")
      ->capture_default_str();
  cmd->add_option("--max-median-diff", opts->max_median_diff,
                  "With --against: fail if the median |ratio-to-best diff| exceeds X")
      ->capture_default_str();
  cmd->add_option("--speedup", opts->speedup,
                  "Speed-up of IMPL over BASE per FLOP decade: geometric mean, win rate, min, max (each side at the "
                  "faster of its verified layouts per shape), e.g. ours:lt_auto")
      ->type_name("IMPL:BASE");
  cmd->add_option("--min-geomean", opts->min_geomean,
                  "With --speedup: fail if the geometric-mean speed-up over all shapes is below X (0: report only)")
      ->capture_default_str();
  cmd->add_flag("--summary", opts->summary,
                "Print the run's summary: per FLOP decade and implementation, median time, TFLOP/s, % of floor");
  cmd->callback([opts] { run_compare(*opts); });
}

}  // namespace kforge
