// kforge hgemm bench end to end on the GPU: files, database, verification, errors.
#include <filesystem>

#include "core/files.hpp"
#include "db/rundb.hpp"
#include "gpu_test.hpp"
#include "report/results.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

using test::GpuTest;
using test::run_kforge;

TEST_F(GpuTest, BenchWritesCsvJsonAndDatabaseInEveryMode) {
  const std::string dir = test::temp_dir();
  auto r = run_kforge("hgemm bench --shapes 128x256x512,1000x1000x1000 --mode offline,graph,server --out " + dir +
                      "/r.csv --out " + dir + "/r.json --db " + dir + "/runs.db");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto rows = parse_results_csv(read_file(dir + "/r.csv"), "r.csv");
  ASSERT_EQ(rows.size(), 2u * 2 * 3 * 3);  // shapes x layouts x baselines x modes
  for (const Measurement& m : rows) {
    EXPECT_TRUE(m.verified) << m.shape.str() << " " << m.key();
    EXPECT_GT(m.time_us.median, 0);
    EXPECT_GE(m.ratio_to_best, 1.0);
    EXPECT_GT(m.floor_pct, 0);
    EXPECT_LE(m.floor_pct, 100.0) << "faster than the counted floor: " << m.shape.str() << " " << m.key();
    if (m.impl == "lt_auto") EXPECT_NE(m.algo.find("best of"), std::string::npos);
  }
  auto j = nlohmann::json::parse(read_file(dir + "/r.json"));
  EXPECT_EQ(j["results"].size(), rows.size());
  EXPECT_TRUE(j.contains("ceilings"));
  RunDb db(dir + "/runs.db");
  EXPECT_EQ(db.run_status(1), "complete");
  EXPECT_EQ(db.measurements(1).size(), rows.size());
  EXPECT_NE(r.out.find("geometric mean"), std::string::npos) << r.out;
}

// The runoff: with a margin of 100% every alternative is within noise, so each implementation with
// several (ours_all's kernels, lt_auto's algorithms) sends --runoff-max of them to the runoff, whose
// second measurement is what the row reports; --runoff-samples 0 leaves the first round's.
TEST_F(GpuTest, BenchRunoffRetimesTheCloseAlternativesAndReportsTheSecondMeasurement) {
  const std::string dir = test::temp_dir();
  auto r = run_kforge("hgemm bench --shapes 1024x1024x1024 --layouts tn --baselines ours_all,lt_auto,cublas --max-variants 6 "
                      "--samples 3 --runoff-samples 7 --runoff-margin 1 --runoff-max 3 --no-db --out " + dir + "/r.csv");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto rows = parse_results_csv(read_file(dir + "/r.csv"), "r.csv");
  ASSERT_EQ(rows.size(), 3u);
  for (const Measurement& m : rows) {
    EXPECT_TRUE(m.verified) << m.key();
    if (m.impl == "cublas") {
      EXPECT_EQ(m.time_us.n, 7) << "every implementation's best is in the runoff";
      continue;
    }
    EXPECT_NE(m.algo.find(", runoff of 3: "), std::string::npos) << m.algo;
    EXPECT_EQ(m.time_us.n, 7) << m.algo << ": the runoff's samples";
  }
  auto off = run_kforge("hgemm bench --shapes 1024x1024x1024 --layouts tn --baselines ours_all --max-variants 4 --samples 3 "
                        "--runoff-samples 0 --no-db --out " + dir + "/off.csv");
  ASSERT_EQ(off.rc, 0) << off.err;
  auto first = parse_results_csv(read_file(dir + "/off.csv"), "off.csv");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].algo.find("runoff"), std::string::npos) << first[0].algo;
  EXPECT_EQ(first[0].time_us.n, 3);
}

TEST_F(GpuTest, BenchRefusesAShapeThatDoesNotFit) {
  const std::string dir = test::temp_dir();
  auto r = run_kforge("hgemm bench --shapes 64x64x64,1000000x1000000x1000 --out " + dir + "/r.csv --db " + dir + "/runs.db");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("out of GPU memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1000000x1000000x1000"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/r.csv"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/runs.db"));
}

TEST_F(GpuTest, DoctorReportsTheDevice) {
  auto r = run_kforge("doctor");
  EXPECT_NE(r.out.find("compute capability"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SMs"), std::string::npos) << r.out;
  EXPECT_EQ(r.rc, 0) << r.out;
}

}  // namespace
}  // namespace kforge
