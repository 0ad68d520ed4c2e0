// What the evaluator says about one candidate, and the reward made of it.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "measure/stats.hpp"

namespace kforge {

// Reason codes, each a stable string in verdicts (tests and users match on them).
namespace reason {
inline constexpr const char* kMissingFile = "missing_file";
inline constexpr const char* kNotText = "not_text";
inline constexpr const char* kSourceTooLarge = "source_too_large";
inline constexpr const char* kCompileError = "compile_error";
inline constexpr const char* kCompileTimeout = "compile_timeout";
inline constexpr const char* kForbiddenCall = "forbidden_call";
inline constexpr const char* kLoadError = "load_error";
inline constexpr const char* kMissingEntryPoint = "missing_entry_point";
inline constexpr const char* kCandidateError = "candidate_error";    // returned non-zero
inline constexpr const char* kCrashed = "crashed";                   // the worker died (signal, exit, abort)
inline constexpr const char* kTimeout = "timeout";                   // a run outlasted its time-out
inline constexpr const char* kCudaError = "cuda_error";              // a CUDA error (sticky or not)
inline constexpr const char* kOutOfMemory = "out_of_memory";
inline constexpr const char* kWrongResult = "wrong_result";          // outside the tolerance model
inline constexpr const char* kUnwrittenOutput = "unwritten_output";  // poisoned elements left
inline constexpr const char* kOutOfBounds = "out_of_bounds";         // a guard band changed
inline constexpr const char* kInputMutated = "input_mutated";
inline constexpr const char* kNondeterministic = "nondeterministic";
inline constexpr const char* kTimedOutputWrong = "timed_output_wrong";  // right when checked, wrong when timed
inline constexpr const char* kSideStream = "side_stream";            // work escaped the given stream
inline constexpr const char* kBackgroundThread = "background_thread";
inline constexpr const char* kImpossibleSpeed = "impossible_speed";  // faster than the counted floor
inline constexpr const char* kUnstableTiming = "unstable_timing";
inline constexpr const char* kInternalError = "internal_error";      // kforge's own fault
inline constexpr const char* kReviewerFlagged = "reviewer_flagged";  // the search loop's LLM reviewer saw a hack
// The executor/judge split (docs/threat-model.md):
inline constexpr const char* kForgedReply = "forged_reply";          // a reply that does not answer the request asked
inline constexpr const char* kGpuNotIdle = "gpu_not_idle";           // work still ran after the candidate said done
inline constexpr const char* kChildProcess = "child_process";        // the candidate left a process behind
inline constexpr const char* kTampered = "tampered";                 // changed kforge's own files (caches) while it ran
// PyTorch (KernelBench-format) tasks, judged by python/kforge_worker:
inline constexpr const char* kTaskError = "task_error";              // the task itself is broken (raises, lacks Model)
inline constexpr const char* kNoTorch = "no_torch";                  // the worker's Python cannot import torch
inline constexpr const char* kNoGpu = "no_gpu";                      // torch sees no CUDA device
inline constexpr const char* kWrongShape = "wrong_shape";            // output structure, shape or dtype differs
inline constexpr const char* kLazyOutput = "lazy_output";            // not a plain dense tensor with its own storage
inline constexpr const char* kAliasedOutput = "aliased_output";      // an output shares memory with an input
inline constexpr const char* kMonkeyPatch = "monkey_patch";          // torch/timer/builtin functions or global switches replaced
inline constexpr const char* kNoKernelLaunched = "no_kernel_launched";  // --require-cuda-kernel: none of its kernels ran
inline constexpr const char* kPrecisionDowngrade = "precision_downgrade";  // TF32, autocast, default dtype switched
}  // namespace reason

struct Verdict {
  std::string candidate;              // the file (or name) judged
  bool correct = false;
  std::vector<std::string> reasons;   // why it is rejected (empty when accepted)
  std::vector<std::string> flags;     // suspicious but not proven (e.g. "near_floor", "noisy_output")
  std::string message;                // one human-readable line
  std::map<std::string, Summary> speedup;  // per mode ("offline", "graph"): baseline time / candidate time, per round
  std::map<std::string, Summary> candidate_us, baseline_us;
  double reward = 0;
  nlohmann::json details = nlohmann::json::object();  // compile info, checks, findings, output excerpt

