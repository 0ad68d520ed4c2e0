// The contrastive search loop (CUDA-L1's core): each iteration draws exemplars from the program
// database (contrastive buckets), builds a prompt with their measured speed-ups, asks the policy
// for a group of G candidates, judges every candidate through the hardened evaluator, and stores
// group-normalised (GRPO) advantages. Every step is a transaction in the run's database, so a run
// killed at any moment resumes where it stopped, with no candidate lost or judged twice.
#pragma once
#include <atomic>
#include <string>

#include "eval/evaluator.hpp"
#include "eval/profile.hpp"
#include "llm/client.hpp"
#include "ops/hgemm.hpp"
#include "torch/torch_eval.hpp"

namespace kforge {

struct OptimizeOptions {
  std::string task;                 // "hgemm:MxNxK[:tn|nn][:f32|f16]", or a KernelBench-format task file (.py)
  std::string run_dir;              // holds kforge-search.db and candidates/<id>.cu
  bool resume = false;              // continue the latest run in run_dir with its stored options
  std::string policy = "llm";       // "llm" or "builtin"
  LlmOptions llm;
  int iterations = 10;              // on --resume, < 1 means "as stored"
  int group_size = 4;
  int exemplars = 2;
  std::string sampler = "contrastive";
  std::string prompts_dir;          // empty: the built-in templates
  double reward_clip = 10;
  double jump_factor = 1.5;         // a best speed-up this many times the previous best is re-measured
  std::string reviewer_model;       // non-empty: that model (on the same endpoints) reviews such jumps
  uint64_t seed = 1;
  EvalOptions eval;                 // HGEMM tasks
  // HGEMM tasks: include folders (absolute) and nvcc arguments of the person's, added to
  // eval.compile's when the evaluator starts; stored with the run, so --resume compiles alike.
  std::vector<std::string> include_dirs;
  std::vector<std::string> nvcc_flags;
  TorchEvalOptions torch;           // PyTorch tasks (its reward.mode is the baseline the reward uses)
  std::string seed_file;            // PyTorch tasks: the seed candidate (empty: the reference renamed ModelNew)
  // Profiles (eval/profile.hpp): after each iteration is judged, its `profile_top` fastest correct
  // candidates are run once more under Nsight Compute and the profile is stored with their verdicts;
  // exemplars that have one show it as a table in the prompt. 0: none are profiled (stored
  // profiles are still shown). no_profile: none profiled and none shown. Not stored with the run.
  int profile_top = 1;
  bool no_profile = false;
  ProfileOptions profile;
};

// Whether `task` names a PyTorch task file (anything that is not "hgemm:...").
bool is_torch_task(const std::string& task);

// The seed of a PyTorch task's search: the task's own code with its Model renamed ModelNew (an
// honest, pure-PyTorch candidate that the evaluator accepts at about 1x eager), under a comment.
std::string torch_seed_from_task(const std::string& task_source);

// Fails with a usage error, before any run is created, when `path` is not a readable .py task
// file or (where the worker's Python has torch) the task raises on import or lacks Model,
// get_inputs or get_init_inputs.
void check_torch_task_file(const std::string& path, const std::string& python = "");

// "hgemm:4096x4096x64:tn" -> problem. Usage error on anything else.
HgemmProblem parse_hgemm_task(const std::string& task);

// The prompt of a search on `task` ("hgemm:..." or a PyTorch task file) before anything is
// measured: the task, its reference (an HGEMM task's naive seed, a PyTorch task's own code) and no
// exemplars ("None yet: this is the first attempt"), with optimize's templates (the built-in ones,
// or prompts_dir's). `torch`: the device and baseline (reward.mode) a PyTorch task's text names.
// kforge data export --kind prompts --tasks uses it for tasks without a run.
std::vector<ChatMessage> first_prompt(const std::string& task, const TorchEvalOptions& torch,
                                      const std::string& prompts_dir = "");

struct OptimizeSummary {
  int64_t run_id = 0;
  int iterations_done = 0;
  int candidates = 0, correct = 0;
  double best_speedup = 0;
  int64_t best_id = 0;
  double spent_usd = 0;
  bool interrupted = false;
  bool python = false;  // a PyTorch task: candidates are candidates/<id>.py
  bool budget_spent = false;  // the spending cap stopped the run (an iteration may be left to --resume)
  // Non-empty when this invocation did nothing useful: every LLM call failed (or the budget was
  // already spent), or no candidate could be judged (every verdict is the judge's failure:
  // internal_error, no_torch, no_gpu, task_error). One line; the command exits non-zero with it.
  std::string failure;
};

// The one validation step of optimize's options: a usage error naming the problem and its fix for
// anything run_optimize could not use (task, policy, sampler, prompts folder, endpoint URLs and
// prices, client time-outs and retries, budget, cassette, evaluator and PyTorch options, Python).
// run_optimize calls it before it creates or writes anything (with --resume: on the stored options
// merged with those given anew); the command line calls it first too.
void check_optimize_options(const OptimizeOptions& o);

// Runs the loop; `stop` is polled between steps (a Ctrl-C handler sets it): the LLM calls in
// flight and the judging of their answers finish, then the run stops ("stopped", resumable).
// The run folder is locked (flock on kforge-search.lock) while it runs: a second run_optimize on
// the same folder is refused with a usage error.
OptimizeSummary run_optimize(const OptimizeOptions& opts, const std::atomic<bool>& stop);

// The options as stored with a run (for --resume), and back.
nlohmann::json to_json(const OptimizeOptions& o);
void apply_stored_options(const nlohmann::json& j, OptimizeOptions& o);

}  // namespace kforge
