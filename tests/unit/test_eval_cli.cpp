// kforge eval hgemm on the CPU: everything decided before a GPU is needed (missing files, binary
// garbage, oversize sources, forbidden calls, compile errors) gets a verdict with a reason, and a
// batch goes on past each of them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/files.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

using test::run_kforge;

const std::string kCorpus = std::string(KFORGE_SOURCE_DIR) + "/tests/corpus/hgemm";

using test::count_lines;

const std::string kFakeWorker = std::string(KFORGE_SOURCE_DIR) + "/tests/support/fake_torch_worker";

// A KernelBench-format task file; its contents matter only to a real worker.
std::string write_task(const std::string& dir, const std::string& name = "t.py") {
  std::ofstream(dir + "/" + name) << "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                                     "        return torch.relu(x)\ndef get_inputs():\n    return [torch.randn(8, 8)]\n"
                                     "def get_init_inputs():\n    return []\n";
  return dir + "/" + name;
}

// Files and folders in `dir` (the test's own inputs included), to see that a failed command added none.
std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) names.push_back(e.path().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The state letter of /proc/PID/stat ('Z' zombie), or 0 when the process is gone.
char proc_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = all.rfind(')');
  return close == std::string::npos || close + 2 >= all.size() ? 0 : all[close + 2];
}

// The children of `parent` whose command line contains `needle`.
std::vector<pid_t> children_with(pid_t parent, const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream st(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != parent) continue;
    std::ifstream cl(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(cl)), std::istreambuf_iterator<char>());
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos) out.push_back(pid_t(std::stoi(name)));
  }
  return out;
}

// Issue 14 item 13: kill -9 of kforge during `kforge eval --task` takes its Python worker with it
// (it used to run on for 15-25 s at full CPU, skewing the next measurement).
TEST(EvalCli, PythonWorkerDiesWithKforge) {
  const std::string dir = test::temp_dir();
  const std::string task = write_task(dir);
  const std::string cand = dir + "/hang_running.py";  // the stand-in worker never answers for it
  std::ofstream(cand) << "class ModelNew: pass\n";
  for (const int sig : {SIGKILL, SIGINT}) {  // kill -9, and Ctrl-C (the worker has a session of its own)
    const pid_t kf = ::fork();
    ASSERT_GE(kf, 0);
    if (kf == 0) {
      ::setenv("KFORGE_PYTHON_DIR", kFakeWorker.c_str(), 1);
      ::freopen("/dev/null", "w", stdout);
      ::freopen("/dev/null", "w", stderr);
      ::execl(KFORGE_BINARY, "kforge", "eval", "--device", "cpu", "--run-timeout", "600", "--compile-timeout", "600",
              "--task", task.c_str(), cand.c_str(), (char*)nullptr);
      ::_exit(127);
    }
    std::vector<pid_t> workers;
    for (int i = 0; i < 200 && workers.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      workers = children_with(kf, "kforge_worker serve");
    }
    if (workers.size() != 1u) ::kill(kf, SIGKILL);
    ASSERT_EQ(workers.size(), 1u) << "the worker did not start";
    const pid_t worker = workers[0];
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // well into the judgement
    ASSERT_NE(proc_state(worker), 0);
    ::kill(kf, sig);
    int status = 0;
    ::waitpid(kf, &status, 0);
    bool gone = false;
    for (int i = 0; i < 20 && !gone; ++i) {
      const char st = proc_state(worker);
      gone = st == 0 || st == 'Z' || st == 'X';
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!gone) ::kill(worker, SIGKILL);  // leave nothing behind either way
    EXPECT_TRUE(gone) << "the Python worker " << worker << " outlived kforge (signal " << sig << ") by more than a second";
  }
}

