// Results: CSV round trip and errors, ratios to the best, decade summaries, comparisons.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "report/results.hpp"

namespace kforge {
namespace {

Measurement row(Shape shape, Layout layout, const std::string& impl, double median_us,
                const std::string& mode = "offline", Acc acc = Acc::kF32) {
  Measurement m;
  m.shape = shape;
  m.layout = layout;
  m.acc = acc;
  m.mode = mode;
  m.impl = impl;
  m.time_us.n = 5;
  m.time_us.median = median_us;
  m.time_us.p10 = median_us * 0.9;
  m.time_us.p90 = median_us * 1.1;
  m.time_us.min = median_us * 0.8;
  m.time_us.max = median_us * 1.25;
  m.time_us.mean = median_us * 1.01;
  m.tflops = shape.flops() / (median_us * 1e6);
  return m;
}

// The usage error `f` throws; fails the test when it throws none.
template <class F>
Error usage_error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage) << e.what();
    return e;
  }
  ADD_FAILURE() << "no error thrown";
  return Error(ErrorKind::kInternal, "none", __FILE__, __LINE__);
}

const char* kHeader =
    "m,n,k,layout,acc,mode,impl,median_us,p10_us,p90_us,min_us,max_us,mean_us,samples,calls_per_sample,"
    "tflops,floor_us,floor_pct,ratio_to_best,verified,err_ratio,algo";
const char* kGoodRow = "64,64,64,nn,f32,offline,cublas,10.5,10,11,9.5,12,10.6,5,40,0.05,2,19.05,1,1,0.25,algo 3";

TEST(Results, KeyIsImplAndLayout) {
  EXPECT_EQ(row({64, 64, 64}, Layout::kTN, "lt_auto", 1).key(), "lt_auto_tn");
  EXPECT_EQ(row({64, 64, 64}, Layout::kNN, "cublas", 1).key(), "cublas_nn");
}

TEST(Results, CsvHeaderComesFirst) {
  // What to_csv writes: kHeader (the columns before bf16, which files may still have) with the
  // dtype column after acc.
  std::string header = kHeader;
  header.insert(header.find(",mode,"), ",dtype");
  EXPECT_EQ(to_csv({}), header + "\n");
}

TEST(Results, CsvRoundTrip) {
  Measurement a = row({4096, 128, 64}, Layout::kTN, "lt_auto", 12.375, "graph", Acc::kF16);
  a.calls_per_sample = 17;
  a.floor_us = 3.5;
  a.floor_pct = 28.2828;
  a.ratio_to_best = 1.0123456;
  a.verified = true;
  a.err_ratio = 0.125;
  a.algo = "algo=23, tile=128x256, \"splitK\"=1";
  Measurement b = row({64, 64, 16384}, Layout::kNN, "cublas", 250000.5);
  b.algo = "  padded  ";
  Measurement c = row({1, 2, 3}, Layout::kNN, "lt_heur", 1.5);
  c.algo = "";

  const std::vector<Measurement> back = parse_results_csv(to_csv({a, b, c}), "mem.csv");
  ASSERT_EQ(back.size(), 3u);
  const Measurement& r = back[0];
  EXPECT_EQ(r.shape, a.shape);
  EXPECT_EQ(r.layout, Layout::kTN);
  EXPECT_EQ(r.acc, Acc::kF16);
  EXPECT_EQ(r.mode, "graph");
  EXPECT_EQ(r.impl, "lt_auto");
  EXPECT_DOUBLE_EQ(r.time_us.median, 12.375);
  EXPECT_NEAR(r.time_us.p10, a.time_us.p10, 1e-5 * a.time_us.p10);
  EXPECT_NEAR(r.time_us.p90, a.time_us.p90, 1e-5 * a.time_us.p90);
  EXPECT_NEAR(r.time_us.min, a.time_us.min, 1e-5 * a.time_us.min);
  EXPECT_NEAR(r.time_us.max, a.time_us.max, 1e-5 * a.time_us.max);
  EXPECT_NEAR(r.time_us.mean, a.time_us.mean, 1e-5 * a.time_us.mean);
  EXPECT_EQ(r.time_us.n, 5);
  EXPECT_EQ(r.calls_per_sample, 17);
  EXPECT_NEAR(r.tflops, a.tflops, 1e-5 * a.tflops);
  EXPECT_DOUBLE_EQ(r.floor_us, 3.5);
  EXPECT_DOUBLE_EQ(r.floor_pct, 28.2828);
  EXPECT_DOUBLE_EQ(r.ratio_to_best, 1.0123456);
  EXPECT_TRUE(r.verified);
  EXPECT_DOUBLE_EQ(r.err_ratio, 0.125);
  EXPECT_EQ(r.algo, a.algo);
  EXPECT_EQ(back[1].algo, "  padded  ");
  EXPECT_FALSE(back[1].verified);
  EXPECT_NEAR(back[1].time_us.median, 250000.5, 1.0);
  EXPECT_EQ(back[2].algo, "");
  EXPECT_EQ(back[2].shape, (Shape{1, 2, 3}));
}

