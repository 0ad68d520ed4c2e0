// Profiles: a correct candidate run once more under Nsight Compute (ncu), in a process of its own,
// never inside the judge. The profile is advisory: it goes into the verdict's details.profile and
// into the contrastive prompt (a table under each exemplar), never into a reward or a verdict.
//
//   HGEMM    ncu ... kforge-executor profile --so SO --m M --n N --k K ...: the executor program,
//            in a one-shot mode (src/eval/profile_target.cpp) that allocates its own buffers, fills
//            the inputs, installs the candidate sandbox, loads the candidate, runs it `warmup`
//            times, then once between cudaProfilerStart/Stop.
//   PyTorch  ncu ... python3 kforge_worker profile --task T --candidate C --build-dir D: the
//            candidate's ModelNew on the task's inputs, warmed up, then one forward between
//            cudaProfilerStart/Stop (python/kforge_worker/ncu_target.py).
//
// ncu runs with --clock-control none (the GPU's own clocks, as the judge times it),
// --profile-from-start off (only the call between start and stop), at most max_kernels launches,
// and prints `--csv --page raw` into a log file of its own, parsed by parse_ncu_csv. The metrics
// kept per kernel (profile_metric_names) are few and fixed; a metric the installed ncu does not
// know is dropped (one retry without it, named in "unavailable") and is absent, never a crash.
//
// A profile is {"tool": "ncu", "kernels": [...], "kernels_profiled", "total_duration_us",
// "seconds" (the wall time of the profile, ncu included), "unavailable"?} or, when ncu is missing,
// refused (ERR_NVGPUCTRPERM), times out or the run fails, {"error": one line, "error_code":
// ncu_missing|ncu_permission|ncu_timeout|ncu_failed|no_kernels, "seconds"}: nothing else of the
// verdict changes. Each kernel: "name", "launch" (its index), "grid", "block", and the metrics it
// had: "duration_us", "sm_throughput_pct", "dram_throughput_pct", "tensor_pipe_pct",
// "achieved_occupancy_pct", "registers_per_thread", "shared_mem_per_block_bytes",
// "l1_hit_rate_pct", "l2_hit_rate_pct", "stalls" (the top three warp-stall reasons:
// [{"reason", "cycles_per_issue", "share_pct"}], share of all stall cycles per issued instruction).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ops/hgemm.hpp"

namespace kforge {

struct TorchEvalOptions;

struct ProfileOptions {
  std::string ncu;           // empty: $KFORGE_NCU, else ncu on PATH, else /usr/local/cuda/bin/ncu
  double timeout_s = 300;    // the whole profile (ncu, its replays, the target's start)
  int max_kernels = 16;      // kernel launches profiled in the one call
  int warmup_calls = 2;      // calls before the profiled one (module loading, autotuners)
  int device = -1;           // >= 0: pinned to that device (eval/devices.hpp); else the default
  bool sandbox = true;       // HGEMM: the candidate sandbox in the profiled process
                             // ($KFORGE_PROFILE_SANDBOX=0 turns it off, to measure what it changes)
};

// $KFORGE_PROFILE_KEEP=DIR keeps a copy of every raw ncu output (ncu-<pid>-<n>.csv, and .txt with
// the command line and ncu's own output), to check the parser against what the installed ncu prints.

// Stable error codes of a profile that could not be taken.
namespace profile_error {
inline constexpr const char* kNcuMissing = "ncu_missing";
inline constexpr const char* kNcuPermission = "ncu_permission";  // ERR_NVGPUCTRPERM
inline constexpr const char* kNcuTimeout = "ncu_timeout";
inline constexpr const char* kNcuFailed = "ncu_failed";          // ncu or the target failed
inline constexpr const char* kNoKernels = "no_kernels";          // nothing ran between start and stop
}  // namespace profile_error

// The ncu metric names requested (sm_90 names; see profile.cpp).
const std::vector<std::string>& profile_metric_names();

// The ncu to run: `configured`, else $KFORGE_NCU, else `ncu` on $PATH, else
// /usr/local/cuda/bin/ncu. Empty when there is none (`why` says where it looked).
std::string find_ncu(const std::string& configured, std::string& why);

// Parses ncu's CSV output: the "raw" page (a header row of identity columns and metric names, an
// optional units row, one row per kernel) or the "details" page (one row per metric, with "Metric
// Name", "Metric Unit", "Metric Value"). Lines before the header (==PROF== messages, program
// output) are skipped; quoted fields may hold commas and doubled quotes; numbers may carry
// thousands separators; "n/a" and unknown metrics are absent. Returns {"kernels": [...]} in launch
// order (see above for the fields); an empty list when there is no table.
nlohmann::json parse_ncu_csv(const std::string& text);

// Runs `target` (argv; absolute program path) under ncu with the fixed metric set, with `env`
// ("NAME=value") added. Never throws for ncu's or the target's failures (see the error codes).
nlohmann::json run_ncu_profile(const std::vector<std::string>& target, const std::vector<std::string>& env,
                               const ProfileOptions& opts);

// A compiled HGEMM candidate (its shared object) on `problem`, through kforge-executor's profile mode.
nlohmann::json profile_hgemm_candidate(const std::string& so_path, const HgemmProblem& problem,
                                       const ProfileOptions& opts);
// A PyTorch candidate of `task_file`, through `kforge_worker profile`; `build_dir` is where its
// extension was built when it was judged (TorchEvaluator::build_dir_for).
nlohmann::json profile_torch_candidate(const std::string& task_file, const std::string& candidate_file,
                                       const std::string& build_dir, const TorchEvalOptions& torch,
                                       const ProfileOptions& opts);

// The profile as the compact Markdown table of the prompt (profile.md's {{table}}): one row per
// kernel, the longest first, at most `max_rows` (the rest summed in one line). Empty for a
// profile without kernels (an error, or none).
std::string render_profile_table(const nlohmann::json& profile, size_t max_rows = 4);

// One line for a terminal: "3 kernels, 812.3 us, profiled in 4.1 s" or "no profile: <error>".
std::string profile_summary(const nlohmann::json& profile);

// ProfileOptions from the environment ($KFORGE_PROFILE_SANDBOX) over the given defaults.
ProfileOptions profile_options_from_env(ProfileOptions o = {});

}  // namespace kforge