  void reject(const std::string& code, const std::string& why);  // adds a reason; the first sets message
  bool has_reason(const std::string& code) const;
};

nlohmann::json to_json(const Verdict& v);
Verdict verdict_from_json(const nlohmann::json& j);

// The reward of a verdict. A correct candidate with speed-up s (the median of `mode`) gets
//   "speedup"  s                           (> 0)
//   "log"      ln(max(s, 0.001))           (0 at parity, negative when slower, at least ln 0.001 = -6.91)
//   "clipped"  min(s, clip)                (> 0; guards an RL trainer against one outlier)
//   "correctness" 1, whatever the speed-up, timed or not (CUDA-L1's stage 2); a rejection 0.
//              The shaped penalties below have no effect on it (the total is clamped at 1).
// A rejected candidate (and a "correct" verdict without a finite positive speed-up in `mode`)
// gets rejected_reward(): -1 for "speedup" and "clipped" (correct rewards are > 0), -8 for "log"
// (correct rewards are >= -6.91). Each floor lies at least 1 below every reward a correct
// candidate can get, so a rejection never ranks above (or ties with) a correct answer, however
// slow, in a group (GRPO advantages) or in exported training data.
//
// Shaped rewards (CUDA-L2's), both off by default, are taken off the speed-up term of a correct
// candidate (after it, before any group normalisation):
//   deviation penalty  W * d, where d is the candidate's worst error against the fp64 reference
//                      divided by the tolerance's bound at that element (the verdict's
//                      details.checks.worst_error_over_bound; 0 = exact, 1 = at the bound, which
//                      is the most a correct candidate can have). At most W.
//   length penalty     W * max(0, T - TOKENS) / TOKENS, where T is the number of tokens of the
//                      candidate's code (count_code_tokens): W for every budget's worth of tokens
//                      beyond the budget.
// total = speed-up term - deviation penalty - length penalty, clamped from below to
// correct_reward_floor(cfg) = rejected_reward(cfg) + 1 (-7 for "log", 0 otherwise), so a
// penalised correct candidate still ranks at least 1 above every rejection. A rejected candidate
// gets rejected_reward() whatever the penalties. reward_parts() returns every part (stored in a
// verdict's details.reward by the evaluators), compute_reward() the total.
struct RewardConfig {
  std::string kind = "log";
  std::string mode = "offline";
  double clip = 10.0;
  double deviation_weight = 0;  // --deviation-penalty W (0: off)
  double length_weight = 0;     // --length-penalty W:TOKENS (0: off)
  long long length_budget = 0;  // its TOKENS (> 0 when length_weight > 0)
};
inline constexpr double kLogRewardMinSpeedup = 0.001;  // a correct candidate slower than 1000x counts as 1000x slower
inline constexpr double kRejectedLogReward = -8.0;     // below ln(0.001) = -6.908
inline constexpr double kRejectedSpeedupReward = -1.0; // "speedup" and "clipped": below every s > 0
RewardConfig parse_reward(const std::string& spec);  // "log", "speedup", "clipped:5"
// The reward of a rejected candidate under `cfg` (see above); a usage error for an unknown kind.
double rejected_reward(const RewardConfig& cfg);
// The lowest reward a correct candidate can get once penalties are taken off: rejected_reward + 1.
double correct_reward_floor(const RewardConfig& cfg);

// "--deviation-penalty W": W a finite number >= 0 (0 is off). Usage error (naming `flag`) otherwise.
double parse_deviation_penalty(const std::string& spec, const char* flag = "--deviation-penalty");
// "--length-penalty W:TOKENS": W a finite number >= 0, TOKENS a whole number >= 1. Usage error otherwise.
std::pair<double, long long> parse_length_penalty(const std::string& spec, const char* flag = "--length-penalty");
// Sets cfg's penalties from the two flags' texts; an empty text leaves that penalty off. This is
// all a front door (eval, optimize, serve) needs: the evaluators apply them.
void set_reward_penalties(RewardConfig& cfg, const std::string& deviation_spec, const std::string& length_spec);
// The penalties as stored with a run or a server ({"deviation_weight", "length_weight",
// "length_budget"}) and read back; a missing key is off.
nlohmann::json penalties_to_json(const RewardConfig& cfg);
void penalties_from_json(const nlohmann::json& j, RewardConfig& cfg);

// The tokens of a candidate's code, as the length penalty counts them: a maximal run of
// identifier characters (ASCII letters, digits, '_', and every byte >= 0x80, so a UTF-8 word is
// one token) is one token; every other character that is not white space (an operator, a bracket,
// a quote, '#') is one token of its own; white space only separates. Comments and string contents
// count like code (the model wrote them). "a->b += 0x1f;" is a - > b + = 0x1f ; = 8 tokens, and
// "0.5f" is 0 . 5f = 3.
long long count_code_tokens(std::string_view code);

struct RewardParts {
  bool correct = false;            // false: total is rejected_reward() and nothing else applies
  double speedup_term = 0;         // the kind's reward of the speed-up alone (rejected_reward() when rejected)
  double deviation = -1;           // worst error over bound; -1 when the verdict lacks it (no penalty)
  double deviation_penalty = 0;
  long long tokens = -1;           // count_code_tokens of the source; -1 when not counted
  double length_penalty = 0;
  bool clamped = false;            // the penalties would have gone below correct_reward_floor()
  double total = 0;
};
nlohmann::json to_json(const RewardParts& p);

// The reward of `v` under `cfg`, part by part; `source` is the candidate's code (only read when
// the length penalty is on; for a correct verdict with a length penalty and no source it is an
// internal error, never a silently unpenalised reward).
RewardParts reward_parts(const Verdict& v, const RewardConfig& cfg, const std::string* source);
double compute_reward(const Verdict& v, const RewardConfig& cfg, const std::string& source);
// Without the source: for a rejection, or a config without a length penalty.
double compute_reward(const Verdict& v, const RewardConfig& cfg);
// Sets v.reward and v.details["reward"] (the parts) at once: what the evaluators call.
void apply_reward(Verdict& v, const RewardConfig& cfg, const std::string* source);

}  // namespace kforge