TEST(Results, CsvQuotedAlgoIsWrittenQuoted) {
  Measurement a = row({64, 64, 64}, Layout::kNN, "cublas", 10);
  a.algo = "x,\"y\"";
  const std::string csv = to_csv({a});
  EXPECT_NE(csv.find(",\"x,\"\"y\"\"\"\n"), std::string::npos) << csv;
}

TEST(Results, CsvToleratesBlankLinesAndCrlf) {
  const std::string text = std::string(kHeader) + "\r\n\r\n" + kGoodRow + "\r\n\n";
  const std::vector<Measurement> rows = parse_results_csv(text, "crlf.csv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].algo, "algo 3");
  EXPECT_EQ(rows[0].calls_per_sample, 40);
  EXPECT_DOUBLE_EQ(rows[0].floor_pct, 19.05);
}

TEST(Results, CsvHeaderOnlyIsEmpty) {
  EXPECT_TRUE(parse_results_csv(std::string(kHeader) + "\n", "h.csv").empty());
}

TEST(Results, CsvMissingHeaderIsAnError) {
  const Error e = usage_error_of([] { parse_results_csv(std::string(kGoodRow) + "\n", "run.csv"); });
  EXPECT_NE(std::string(e.what()).find("run.csv:1:"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("header"), std::string::npos) << e.what();
  const Error empty = usage_error_of([] { parse_results_csv("\n\n", "empty.csv"); });
  EXPECT_NE(std::string(empty.what()).find("empty.csv"), std::string::npos) << empty.what();
}

TEST(Results, CsvWrongColumnCountNamesTheLine) {
  const std::string text = std::string(kHeader) + "\n" + kGoodRow + "\n64,64,64,nn,f32,offline,cublas,10.5\n";
  const Error e = usage_error_of([&] { parse_results_csv(text, "run.csv"); });
  EXPECT_NE(std::string(e.what()).find("run.csv:3:"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("columns"), std::string::npos) << e.what();
}

TEST(Results, CsvBadValuesNameTheLineAndColumn) {
  struct Case {
    std::string from, to, expect;
  };
  const std::vector<Case> cases = {
      {",10.5,", ",ten,", "median_us"},
      {"64,64,64,nn", "64,64,6x4,nn", "'k'"},
      {",nn,", ",nt,", "layout"},
      {",f32,", ",bf16,", "accumulation"},
      {",5,40,", ",5,0,", "calls_per_sample"},
      {",1,0.25,", ",yes,0.25,", "verified"},
  };
  for (const Case& c : cases) {
    std::string bad = kGoodRow;
    const size_t at = bad.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    bad.replace(at, c.from.size(), c.to);
    const std::string text = std::string(kHeader) + "\n" + kGoodRow + "\n\n" + bad + "\n";
    const Error e = usage_error_of([&] { parse_results_csv(text, "bad.csv"); });
    EXPECT_NE(std::string(e.what()).find("bad.csv:4:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
  }
}

TEST(Results, CsvUnclosedQuoteIsAnError) {
  const std::string text = std::string(kHeader) + "\n" + kGoodRow + ",\"never closed\n";
  const Error e = usage_error_of([&] { parse_results_csv(text, "q.csv"); });
  EXPECT_NE(std::string(e.what()).find("q.csv:2:"), std::string::npos) << e.what();
}

TEST(Results, FillRatioToBestGroupsByShapeAccAndMode) {
  const Shape s{256, 256, 256};
  std::vector<Measurement> rows = {
      row(s, Layout::kNN, "cublas", 20),
      row(s, Layout::kTN, "cublas", 10),
      row(s, Layout::kTN, "lt_auto", 8),
      row(s, Layout::kNN, "cublas", 4, "graph"),        // other mode
      row(s, Layout::kNN, "cublas", 2, "offline", Acc::kF16),  // other acc
      row({256, 256, 512}, Layout::kNN, "cublas", 30),  // other shape
      row(s, Layout::kNN, "lt_heur", 0),                // no usable time
  };
  fill_ratio_to_best(rows);
  EXPECT_DOUBLE_EQ(rows[0].ratio_to_best, 2.5);
  EXPECT_DOUBLE_EQ(rows[1].ratio_to_best, 1.25);
  EXPECT_DOUBLE_EQ(rows[2].ratio_to_best, 1.0);
  EXPECT_DOUBLE_EQ(rows[3].ratio_to_best, 1.0);
  EXPECT_DOUBLE_EQ(rows[4].ratio_to_best, 1.0);
  EXPECT_DOUBLE_EQ(rows[5].ratio_to_best, 1.0);
  EXPECT_DOUBLE_EQ(rows[6].ratio_to_best, 0.0);
}

TEST(Results, SummarizeByDecade) {
  // 2*64^3 = 524288 (decade 5); 2*100*100*50 = 1e6 exactly (decade 6); 2*128^3 ~ 4.2e6 (decade 6).
  auto with_ratio = [](Measurement m, double r, double pct) {
    m.ratio_to_best = r;
    m.floor_pct = pct;
    return m;
  };
  const std::vector<Measurement> rows = {
      with_ratio(row({128, 128, 128}, Layout::kTN, "lt_auto", 10), 1.0, 50),
      with_ratio(row({128, 128, 128}, Layout::kNN, "cublas", 40), 4.0, 12.5),
      with_ratio(row({100, 100, 50}, Layout::kTN, "lt_auto", 6), 1.0, 30),
      with_ratio(row({100, 100, 50}, Layout::kNN, "cublas", 6), 1.0, 30),
      with_ratio(row({64, 64, 64}, Layout::kNN, "cublas", 5), 1.0, 10),
      with_ratio(row({64, 64, 64}, Layout::kTN, "lt_auto", 7), 1.4, 7),
      with_ratio(row({100, 100, 50}, Layout::kTN, "lt_auto", 8), 0.0, 20),  // unknown ratio: skipped
  };
  const std::vector<DecadeRow> d = summarize_by_decade(rows);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].decade, 5);
  EXPECT_EQ(d[0].key, "lt_auto_tn");  // first-seen key order
  EXPECT_EQ(d[0].shapes, 1);
  EXPECT_DOUBLE_EQ(d[0].median_us, 7);
  EXPECT_DOUBLE_EQ(d[0].geomean_vs_best, 1.4);
  EXPECT_EQ(d[1].decade, 5);
  EXPECT_EQ(d[1].key, "cublas_nn");
  EXPECT_DOUBLE_EQ(d[1].median_floor_pct, 10);

  EXPECT_EQ(d[2].decade, 6);
  EXPECT_EQ(d[2].key, "lt_auto_tn");
  EXPECT_EQ(d[2].shapes, 3);
  EXPECT_DOUBLE_EQ(d[2].median_us, 8);
  EXPECT_DOUBLE_EQ(d[2].median_floor_pct, 30);
  EXPECT_DOUBLE_EQ(d[2].geomean_vs_best, 1.0);
  EXPECT_EQ(d[3].key, "cublas_nn");
  EXPECT_EQ(d[3].shapes, 2);
  EXPECT_DOUBLE_EQ(d[3].median_us, 23);                 // median of 40 and 6
  EXPECT_DOUBLE_EQ(d[3].geomean_vs_best, 2.0);          // sqrt(4 * 1)
  EXPECT_DOUBLE_EQ(d[3].median_tflops, (rows[1].tflops + rows[3].tflops) / 2);
}

TEST(Results, SummarizeKeysGeomean) {
  std::vector<Measurement> rows = {
      row({64, 64, 64}, Layout::kNN, "cublas", 1), row({128, 64, 64}, Layout::kNN, "cublas", 1),
      row({256, 64, 64}, Layout::kNN, "cublas", 1), row({64, 64, 64}, Layout::kTN, "lt_auto", 1),
  };
  rows[0].ratio_to_best = 1;
  rows[1].ratio_to_best = 8;
  rows[2].ratio_to_best = 1;
  rows[3].ratio_to_best = 1.5;
  const std::vector<KeySummary> k = summarize_keys(rows);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].key, "cublas_nn");
  EXPECT_EQ(k[0].shapes, 3);
  EXPECT_NEAR(k[0].geomean_vs_best, 2.0, 1e-12);  // cube root of 8
  EXPECT_EQ(k[1].key, "lt_auto_tn");
  EXPECT_DOUBLE_EQ(k[1].geomean_vs_best, 1.5);
}

TEST(Results, FormatSummaryIsReadable) {
  std::vector<Measurement> rows = {
      row({64, 64, 64}, Layout::kNN, "cublas", 9.5),
      row({64, 64, 64}, Layout::kTN, "a_rather_long_impl_name", 9.0),
      row({4096, 4096, 4096}, Layout::kNN, "cublas", 250.0),
  };
  fill_ratio_to_best(rows);
  const std::string text = format_summary(rows);
  EXPECT_NE(text.find("1e5 to 1e6 FLOP"), std::string::npos) << text;
  EXPECT_NE(text.find("1e11 to 1e12 FLOP"), std::string::npos) << text;
  EXPECT_NE(text.find("a_rather_long_impl_name_tn"), std::string::npos) << text;
  EXPECT_NE(text.find("9.50 us"), std::string::npos) << text;
  EXPECT_NE(text.find("1.056"), std::string::npos) << text;  // 9.5 / 9.0
  EXPECT_NE(text.find("Geometric mean vs best over all shapes"), std::string::npos) << text;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
  EXPECT_EQ(format_summary({}), "no measurements\n");
}

const char* kReference =
    "M,N,K,cublas_nn_us,cublas_tn_us,lt_auto_tn_us,algos_nn,algos_tn\n"
    "64,64,64,10,11,8,3,3\n"
    "64,64,128,20,22,16,3,3\n"
    "128,64,64,40,,32,3,3\n";

TEST(Results, CompareToReference) {
  const std::vector<Measurement> ours = {
      row({64, 64, 64}, Layout::kNN, "cublas", 11),      // 1.1
      row({64, 64, 128}, Layout::kNN, "cublas", 19),     // 0.95
      row({128, 64, 64}, Layout::kNN, "cublas", 40),     // 1.0
      row({64, 64, 64}, Layout::kTN, "lt_auto", 8),      // 1.0
      row({128, 64, 64}, Layout::kTN, "cublas", 40),     // empty reference cell: skipped
      row({512, 64, 64}, Layout::kTN, "lt_auto", 8),     // shape not in the reference
      row({64, 64, 64}, Layout::kNN, "lt_heur", 8),      // key not in the reference
  };
  const std::vector<ReferenceComparison> c = compare_to_reference(ours, kReference, "ref.csv");
  ASSERT_EQ(c.size(), 2u);  // cublas_tn has no match
  EXPECT_EQ(c[0].key, "cublas_nn");
  EXPECT_EQ(c[0].shapes, 3);
  EXPECT_DOUBLE_EQ(c[0].median_ratio, 1.0);
  EXPECT_NEAR(c[0].p10_ratio, 0.96, 1e-12);
  EXPECT_NEAR(c[0].p90_ratio, 1.08, 1e-12);
  EXPECT_EQ(c[1].key, "lt_auto_tn");
  EXPECT_EQ(c[1].shapes, 1);
  EXPECT_DOUBLE_EQ(c[1].median_ratio, 1.0);
}

TEST(Results, CompareToReferenceErrorsNameTheLine) {
  const std::vector<Measurement> ours = {row({64, 64, 64}, Layout::kNN, "cublas", 11)};
  const Error bad = usage_error_of(
      [&] { compare_to_reference(ours, "M,N,K,cublas_nn_us\n64,64,64,10\n64,64,128,abc\n", "ref.csv"); });
  EXPECT_NE(std::string(bad.what()).find("ref.csv:3:"), std::string::npos) << bad.what();
  const Error no_header =
      usage_error_of([&] { compare_to_reference(ours, "64,64,64,10\n", "ref.csv"); });
  EXPECT_NE(std::string(no_header.what()).find("ref.csv:1:"), std::string::npos) << no_header.what();
  const Error short_row =
      usage_error_of([&] { compare_to_reference(ours, "M,N,K,cublas_nn_us\n64,64,64\n", "ref.csv"); });
  EXPECT_NE(std::string(short_row.what()).find("ref.csv:2:"), std::string::npos) << short_row.what();
}

TEST(Results, CompareToTheShippedReferenceHeader) {
  // The real file's first rows: the keys come out in its column order.
  const std::string text =
      "M,N,K,cublas_nn_us,cublas_tn_us,lt_heur_nn_us,lt_heur_tn_us,lt_auto_nn_us,lt_auto_tn_us,algos_nn,algos_tn\n"
      "64,64,64,10.947,11.507,9.842,10.331,9.388,9.502,3,3\n";
  std::vector<Measurement> ours;
  for (const char* impl : {"lt_auto", "lt_heur", "cublas"})
    for (Layout l : {Layout::kTN, Layout::kNN}) ours.push_back(row({64, 64, 64}, l, impl, 10));
  const std::vector<ReferenceComparison> c = compare_to_reference(ours, text, "h200.csv");
  ASSERT_EQ(c.size(), 6u);
  const char* keys[] = {"cublas_nn", "cublas_tn", "lt_heur_nn", "lt_heur_tn", "lt_auto_nn", "lt_auto_tn"};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(c[i].key, keys[i]);
  EXPECT_NEAR(c[5].median_ratio, 10 / 9.502, 1e-12);
}

TEST(Results, CompareRuns) {
  auto with_ratio = [](Measurement m, double r) {
    m.ratio_to_best = r;
    return m;
  };
  const std::vector<Measurement> a = {
      with_ratio(row({64, 64, 64}, Layout::kNN, "cublas", 1), 1.10),
      with_ratio(row({128, 64, 64}, Layout::kNN, "cublas", 1), 1.00),
      with_ratio(row({256, 64, 64}, Layout::kNN, "cublas", 1), 1.20),
      with_ratio(row({64, 64, 64}, Layout::kTN, "lt_auto", 1), 1.00),
      with_ratio(row({64, 64, 64}, Layout::kTN, "lt_auto", 1, "graph"), 1.00),  // no partner
      with_ratio(row({512, 64, 64}, Layout::kNN, "cublas", 1), 1.00),          // no partner
  };
  const std::vector<Measurement> b = {
      with_ratio(row({64, 64, 64}, Layout::kTN, "lt_auto", 1), 1.04),
      with_ratio(row({256, 64, 64}, Layout::kNN, "cublas", 1), 1.00),
      with_ratio(row({64, 64, 64}, Layout::kNN, "cublas", 1), 1.00),
      with_ratio(row({128, 64, 64}, Layout::kNN, "cublas", 1), 1.01),
      with_ratio(row({512, 64, 64}, Layout::kNN, "cublas", 1, "offline", Acc::kF16), 1.0),  // other acc
  };
  const std::vector<RepeatabilityComparison> c = compare_runs(a, b);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].key, "cublas_nn");
  EXPECT_EQ(c[0].pairs, 3);
  EXPECT_NEAR(c[0].median_abs_diff, 0.10, 1e-12);
  EXPECT_NEAR(c[0].max_abs_diff, 0.20, 1e-12);
  EXPECT_NEAR(c[0].p90_abs_diff, 0.18, 1e-12);
  EXPECT_EQ(c[1].key, "lt_auto_tn");
  EXPECT_EQ(c[1].pairs, 1);
  EXPECT_NEAR(c[1].median_abs_diff, 0.04, 1e-12);
  EXPECT_EQ(c[2].key, "all");
  EXPECT_EQ(c[2].pairs, 4);
  EXPECT_NEAR(c[2].median_abs_diff, 0.07, 1e-12);  // of 0.01, 0.04, 0.10, 0.20
  EXPECT_NEAR(c[2].max_abs_diff, 0.20, 1e-12);
  EXPECT_TRUE(compare_runs(a, {}).empty());
}

