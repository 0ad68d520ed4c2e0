// The kforge command: versions, help, and clear one-line errors on bad input (before any GPU work).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/files.hpp"
#include "gpu/device.hpp"
#include "kforge/version.hpp"
#include "report/results.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

using test::count_lines;
using test::run_kforge;

TEST(Cli, Version) {
  auto r = run_kforge("--version");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find(kVersion), std::string::npos) << r.out;
}

TEST(Cli, HelpForEveryCommand) {
  for (const char* cmd : {"--help", "doctor --help", "hgemm --help", "hgemm bench --help", "hgemm compare --help"}) {
    auto r = run_kforge(cmd);
    EXPECT_EQ(r.rc, 0) << cmd << "\n" << r.err;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << cmd;
  }
  auto bench = run_kforge("hgemm bench --help");
  for (const char* flag : {"--shapes", "--mode", "--layouts", "--acc", "--baselines", "--out", "--db", "--cold"})
    EXPECT_NE(bench.out.find(flag), std::string::npos) << flag;
}

TEST(Cli, UnknownCommandFails) {
  auto r = run_kforge("frobnicate");
  EXPECT_NE(r.rc, 0);
}

struct BadInput {
  const char* args;
  const char* message;
};

TEST(Cli, BadBenchInputGivesOneLineErrorAndWritesNothing) {
  const std::string dir = test::temp_dir();
  const std::string out = dir + "/out.csv", db = dir + "/runs.db";
  const BadInput cases[] = {
      {"--shapes 0x64x64", "bad shape"},
      {"--shapes -64x64x64", "bad shape"},
      {"--shapes 64xfoox64", "not a whole number"},
      {"--shapes 64x64", "expected MxNxK"},
      {"--mode fast", "unknown mode"},
      {"--layouts nt", "unknown layout"},
      {"--acc f64", "unknown accumulation"},
      {"--baselines cublas,magic", "unknown baseline"},
      {"--cold lukewarm", "unknown --cold"},
      {"--mode graph --cold flush", "graph mode"},
      {"--dist zeros", "unknown input distribution"},
      {"--samples 0", "--samples"},
      {"--shapes @/nonexistent/shapes.txt", "cannot read shape file"},
  };
  for (const BadInput& c : cases) {
    auto r = run_kforge(std::string("hgemm bench ") + c.args + " --out " + out + " --db " + db);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
    EXPECT_FALSE(std::filesystem::exists(db)) << c.args;
  }
  auto unwritable = run_kforge("hgemm bench --shapes 64x64x64 --out /nonexistent-dir/x.csv --no-db");
  EXPECT_EQ(unwritable.rc, 2);
  EXPECT_NE(unwritable.err.find("does not exist"), std::string::npos) << unwritable.err;
  auto badext = run_kforge("hgemm bench --shapes 64x64x64 --out " + dir + "/x.txt --no-db");
  EXPECT_EQ(badext.rc, 2);
  EXPECT_NE(badext.err.find(".csv or .json"), std::string::npos) << badext.err;
  auto non_numeric = run_kforge("hgemm bench --samples abc --no-db");
  EXPECT_NE(non_numeric.rc, 0);
}

TEST(Cli, NoGpuIsAClearError) {
  if (!gpu_unavailable_reason()) GTEST_SKIP() << "a GPU is present: the no-GPU path is not reachable here";
  auto doctor = run_kforge("doctor");
  EXPECT_EQ(doctor.rc, 1);
  EXPECT_NE(doctor.out.find("NONE"), std::string::npos) << doctor.out;
  EXPECT_NE(doctor.out.find("missing"), std::string::npos) << doctor.out;
  const std::string dir = test::temp_dir();
  auto bench = run_kforge("hgemm bench --shapes 64x64x64 --db " + dir + "/runs.db --out " + dir + "/o.csv");
  EXPECT_EQ(bench.rc, 1);
  EXPECT_EQ(count_lines(bench.err), 1) << bench.err;
  EXPECT_NE(bench.err.find("no CUDA"), std::string::npos) << bench.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/runs.db"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/o.csv"));
}

// hgemm compare --speedup/--summary on a run file: the table, the optional gate, bad input.
TEST(Cli, CompareReportsSpeedupPerDecadeAndGatesOnIt) {
  const std::string dir = test::temp_dir();
  const std::string run = dir + "/run.csv";
  std::vector<Measurement> rows;
  auto add = [&rows](Shape sh, Layout l, const char* impl, double us) {
    Measurement m;
    m.shape = sh;
    m.layout = l;
    m.mode = "offline";
    m.impl = impl;
    m.time_us.n = 5;
    m.time_us.median = m.time_us.p10 = m.time_us.p90 = m.time_us.min = m.time_us.max = m.time_us.mean = us;
    m.tflops = sh.flops() / (us * 1e6);
    m.verified = true;
    rows.push_back(m);
  };
  add({64, 64, 64}, Layout::kNN, "ours", 4);
  add({64, 64, 64}, Layout::kNN, "lt_auto", 6);
  add({4096, 4096, 4096}, Layout::kTN, "ours", 200);
  add({4096, 4096, 4096}, Layout::kTN, "lt_auto", 190);
  fill_ratio_to_best(rows);
  write_file_atomic(run, to_csv(rows));

  auto r = run_kforge("hgemm compare " + run + " --speedup ours:lt_auto --summary");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Speed-up of ours over lt_auto"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1e5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1.500"), std::string::npos) << r.out;  // 64^3: 6 / 4
  EXPECT_NE(r.out.find("0.950"), std::string::npos) << r.out;  // 4096^3: 190 / 200
  EXPECT_NE(r.out.find("Per FLOP decade"), std::string::npos) << r.out;  // --summary

  r = run_kforge("hgemm compare " + run + " --speedup ours:lt_auto --min-geomean 1.5");
  EXPECT_EQ(r.rc, 1);  // geomean sqrt(1.5 * 0.95) = 1.19
  EXPECT_NE(r.err.find("below 1.5"), std::string::npos) << r.err;
  for (const char* bad : {"--speedup ours", "--speedup ours:ours", "--speedup :lt_auto", "--min-geomean 1.1",
                          "--speedup ours:cublas", ""}) {
    r = run_kforge("hgemm compare " + run + " " + bad);
    EXPECT_EQ(r.rc, 2) << bad << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << bad << "\n" << r.err;
  }
}

}  // namespace
}  // namespace kforge
