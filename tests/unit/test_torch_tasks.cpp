// PyTorch tasks on the CPU: task-set import and pairing, metrics, the worker protocol (against a
// stand-in worker that needs no torch), the static scan of Python candidates (needs python3 only),
// and, where torch is installed, the real worker on the red-team corpus with device=cpu.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/subprocess.hpp"
#include "core/text.hpp"
#include "torch/metrics.hpp"
#include "torch/tasks.hpp"
#include "torch/torch_eval.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using test::run_kforge;

const std::string kSource = KFORGE_SOURCE_DIR;
const std::string kCorpus = kSource + "/tests/corpus/torch";

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

// ---------------------------------------------------------------------------------------------
// Task sets

TEST(TorchTasks, FileNamesGiveNumberAndName) {
  EXPECT_EQ(parse_task_file_name("1_Square_matrix_multiplication_.py"),
            (std::pair<int, std::string>{1, "Square_matrix_multiplication_"}));
  EXPECT_EQ(parse_task_file_name("/a/b/42_Conv2d_ReLU.py"), (std::pair<int, std::string>{42, "Conv2d_ReLU"}));
  EXPECT_EQ(parse_task_file_name("relu.py"), (std::pair<int, std::string>{0, "relu"}));
  EXPECT_EQ(parse_task_file_name("12.py"), (std::pair<int, std::string>{0, "12"}));
}

TEST(TorchTasks, ImportsKernelBenchLevelsInOrder) {
  const std::string dir = test::temp_dir() + "/KernelBench";
  for (const char* f : {"level1/10_ReLU.py", "level1/2_Matmul.py", "level1/1_Square.py", "level2/1_Conv_ReLU.py",
                        "level1/__init__.py", "level1/notes.txt", "level3/3_MLP.py"})
    write(dir + "/" + f, "# task\n");
  const auto all = import_kernelbench(dir);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].id, "level1/1");
  EXPECT_EQ(all[1].id, "level1/2");
  EXPECT_EQ(all[2].id, "level1/10");
  EXPECT_EQ(all[2].name, "ReLU");
  EXPECT_EQ(all[3].id, "level2/1");
  EXPECT_EQ(all[4].level, 3);
  // The checkout root works too (its KernelBench/ folder holds the levels).
  EXPECT_EQ(import_kernelbench(fs::path(dir).parent_path().string()).size(), 5u);
  const auto l2 = import_kernelbench(dir, {2});
  ASSERT_EQ(l2.size(), 1u);
  EXPECT_EQ(l2[0].name, "Conv_ReLU");
  EXPECT_THROW(import_kernelbench(dir, {7}), Error);
  EXPECT_THROW(import_kernelbench(test::temp_dir()), Error);
  // A listing round-trips, relative paths resolved against its folder.
  const nlohmann::json j = task_set_to_json(dir, all);
  EXPECT_EQ(j["count"], 5);
  const auto back = task_set_from_json(j, "/nowhere");
  ASSERT_EQ(back.size(), 5u);
  EXPECT_EQ(back[2].file, all[2].file);
  const auto rel = task_set_from_json({{"tasks", {{{"file", "level1/1_Square.py"}}}}}, dir);
  EXPECT_EQ(rel[0].file, dir + "/level1/1_Square.py");
  EXPECT_EQ(rel[0].number, 1);
}

TEST(TorchTasks, SolutionsPairByName) {
  const std::string dir = test::temp_dir();
  write(dir + "/tasks/01_relu.py", "#\n");
  write(dir + "/tasks/02_sum.py", "#\n");
  write(dir + "/tasks/solutions/01_relu.py", "#\n");
  write(dir + "/tasks/solutions/01_relu/b_variant.py", "#\n");
  write(dir + "/tasks/solutions/01_relu/a_variant.py", "#\n");
  const auto set = load_task_set(dir + "/tasks");
  ASSERT_EQ(set.size(), 2u);  // solutions/ is a folder, not a task
  EXPECT_EQ(set[0].id, "01_relu");
  const auto sols = solutions_for(set[0], dir + "/tasks/solutions");
  ASSERT_EQ(sols.size(), 3u);
  EXPECT_EQ(fs::path(sols[0]).filename(), "01_relu.py");
  EXPECT_EQ(fs::path(sols[1]).filename(), "a_variant.py");
  EXPECT_TRUE(solutions_for(set[1], dir + "/tasks/solutions").empty());
}

TEST(TorchTasks, OwnTaskSetHasTenTasksEachWithASolution) {
  const auto set = load_task_set(kSource + "/tasks/kforge");
  ASSERT_GE(set.size(), 10u);
  for (const TorchTask& t : set) EXPECT_EQ(solutions_for(t, kSource + "/tasks/kforge/solutions").size(), 1u) << t.id;
}

