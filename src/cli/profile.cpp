// kforge profile: judge candidates, then run each correct one once more under Nsight Compute
// (eval/profile.hpp) and show its metrics per kernel. Flags and printing only: the judging and the
// profile go through the evaluation service's tasks (service/task.hpp), as kforge serve --profile.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>

#include "cli/commands.hpp"
#include "compile/compile.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "eval/devices.hpp"
#include "eval/profile.hpp"
#include "search/loop.hpp"
#include "service/eval_service.hpp"

namespace fs = std::filesystem;

namespace kforge {
namespace {

struct ProfileCli {
  std::string task;
  std::vector<std::string> candidates;
  bool time = false;
  bool json = false;
  std::string out;
  std::string arch;
  std::vector<std::string> include_dirs, nvcc_flags;
  std::string device = "cuda";
  std::string python;
  std::string devices;
  int max_kernels = 16;
  int warmup = 2;
  double profile_timeout = 300;
};

void run_profile(const ProfileCli& o) {
  if (o.candidates.empty()) KF_USAGE_ERROR("no candidate given (kforge profile --task TASK FILE ...)");
  for (const std::string& c : o.candidates) check_input_file("candidate", c);
  if (o.max_kernels < 1 || o.max_kernels > 1000)
    KF_USAGE_ERROR("--max-kernels must be a whole number from 1 to 1000 (got %d)", o.max_kernels);
  if (o.warmup < 0 || o.warmup > 100) KF_USAGE_ERROR("--warmup must be a whole number from 0 to 100 (got %d)", o.warmup);
  check_seconds("--profile-timeout", o.profile_timeout);
  if (!o.out.empty()) {
    if (!ends_with(o.out, ".json")) KF_USAGE_ERROR("--out must name a .json file (got '%s')", o.out.c_str());
    check_output_file("--out", o.out);
  }
  const std::vector<int> devices = parse_devices(o.devices);
  if (devices.size() > 1) KF_USAGE_ERROR("kforge profile uses one GPU: give --devices one index (got '%s')", o.devices.c_str());

  ServiceOptions so;
  so.devices = devices;
  so.profile = true;
  so.profile_options = profile_options_from_env();
  so.profile_options.max_kernels = o.max_kernels;
  so.profile_options.warmup_calls = o.warmup;
  so.profile_options.timeout_s = o.profile_timeout;
  std::shared_ptr<EvalTask> task;
  if (is_torch_task(o.task)) {
    if (!o.arch.empty() || !o.include_dirs.empty() || !o.nvcc_flags.empty())
      KF_USAGE_ERROR("--arch, --include-dir and --nvcc-flag are for HGEMM tasks; a PyTorch candidate builds its own code");
    check_torch_task_file(o.task, o.python);
    TorchEvalOptions to;
    to.device = o.device;
    to.python = o.python;
    to.skip_timing = !o.time;
    require_default_device(devices, o.device);
    task = make_torch_task(fs::path(o.task).stem().string(), o.task, to);
  } else {
    if (o.device != "cuda") KF_USAGE_ERROR("--device is for PyTorch tasks; an HGEMM candidate runs on the GPU");
    const HgemmProblem problem = parse_hgemm_task(o.task);
    if (!o.arch.empty() && !std::regex_match(o.arch, std::regex("sm_[0-9]{2,3}[a-z]?")))
      KF_USAGE_ERROR("--arch '%s': expected an nvcc target such as sm_90a or sm_80", o.arch.c_str());
    const std::vector<std::string> dirs = checked_include_dirs(o.include_dirs);
    check_nvcc_flags(o.nvcc_flags);
    EvalOptions eo = hgemm_eval_options(o.arch);
    eo.skip_timing = !o.time;
    eo.compile.include_dirs.insert(eo.compile.include_dirs.end(), dirs.begin(), dirs.end());
    eo.compile.extra_flags.insert(eo.compile.extra_flags.end(), o.nvcc_flags.begin(), o.nvcc_flags.end());
    task = make_hgemm_task(o.task, problem, eo);
  }
  EvalService service(so);
  service.add_task(task);
  std::fprintf(stderr, "kforge profile: %zu candidate(s) of %s (%s, then Nsight Compute on the correct ones)\n",
               o.candidates.size(), o.task.c_str(), o.time ? "judged and timed" : "verified, not timed");
  std::vector<std::future<Verdict>> futures;
  for (const std::string& c : o.candidates) futures.push_back(service.submit(task->id(), read_file(c)));
  nlohmann::json all = nlohmann::json::array();
  bool rejected = false, unprofiled = false;
  for (size_t i = 0; i < futures.size(); ++i) {
    Verdict v = futures[i].get();
    v.candidate = o.candidates[i];
    const nlohmann::json profile = v.details.value("profile", nlohmann::json());
    rejected |= !v.correct;
    unprofiled |= v.correct && (!profile.is_object() || profile.contains("error"));
    if (!o.json) {
      if (!v.correct) {
        std::printf("REJECT  %s  %s: %s (not profiled)\n", v.candidate.c_str(), join(v.reasons, ",").c_str(),
                    v.message.c_str());
      } else {
        std::printf("ACCEPT  %s  %s\n", v.candidate.c_str(), profile_summary(profile).c_str());
        const std::string table = render_profile_table(profile, 16);
        if (!table.empty()) std::printf("\n%s\n", table.c_str());
      }
      std::fflush(stdout);
    }
    all.push_back(to_json(v));
  }
  const nlohmann::json doc = all.size() == 1 ? all[0] : all;
  if (o.json) std::printf("%s\n", dump_json(doc, 2).c_str());
  if (!o.out.empty()) write_file_atomic(o.out, dump_json(doc, 2) + "\n");
  if (rejected) throw ExitStatus{3};
  if (unprofiled) throw ExitStatus{1};
}

}  // namespace

void register_profile(CLI::App& app) {
  auto o = std::make_shared<ProfileCli>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Judge candidates, then run each correct one once more under Nsight Compute (ncu --clock-control none, in a "
      "process of its own, never the judge) and show its metrics per kernel: duration, SM and DRAM throughput, "
      "tensor-pipe use, achieved occupancy, registers, shared memory, L1/L2 hit rates, the top warp stalls");
  cmd->add_option("candidates", o->candidates, "candidate files (.cu for HGEMM, .py defining ModelNew for a PyTorch task)")
      ->required();
  cmd->add_option("--task", o->task,
                  "hgemm:MxNxK[:nn|tn][:f32|f16], or a KernelBench-format task file (.py)")
      ->required();
  cmd->add_flag("--time", o->time, "also time each candidate against its baseline (default: verify only, then profile)");
  cmd->add_flag("--json", o->json, "print the verdicts (with details.profile) as JSON");
  cmd->add_option("--out", o->out, "also write the verdicts to FILE.json");
  cmd->add_option("--max-kernels", o->max_kernels, "kernel launches profiled in the one call (1 to 1000)")
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "calls before the profiled one (0 to 100)")->capture_default_str();
  cmd->add_option("--profile-timeout", o->profile_timeout, "seconds one profile (ncu and its replays) may take")
      ->capture_default_str();
  cmd->add_option("--arch", o->arch, "HGEMM: nvcc target, e.g. sm_90a (default: the device's)");
  cmd->add_option("--include-dir", o->include_dirs, "HGEMM: folder added to the candidates' include path (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--nvcc-flag", o->nvcc_flags, "HGEMM: one extra nvcc argument, e.g. --nvcc-flag=-DTILE=64 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--device", o->device, "PyTorch tasks: cuda, or cpu (judged on the CPU; only to test, a profile needs a GPU)")->capture_default_str();
  cmd->add_option("--devices", o->devices, "the one GPU to judge and profile on (an index; default: the first)");
  cmd->add_option("--python", o->python, "PyTorch tasks: the worker's Python (default $KFORGE_PYTHON, else python3)");
  cmd->footer(
      "ncu: $KFORGE_NCU, else ncu on PATH, else /usr/local/cuda/bin/ncu. Where it is missing or may not read the "
      "counters (ERR_NVGPUCTRPERM), each verdict's details.profile says so (error, error_code) and the verdict is "
      "otherwise the same.\n"
      "Exit status: 0 every candidate accepted and profiled; 1 a correct candidate could not be profiled (the line "
      "says why); 2 a usage error; 3 a candidate was rejected (it is not profiled).\n"
      "See docs/optimize.md (Profiles).");
  cmd->callback([o] { run_profile(*o); });
}

}  // namespace kforge
