// kforge eval hgemm: judge candidate .cu files through the hardened evaluator.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "eval/devices.hpp"
#include "eval/evaluator.hpp"
#include "eval/hgemm_worker.hpp"
#include "eval/profile.hpp"
#include "measure/timer.hpp"
#include "service/eval_service.hpp"
#include "service/task.hpp"

namespace kforge {
namespace {

struct EvalCliOptions {
  std::string shape;
  std::string layout = "nn";
  std::string acc = "f32";
  std::string dtype = "f16";
  std::string modes = "offline";
  std::vector<std::string> candidates;
  int samples = 7;
  uint64_t seed = 1;
  bool json = false;
  std::string out;
  std::string reward = "log";
  std::string deviation_penalty, length_penalty;  // shaped rewards (empty: off)
  double compile_timeout = 180;
  double run_timeout = 60;
  std::string arch;
  bool allow_streams = false;
  bool verify_only = false;
  std::string devices;
  std::vector<std::string> include_dirs;
  std::vector<std::string> nvcc_flags;
  bool profile = false;
};

std::string one_line(const Verdict& v) {
  if (!v.correct) {
    return strf("REJECT  %s  %s: %s", v.candidate.c_str(), join(v.reasons, ",").c_str(), v.message.c_str());
  }
  std::string s = strf("ACCEPT  %s", v.candidate.c_str());
  for (const auto& [mode, sp] : v.speedup)
    s += strf("  %s speed-up %.3fx (p10 %.3f, p90 %.3f; %s vs %s)", mode.c_str(), sp.median, sp.p10, sp.p90,
              human_us(v.candidate_us.at(mode).median).c_str(), human_us(v.baseline_us.at(mode).median).c_str());
  s += strf("  reward %.3f", v.reward);
  if (!v.flags.empty()) s += "  flags " + join(v.flags, ",");
  return s;
}

void run_eval(const EvalCliOptions& o) {
  RewardConfig reward = parse_reward(o.reward);
  set_reward_penalties(reward, o.deviation_penalty, o.length_penalty);
  const std::vector<std::string> include_dirs = checked_include_dirs(o.include_dirs);
  check_nvcc_flags(o.nvcc_flags);
  HgemmProblem problem;
  if (o.shape.empty()) KF_USAGE_ERROR("--shape MxNxK is required");
  problem.shape = parse_shape(o.shape);
  problem.layout = parse_layout(o.layout);
  problem.acc = parse_acc(o.acc);
  problem.dtype = parse_dtype(o.dtype);
  if (problem.dtype == Dtype::kBF16 && problem.acc != Acc::kF32)
    KF_USAGE_ERROR("--dtype bf16 accumulates in fp32 only: drop --acc f16 (or use --dtype f16)");
  EvalOptions eo = hgemm_eval_options(o.arch);
  eo.modes.clear();
  for (Mode m : parse_modes(o.modes)) eo.modes.emplace_back(to_string(m));
  if (o.candidates.empty()) KF_USAGE_ERROR("no candidate given (kforge eval hgemm --shape MxNxK FILE.cu ...)");
  if (o.samples < 3 || o.samples > 1000) KF_USAGE_ERROR("--samples must be between 3 and 1000 (got %d)", o.samples);
  check_seconds("--compile-timeout", o.compile_timeout);
  check_seconds("--run-timeout", o.run_timeout);
  if (!o.arch.empty() && !std::regex_match(o.arch, std::regex("sm_[0-9]{2,3}[a-z]?")))
    KF_USAGE_ERROR("--arch '%s': expected an nvcc target such as sm_90a or sm_80", o.arch.c_str());
  if (!o.out.empty()) {
    if (!ends_with(o.out, ".json")) KF_USAGE_ERROR("--out must name a .json file (got '%s')", o.out.c_str());
    check_output_file("--out", o.out);
  }
  // A missing candidate is a verdict (missing_file) and the batch goes on; a path that names
  // something other than a file is a mistake on the command line.
  for (const std::string& c : o.candidates) {
    std::error_code ec;
    if (std::filesystem::exists(c, ec)) check_input_file("candidate", c);
  }
  eo.reward = reward;
  eo.reward.mode = eo.modes.front();
  eo.samples = o.samples;
  eo.seed = o.seed;
  eo.run_timeout_s = o.run_timeout;
  eo.skip_timing = o.verify_only;
  eo.scan.allow_streams = o.allow_streams;
  eo.compile.timeout_s = o.compile_timeout;
  eo.compile.include_dirs.insert(eo.compile.include_dirs.end(), include_dirs.begin(), include_dirs.end());
  eo.compile.extra_flags.insert(eo.compile.extra_flags.end(), o.nvcc_flags.begin(), o.nvcc_flags.end());
  eo.devices = parse_devices(o.devices);
  // Judged through the one evaluation service (src/service), as kforge serve and optimize judge:
  // a slot per --devices GPU (else the default device), the candidates compiled on every core
  // first, then one batch per slot.
  ServiceOptions so;
  so.devices = eo.devices;
  so.max_batch = o.candidates.size();
  EvalService service(so);
  service.add_task(make_hgemm_task("eval", problem, eo));
  std::fprintf(stderr, "kforge eval: %zu candidate(s), HGEMM %s %s acc %s dtype %s, target %s\n", o.candidates.size(),
               problem.shape.str().c_str(), o.layout.c_str(), o.acc.c_str(), std::string(to_string(problem.dtype)).c_str(),
               eo.compile.arch.c_str());
  size_t done = 0;
  std::vector<Verdict> verdicts = service.judge_files("eval", o.candidates, [&](size_t, const Verdict& v) {
    if (!o.json) std::printf("%s\n", one_line(v).c_str());
    std::fprintf(stderr, "[%zu/%zu] %s\n", ++done, o.candidates.size(), v.correct ? "accepted" : "rejected");
    std::fflush(stdout);
  });
  // --profile: each correct candidate once more under Nsight Compute, after the whole batch is judged
  // (its shared object comes from the compile cache the evaluator filled).
  if (o.profile) {
    ProfileOptions po = profile_options_from_env();
    if (!eo.devices.empty()) po.device = eo.devices.front();
    std::unique_ptr<CompileService> compiler;
    for (size_t i = 0; i < verdicts.size(); ++i) {
      if (!verdicts[i].correct) continue;
      if (!compiler) compiler = std::make_unique<CompileService>(eo.compile);
      const CompileResult r = compiler->compile_file(o.candidates[i]);
      verdicts[i].details["profile"] =
          r.ok ? profile_hgemm_candidate(r.so_path, problem, po)
               : nlohmann::json{{"tool", "ncu"}, {"error", "the candidate does not compile: " + r.failure},
                                {"error_code", profile_error::kNcuFailed}, {"seconds", 0.0}};
      std::fprintf(stderr, "kforge eval: %s: %s\n", o.candidates[i].c_str(),
                   profile_summary(verdicts[i].details["profile"]).c_str());
      if (!o.json) {
        const std::string table = render_profile_table(verdicts[i].details["profile"]);
        if (!table.empty()) std::printf("%s\n", table.c_str());
      }
    }
  }
  nlohmann::json all = nlohmann::json::array();
  for (const Verdict& v : verdicts) all.push_back(to_json(v));
  const nlohmann::json doc = verdicts.size() == 1 ? all[0] : all;
  if (o.json) std::printf("%s\n", dump_json(doc, 2).c_str());
  if (!o.out.empty()) write_file_atomic(o.out, dump_json(doc, 2) + "\n");
  for (const Verdict& v : verdicts)
    if (!v.correct) throw ExitStatus{3};
}

}  // namespace

void register_eval(CLI::App& app) {
  CLI::App* eval = app.add_subcommand(
      "eval", "Judge candidates through the hardened evaluator: KernelBench-format PyTorch tasks (--task, --tasks) "
              "or HGEMM kernels (eval hgemm). Exit status 0 when every candidate is accepted, 3 when any is rejected");
  eval->require_subcommand(0, 1);
  register_eval_torch(*eval);
  auto o = std::make_shared<EvalCliOptions>();
  CLI::App* cmd = eval->add_subcommand(
      "hgemm", "Judge HGEMM candidates (.cu files defining kforge_hgemm, see include/kforge/abi/hgemm.h): static "
               "scan, compile, verify, time against cuBLASLt auto-tuned. Exit status 0 when every candidate is "
               "accepted, 3 when any is rejected");
  cmd->add_option("candidates", o->candidates, "candidate .cu files (several make a batch)")->required();
  cmd->add_option("--shape", o->shape, "problem shape MxNxK")->required();
  cmd->add_option("--layout", o->layout, "B layout: nn (row-major K x N) or tn (column-major)")->capture_default_str();
  cmd->add_option("--acc", o->acc, "declared accumulation: f32 or f16")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "element type of A, B and C: f16, or bf16 (fp32 accumulation; the candidate "
                                       "reads it from args->problem.dtype, the baseline is cuBLASLt auto-tuned bf16)")
      ->capture_default_str();
  cmd->add_option("--mode", o->modes, "timing modes: offline, graph, server (comma list); the first one sets the reward")
      ->capture_default_str();
  cmd->add_option("--samples", o->samples, "paired rounds of candidate and baseline per mode")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed for inputs and the random order of paired runs")->capture_default_str();
  cmd->add_flag("--json", o->json, "print the verdicts as JSON (one object, or an array for a batch)");
  cmd->add_option("--out", o->out, "also write the verdicts to FILE.json");
  cmd->add_option("--reward", o->reward, "reward of a correct candidate: log (ln speed-up), speedup, clipped:X")
      ->capture_default_str();
  cmd->add_option("--deviation-penalty", o->deviation_penalty, "shaped reward, off by default: take W x (the worst error over the tolerance's bound, 0 to 1) off a correct candidate's reward (never down to a rejection's; docs/training.md)")->type_name("W");
  cmd->add_option("--length-penalty", o->length_penalty, "shaped reward, off by default: take W x (tokens beyond TOKENS) / TOKENS off a correct candidate's reward (a token: a word, a number or one punctuation mark; never down to a rejection's; docs/training.md)")->type_name("W:TOKENS");
  cmd->add_option("--compile-timeout", o->compile_timeout, "seconds one nvcc compile may take")->capture_default_str();
  cmd->add_option("--run-timeout", o->run_timeout, "seconds any one batch of a candidate's calls may take before its executor is killed (timeout)")
      ->capture_default_str();
  cmd->add_option("--arch", o->arch, "nvcc target, e.g. sm_90a or sm_80 (default: the device's; sm_90a without one)");
  cmd->add_flag("--allow-streams", o->allow_streams, "let candidates create streams (the static scan forbids it by default)");
  cmd->add_flag("--verify-only", o->verify_only, "check correctness and hardening, skip timing");
  cmd->add_flag("--profile", o->profile,
                "then run each correct candidate once more under Nsight Compute (ncu, a process of its own) and add "
                "its metrics per kernel to the verdict's details.profile (or why not: profile.error)");
  cmd->add_option("--include-dir", o->include_dirs,
                  "folder added to the candidates' include path (repeatable; after kforge's ABI headers, before "
                  "the CUTLASS/CuTe headers, which are found by themselves: $KFORGE_CUTLASS_DIR, else the "
                  "nvidia-cutlass wheel); part of the compile cache key")
      ->allow_extra_args(false);
  cmd->add_option("--nvcc-flag", o->nvcc_flags,
                  "one extra nvcc argument for the candidates, e.g. --nvcc-flag=-DTILE=64 (repeatable; write it "
                  "with '=' when it starts with '-'); part of the compile cache key")
      ->allow_extra_args(false);
  cmd->add_option("--devices", o->devices,
                  "GPUs to judge a batch on in parallel, one worker each: 0,1,... or all (default: the first device); "
                  "every candidate is timed against the baseline on its own device");
  cmd->callback([o] { run_eval(*o); });

  // The isolated worker the evaluator starts; not for people.
  CLI::App* worker = app.add_subcommand("eval-worker", "");
  worker->group("");
  worker->callback([] {
    const int rc = run_eval_worker();
    if (rc != 0) throw ExitStatus{rc};
  });
  // The candidate-free process the judge times the baseline in; not for people.
  CLI::App* baseline = app.add_subcommand("eval-baseline", "");
  baseline->group("");
  baseline->callback([] {
    const int rc = run_baseline_executor();
    if (rc != 0) throw ExitStatus{rc};
  });
}

}  // namespace kforge