TEST(TorchTasks, ImportCommandWritesAListing) {
  const std::string dir = test::temp_dir();
  write(dir + "/kb/level1/1_A.py", "#\n");
  write(dir + "/kb/level2/5_B.py", "#\n");
  auto r = run_kforge("tasks import --kernelbench " + dir + "/kb --out " + dir + "/set.json");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("level2/5"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("2 task(s)"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(read_file(dir + "/set.json"));
  EXPECT_EQ(j["tasks"].size(), 2u);
  auto list = run_kforge("tasks list " + dir + "/set.json");
  EXPECT_EQ(list.rc, 0) << list.err;
  EXPECT_NE(list.out.find("level1/1"), std::string::npos);
  EXPECT_EQ(run_kforge("tasks import --kernelbench " + dir + "/nothing").rc, 2);
  EXPECT_EQ(run_kforge("tasks import --kernelbench " + dir + "/kb --levels x").rc, 2);
}

// ---------------------------------------------------------------------------------------------
// Metrics

Verdict accepted(const std::string& name, std::map<std::string, double> speedups) {
  Verdict v;
  v.candidate = name;
  v.correct = true;
  for (const auto& [b, s] : speedups) {
    Summary sum;
    sum.n = 5;
    sum.median = s;
    v.speedup[b] = sum;
  }
  return v;
}

Verdict rejected(const std::string& name, std::vector<std::string> reasons) {
  Verdict v;
  v.candidate = name;
  for (const auto& r : reasons) v.reject(r, "because");
  return v;
}

TEST(TorchMetrics, TableOverATaskSet) {
  std::vector<TaskOutcome> o = {
      {"t1", accepted("a", {{"eager", 2.0}, {"compile", 1.0}})},
      {"t1", accepted("b", {{"eager", 4.0}, {"compile", 2.0}})},  // the best of t1
      {"t2", accepted("c", {{"eager", 1.0}, {"compile", 0.5}})},
      {"t3", rejected("d", {"wrong_result"})},
      {"t4", accepted("e", {{"eager", 1.6}})},  // compile unavailable for t4
      {"t4", rejected("f", {"forbidden_call", "wrong_result"})},
  };
  const TaskSetMetrics m = compute_metrics(o);
  EXPECT_EQ(m.tasks, 4);
  EXPECT_EQ(m.candidates, 6);
  EXPECT_EQ(m.solved, 3);
  EXPECT_DOUBLE_EQ(m.success_rate, 0.75);
  EXPECT_EQ(m.rejections.at("wrong_result"), 2);
  EXPECT_EQ(m.rejections.at("forbidden_call"), 1);
  ASSERT_EQ(m.baselines.size(), 2u);
  const BaselineStats& e = m.baselines[0];
  EXPECT_EQ(e.baseline, "eager");
  EXPECT_EQ(e.timed, 3);
  EXPECT_DOUBLE_EQ(e.mean, (4.0 + 1.0 + 1.6) / 3);
  EXPECT_DOUBLE_EQ(e.mean_all, (4.0 + 1.0 + 1.0 + 1.6) / 4);
  EXPECT_DOUBLE_EQ(e.median, 1.6);
  EXPECT_DOUBLE_EQ(e.max, 4.0);
  EXPECT_NEAR(e.geomean, std::cbrt(4.0 * 1.0 * 1.6), 1e-12);
  // fast_p: solved and strictly faster than p, over all four tasks.
  ASSERT_EQ(e.fast_p.size(), 3u);
  EXPECT_DOUBLE_EQ(e.fast_p[0].second, 0.5);   // 4.0, 1.6
  EXPECT_DOUBLE_EQ(e.fast_p[1].second, 0.5);   // 4.0, 1.6
  EXPECT_DOUBLE_EQ(e.fast_p[2].second, 0.25);  // 4.0
  const BaselineStats& c = m.baselines[1];
  EXPECT_EQ(c.baseline, "compile");
  EXPECT_EQ(c.timed, 2);
  EXPECT_DOUBLE_EQ(c.median, 1.25);
  EXPECT_DOUBLE_EQ(c.fast_p[0].second, 0.25);

  const std::string csv = metrics_to_csv(m);
  const auto lines = split(csv, '\n');
  EXPECT_EQ(lines[0], "baseline,tasks,solved,success_rate,timed,mean,mean_all,median,p25,p75,max,geomean,fast_1.0,"
                      "fast_1.5,fast_2.0");
  EXPECT_EQ(lines[1].substr(0, 21), "eager,4,3,0.75,3,2.2,") << lines[1];
  EXPECT_NE(lines[1].find(",0.5,0.5,0.25"), std::string::npos) << lines[1];
  const nlohmann::json j = metrics_to_json(m);
  EXPECT_EQ(j["solved"], 3);
  EXPECT_EQ(j["baselines"][0]["fast_p"]["2.0"], 0.25);
  EXPECT_EQ(j["per_task"].size(), 6u);
  EXPECT_TRUE(j["per_task"][1]["best"].get<bool>());
  EXPECT_FALSE(j["per_task"][0]["best"].get<bool>());
  EXPECT_NE(format_metrics(m).find("rejections: forbidden_call 1 wrong_result 2"), std::string::npos) << format_metrics(m);
}

TEST(TorchMetrics, NothingSolved) {
  const TaskSetMetrics m = compute_metrics({{"t", rejected("x", {"timeout"})}});
  EXPECT_EQ(m.solved, 0);
  EXPECT_EQ(m.success_rate, 0.0);
  EXPECT_TRUE(m.baselines.empty());  // no baseline was ever timed
  EXPECT_EQ(split(metrics_to_csv(m), '\n').size(), 2u);
}

// ---------------------------------------------------------------------------------------------
// The worker protocol, against a stand-in worker

bool have_python() { return !find_python().empty(); }

// The worker takes expandable_segments out of PYTORCH_CUDA_ALLOC_CONF before torch loads (the
// judge's GPU arenas must be legacy CUDA IPC handles): tests/python/test_ipc_env.py, python3 only.
TEST(TorchWorker, KeepsTheJudgesCudaIpcLegacy) {
  if (!have_python()) GTEST_SKIP() << "SKIPPED: no python3";
  const ProcessResult r = run_process({find_python(), kSource + "/tests/python/test_ipc_env.py"});
  EXPECT_TRUE(r.ok()) << r.describe() << "\n" << r.out << r.err;
}

// The precision switches count against a candidate only where they lower the precision the judge
// set (an honest candidate may set full precision again): tests/python/test_precision_guard.py.
TEST(TorchWorker, PrecisionSwitchesCountOnlyWhenLowered) {
  if (!have_python()) GTEST_SKIP() << "SKIPPED: no python3";
  const ProcessResult r = run_process({find_python(), kSource + "/tests/python/test_precision_guard.py"});
  EXPECT_TRUE(r.ok()) << r.describe() << "\n" << r.out << r.err;
}

TorchEvalOptions fake_options() {
  TorchEvalOptions o;
  o.worker_dir = kSource + "/tests/support/fake_torch_worker";
  o.static_scan = false;
  o.prebuild = false;
  o.compile_timeout_s = 2;
  o.run_timeout_s = 2;
  o.cache_dir = test::temp_dir();
  return o;
}

TEST(TorchProtocol, PhasesTimeOutsCrashesAndABatchThatGoesOn) {
  if (!have_python()) GTEST_SKIP() << "SKIPPED: no python3";
  const std::string dir = test::temp_dir();
  const std::string task = dir + "/task.py";
  write(task, "# task\n");
  std::vector<TorchJob> jobs;
  for (const char* c : {"accept.py", "hang_loading.py", "hang_running.py", "die.py", "garbage.py", "fatal.py", "accept2.py"}) {
    write(dir + "/" + c, "# candidate\n");
    jobs.push_back({task, dir + "/" + c});
  }
  jobs.push_back({task, dir + "/missing.py"});
  jobs.push_back({dir + "/no_task.py", dir + "/accept.py"});
  TorchEvaluator ev(fake_options());
  std::vector<size_t> seen;
  const auto v = ev.evaluate_batch(jobs, [&](size_t i, size_t n, const Verdict&) {
    seen.push_back(i);
    EXPECT_EQ(n, jobs.size());
  });
  ASSERT_EQ(v.size(), jobs.size());
  EXPECT_EQ(seen.size(), jobs.size());
  EXPECT_TRUE(v[0].correct) << v[0].message;
  EXPECT_DOUBLE_EQ(v[0].speedup.at("eager").median, 2.0);
  EXPECT_NEAR(v[0].reward, std::log(2.0), 1e-12);
  EXPECT_EQ(v[0].candidate, jobs[0].candidate);
  // The request carries what the worker needs.
  const nlohmann::json req = v[0].details.at("request");
  EXPECT_EQ(req["device"], "cuda");
  EXPECT_EQ(req["baselines"], nlohmann::json::array({"eager"}));
  EXPECT_NE(req["build_dir"].get<std::string>().find("/ext/"), std::string::npos);
  EXPECT_EQ(v[1].reasons, std::vector<std::string>{"compile_timeout"}) << v[1].message;
  EXPECT_EQ(v[2].reasons, std::vector<std::string>{"timeout"}) << v[2].message;
  EXPECT_EQ(v[3].reasons, std::vector<std::string>{"crashed"}) << v[3].message;
  EXPECT_NE(v[3].message.find("status 7"), std::string::npos) << v[3].message;
  EXPECT_EQ(v[4].reasons, std::vector<std::string>{"internal_error"}) << v[4].message;
  EXPECT_EQ(v[5].reasons, std::vector<std::string>{"cuda_error"}) << v[5].message;
  EXPECT_TRUE(v[6].correct) << v[6].message;  // after a crash, a hang and a sticky error: a fresh worker
  EXPECT_EQ(v[7].reasons, std::vector<std::string>{"missing_file"});
  EXPECT_EQ(v[8].reasons, std::vector<std::string>{"task_error"});
  for (const Verdict& x : v)
    if (!x.correct) EXPECT_EQ(x.reward, rejected_reward(RewardConfig{}));
  EXPECT_EQ(ev.workers_started(), 7);  // one per candidate that reached a worker
}

TEST(TorchProtocol, ALineWithoutTheRequestsKeyIsForged) {
  if (!have_python()) GTEST_SKIP() << "SKIPPED: no python3";
  const std::string dir = test::temp_dir();
  write(dir + "/task.py", "# task\n");
  write(dir + "/forged.py", "# candidate\n");
  write(dir + "/accept.py", "# candidate\n");
  TorchEvaluator ev(fake_options());
  const auto v = ev.evaluate_batch({{dir + "/task.py", dir + "/forged.py"}, {dir + "/task.py", dir + "/accept.py"}});
  EXPECT_EQ(v[0].reasons, std::vector<std::string>{"forged_reply"}) << v[0].message;
  EXPECT_FALSE(v[0].correct);
  EXPECT_EQ(v[0].reward, rejected_reward(RewardConfig{}));
  EXPECT_TRUE(v[1].correct) << v[1].message;  // the next candidate gets a fresh judge
  // The request carries a key of 32 hex digits, a new one per request.
  const std::string key = v[1].details.at("request").at("key").get<std::string>();
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos) << key;
  const auto again = ev.evaluate({dir + "/task.py", dir + "/accept.py"});
  EXPECT_NE(again.details.at("request").at("key").get<std::string>(), key);
  EXPECT_GT(v[1].details.at("request").at("run_timeout_s").get<double>(), 0.0);
}

TEST(TorchProtocol, SeveralDevicesJudgeInParallelEachWorkerPinned) {
  if (!have_python()) GTEST_SKIP() << "SKIPPED: no python3";
  const std::string dir = test::temp_dir();
  const std::string task = dir + "/task.py";
  write(task, "# task\n");
  std::vector<TorchJob> jobs;
  for (int i = 0; i < 6; ++i) {
    const std::string c = strf("%s/slow_accept_%d.py", dir.c_str(), i);
    write(c, "# candidate\n");
    jobs.push_back({task, c});
  }
  TorchEvalOptions o = fake_options();
  o.devices = {3, 1};  // indices among the visible devices; the workers are pinned through CUDA_VISIBLE_DEVICES
  o.device = "cuda:2";  // ignored with devices: each pinned worker is told "cuda"
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  TorchEvaluator ev(o);
  size_t calls = 0;
  const auto v = ev.evaluate_batch(jobs, [&](size_t, size_t, const Verdict&) { ++calls; });
  ASSERT_EQ(v.size(), jobs.size());
  EXPECT_EQ(calls, jobs.size());
  std::map<int, int> per_device;
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_TRUE(v[i].correct) << v[i].message;
    EXPECT_EQ(v[i].candidate, jobs[i].candidate);  // verdicts in the order of the jobs
    const int d = v[i].details.at("device").get<int>();
    ++per_device[d];
    EXPECT_EQ(v[i].details.at("visible_devices"), std::to_string(d));
    EXPECT_EQ(v[i].details.at("request").at("device"), "cuda");
  }
  EXPECT_EQ(per_device.size(), 2u);
  EXPECT_EQ(per_device[1] + per_device[3], 6);
  // Judged at the same time: some two verdicts' judging intervals overlap.
  bool overlap = false;
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t j = i + 1; j < v.size(); ++j)
      if (v[i].details["started"].get<double>() < v[j].details["ended"].get<double>() &&
          v[j].details["started"].get<double>() < v[i].details["ended"].get<double>())
        overlap = true;
  EXPECT_TRUE(overlap);
}

