// kforge eval --task FILE CANDIDATE.py ... / kforge eval --tasks DIR: KernelBench-format PyTorch
// tasks through the Python worker (torch/torch_eval.hpp), with metrics over a task set.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <regex>

#include "cli/commands.hpp"
#include "eval/profile.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "eval/devices.hpp"
#include "torch/metrics.hpp"
#include "torch/tasks.hpp"
#include "service/eval_service.hpp"
#include "service/task.hpp"
#include "torch/torch_eval.hpp"

namespace fs = std::filesystem;

namespace kforge {
namespace {

struct TorchCliOptions {
  std::string task;
  std::string tasks;
  std::string solutions;
  std::vector<std::string> candidates;
  std::string baselines = "eager";
  std::string device = "cuda";
  int samples = 10;
  int trials = 5;
  uint64_t seed = 1;
  double atol = -1, rtol = -1;
  double compile_timeout = 300;
  double import_timeout = 60;
  double run_timeout = 300;
  bool json = false;
  std::string out;
  std::vector<std::string> metrics;
  std::string reward = "log";
  std::string deviation_penalty, length_penalty;  // shaped rewards (empty: off)
  bool allow_streams = false;
  bool require_cuda_kernel = false;
  bool no_scan = false;
  bool verify_only = false;
  std::string python;
  int build_jobs = 0;
  std::string devices;
  bool profile = false;
};

std::string one_line(const Verdict& v, const std::string& task) {
  const std::string who = fs::path(task).stem().string() + " :: " + v.candidate;
  if (!v.correct) return strf("REJECT  %s  %s: %s", who.c_str(), join(v.reasons, ",").c_str(), v.message.c_str());
  std::string s = strf("ACCEPT  %s", who.c_str());
  for (const auto& [b, sp] : v.speedup)
    s += strf("  %s %.3fx", b.c_str(), sp.median);
  if (!v.speedup.empty() && v.candidate_us.count(v.speedup.begin()->first))
    s += strf("  (%s per call)", human_us(v.candidate_us.begin()->second.median).c_str());
  s += strf("  reward %.3f", v.reward);
  if (!v.flags.empty()) s += "  flags " + join(v.flags, ",");
  return s;
}

std::vector<std::string> parse_baselines(const std::string& spec) {
  if (trim(spec) == "all") return {"eager", "compile", "compile_ro", "graph"};
  std::vector<std::string> out;
  for (const std::string& b : split(spec, ',')) {
    const std::string t(trim(b));
    if (t.empty()) continue;
    if (t != "eager" && t != "compile" && t != "compile_ro" && t != "graph")
      KF_USAGE_ERROR("unknown baseline '%s' (expected eager, compile, compile_ro, graph or all)", t.c_str());
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  if (out.empty()) KF_USAGE_ERROR("--baselines is empty");
  // eager is always timed: it is the reference output every timed call is re-checked against.
  if (out.front() != "eager") {
    out.erase(std::remove(out.begin(), out.end(), "eager"), out.end());
    out.insert(out.begin(), "eager");
  }
  return out;
}

// Everything the options say, checked before anything is started or written.
void validate(const TorchCliOptions& o) {
  if (!o.task.empty() && !o.tasks.empty()) KF_USAGE_ERROR("give --task FILE or --tasks DIR, not both");
  if (o.task.empty() && o.tasks.empty())
    KF_USAGE_ERROR("nothing to judge: kforge eval --task TASK.py CANDIDATE.py ..., kforge eval --tasks DIR, or "
                   "kforge eval hgemm ...");
  if (!o.tasks.empty() && !o.candidates.empty())
    KF_USAGE_ERROR("--tasks pairs solutions by name (see --solutions); candidate files are for --task");
  if (!o.task.empty() && o.candidates.empty()) KF_USAGE_ERROR("no candidate given (kforge eval --task TASK.py CANDIDATE.py ...)");
  if (!o.task.empty()) {
    check_input_file("--task", o.task);
    if (!ends_with(o.task, ".py"))
      KF_USAGE_ERROR("--task %s is not a Python file: a task is a KernelBench-format FILE.py (defining Model, "
                     "get_inputs, get_init_inputs)", o.task.c_str());
  }
  if (!o.tasks.empty()) {
    std::error_code ec;
    if (!fs::exists(o.tasks, ec)) KF_USAGE_ERROR("--tasks %s: no such folder or listing", o.tasks.c_str());
    if (!fs::is_directory(o.tasks, ec)) check_input_file("--tasks", o.tasks);
  }
  if (!o.solutions.empty()) {
    std::error_code ec;
    if (o.tasks.empty()) KF_USAGE_ERROR("--solutions goes with --tasks (with --task, name the candidate files)");
    if (!fs::is_directory(o.solutions, ec)) KF_USAGE_ERROR("--solutions %s: no such folder", o.solutions.c_str());
  }
  // A missing candidate is a verdict (missing_file) and the batch goes on; a path that names
  // something other than a file is a mistake on the command line.
  for (const std::string& c : o.candidates) {
    std::error_code ec;
    if (fs::exists(c, ec)) check_input_file("candidate", c);
  }
  if (!o.out.empty()) {
    if (!ends_with(o.out, ".json")) KF_USAGE_ERROR("--out must name a .json file (got '%s')", o.out.c_str());
    check_output_file("--out", o.out);
  }
  for (const std::string& m : o.metrics) {
    if (!ends_with(m, ".json") && !ends_with(m, ".csv"))
      KF_USAGE_ERROR("--metrics must name a .csv or .json file (got '%s')", m.c_str());
    check_output_file("--metrics", m);
  }
  check_seconds("--compile-timeout", o.compile_timeout);
  check_seconds("--import-timeout", o.import_timeout);
  check_seconds("--run-timeout", o.run_timeout);
  if (o.samples < 3 || o.samples > 1000) KF_USAGE_ERROR("--samples must be between 3 and 1000 (got %d)", o.samples);
  if (o.trials < 1 || o.trials > 100) KF_USAGE_ERROR("--trials must be between 1 and 100 (got %d)", o.trials);
  if (o.build_jobs > 256) KF_USAGE_ERROR("--build-jobs must be between 0 (automatic) and 256 (got %d)", o.build_jobs);
  // --atol/--rtol: the default is "unset" (-1); a given value was checked at parse time (a finite
  // number >= 0, see add_value_checks).
  const std::string device(trim(o.device));
  if (device != "cpu" && device != "cuda" && !std::regex_match(device, std::regex("cuda:[0-9]{1,2}")))
    KF_USAGE_ERROR("--device '%s': expected cuda, cuda:N or cpu", o.device.c_str());
  if (device == "cpu") {
    for (const std::string& b : parse_baselines(o.baselines))
      if (b != "eager")
        KF_USAGE_ERROR("--device cpu times only the eager baseline (got --baselines %s); torch.compile and CUDA "
                       "graphs on the CPU say nothing about a CUDA kernel", o.baselines.c_str());
  }
  if (!o.python.empty() && find_python(o.python).empty())
    KF_USAGE_ERROR("--python %s: no such interpreter (give the path of a Python with torch)", o.python.c_str());
  if (o.python.empty()) {
    const char* env = std::getenv("KFORGE_PYTHON");
    if (env && *env && find_python(env).empty())
      KF_USAGE_ERROR("KFORGE_PYTHON=%s: no such interpreter (unset it, or name a Python with torch)", env);
  }
}

void run_eval_torch(const TorchCliOptions& o) {
  RewardConfig reward = parse_reward(o.reward);
  set_reward_penalties(reward, o.deviation_penalty, o.length_penalty);
  validate(o);

  TorchEvalOptions eo;
  eo.python = o.python;
  eo.device = o.device;
  eo.baselines = parse_baselines(o.baselines);
  eo.samples = o.samples;
  eo.trials = o.trials;
  eo.seed = o.seed;
  if (o.atol >= 0) eo.atol = o.atol;
  if (o.rtol >= 0) eo.rtol = o.rtol;
  eo.compile_timeout_s = o.compile_timeout;
  eo.import_timeout_s = o.import_timeout;
  eo.run_timeout_s = o.run_timeout;
  eo.allow_streams = o.allow_streams;
  eo.require_cuda_kernel = o.require_cuda_kernel;
  eo.static_scan = !o.no_scan;
  eo.skip_timing = o.verify_only;
  eo.build_jobs = o.build_jobs;
  eo.reward = reward;
  eo.reward.mode = "eager";
  eo.devices = parse_devices(o.devices);
  require_default_device(eo.devices, o.device);

  std::vector<TorchJob> jobs;
  std::vector<std::string> task_ids;
  if (!o.task.empty()) {
    for (const std::string& c : o.candidates) {
      jobs.push_back({o.task, c});
      task_ids.push_back(fs::path(o.task).stem().string());
    }
  } else {
    std::vector<TorchTask> set;
    try {
      set = load_task_set(o.tasks);
    } catch (const nlohmann::json::exception& e) {
      KF_USAGE_ERROR("task set %s is not a valid listing: %s", o.tasks.c_str(), plain_message(e.what()).c_str());
    }
    if (set.empty()) KF_USAGE_ERROR("the task set %s holds no tasks", o.tasks.c_str());
    std::error_code ec;
    const std::string sol = !o.solutions.empty() ? o.solutions
                                                 : (fs::is_directory(o.tasks, ec) ? (fs::path(o.tasks) / "solutions").string()
                                                                              : fs::path(o.tasks).parent_path().string() + "/solutions");
    for (const TorchTask& t : set) {
      std::vector<std::string> files = solutions_for(t, sol);
      // A task without a solution still counts (unsolved): a job on a missing file says so.
      if (files.empty()) files.push_back((fs::path(sol) / (t.stem() + ".py")).string());
      for (const std::string& f : files) {
        jobs.push_back({t.file, f});
        task_ids.push_back(t.id);
      }
    }
  }
  // The options as the judges resolve them (the Python, the worker's and cache folders), checked
  // before anything starts.
  const TorchEvaluator ev(eo);
  // Judged through the one evaluation service (src/service), as kforge serve and optimize judge: a
  // slot per --devices GPU (else --device), each task file an EvalTask, all candidates queued at
  // once (one batch per slot: their extensions build in parallel, as before).
  ServiceOptions so;
  so.devices = eo.devices;
  so.max_batch = jobs.size();
  EvalService service(so);
  std::vector<EvalService::FileJob> files;
  for (const TorchJob& j : jobs) {
    if (!service.task(j.task)) service.add_task(make_torch_task(j.task, j.task, eo));
    files.push_back({j.task, j.candidate});
  }
  const std::string where = eo.devices.empty() ? eo.device : "cuda devices " + o.devices;
  std::fprintf(stderr, "kforge eval: %zu candidate(s) on %s, device %s, baselines %s, python %s\n", jobs.size(),
               o.task.empty() ? o.tasks.c_str() : o.task.c_str(), where.c_str(), join(eo.baselines, ",").c_str(),
               ev.options().python.empty() ? "(none)" : ev.options().python.c_str());
  size_t done = 0;
  std::vector<Verdict> verdicts = service.judge_files(files, [&](size_t i, const Verdict& v) {
    if (!o.json) std::printf("%s\n", one_line(v, jobs[i].task).c_str());
    std::fprintf(stderr, "[%zu/%zu] %s\n", ++done, jobs.size(), v.correct ? "accepted" : "rejected");
    std::fflush(stdout);
  });
  // --profile: each correct candidate once more under Nsight Compute, after the whole batch is judged.
  if (o.profile) {
    ProfileOptions po = profile_options_from_env();
    if (!eo.devices.empty()) po.device = eo.devices.front();
    for (size_t i = 0; i < verdicts.size(); ++i) {
      if (!verdicts[i].correct) continue;
      std::string source;
      try {
        source = read_file(jobs[i].candidate);
      } catch (const std::exception&) {
      }
      verdicts[i].details["profile"] =
          profile_torch_candidate(jobs[i].task, jobs[i].candidate, torch_build_dir(ev.options(), source), ev.options(), po);
      std::fprintf(stderr, "kforge eval: %s: %s\n", jobs[i].candidate.c_str(),
                   profile_summary(verdicts[i].details["profile"]).c_str());
      if (!o.json) {
        const std::string table = render_profile_table(verdicts[i].details["profile"]);
        if (!table.empty()) std::printf("%s\n", table.c_str());
      }
    }
  }
  nlohmann::json all = nlohmann::json::array();
  std::vector<TaskOutcome> outcomes;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    all.push_back(to_json(verdicts[i]));
    outcomes.push_back({task_ids[i], verdicts[i]});
  }
  const nlohmann::json doc = verdicts.size() == 1 && !o.task.empty() ? all[0] : all;
  const TaskSetMetrics m = compute_metrics(outcomes);
  if (o.json) std::printf("%s\n", dump_json(doc, 2).c_str());
  else if (!o.tasks.empty() || jobs.size() > 1) std::printf("\n%s", format_metrics(m).c_str());
  if (!o.out.empty()) write_file_atomic(o.out, dump_json(doc, 2) + "\n");
  for (const std::string& f : o.metrics)
    write_file_atomic(f, ends_with(f, ".csv") ? metrics_to_csv(m) : dump_json(metrics_to_json(m), 2) + "\n");
  for (const Verdict& v : verdicts)
    if (!v.correct) throw ExitStatus{3};
}

}  // namespace

void register_eval_torch(CLI::App& eval) {
  auto o = std::make_shared<TorchCliOptions>();
  eval.add_option("--task", o->task,
                  "a KernelBench-format task file (defines Model, get_inputs, get_init_inputs); the positional "
                  "arguments are candidate files defining ModelNew");
  eval.add_option("--tasks", o->tasks,
                  "a task set: a folder of task files, a KernelBench checkout (level1/, ...) or a listing from "
                  "`kforge tasks import`; each task is judged with its solutions (see --solutions)");
  eval.add_option("--solutions", o->solutions,
                  "where --tasks finds solutions: SOL/<task stem>.py and SOL/<task stem>/*.py (default: "
                  "<tasks>/solutions)");
  eval.add_option("torch_candidates", o->candidates, "candidate .py files for --task");
  eval.add_option("--baselines", o->baselines,
                  "what the candidate is timed against (comma list, or all): eager (the reference as written; always "
                  "timed), compile (torch.compile), compile_ro (torch.compile mode=reduce-overhead), graph (the "
                  "reference captured in CUDA graphs)")
      ->capture_default_str();
  eval.add_option("--device", o->device, "cuda (or cuda:N), or cpu to verify and time on the CPU")->capture_default_str();
  eval.add_option("--samples", o->samples, "timed rounds; each runs every contender once, in a random order")
      ->capture_default_str();
  eval.add_option("--trials", o->trials, "verification trials, each with fresh inputs")->capture_default_str();
  eval.add_option("--seed", o->seed, "seed for weights, inputs and the order of timed runs")->capture_default_str();
  eval.add_option("--atol", o->atol, "absolute tolerance (default: the task's KFORGE['atol'], else 1e-4 for fp32, 1e-2 "
                                     "for fp16/bf16)");
  eval.add_option("--rtol", o->rtol, "relative tolerance (default as for --atol)");
  eval.add_option("--compile-timeout", o->compile_timeout, "seconds importing (building) one candidate may take")
      ->capture_default_str();
  eval.add_option("--import-timeout", o->import_timeout,
                  "seconds importing a candidate may take once its extension is built (or when it has none)")
      ->capture_default_str();
  eval.add_option("--run-timeout", o->run_timeout, "seconds the rest of one candidate's judgement may take")
      ->capture_default_str();
  eval.add_flag("--json", o->json, "print the verdicts as JSON");
  eval.add_option("--out", o->out, "also write the verdicts to FILE.json");
  eval.add_option("--metrics", o->metrics,
                  "write the task-set metrics (mean/median/max/geomean speed-up, fast_p, success rate, rejections "
                  "by reason) to FILE.csv or FILE.json (repeatable)");
  eval.add_option("--reward", o->reward, "reward of a correct candidate against eager: log, speedup, clipped:X")
      ->capture_default_str();
  eval.add_option("--deviation-penalty", o->deviation_penalty, "shaped reward, off by default: take W x (the worst error over the tolerance's bound, 0 to 1) off a correct candidate's reward (never down to a rejection's; docs/training.md)")->type_name("W");
  eval.add_option("--length-penalty", o->length_penalty, "shaped reward, off by default: take W x (tokens beyond TOKENS) / TOKENS off a correct candidate's reward (a token: a word, a number or one punctuation mark; never down to a rejection's; docs/training.md)")->type_name("W:TOKENS");
  eval.add_flag("--allow-streams", o->allow_streams, "let candidates create CUDA streams (the static scan forbids it)");
  eval.add_flag("--require-cuda-kernel", o->require_cuda_kernel,
                "policy: a candidate must build a __global__ kernel with torch.utils.cpp_extension and may not "
                "call ATen compute ops from C++ (a task can ask for this with KFORGE = {'require_cuda_kernel': True})");
  eval.add_flag("--no-scan", o->no_scan, "skip the static scan (to exercise the run-time defences only)");
  eval.add_flag("--verify-only", o->verify_only, "check correctness and hardening, skip timing");
  eval.add_flag("--profile", o->profile,
                "then run each correct candidate once more under Nsight Compute (ncu, a process of its own) and add "
                "its metrics per kernel to the verdict's details.profile (or why not: profile.error)");
  eval.add_option("--devices", o->devices,
                  "GPUs to judge a batch on in parallel, one worker at a time each: 0,1,... or all (default: --device); "
                  "every candidate is timed against the baselines on its own device");
  eval.add_option("--python", o->python, "the Python interpreter with torch (default: $KFORGE_PYTHON, else python3)");
  eval.add_option("--build-jobs", o->build_jobs, "extensions built in parallel before judging (0: half the cores, at most 8)")
      ->capture_default_str();
  eval.callback([o, &eval] {
    for (const CLI::App* sub : eval.get_subcommands())
      if (sub->parsed()) return;  // kforge eval hgemm ...
    run_eval_torch(*o);
  });
}

}  // namespace kforge
