// The kforge command: versions, help, and clear one-line errors on bad input (before any GPU work).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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

// Issue 14 item 18: command-line parse errors exit 2 (not CLI11's 104-114) with one plain line
// naming the problem and the command whose --help says more.
TEST(Cli, ParseErrorsArePlainUsageErrors) {
  struct Case {
    const char* args;
    const char* message;
  };
  const Case cases[] = {
      {"frobnicate", "unknown command 'frobnicate' for kforge (commands: doctor, eval"},
      {"hgemm frob", "unknown command 'frob' for kforge hgemm (commands: bench, tune"},
      {"hgemm", "kforge hgemm needs a command: bench, tune"},
      {"tasks", "kforge tasks needs a command: import, list"},
      {"", "kforge needs a command: doctor"},
      {"hgemm bench --samples 3 --samples 5", "--samples given twice; give it once"},
      {"hgemm bench --seed 1 --seed 2 --seed 3", "--seed given 3 times"},
      {"hgemm bench --samples abc", "--samples: 'abc' is not a whole number"},
      {"hgemm bench --samples 1.5", "--samples: '1.5' is not a whole number"},
      {"hgemm bench --batch-us fast", "--batch-us: 'fast' is not a number"},
      {"hgemm bench --seed -1", "--seed: '-1' is negative"},
      {"hgemm bench --seed 99999999999999999999", "--seed: '99999999999999999999' is too large"},
      {"hgemm bench --batch-us nan", "--batch-us: 'nan' is not a finite number"},
      {"hgemm bench --batch-us 1e400", "is not a finite number"},
      {"hgemm bench --shapes=", "--shapes needs a value"},
      {"hgemm bench --shapes ''", "--shapes: empty value"},
      {"hgemm bench --frob", "unknown option '--frob' for kforge hgemm bench"},
      {"doctor extra", "unexpected argument 'extra' for kforge doctor"},
      {"eval hgemm --shape", "--shape needs a value"},
      {"eval hgemm x.cu", "--shape is required"},
      {"hgemm compare", "missing argument RUN"},
      {"hgemm tune --retune --retune-stale", "--retune and --retune-stale cannot be given together"},
      {"hgemm bench --db x.db --no-db", "--db and --no-db cannot be given together"},
      {"hgemm tune --no-db --db x.db", "cannot be given together"},
      {"optimize --task hgemm:64x64x64 --policy builtin --reward-clip -1", "--reward-clip: '-1' is negative"},
      {"optimize --task hgemm:64x64x64 --policy builtin --budget-usd nan", "--budget-usd: 'nan' is not a finite"},
  };
  const std::string dir = test::temp_dir();
  for (const Case& c : cases) {
    auto r = run_kforge(std::string("--version >/dev/null; cd ") + dir + " && " + KFORGE_BINARY + " " + c.args);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("kforge: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("--help`)"), std::string::npos) << r.err;
    for (const char* raw : {"Run with --help", "required but received", "Could not convert", "A subcommand is required",
                            "was not expected", "excludes"})
      EXPECT_EQ(r.err.find(raw), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << c.args;
  }
  // Every --help says what bad input does.
  for (const char* cmd : {"--help", "hgemm bench --help", "eval --help", "eval hgemm --help", "tasks import --help",
                          "hgemm export --help", "doctor --help"}) {
    auto h = run_kforge(cmd);
    EXPECT_EQ(h.rc, 0) << cmd;
    EXPECT_NE(h.out.find("exit status 2, one line on stderr naming the problem and the fix"), std::string::npos) << cmd;
  }
}

// Items 17, 20, 21 (bench, tune, compare, export, tasks): outputs checked writable first, naming
// the real path; missing inputs named as such; values that made no sense refused; nothing created.
TEST(Cli, HgemmAndTasksOptionsCheckedBeforeAnything) {
  const std::string dir = test::temp_dir();
  const std::string run = dir + "/run.csv";
  {
    Measurement m;
    m.shape = {64, 64, 64};
    m.mode = "offline";
    m.impl = "lt_auto";
    m.time_us.n = 5;
    m.time_us.median = m.time_us.p10 = m.time_us.p90 = m.time_us.min = m.time_us.max = m.time_us.mean = 4;
    m.verified = true;
    std::vector<Measurement> rows = {m};
    fill_ratio_to_best(rows);
    const std::string good = to_csv(rows);
    write_file_atomic(run, good);
    // The same run with a negative, a NaN and a zero time.
    const std::string line = good.substr(good.find('\n') + 1);
    const std::string head = good.substr(0, good.find('\n') + 1);
    std::string neg = line, nan = line, zero = line;
    const size_t at = line.find(",4,");  // median_us, the first time column
    ASSERT_NE(at, std::string::npos) << line;
    neg.replace(at, 3, ",-4,");
    nan.replace(at, 3, ",nan,");
    zero.replace(at, 3, ",0,");
    write_file_atomic(dir + "/neg.csv", head + neg);
    write_file_atomic(dir + "/nan.csv", head + nan);
    write_file_atomic(dir + "/zero.csv", head + zero);
  }
  std::filesystem::create_directories(dir + "/kb/level1");
  std::ofstream(dir + "/kb/level1/1_Relu.py") << "class Model: pass\n";
  std::filesystem::create_directory(dir + "/folder");
  std::ofstream(dir + "/afile") << "x\n";
  std::filesystem::create_symlink("/dev/null", dir + "/null.csv");  // renaming over it would replace /dev/null
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"hgemm bench --shapes 64x64x64 --out /proc/kforge-x.csv", "no file can be created in folder '/proc'"},
      {"hgemm bench --shapes 64x64x64 --db /proc/kforge.db", "'/proc'"},
      {"hgemm bench --shapes 64x64x64 --variants-out /proc/v.csv", "'/proc'"},
      {"hgemm bench --shapes 64x64x64 --out " + dir + "/null.csv", "not a regular file"},
      {"hgemm bench --shapes missing.txt", "--shapes missing.txt: no such file"},
      {"hgemm bench --shapes " + dir + "/folder", "is a folder"},
      {"hgemm bench --shapes 64x64x64 --table missing.json --ours", "--table missing.json: no such dispatch table"},
      {"hgemm bench --shapes 64x64x64 --table-limit -1", "--table-limit"},
      {"hgemm bench --shapes 64x64x64 --max-variants -2", "--max-variants"},
      {"hgemm tune --shapes 64x64x64 --budget -5", "--budget: '-5' is negative"},
      {"hgemm tune --shapes 64x64x64 --budget nan", "--budget"},
      {"hgemm tune --shapes 64x64x64 --budget 1e300", "--budget"},
      {"hgemm tune --shapes 64x64x64 --out /proc/t.json", "'/proc'"},
      {"hgemm tune --shapes 64x64x64 --out " + dir + "/table.txt", "must end in .json"},
      {"hgemm tune --shapes 64x64x64 --results /proc/r.csv", "'/proc'"},
      {"hgemm compare " + dir + "/neg.csv --summary", "median_us -4"},
      {"hgemm compare " + dir + "/nan.csv --summary", "median_us nan"},
      {"hgemm compare " + dir + "/zero.csv --summary", "median_us 0"},
      {"hgemm compare " + dir + "/folder --summary", "is a folder"},
      {"hgemm compare " + run + " --min-geomean nan --speedup a:b", "--min-geomean"},
      {"hgemm compare " + run + " --max-median-diff -1 --against " + run, "--max-median-diff"},
      {"hgemm export --out /nonexistent-kforge-root/x/y", "folder /nonexistent-kforge-root/x does not exist"},
      {"hgemm export --out " + dir + "/afile/x", "does not exist"},
      {"hgemm export --out " + dir + "/exp --table " + dir + "/missing.json", "cannot read"},
      {"hgemm export --out " + dir + "/exp --table " + dir + "/folder", "is a folder"},
      {"hgemm export --out " + dir + "/exp --table " + dir + "/afile", "not JSON"},
      {"tasks import --kernelbench " + dir + "/kb --out /proc/s.json", "'/proc'"},
      {"tasks import --kernelbench " + dir + "/kb --out " + dir + "/folder", "must name a .json"},
      {"tasks import --kernelbench " + dir + "/nothing", "no such folder"},
      {"tasks import --kernelbench " + dir + "/kb --levels 0", "--levels"},
      {"tasks list " + dir + "/missing.json", "no such folder or listing"},
      {"tasks list " + dir + "/afile", "a task set is a folder or a .json listing"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> before;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) before.push_back(e.path().string());
    auto r = run_kforge(c.args);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
    std::vector<std::string> after;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) after.push_back(e.path().string());
    EXPECT_EQ(after.size(), before.size()) << c.args;
  }
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-kforge-root"));
  std::filesystem::remove_all("/nonexistent-kforge-root");
  // A malformed listing (fields of the wrong type) is a usage error in plain words.
  write_file_atomic(dir + "/set.json", R"({"tasks": [{"file": "a.py", "number": "one"}]})");
  auto bad = run_kforge("tasks list " + dir + "/set.json");
  EXPECT_EQ(bad.rc, 2) << bad.err;
  EXPECT_EQ(count_lines(bad.err), 1) << bad.err;
  EXPECT_EQ(bad.err.find("json.exception"), std::string::npos) << bad.err;
  // The good commands beside them still work.
  EXPECT_EQ(run_kforge("hgemm compare " + run + " --summary").rc, 0);
  auto exp = run_kforge("hgemm export --out " + dir + "/exp");
  EXPECT_EQ(exp.rc, 0) << exp.err;
  EXPECT_EQ(run_kforge("tasks import --kernelbench " + dir + "/kb --out " + dir + "/s.json").rc, 0);
  EXPECT_EQ(run_kforge("tasks list " + dir + "/s.json").rc, 0);
}

// Item 22 (tasks): a task file whose name and contents are latin-1 is listed and written as valid
// JSON (the name's byte as U+FFFD), and the listing reads back.
TEST(Cli, TasksImportLatin1) {
  const std::string dir = test::temp_dir();
  std::filesystem::create_directories(dir + "/kb/level1");
  std::ofstream(dir + "/kb/level1/1_Caf\xe9.py", std::ios::binary) << "# -*- coding: latin-1 -*-\n# caf\xe9\nclass Model: pass\n";
  auto r = run_kforge("tasks import --kernelbench " + dir + "/kb --json --out " + dir + "/s.json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["count"], 1) << r.out;
  EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/s.json")), j);
  auto list = run_kforge("tasks list " + dir + "/kb --json");
  EXPECT_EQ(list.rc, 0) << list.err;
  EXPECT_NO_THROW((void)nlohmann::json::parse(list.out)) << list.out;
  // The listing names the task file by its bytes: eval --tasks finds it and its solution (the
  // stand-in worker accepts it). A listing holding the name with U+FFFD for the byte named no file.
  std::filesystem::create_directories(dir + "/sol");
  std::ofstream(dir + "/sol/1_Caf\xe9.py", std::ios::binary) << "class ModelNew: pass\n";
  auto judged = run_kforge("--version >/dev/null; KFORGE_PYTHON_DIR=" + std::string(KFORGE_SOURCE_DIR) +
                           "/tests/support/fake_torch_worker " + KFORGE_BINARY + " eval --device cpu --tasks " + dir +
                           "/s.json --solutions " + dir + "/sol --json");
  EXPECT_EQ(judged.rc, 0) << judged.err << judged.out.substr(0, 2000);
}

// Item 19: doctor reports the Python kforge will use ($KFORGE_PYTHON), not python3 on PATH.
TEST(Cli, DoctorReportsThePythonKforgeUses) {
  const std::string dir = test::temp_dir();
  const std::string py = dir + "/mypython";
  std::ofstream(py) << "#!/bin/sh\necho 'Python 9.9.9-kforge-test'\n";
  std::filesystem::permissions(py, std::filesystem::perms::owner_all);
  auto r = run_kforge("--version >/dev/null; KFORGE_PYTHON=" + py + " " + KFORGE_BINARY + " doctor");
  EXPECT_NE(r.out.find("python (KFORGE_PYTHON)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(py + " (Python 9.9.9-kforge-test)"), std::string::npos) << r.out;
  auto missing = run_kforge("--version >/dev/null; KFORGE_PYTHON=/nonexistent/py " + std::string(KFORGE_BINARY) + " doctor");
  EXPECT_NE(missing.out.find("NOT FOUND: /nonexistent/py"), std::string::npos) << missing.out;
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
