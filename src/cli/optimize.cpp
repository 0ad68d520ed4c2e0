// kforge optimize: the contrastive search loop from the command line.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <memory>
#include <regex>
#include <unistd.h>
#include <cstring>
#include <cmath>
#include <signal.h>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "eval/devices.hpp"
#include "measure/timer.hpp"
#include "search/loop.hpp"

namespace kforge {
namespace {

// Ctrl-C: the first asks the loop to stop after the step in progress (the LLM calls in flight and
// the judging of their answers); a second ends the process at once. Every answer and verdict is
// stored by its own transaction, so the run folder is consistent whenever the process ends, and
// --resume goes on from there.
std::atomic<bool> g_stop{false};
std::atomic<int> g_interrupts{0};
constexpr char kStopLine[] =
    "\nkforge optimize: stopping after this step (the LLM calls in flight and the judging of their answers); "
    "press Ctrl-C again to abort at once\n";
char g_abort_line[1024];
size_t g_abort_len = 0;

extern "C" void on_stop_signal(int) {
  if (g_interrupts.fetch_add(1) == 0) {
    g_stop = true;
    (void)!::write(2, kStopLine, sizeof kStopLine - 1);
    return;
  }
  (void)!::write(2, g_abort_line, g_abort_len);
  ::_exit(130);
}

struct OptimizeCli {
  OptimizeOptions o;
  std::vector<std::string> urls, models;
  std::string api_key_env = "OPENAI_API_KEY";
  double price_prompt = 0, price_completion = 0;
  double budget = -1;
  CLI::Option* budget_opt = nullptr;
  std::string resume_dir;
  std::string cassette;
  bool record = false, replay = false;
  std::string arch, modes = "offline", reward = "log";
  std::string deviation_penalty, length_penalty;  // shaped rewards (empty: off)
  double run_timeout = 60, compile_timeout = 180;
  int samples = 7;
  // PyTorch tasks
  std::string device = "cuda", baseline = "eager", python;
  int trials = 5;
  double import_timeout = 60;
  double atol = -1, rtol = -1;
  bool allow_streams = false, require_cuda_kernel = false;
  std::string devices;
  std::vector<std::string> include_dirs, nvcc_flags;
};

void run(OptimizeCli& c) {
  OptimizeOptions& o = c.o;
  // Every option is checked here and by check_optimize_options() before anything is created.
  o.include_dirs = checked_include_dirs(c.include_dirs);
  check_nvcc_flags(c.nvcc_flags);
  o.nvcc_flags = c.nvcc_flags;
  o.profile = profile_options_from_env(o.profile);
  if (!c.resume_dir.empty() && (!o.include_dirs.empty() || !o.nvcc_flags.empty()))
    KF_USAGE_ERROR("--include-dir and --nvcc-flag are stored with the run; --resume compiles with the stored ones");
  if (!c.resume_dir.empty() && (!c.deviation_penalty.empty() || !c.length_penalty.empty()))
    KF_USAGE_ERROR("--deviation-penalty and --length-penalty are stored with the run; leave them out with --resume "
                   "(it rewards with the stored ones)");
  if (!c.resume_dir.empty()) {
    if (!o.task.empty())
      KF_USAGE_ERROR("--resume continues the stored task; leave --task out (or start a new run with --run-dir)");
    o.resume = true;
    o.run_dir = c.resume_dir;
  } else if (o.task.empty()) {
    KF_USAGE_ERROR("--task is required (e.g. --task hgemm:4096x4096x64:tn), or --resume DIR");
  } else if (o.task.rfind("hgemm:", 0) == 0 || !ends_with(o.task, ".py")) {
    std::error_code ec;
    if (std::filesystem::exists(o.task, ec) && !ends_with(o.task, ".py"))
      KF_USAGE_ERROR("task '%s' is a file but not a .py task file (PyTorch tasks are KernelBench-format .py files)",
                     o.task.c_str());
    parse_hgemm_task(o.task);  // fail early on a bad task
  } else if (!o.include_dirs.empty() || !o.nvcc_flags.empty()) {
    KF_USAGE_ERROR("--include-dir and --nvcc-flag apply to HGEMM tasks (a PyTorch candidate passes its own "
                   "flags to load_inline)");
  }
  if (c.models.size() > 1 && c.models.size() != c.urls.size())
    KF_USAGE_ERROR("give one --model for all endpoints or one per --llm-url (%zu models for %zu URLs)", c.models.size(),
                   c.urls.size());
  if (!c.urls.empty() && c.models.empty()) KF_USAGE_ERROR("--model is required with --llm-url");
  if (c.urls.empty() && !c.models.empty()) KF_USAGE_ERROR("--model needs --llm-url (the endpoint that serves it)");
  for (size_t i = 0; i < c.urls.size(); ++i) {
    Endpoint e;
    e.url = c.urls[i];
    e.model = c.models.size() == 1 ? c.models[0] : c.models[i];
    e.api_key_env = c.api_key_env;
    e.usd_per_1k_prompt = c.price_prompt;
    e.usd_per_1k_completion = c.price_completion;
    o.llm.endpoints.push_back(e);
  }
  if (c.budget_opt && c.budget_opt->count() > 0) o.llm.budget_usd = c.budget;  // checked with the rest
  if (c.record && c.replay) KF_USAGE_ERROR("--record and --replay exclude each other");
  if ((c.record || c.replay) && c.cassette.empty()) KF_USAGE_ERROR("--record and --replay need --cassette FILE");
  if (!c.cassette.empty() && !c.record && !c.replay)
    KF_USAGE_ERROR("--cassette needs --record (write the LLM exchanges) or --replay (answer from them)");
  o.llm.cassette_path = c.cassette;
  o.llm.cassette_mode = c.record ? CassetteMode::kRecord : c.replay ? CassetteMode::kReplay : CassetteMode::kOff;
  o.llm.replay_in_order = true;  // prompts quote measured speed-ups: replay by order, not by content
  if (o.iterations == 0 || o.iterations < -1) KF_USAGE_ERROR("--iterations must be at least 1 (got %d)", o.iterations);
  if (o.iterations == -1 && !o.resume) o.iterations = 10;

  const std::string arch = c.arch;
  if (!arch.empty() && !std::regex_match(arch, std::regex("sm_[0-9]{2,3}[a-z]?")))
    KF_USAGE_ERROR("--arch '%s': expected an nvcc target such as sm_90a or sm_80", arch.c_str());
  EvalOptions eval = hgemm_eval_options(arch);
  eval.modes.clear();  // checked here: an unknown mode must not reach the worker
  for (Mode m : parse_modes(c.modes)) eval.modes.emplace_back(to_string(m));
  eval.samples = c.samples;
  eval.run_timeout_s = c.run_timeout;
  eval.compile.timeout_s = c.compile_timeout;
  eval.reward = parse_reward(c.reward);
  set_reward_penalties(eval.reward, c.deviation_penalty, c.length_penalty);
  eval.reward.mode = eval.modes.front();
  eval.scan.allow_streams = c.allow_streams;
  eval.devices = parse_devices(c.devices);
  o.eval = eval;

  TorchEvalOptions& t = o.torch;  // used when the task (given or stored) is a PyTorch task
  t.python = c.python;
  t.device = c.device;
  if (c.baseline != "eager" && c.baseline != "compile" && c.baseline != "compile_ro" && c.baseline != "graph")
    KF_USAGE_ERROR("unknown baseline '%s' (expected eager, compile, compile_ro or graph)", c.baseline.c_str());
  if (c.device == "cpu" && c.baseline != "eager") KF_USAGE_ERROR("--device cpu times only the eager baseline");
  t.baselines = {"eager"};  // always timed: the timed outputs are checked against it
  if (c.baseline != "eager") t.baselines.push_back(c.baseline);
  if (c.samples < 1) KF_USAGE_ERROR("--samples must be at least 1 (got %d)", c.samples);
  t.samples = std::max(3, c.samples);
  t.trials = c.trials;
  t.run_timeout_s = c.run_timeout;
  t.compile_timeout_s = c.compile_timeout;
  t.import_timeout_s = c.import_timeout;
  t.seed = o.seed;
  t.reward = eval.reward;  // the kind and the penalties
  t.reward.mode = c.baseline;
  if (c.atol != -1 && !(c.atol >= 0 && std::isfinite(c.atol)))
    KF_USAGE_ERROR("--atol must be a non-negative number (got %g)", c.atol);
  if (c.rtol != -1 && !(c.rtol >= 0 && std::isfinite(c.rtol)))
    KF_USAGE_ERROR("--rtol must be a non-negative number (got %g)", c.rtol);
  if (c.atol >= 0) t.atol = c.atol;
  if (c.rtol >= 0) t.rtol = c.rtol;
  t.allow_streams = c.allow_streams;
  t.require_cuda_kernel = c.require_cuda_kernel;
  t.devices = eval.devices;
  if (!o.resume) {
    check_optimize_options(o);  // all of it, before the (slower) import check and before anything is created
    if (is_torch_task(o.task)) check_torch_task_file(o.task, c.python);  // raising on import: fail early
  }
  require_default_device(t.devices, c.device);

  g_stop = false;
  g_interrupts = 0;
  const std::string abort_line = "\nkforge optimize: aborted; every answer and verdict stored so far is kept: continue "
                                 "with --resume " + o.run_dir + "\n";
  g_abort_len = std::min(abort_line.size(), sizeof g_abort_line);
  std::memcpy(g_abort_line, abort_line.data(), g_abort_len);
  struct sigaction sa {}, previous {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &previous);
  OptimizeSummary s;
  try {
    s = run_optimize(o, g_stop);
  } catch (...) {
    ::sigaction(SIGINT, &previous, nullptr);
    throw;
  }
  ::sigaction(SIGINT, &previous, nullptr);
  std::printf("run %lld in %s: %d iterations, %d candidates (%d correct), best %.3fx%s, spent $%.4f%s\n",
              (long long)s.run_id, o.run_dir.c_str(), s.iterations_done, s.candidates, s.correct, s.best_speedup,
              s.best_id ? strf(" (candidate %lld: %s/candidates/%lld.%s)", (long long)s.best_id, o.run_dir.c_str(),
                               (long long)s.best_id, s.python ? "py" : "cu").c_str()
                        : "",
              s.spent_usd,
              s.interrupted     ? ("; stopped: continue with --resume " + o.run_dir).c_str()
              : s.budget_spent  ? ("; stopped at the spending cap: raise --budget-usd and --resume " + o.run_dir).c_str()
                                : "");
  std::fflush(stdout);
  if (s.interrupted) throw ExitStatus{130};
  if (!s.failure.empty()) {
    std::fprintf(stderr, "kforge optimize: error: %s\n", s.failure.c_str());
    throw ExitStatus{1};
  }
}

}  // namespace

void register_optimize(CLI::App& app) {
  auto c = std::make_shared<OptimizeCli>();
  CLI::App* cmd = app.add_subcommand("optimize", "The contrastive search loop: an LLM (or the built-in policy) "
                                                 "proposes kernels, the hardened evaluator judges them");
  cmd->add_option("--task", c->o.task,
                  "what to optimise: hgemm:MxNxK[:nn|tn][:f32|f16], or a KernelBench-format PyTorch task file "
                  "(FILE.py defining Model, get_inputs, get_init_inputs; candidates are ModelNew files)");
  cmd->add_option("--policy", c->o.policy, "llm (an OpenAI-compatible endpoint) or builtin (no LLM)")->capture_default_str();
  cmd->add_option("--llm-url", c->urls, "endpoint base URL, with or without /v1: http://127.0.0.1:8000/v1 and http://127.0.0.1:8000 both call "
                  ".../v1/chat/completions (repeatable: several endpoints); http:// or https:// only");
  cmd->add_option("--model", c->models, "model name (one for all endpoints, or one per --llm-url)");
  cmd->add_option("--api-key-env", c->api_key_env, "environment variable holding the API key (never logged)")
      ->capture_default_str();
  cmd->add_option("--price-prompt", c->price_prompt, "USD per 1,000 prompt tokens (for the spending cap)");
  cmd->add_option("--price-completion", c->price_completion, "USD per 1,000 completion tokens");
  c->budget_opt = cmd->add_option("--budget-usd", c->budget,
                                  "the run's cap on LLM spending in USD, across --resume (the total spent is stored "
                                  "with the run; calls in flight when it is reached still finish)");
  cmd->add_option("--iterations", c->o.iterations,
                  "iterations, one prompt and one group each (default 10; with --resume, as stored unless given)");
  cmd->add_option("--llm-retries", c->o.llm.max_retries, "retries of one LLM call on 429, 5xx and transport errors (0 to 100): each waits the server's Retry-After "
                  "when given (at most 60 s), else a random 0.5-1 x 1 s x 2^retry (exponential backoff with jitter)")
      ->capture_default_str();
  cmd->add_option("--llm-timeout", c->o.llm.timeout_s, "seconds one LLM request may take (above 0, at most 604800)")->capture_default_str();
  cmd->add_option("--group-size", c->o.group_size, "candidates per prompt (a GRPO group)")->capture_default_str();
  cmd->add_option("--exemplars", c->o.exemplars, "earlier candidates shown in each prompt")->capture_default_str();
  cmd->add_option("--concurrency", c->o.llm.concurrency, "LLM requests in flight at once. A group is asked for in one request (n = group size, so the prompt is paid "
                  "once); when the endpoint answers fewer choices than asked (it ignores n), the rest are asked for by up "
                  "to this many requests at once (1 to 256; one at a time with --replay)")->capture_default_str();
  cmd->add_option("--sampler", c->o.sampler, "contrastive[:BUCKETS:TEMPERATURE], topk or islands:N")->capture_default_str();
  cmd->add_option("--prompts", c->o.prompts_dir, "folder of prompt templates overriding the built-in ones (see prompts/)");
  cmd->add_option("--run-dir", c->o.run_dir, "folder of this run (database and candidate files)")->capture_default_str();
  cmd->add_option("--resume", c->resume_dir, "continue the run in this folder where it stopped: answers and verdicts already stored are kept, an "
                  "iteration cut short asks only for its missing candidates with its own prompt; refused while another "
                  "kforge runs in the folder");
  cmd->add_option("--cassette", c->cassette, "JSONL file of recorded LLM exchanges (with --record or --replay; replay needs a file that holds at least "
                  "one exchange)");
  cmd->add_flag("--record", c->record, "record every LLM exchange into --cassette");
  cmd->add_flag("--replay", c->replay, "answer LLM calls from --cassette only, in the recorded order (deterministic, no network; needs no "
                "--llm-url or --model)");
  cmd->add_option("--seed", c->o.seed, "seed of the sampler and the built-in policy")->capture_default_str();
  cmd->add_option("--mode", c->modes, "timing modes of the evaluator; the first sets the reward")->capture_default_str();
  cmd->add_option("--samples", c->samples, "paired timing rounds per candidate")->capture_default_str();
  cmd->add_option("--reward", c->reward, "reward of a correct candidate: log (ln of the speed-up, at least ln 0.001), speedup, clipped:X; a rejected "
                  "candidate gets a floor below every correct reward (-8 for log, -1 otherwise)")->capture_default_str();
  cmd->add_option("--deviation-penalty", c->deviation_penalty, "shaped reward, off by default: take W x (the worst error over the tolerance's bound, 0 to 1) off a correct candidate's reward, before group normalisation (never down to a rejection's; stored with the run; docs/training.md)")->type_name("W");
  cmd->add_option("--length-penalty", c->length_penalty, "shaped reward, off by default: take W x (tokens beyond TOKENS) / TOKENS off a correct candidate's reward, before group normalisation (a token: a word, a number or one punctuation mark; never down to a rejection's; stored with the run; docs/training.md)")->type_name("W:TOKENS");
  cmd->add_option("--reviewer-model", c->o.reviewer_model,
                  "when a best speed-up jumps, this model (same endpoints) compares the winner with known hacks; "
                  "a HACK verdict rejects it");
  cmd->add_option("--reward-clip", c->o.reward_clip, "clip correct candidates' rewards to +-X (X > 0) before group normalisation; a rejected candidate enters "
                  "with the reward floor (below every correct one), never clipped")->capture_default_str();
  cmd->add_option("--arch", c->arch, "nvcc target (default: the device's)");
  cmd->add_option("--include-dir", c->include_dirs,
                  "HGEMM tasks: folder added to the candidates' include path (repeatable; CUTLASS/CuTe headers "
                  "are found by themselves: $KFORGE_CUTLASS_DIR, else the nvidia-cutlass wheel); stored with the "
                  "run, in the compile cache key")
      ->allow_extra_args(false);
  cmd->add_option("--nvcc-flag", c->nvcc_flags,
                  "HGEMM tasks: one extra nvcc argument, e.g. --nvcc-flag=-DTILE=64 (repeatable; write it with '=' "
                  "when it starts with '-'); stored with the run, in the compile cache key")
      ->allow_extra_args(false);
  cmd->add_option("--run-timeout", c->run_timeout, "seconds to judge one candidate")->capture_default_str();
  cmd->add_option("--compile-timeout", c->compile_timeout,
                  "seconds for one nvcc compile (PyTorch tasks: one load_inline build)")
      ->capture_default_str();
  cmd->add_option("--baseline", c->baseline,
                  "PyTorch tasks: the baseline the reward's speed-up is against: eager, compile, compile_ro, graph")
      ->capture_default_str();
  cmd->add_option("--device", c->device, "PyTorch tasks: cuda, cuda:N, or cpu (eager only; tests, no GPU)")
      ->capture_default_str();
  cmd->add_option("--trials", c->trials, "PyTorch tasks: verification trials with fresh inputs")->capture_default_str();
  cmd->add_option("--import-timeout", c->import_timeout,
                  "PyTorch tasks: seconds to import a candidate whose extension is already built")
      ->capture_default_str();
  cmd->add_option("--seed-file", c->o.seed_file,
                  "PyTorch tasks: the first candidate (default: the task's code with Model renamed ModelNew)");
  cmd->add_option("--atol", c->atol,
                  "PyTorch tasks: absolute tolerance (default: the task's KFORGE['atol'], else 1e-4 for fp32, 1e-2 "
                  "for fp16/bf16); stored with the run");
  cmd->add_option("--rtol", c->rtol, "PyTorch tasks: relative tolerance (default as for --atol); stored with the run");
  cmd->add_flag("--allow-streams", c->allow_streams,
                "let candidates create CUDA streams (the static scan forbids it by default); stored with the run");
  cmd->add_flag("--require-cuda-kernel", c->require_cuda_kernel,
                "PyTorch tasks, policy: a candidate must build a __global__ kernel and may not call ATen compute ops "
                "from C++; stored with the run");
  cmd->add_option("--devices", c->devices,
                  "GPUs to judge each group on in parallel, one worker each: 0,1,... or all (default: the first "
                  "device); not stored with the run (give it again with --resume)");
  cmd->add_option("--python", c->python, "PyTorch tasks: the worker's Python (default $KFORGE_PYTHON, else python3)");
  cmd->add_option("--profile-top", c->o.profile_top,
                  "after each iteration, profile its N fastest correct candidates once more under Nsight Compute "
                  "(ncu, a process of its own; seconds of GPU time each) and store the metrics with their verdicts; "
                  "exemplars with a profile show it as a table in the prompt (0: profile none; 0 to 100)")
      ->capture_default_str();
  cmd->add_flag("--no-profile", c->o.no_profile,
                "no profiles: none taken and none shown in prompts (the profile section of prompts/README.md)");
  cmd->footer(
      "Bad input: every option is checked before anything is created (no run folder, database, cassette or LLM "
      "call); a bad one exits 2 with one line naming the problem and the fix.\n"
      "Exit status: 0 the run did its work; 1 it did nothing useful (every LLM call failed, the budget was spent, or "
      "no candidate could be judged), with one line saying why; 2 a usage error (also: the run folder is in use by "
      "another kforge); 130 stopped by Ctrl-C (a second Ctrl-C aborts at once; --resume continues).\n"
      "See docs/optimize.md.");
  c->o.run_dir = "kforge-run";
  c->o.iterations = -1;
  cmd->callback([c] { run(*c); });
}

}  // namespace kforge