// Issue 14 items 14-17, 20, 21 (eval): every bad option is exit 2, one line naming the problem,
// before anything is started or written; the good command beside each one works.
TEST(EvalCli, TorchOptionsCheckedBeforeAnything) {
  const std::string dir = test::temp_dir();
  const std::string task = write_task(dir);
  const std::string cand = dir + "/accept.py";
  std::ofstream(cand) << "class ModelNew: pass\n";
  std::ofstream(dir + "/notes.txt") << "not a task\n";
  std::filesystem::create_directory(dir + "/folder");
  std::filesystem::create_directory(dir + "/folder.json");
  const std::string good = "eval --device cpu --task " + task + " " + cand;
  {
    // The command every case spoils is good: the stand-in worker accepts it and the outputs appear.
    const std::string out = test::temp_dir();
    const std::string cmd = "KFORGE_PYTHON_DIR=" + kFakeWorker + " " + std::string(KFORGE_BINARY) + " " + good +
                            " --out " + out + "/v.json --metrics " + out + "/m.csv >/dev/null 2>" + out + "/err";
    const int status = std::system(cmd.c_str());
    ASSERT_EQ(WEXITSTATUS(status), 0) << test::slurp(out + "/err");
    EXPECT_TRUE(std::filesystem::exists(out + "/v.json"));
    EXPECT_TRUE(std::filesystem::exists(out + "/m.csv"));
  }
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"eval --device cpu --task " + dir + "/missing.py " + cand, "no such file"},
      {"eval --device cpu --task " + dir + "/folder " + cand, "is a folder"},
      {"eval --device cpu --task " + dir + "/notes.txt " + cand, "not a Python file"},
      {"eval --device cpu --task /dev/null " + cand, "not a regular file"},
      {good + " " + dir + "/folder", "is a folder"},
      {good + " /dev/null", "not a regular file"},
      {good + " --baselines compile", "--device cpu times only the eager baseline"},
      {good + " --baselines eager,graph", "--device cpu times only the eager baseline"},
      {good + " --compile-timeout 1e16", "--compile-timeout"},
      {good + " --run-timeout 1e12", "--run-timeout"},
      {good + " --import-timeout inf", "--import-timeout"},
      {good + " --run-timeout 0", "--run-timeout"},
      {good + " --run-timeout -5", "--run-timeout"},
      {good + " --compile-timeout nan", "--compile-timeout"},
      {good + " --atol -1", "--atol"},
      {good + " --atol nan", "--atol"},
      {good + " --rtol -0.5", "--rtol"},
      {good + " --build-jobs -1", "--build-jobs"},
      {good + " --samples 0", "--samples"},
      {good + " --trials 0", "--trials"},
      {good + " --device gpu", "--device"},
      {good + " --python /nonexistent/python", "--python"},
      {good + " --out /proc/kforge-x.json", "/proc"},
      {good + " --metrics /proc/kforge-x.csv", "/proc"},
      {good + " --out " + dir + "/folder.json", "is a folder"},
      {good + " --solutions " + dir, "--solutions goes with --tasks"},
      {"eval --device cpu --tasks " + dir + "/nothing-here", "no such folder"},
  };
  for (const Case& c : cases) {
    const std::vector<std::string> before = listing(dir);
    auto r = run_kforge(c.args);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.args;
    EXPECT_EQ(listing(dir), before) << c.args;
  }
}

// KFORGE_PYTHON naming no interpreter is a usage error too, not one no_torch verdict per candidate.
TEST(EvalCli, KforgePythonNotFoundIsAUsageError) {
  const std::string dir = test::temp_dir();
  const std::string task = write_task(dir);
  std::ofstream(dir + "/accept.py") << "class ModelNew: pass\n";
  const std::string cmd = "KFORGE_PYTHON=/nonexistent/python3 " + std::string(KFORGE_BINARY) + " eval --device cpu --task " +
                          task + " " + dir + "/accept.py >" + dir + "/o 2>" + dir + "/e";
  const int status = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
  const std::string err = test::slurp(dir + "/e");
  EXPECT_EQ(count_lines(err), 1) << err;
  EXPECT_NE(err.find("KFORGE_PYTHON=/nonexistent/python3"), std::string::npos) << err;
}

// eval hgemm: time-outs out of range, a bad --arch and a folder or device as candidate are usage
// errors before anything is compiled; a missing candidate stays a verdict (the batch goes on).
TEST(EvalCli, HgemmOptionsCheckedBeforeAnything) {
  const std::string dir = test::temp_dir();
  std::filesystem::create_directory(dir + "/folder");
  const std::string good = "eval hgemm --shape 64x64x64 --arch sm_90a " + kCorpus + "/hacked/cublas_call.cu";
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {good + " --compile-timeout 1e16", "--compile-timeout"}, {good + " --compile-timeout inf", "--compile-timeout"},
      {good + " --run-timeout 1e12", "--run-timeout"},         {good + " --run-timeout 0", "--run-timeout"},
      {good + " --run-timeout -1", "--run-timeout"},           {good + " --run-timeout nan", "--run-timeout"},
      {good + " " + dir + "/folder", "is a folder"},           {good + " /dev/null", "not a regular file"},
      {good + " --arch bogus", "--arch"},                      {good + " --out /proc/kforge-x.json", "/proc"},
      {good + " --samples 1 --samples 2", "--samples given twice"},
  };
  for (const Case& c : cases) {
    const std::vector<std::string> before = listing(dir);
    auto r = run_kforge(c.args + (c.args.find("--out") == std::string::npos ? " --out " + dir + "/v.json" : ""));
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(listing(dir), before) << c.args;
  }
  auto fine = run_kforge(good + " --compile-timeout 604800 --run-timeout 0.5 --out " + dir + "/v.json");
  EXPECT_EQ(fine.rc, 3) << fine.err;  // the scan rejects it: judged, not refused
}