// Speed-up per FLOP decade: each side at the faster of its layouts; shapes one side lacks skipped.
TEST(Results, SpeedupTakesEachSideAtItsFasterLayoutPerDecade) {
  const std::vector<Measurement> rows = {
      // 64^3 (5.2e5 FLOP, decade 5): ours 4 (tn), base 6 (nn) -> 1.5
      row({64, 64, 64}, Layout::kNN, "ours", 5), row({64, 64, 64}, Layout::kTN, "ours", 4),
      row({64, 64, 64}, Layout::kNN, "lt_auto", 6), row({64, 64, 64}, Layout::kTN, "lt_auto", 8),
      // 128^3 (4.2e6, decade 6): ours 10, base 8 -> 0.8
      row({128, 128, 128}, Layout::kNN, "ours", 10), row({128, 128, 128}, Layout::kNN, "lt_auto", 8),
      // 128x128x256 (8.4e6, decade 6): 2.0
      row({128, 128, 256}, Layout::kTN, "ours", 5), row({128, 128, 256}, Layout::kTN, "lt_auto", 10),
      // only the baseline measured it: not counted
      row({256, 256, 256}, Layout::kNN, "lt_auto", 3),
      // another implementation and another mode: ignored
      row({64, 64, 64}, Layout::kNN, "cublas", 1), row({64, 64, 64}, Layout::kNN, "ours", 0.1, "graph"),
  };
  std::vector<Measurement> offline;
  for (Measurement m : rows)
    if (m.mode == "offline") {
      m.verified = true;
      offline.push_back(m);
    }
  // A faster output that failed verification does not count.
  Measurement wrong = row({64, 64, 64}, Layout::kNN, "ours", 0.5);
  wrong.verified = false;
  offline.push_back(wrong);
  const std::vector<SpeedupRow> s = speedup_by_decade(offline, "ours", "lt_auto");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].decade, 5);
  EXPECT_EQ(s[0].shapes, 1);
  EXPECT_NEAR(s[0].geomean, 1.5, 1e-12);
  EXPECT_EQ(s[1].decade, 6);
  EXPECT_EQ(s[1].shapes, 2);
  EXPECT_NEAR(s[1].geomean, std::sqrt(0.8 * 2.0), 1e-12);
  EXPECT_NEAR(s[1].win_rate, 0.5, 1e-12);
  EXPECT_NEAR(s[1].min, 0.8, 1e-12);
  EXPECT_NEAR(s[1].max, 2.0, 1e-12);
  EXPECT_EQ(s[2].decade, -1);  // all shapes
  EXPECT_EQ(s[2].shapes, 3);
  EXPECT_NEAR(s[2].geomean, std::cbrt(1.5 * 0.8 * 2.0), 1e-12);
  EXPECT_NEAR(s[2].win_rate, 2.0 / 3.0, 1e-12);
  EXPECT_TRUE(speedup_by_decade(offline, "ours", "nobody").empty());
}

}  // namespace
}  // namespace kforge