TEST(TorchProtocol, ImportTimeOutOnceBuilt) {
  if (!have_python()) GTEST_SKIP() << "SKIPPED: no python3";
  const std::string dir = test::temp_dir();
  write(dir + "/task.py", "# task\n");
  write(dir + "/hang_loading.py", "# no extension to build\n");
  TorchEvalOptions o = fake_options();
  o.compile_timeout_s = 100;
  o.import_timeout_s = 1;
  TorchEvaluator ev(o);
  const auto t0 = std::chrono::steady_clock::now();
  const Verdict v = ev.evaluate({dir + "/task.py", dir + "/hang_loading.py"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  EXPECT_EQ(v.reasons, std::vector<std::string>{"compile_timeout"});
  EXPECT_NE(v.message.find("more than 1 s"), std::string::npos) << v.message;
}

TEST(TorchProtocol, BadOptionsAreUsageErrors) {
  TorchEvalOptions o = fake_options();
  o.baselines = {"eager", "magic"};
  EXPECT_THROW(TorchEvaluator{o}, Error);
  o = fake_options();
  o.device = "tpu";
  EXPECT_THROW(TorchEvaluator{o}, Error);
  o = fake_options();
  o.samples = 1;
  EXPECT_THROW(TorchEvaluator{o}, Error);
}

TEST(TorchProtocol, WorkerWithoutTorchSaysSo) {
  if (!have_python()) GTEST_SKIP() << "SKIPPED: no python3";
  // A torch that cannot be imported, first on the worker's path.
  const std::string dir = test::temp_dir();
  write(dir + "/shadow/torch.py", "raise ImportError('torch is hidden by the test')\n");
  write(dir + "/task.py", "# task\n");
  write(dir + "/cand.py", "class ModelNew: pass\n");
  const char* old = std::getenv("PYTHONPATH");
  const std::string saved = old ? old : "";
  ::setenv("PYTHONPATH", (dir + "/shadow").c_str(), 1);
  TorchEvalOptions o;
  o.cache_dir = dir + "/cache";
  o.prebuild = false;
  TorchEvaluator ev(o);
  const Verdict v = ev.evaluate({dir + "/task.py", dir + "/cand.py"});
  if (old) ::setenv("PYTHONPATH", saved.c_str(), 1);
  else ::unsetenv("PYTHONPATH");
  EXPECT_EQ(v.reasons, std::vector<std::string>{"no_torch"}) << v.message;
  EXPECT_NE(v.message.find("hidden by the test"), std::string::npos) << v.message;
}

// ---------------------------------------------------------------------------------------------
// The static scan of Python candidates (python3 only, no torch)

std::vector<std::string> scan_rules(const std::string& source, const std::vector<std::string>& flags = {},
                                    const std::string& task = "") {
  const std::string dir = test::temp_dir();
  write(dir + "/cand.py", source);
  if (!task.empty()) write(dir + "/my_task.py", task);
  std::vector<std::string> argv = {find_python(), kSource + "/python/kforge_worker", "scan", dir + "/cand.py", "--task",
                                   dir + "/my_task.py"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  const ProcessResult r = run_process(argv);
  EXPECT_TRUE(r.ok()) << r.describe() << r.err;
  std::vector<std::string> out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const auto& f : j["findings"])
    out.push_back(f["rule"].get<std::string>() + "@" + std::to_string(f["line"].get<int>()));
  return out;
}

const std::string kModelNew = "\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n";

using V = std::vector<std::string>;

TEST(TorchScan, ForbiddenThingsAreFoundWithTheirLines) {
  if (!have_python()) GTEST_SKIP() << "SKIPPED: no python3";
  EXPECT_EQ(scan_rules("import torch\n# os.environ, subprocess, threading in a comment\n" + kModelNew), V{});
  EXPECT_EQ(scan_rules("import torch\nimport os\nos.environ['X'] = '1'\n" + kModelNew),
            (V{"monkey_patch@3", "environment_access@3"}));
  EXPECT_EQ(scan_rules("import torch\nimport os\nhome = os.getenv('HOME')\n" + kModelNew), V{"environment_access@3"});
  EXPECT_EQ(scan_rules("import torch\nfrom os import getenv\n" + kModelNew), V{"environment_access@2"});
  EXPECT_EQ(scan_rules("import torch\nimport subprocess as sp\n" + kModelNew), V{"process_creation@2"});
  EXPECT_EQ(scan_rules("import torch\nfrom threading import Thread\n" + kModelNew), V{"thread_creation@2"});
  EXPECT_EQ(scan_rules("import torch\nimport ctypes\n" + kModelNew), V{"dynamic_loading@2"});
  EXPECT_EQ(scan_rules("import torch as T\nT.matmul = lambda a, b: a\n" + kModelNew), V{"monkey_patch@2"});
  EXPECT_EQ(scan_rules("import torch\nsetattr(torch.cuda, 'synchronize', None)\n" + kModelNew), V{"monkey_patch@2"});
  EXPECT_EQ(scan_rules("import torch\nimport time\n" + kModelNew), V{"timer@2"});
  EXPECT_EQ(scan_rules("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n" + kModelNew),
            (V{"monkey_patch@2", "precision_settings@2"}));
  EXPECT_EQ(scan_rules("import torch\ns = torch.cuda.Stream()\n" + kModelNew), V{"stream_creation@2"});
  EXPECT_EQ(scan_rules("import torch\ns = torch.cuda.Stream()\n" + kModelNew, {"--allow-streams"}), V{});
  EXPECT_EQ(scan_rules("import torch\nimport gc\n" + kModelNew), V{"introspection@2"});
  EXPECT_EQ(scan_rules("import torch\nx = eval('1')\n" + kModelNew), V{"introspection@2"});
  EXPECT_EQ(scan_rules("import torch\nf = open('/tmp/x')\n" + kModelNew), V{"file_access@2"});
  // The reference: by name, by import of the task module, by subclassing.
  EXPECT_EQ(scan_rules("import torch\nfrom my_task import Model\n" + kModelNew),
            (V{"reference_call@2"}));
  EXPECT_EQ(scan_rules("import torch\nclass ModelNew(Model):\n    pass\n"), V{"reference_call@2"});
  // Fallbacks: a handler that does not re-raise.
  EXPECT_EQ(scan_rules("import torch\ntry:\n    import fastlib\nexcept ImportError:\n    fastlib = None\n" + kModelNew),
            V{"exception_fallback@4"});
  EXPECT_EQ(scan_rules("import torch\ntry:\n    import fastlib\nexcept ImportError as e:\n    raise RuntimeError('no') from e\n" +
                       kModelNew),
            V{});
  // No ModelNew; not Python.
  EXPECT_EQ(scan_rules("import torch\n"), V{"missing_model_new@1"});
  EXPECT_EQ(scan_rules("def f(:\n"), V{"syntax_error@1"});
}

TEST(TorchScan, CudaSourcesInStringsAreScannedToo) {
  if (!have_python()) GTEST_SKIP() << "SKIPPED: no python3";
  const std::string pre = "import torch\nfrom torch.utils.cpp_extension import load_inline\nsrc = r'''\n";
  const std::string post = "'''\next = load_inline(name='x', cpp_sources='', cuda_sources=src)\n" + kModelNew;
  EXPECT_EQ(scan_rules(pre + "__global__ void k(float* p) { p[0] = 1.f; }\n// cublasSgemm in a comment\n" + post), V{});
  EXPECT_EQ(scan_rules(pre + "__global__ void k(float* p) { p[0] = 1.f; }\nvoid f() { cublasSgemm(h); }\n" + post),
            V{"library_call@5"});
  EXPECT_EQ(scan_rules(pre + "void f() { std::thread t(g); cudaStreamCreate(&s); }\n" + post),
            (V{"thread_creation@4", "stream_creation@4"}));
  EXPECT_EQ(scan_rules(pre + "void f() { auto v = getenv(\"HOME\"); }\n" + post), V{"environment_access@4"});
  // The policy: a __global__ kernel built through cpp_extension, no ATen compute from C++.
  EXPECT_EQ(scan_rules("import torch\n" + kModelNew, {"--require-cuda-kernel"}), V{"no_cuda_kernel@1"});
  EXPECT_EQ(scan_rules(pre + "__global__ void k(float* p) { p[0] = 1.f; }\n" + post, {"--require-cuda-kernel"}), V{});
  // ... or the task asks for it.
  EXPECT_EQ(scan_rules("import torch\n" + kModelNew, {}, "KFORGE = {'require_cuda_kernel': True, 'atol': 1e-3}\n"),
            V{"no_cuda_kernel@1"});
  EXPECT_EQ(scan_rules("import torch\n" + kModelNew, {}, "KFORGE = {'atol': 1e-3}\n"), V{});
  EXPECT_EQ(scan_rules(pre + "__global__ void k(float* p) {}\ntorch::Tensor f(torch::Tensor a) { return at::matmul(a, a); }\n" +
                           post,
                       {"--require-cuda-kernel"}),
            V{"aten_compute@5"});
}

TEST(TorchScan, OwnSolutionsAreClean) {
  if (!have_python()) GTEST_SKIP() << "SKIPPED: no python3";
  for (const TorchTask& t : load_task_set(kSource + "/tasks/kforge")) {
    const std::string sol = kSource + "/tasks/kforge/solutions/" + t.stem() + ".py";
    const ProcessResult r = run_process({find_python(), kSource + "/python/kforge_worker", "scan", sol, "--task", t.file,
                                         "--require-cuda-kernel"});
    ASSERT_TRUE(r.ok()) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["findings"].size(), 0u) << sol << ": " << r.out;
  }
}

// The worker runs as `python3 python/kforge_worker ...`, which puts its own folder first on
// sys.path: a module of it named like a standard-library one shadows that module for every
// candidate and for torch (a `profile.py` there broke torch.compile's `import profile`).
TEST(TorchWorker, NoModuleShadowsTheStandardLibrary) {
  if (!have_python()) GTEST_SKIP() << "SKIPPED: no python3";
  const ProcessResult r = run_process(
      {find_python(), "-c",
       "import os, sys\n"
       "d = sys.argv[1]\n"
       "names = {f[:-3] for f in os.listdir(d) if f.endswith('.py')} | {f for f in os.listdir(d) if os.path.isdir(os.path.join(d, f, '')) and not f.startswith('__')}\n"
       "std = getattr(sys, 'stdlib_module_names', None)\n"
       "if std is None: print('SKIP'); sys.exit(0)\n"
       "bad = sorted(n for n in names if n in std)\n"
       "print(' '.join(bad) or 'OK')\n"
       "sys.exit(1 if bad else 0)\n",
       kSource + "/python/kforge_worker"});
  if (trim(r.out) == "SKIP") GTEST_SKIP() << "SKIPPED: python3 older than 3.10 (no sys.stdlib_module_names)";
  EXPECT_TRUE(r.ok()) << "kforge_worker modules named like standard-library modules: " << r.out << r.err;
}

// ---------------------------------------------------------------------------------------------
// The real worker on the CPU (only where torch is installed)

bool have_torch() {
  static const bool yes = [] {
    if (!have_python()) return false;
    const nlohmann::json p = probe_python();
    return p.contains("torch") && p["torch"].is_string();
  }();
  return yes;
}

// Processes below this one (the test binary), by walking /proc's parent links.
int descendants_of_self() {
  std::map<int, int> parent;
  for (const auto& d : fs::directory_iterator("/proc")) {
    const std::string name = d.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(d.path() / "stat");
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t r = s.rfind(')');
    if (r == std::string::npos) continue;
    std::istringstream rest(s.substr(r + 2));
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    if (state != "Z") parent[std::stoi(name)] = ppid;
  }
  int n = 0;
  for (const auto& [pid, pp] : parent) {
    int p = pp;
    for (int depth = 0; p > 1 && depth < 64; ++depth) {
      if (p == int(::getpid())) {
        ++n;
        break;
      }
      auto it = parent.find(p);
      if (it == parent.end()) break;
      p = it->second;
    }
  }
  return n;
}

void check_cpu_corpus(bool scan) {
  const nlohmann::json manifest = nlohmann::json::parse(read_file(kCorpus + "/manifest.json"));
  std::vector<TorchJob> jobs;
  std::vector<nlohmann::json> expect;
  for (const auto& e : manifest["entries"]) {
    if (!e.value("cpu", false)) continue;
    // The run-time pass needs the honest entries only where the scan pass could not accept them.
    if (!scan && e["expect"] == "accept" && !e.contains("scan_known_issue")) continue;
    jobs.push_back({kSource + "/" + e["task"].get<std::string>(), kSource + "/" + e["file"].get<std::string>()});
    expect.push_back(e);
  }
  TorchEvalOptions o;
  o.device = "cpu";
  o.samples = 3;
  o.trials = 2;
  o.static_scan = scan;
  o.compile_timeout_s = 30;  // importing torch.compile's machinery takes seconds on two busy cores
  o.run_timeout_s = 180;
  o.cache_dir = test::temp_dir();
  TorchEvaluator ev(o);
  const auto verdicts = ev.evaluate_batch(jobs, [&](size_t i, size_t n, const Verdict& v) {
    std::printf("[%2zu/%zu] %-24s %-7s %-22s %s\n", i + 1, n, fs::path(v.candidate).filename().c_str(),
                v.correct ? "ACCEPT" : "REJECT", join(v.reasons, ",").c_str(), v.message.substr(0, 100).c_str());
    std::fflush(stdout);
  });
  // No judge, executor or anything a candidate started outlives its verdict.
  EXPECT_EQ(descendants_of_self(), 0);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const nlohmann::json& e = expect[i];
    const Verdict& v = verdicts[i];
    const nlohmann::json reasons = e.value(scan ? "reasons" : "runtime_reasons", nlohmann::json::array());
    if (scan && e.contains("scan_known_issue")) {
      // An honest candidate the static scan still refuses (python/kforge_worker/scan.py is not
      // ours to change here); the run-time pass must accept it.
      std::printf("NOTE %s: %s (got %s)\n", jobs[i].candidate.c_str(), e["scan_known_issue"].get<std::string>().c_str(),
                  join(v.reasons, ",").c_str());
      continue;
    }
    if (e["expect"] == "accept" || (!scan && reasons.empty())) {
      EXPECT_TRUE(v.correct) << jobs[i].candidate << ": " << join(v.reasons, ",") << " " << v.message;
      if (e["expect"] == "accept") EXPECT_TRUE(v.speedup.count("eager")) << jobs[i].candidate;
      continue;
    }
    EXPECT_FALSE(v.correct) << jobs[i].candidate << " was accepted";
    bool expected = false;
    for (const auto& r : reasons) expected |= v.has_reason(r.get<std::string>());
    EXPECT_TRUE(expected) << jobs[i].candidate << ": got " << join(v.reasons, ",") << " (" << v.message
                          << "), expected one of " << reasons.dump();
  }
}

