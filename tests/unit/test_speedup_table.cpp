// The per-shape speed-up table of `hgemm bench --speedup IMPL:BASE` (report/results.hpp): each
// side at its faster verified layout, per mode; the printed table, its CSV and its JSON.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report/results.hpp"

namespace kforge {
namespace {

Measurement row(Shape s, Layout l, const std::string& mode, const std::string& impl, double us, bool ok = true) {
  Measurement m;
  m.shape = s;
  m.layout = l;
  m.mode = mode;
  m.impl = impl;
  m.time_us.median = us;
  m.verified = ok;
  m.algo = impl + "-" + std::string(to_string(l));
  return m;
}

TEST(SpeedupTable, EachSideAtItsFasterVerifiedLayoutPerMode) {
  const Shape a{1000, 3000, 776}, b{7, 12288, 4096}, c{64, 64, 60};
  const std::vector<Measurement> rows = {
      row(a, Layout::kNN, "offline", "ours", 50), row(a, Layout::kTN, "offline", "ours", 40),
      row(a, Layout::kNN, "offline", "lt_auto", 30), row(a, Layout::kTN, "offline", "lt_auto", 36),
      row(a, Layout::kTN, "graph", "ours", 20), row(a, Layout::kNN, "graph", "lt_auto", 25),
      // A faster but unverified output never counts.
      row(b, Layout::kNN, "offline", "ours", 1, false), row(b, Layout::kTN, "offline", "ours", 100),
      row(b, Layout::kTN, "offline", "lt_auto", 50),
      // Only one side measured: left out.
      row(c, Layout::kTN, "offline", "ours", 5),
      // Other implementations are ignored.
      row(a, Layout::kTN, "offline", "cublas", 1),
  };
  const std::vector<ShapeSpeedup> sp = speedup_per_shape(rows, "ours", "lt_auto");
  ASSERT_EQ(sp.size(), 3u);
  auto find = [&](const Shape& s, const std::string& mode) -> const ShapeSpeedup* {
    for (const ShapeSpeedup& r : sp)
      if (r.shape == s && r.mode == mode) return &r;
    return nullptr;
  };
  const ShapeSpeedup* x = find(a, "offline");
  ASSERT_NE(x, nullptr);
  EXPECT_DOUBLE_EQ(x->impl_us, 40);
  EXPECT_EQ(x->impl_layout, Layout::kTN);
  EXPECT_DOUBLE_EQ(x->base_us, 30);
  EXPECT_EQ(x->base_layout, Layout::kNN);
  EXPECT_DOUBLE_EQ(x->speedup, 0.75);
  ASSERT_NE(find(a, "graph"), nullptr);
  EXPECT_DOUBLE_EQ(find(a, "graph")->speedup, 1.25);
  ASSERT_NE(find(b, "offline"), nullptr);
  EXPECT_DOUBLE_EQ(find(b, "offline")->speedup, 0.5);
  EXPECT_EQ(find(c, "offline"), nullptr);

  const std::string table = format_speedup_table(sp, "ours", "lt_auto");
  EXPECT_NE(table.find("1000x3000x776"), std::string::npos) << table;
  EXPECT_NE(table.find("offline: 2 shapes, geomean 0.612, win rate 0.0%, min 0.500, max 0.750, 2 below 0.80"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("graph: 1 shapes, geomean 1.250"), std::string::npos) << table;

  const std::string csv = speedup_csv(sp);
  EXPECT_EQ(csv.rfind("m,n,k,acc,mode,impl_us,impl_layout,impl_algo,base_us,base_layout,base_algo,speedup\n", 0), 0u);
  EXPECT_NE(csv.find("1000,3000,776,f32,offline,40.0000,tn,\"ours-tn\",30.0000,nn,\"lt_auto-nn\",0.75000"),
            std::string::npos)
      << csv;
  const nlohmann::json j = speedup_json(sp, "ours", "lt_auto");
  EXPECT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["summary"]["offline"]["shapes"], 2);
  EXPECT_EQ(j["summary"]["offline"]["below_0_80"], 2);
  EXPECT_NEAR(j["summary"]["graph"]["geomean"].get<double>(), 1.25, 1e-12);
}

}  // namespace
}  // namespace kforge