bool python_has_torch() {
  return std::system("python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

// Item 20: a CUDA candidate judged with --device cpu says that it needs a GPU (it said
// "IndexError: list index out of range"). Item 22: a task file declaring latin-1, with a byte that
// is not UTF-8, and a latin-1 candidate whose forbidden line the scan quotes, still give verdicts
// and valid JSON (--json and --out). Needs the real worker, so torch.
TEST(EvalCli, CudaCandidateOnCpuAndLatin1Files) {
  if (!python_has_torch()) GTEST_SKIP() << "SKIPPED: python3 cannot import torch";
  const std::string dir = test::temp_dir();
  const std::string src = std::string(KFORGE_SOURCE_DIR) + "/tasks/kforge";
  std::ofstream(dir + "/t.py", std::ios::binary) << "# -*- coding: latin-1 -*-\n# caf\xe9 cr\xe8me\n"
                                                 << read_file(src + "/01_relu.py");
  std::ofstream(dir + "/latin1.py", std::ios::binary)
      << "# -*- coding: latin-1 -*-\nimport os\nimport torch\nclass ModelNew(torch.nn.Module):\n"
         "    def forward(self, x):\n        os.system('caf\xe9')\n        return x\n";
  auto r = run_kforge("eval --device cpu --json --out " + dir + "/v.json --task " + dir + "/t.py " + src +
                      "/solutions/01_relu.py " + dir + "/latin1.py");
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << r.err;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  ASSERT_EQ(v.size(), 2u) << r.out;
  EXPECT_EQ(v[0]["reasons"], nlohmann::json::array({"load_error"})) << v[0].dump();
  EXPECT_NE(v[0]["message"].get<std::string>().find("a CUDA candidate needs a GPU"), std::string::npos) << v[0].dump();
  EXPECT_EQ(v[1]["reasons"], nlohmann::json::array({"forbidden_call"})) << v[1].dump();
  EXPECT_NE(v[1]["message"].get<std::string>().find("os.system"), std::string::npos) << v[1].dump();
  EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/v.json")), v);
}

TEST(EvalCli, EarlyRejectionsCarryTheirReasonsAndTheBatchGoesOn) {
  const std::string dir = test::temp_dir();
  {
    std::ofstream g(dir + "/garbage.cu", std::ios::binary);
    for (int i = 0; i < 256; ++i) g.put(char(i));
    std::ofstream big(dir + "/enormous.cu");
    for (int i = 0; i < 20000; ++i) big << "// padding line to make the source larger than the limit allows\n";
    std::ofstream broken(dir + "/broken.cu");
    broken << "extern \"C\" int kforge_hgemm(const kforge_hgemm_args* a, cudaStream_t s) { return oops; }\n";
  }
  const std::string files = dir + "/missing.cu " + dir + "/garbage.cu " + dir + "/enormous.cu " + kCorpus +
                            "/hacked/cublas_call.cu " + kCorpus + "/hacked/dlopen_cublas.cu " + dir + "/broken.cu";
  auto r = run_kforge("eval hgemm --shape 64x64x64 --arch sm_90a --json --out " + dir + "/v.json " + files);
  ASSERT_EQ(r.rc, 3) << r.err;
  auto j = nlohmann::json::parse(read_file(dir + "/v.json"));
  ASSERT_EQ(j.size(), 6u);
  const char* expected[] = {"missing_file", "not_text", "source_too_large", "forbidden_call", "forbidden_call", "compile_error"};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_FALSE(j[i]["correct"].get<bool>()) << j[i].dump();
    ASSERT_FALSE(j[i]["reasons"].empty()) << j[i].dump();
    EXPECT_EQ(j[i]["reasons"][0], expected[i]) << j[i].dump();
    EXPECT_EQ(j[i]["reward"].get<double>(), -8.0);  // kRejectedLogReward: the floor of the default reward (verdict.hpp)
  }
  // The scan quotes the offending line; the compile verdict carries nvcc's log.
  EXPECT_NE(j[3]["message"].get<std::string>().find("cublas"), std::string::npos) << j[3].dump();
  EXPECT_NE(j[4]["message"].get<std::string>().find("dlopen"), std::string::npos) << j[4].dump();
  EXPECT_NE(j[5]["details"]["compile"]["log"].get<std::string>().find("oops"), std::string::npos) << j[5].dump();
}

TEST(EvalCli, BadArgumentsAreUsageErrors) {
  auto noshape = run_kforge("eval hgemm x.cu");
  EXPECT_NE(noshape.rc, 0);
  auto badshape = run_kforge("eval hgemm --shape 0x1x1 x.cu");
  EXPECT_EQ(badshape.rc, 2);
  EXPECT_NE(badshape.err.find("bad shape"), std::string::npos) << badshape.err;
  auto badmode = run_kforge("eval hgemm --shape 64x64x64 --mode fast x.cu");
  EXPECT_EQ(badmode.rc, 2);
  auto badreward = run_kforge("eval hgemm --shape 64x64x64 --reward magic x.cu");
  EXPECT_EQ(badreward.rc, 2);
  auto badout = run_kforge("eval hgemm --shape 64x64x64 --out /nonexistent/v.json x.cu");
  EXPECT_EQ(badout.rc, 2);
  const std::string task = write_task(test::temp_dir());
  for (const char* devices : {"x", "0,0", "-2"}) {
    auto bad = run_kforge(std::string("eval hgemm --shape 64x64x64 --devices ") + devices + " x.cu");
    EXPECT_EQ(bad.rc, 2) << devices;
    EXPECT_NE(bad.err.find("--devices"), std::string::npos) << bad.err;
    auto bad_torch = run_kforge("eval --task " + task + " --devices " + devices + " c.py");
    EXPECT_EQ(bad_torch.rc, 2) << devices;
    EXPECT_NE(bad_torch.err.find("--devices"), std::string::npos) << bad_torch.err;
  }
  auto cpu_devices = run_kforge("eval --task " + task + " --device cpu --devices 0 c.py");
  EXPECT_EQ(cpu_devices.rc, 2);
  EXPECT_NE(cpu_devices.err.find("leave --device at cuda"), std::string::npos) << cpu_devices.err;
}

// --include-dir and --nvcc-flag reach nvcc (and so the cache key); bad ones are usage errors,
// one line, before anything is written.
TEST(EvalCli, IncludeDirsAndNvccFlags) {
  const std::string dir = test::temp_dir();
  std::ofstream(dir + "/kf_cli_value.h") << "#define KF_CLI_VALUE KF_CLI_FLAG\n";
  std::ofstream(dir + "/uses.cu") << "#include \"kf_cli_value.h\"\n"
                                     "extern \"C\" int kforge_hgemm(const kforge_hgemm_args*, cudaStream_t) {\n"
                                     "  return KF_CLI_VALUE;\n}\n";
  auto r = run_kforge("eval hgemm --shape 64x64x64 --arch sm_90a --json --include-dir " + dir +
                      " --nvcc-flag=-DKF_CLI_FLAG=0 --nvcc-flag=-DKF_OTHER=1 " + dir + "/uses.cu");
  ASSERT_FALSE(r.out.empty()) << r.err;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  const std::string cmd = v["details"]["compile"].value("command", "");
  EXPECT_NE(cmd.find("-I" + dir), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("-DKF_CLI_FLAG=0 -DKF_OTHER=1"), std::string::npos) << cmd;
  for (const auto& reason : v["reasons"]) EXPECT_NE(reason, "compile_error") << v.dump(2);

  for (const std::string& bad : {"--include-dir " + dir + "/missing", std::string("--nvcc-flag=-o"),
                                 std::string("--nvcc-flag=-Xlinker=-z,lazy")}) {
    auto u = run_kforge("eval hgemm --shape 64x64x64 --out " + dir + "/v.json " + bad + " " + dir + "/uses.cu");
    EXPECT_EQ(u.rc, 2) << bad << "\n" << u.err;
    EXPECT_EQ(std::count(u.err.begin(), u.err.end(), '\n'), 1) << u.err;
    EXPECT_FALSE(std::filesystem::exists(dir + "/v.json")) << bad;
  }
  auto help = run_kforge("eval hgemm --help");
  EXPECT_NE(help.out.find("--include-dir"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--nvcc-flag"), std::string::npos) << help.out;
}

// A candidate with a byte that is not UTF-8 (in a comment and in what the scan quotes): --json and
// --out still write the verdicts.
TEST(EvalCli, NonUtf8SourceStillGivesJson) {
  const std::string dir = test::temp_dir();
  std::ofstream(dir + "/latin1.cu", std::ios::binary)
      << "// caf\xe9\nextern \"C\" int kforge_hgemm(const kforge_hgemm_args*, cudaStream_t) { fork(); /* \xe9 */ return 0; }\n";
  auto r = run_kforge("eval hgemm --shape 64x64x64 --arch sm_90a --json --out " + dir + "/v.json " + dir + "/latin1.cu");
  EXPECT_EQ(r.rc, 3) << r.err;
  const nlohmann::json v = nlohmann::json::parse(r.out);
  EXPECT_EQ(v["reasons"], nlohmann::json::array({"forbidden_call"})) << r.out;
  EXPECT_NE(v["message"].get<std::string>().find("/* \xef\xbf\xbd */"), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/v.json")), v);
}

}  // namespace
}  // namespace kforge