TEST(TorchWorkerCpu, CorpusWithTheStaticScan) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  check_cpu_corpus(true);
}

TEST(TorchWorkerCpu, CorpusRunTimeDefencesOnly) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  check_cpu_corpus(false);
}

TEST(TorchWorkerCpu, TaskSetBatchWritesMetrics) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string dir = test::temp_dir();
  const std::string tasks = kSource + "/tasks/kforge";
  write(dir + "/set/01_relu.py", read_file(tasks + "/01_relu.py"));
  write(dir + "/set/05_layernorm.py", read_file(tasks + "/05_layernorm.py"));
  write(dir + "/set/solutions/01_relu.py", read_file(kCorpus + "/honest_cpu/relu_clamp.py"));
  // 05_layernorm has no solution: it counts as unsolved.
  auto r = run_kforge("eval --tasks " + dir + "/set --device cpu --samples 3 --trials 1 --metrics " + dir +
                      "/m.csv --metrics " + dir + "/m.json --out " + dir + "/v.json");
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_NE(r.out.find("ACCEPT  01_relu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("missing_file"), std::string::npos) << r.out;
  const auto m = nlohmann::json::parse(read_file(dir + "/m.json"));
  EXPECT_EQ(m["tasks"], 2);
  EXPECT_EQ(m["solved"], 1);
  EXPECT_EQ(m["rejections"]["missing_file"], 1);
  EXPECT_EQ(read_file(dir + "/m.csv").rfind("baseline,tasks,solved", 0), 0u);
  EXPECT_EQ(nlohmann::json::parse(read_file(dir + "/v.json")).size(), 2u);
}

// Shaped rewards (issue 16 item 2): the PyTorch judge writes checks.worst_error_over_bound (the
// worst error against the fp64 reference over its element's bound), and the deviation penalty
// takes W times it off the reward; an exact candidate has none.
TEST(TorchWorkerCpu, DeviationPenaltyReadsTheJudgesErrorOverBound) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string dir = test::temp_dir();
  // Summing two halves apart rounds differently from eager's sum: inexact, well inside the bound.
  write(dir + "/halves.py",
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def __init__(self, *args):\n"
        "        super().__init__()\n\n    def forward(self, x):\n        h = x.shape[1] // 2\n"
        "        return torch.sum(x[:, :h], dim=1) + torch.sum(x[:, h:], dim=1)\n");
  write(dir + "/exact.py", read_file(kCorpus + "/honest_cpu/relu_clamp.py"));
  TorchEvalOptions o;
  o.device = "cpu";
  o.samples = 3;
  o.trials = 1;
  o.cache_dir = dir + "/cache";
  o.reward = parse_reward("log");
  o.reward.mode = "eager";
  set_reward_penalties(o.reward, "2", "");
  TorchEvaluator ev(o);
  const auto v = ev.evaluate_batch({{kSource + "/tasks/kforge/03_row_sum.py", dir + "/halves.py"},
                                    {kSource + "/tasks/kforge/01_relu.py", dir + "/exact.py"}});
  ASSERT_TRUE(v[0].correct) << v[0].message;
  ASSERT_TRUE(v[1].correct) << v[1].message;
  const double d = v[0].details.at("checks").at("worst_error_over_bound").get<double>();
  EXPECT_GT(d, 0.0);
  EXPECT_LE(d, 1.0);
  const nlohmann::json& parts = v[0].details.at("reward");
  EXPECT_DOUBLE_EQ(parts.at("deviation").get<double>(), d);
  EXPECT_NEAR(parts.at("deviation_penalty").get<double>(), 2 * d, 1e-12);
  EXPECT_NEAR(v[0].reward, std::log(v[0].speedup.at("eager").median) - 2 * d, 1e-9);
  EXPECT_EQ(v[1].details.at("checks").at("worst_error_over_bound").get<double>(), 0.0);  // relu is exact
  EXPECT_EQ(v[1].details.at("reward").at("deviation_penalty").get<double>(), 0.0);
}

// ---------------------------------------------------------------------------------------------
// The command line

TEST(TorchCli, UsageErrors) {
  EXPECT_EQ(run_kforge("eval").rc, 2);
  EXPECT_EQ(run_kforge("eval --task t.py").rc, 2);                          // no candidate
  EXPECT_EQ(run_kforge("eval --task t.py --tasks d c.py").rc, 2);           // both
  EXPECT_EQ(run_kforge("eval --task t.py c.py --baselines eager,magic").rc, 2);
  EXPECT_EQ(run_kforge("eval --task t.py c.py --metrics m.txt").rc, 2);
  EXPECT_EQ(run_kforge("eval --task t.py c.py --device tpu").rc, 2);
  EXPECT_EQ(run_kforge("eval --tasks /nonexistent/set").rc, 2);
  auto help = run_kforge("eval --help");
  EXPECT_EQ(help.rc, 0);
  for (const char* flag : {"--task", "--tasks", "--solutions", "--baselines", "--metrics", "--no-scan", "--require-cuda-kernel"})
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
}

TEST(TorchCli, MissingCandidateGetsAVerdict) {
  const std::string dir = test::temp_dir();
  write(dir + "/t.py", "# task\n");
  auto r = run_kforge("eval --task " + dir + "/t.py " + dir + "/none.py --json");
  EXPECT_EQ(r.rc, 3) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["reasons"][0], "missing_file");
}

}  // namespace
}  // namespace kforge
