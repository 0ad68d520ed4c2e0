// The PyTorch evaluator: KernelBench-format tasks (a task file defines Model, get_inputs(),
// get_init_inputs(); a candidate defines ModelNew, usually with CUDA built by
// torch.utils.cpp_extension.load_inline) judged by the Python worker (python/kforge_worker), with
// the verdicts and reason codes of the HGEMM evaluator (eval/verdict.hpp).
//
// For each candidate: the file is read (missing, binary, oversize: rejected), scanned statically
// by the worker's scan (Python syntax tree plus the C++ strings it compiles; forbidden_call), its
// extension built in a folder of its own ($KFORGE_CACHE_DIR/torch/ext/<content hash>, several
// candidates in parallel; a build that outlasts the compile time-out is compile_timeout), then
// judged by a fresh judge process (`kforge_worker serve`, python/kforge_worker/judge.py), which
// never imports candidate code: it starts an executor subprocess for the candidate and one for the
// baselines (python/kforge_worker/executor.py), draws the inputs, owns the references, reads the
// outputs back and times from outside (docs/pytorch-tasks.md, docs/threat-model.md). The judge
// reports phases; the compile time-out applies while it imports the candidate, the run time-out to
// the rest. Every line it writes carries a secret key drawn for the request (a line without it is
// forged_reply). A judge that hangs is killed (its whole process group), one that dies gives
// "crashed"; the batch goes on.
#pragma once
#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "eval/verdict.hpp"

namespace kforge {

struct TorchEvalOptions {
  std::string python;      // empty: $KFORGE_PYTHON, else python3 on PATH
  std::string worker_dir;  // the folder holding kforge_worker/: empty: $KFORGE_PYTHON_DIR, else the source tree's python/
  std::string device = "cuda";                 // "cpu" verifies and times on the CPU (tests, no GPU)
  std::vector<std::string> baselines = {"eager"};  // eager, compile, compile_ro, graph
  int samples = 10;                            // timed rounds (each: every contender once, random order)
  int trials = 5;                              // verification trials, fresh inputs each
  uint64_t seed = 1;
  double compile_timeout_s = 300;              // building (importing) one candidate
  double import_timeout_s = 0;                 // importing a candidate whose build is done (or that has
                                               // none); 0: compile_timeout_s
  double run_timeout_s = 300;                  // everything else for one candidate
  std::optional<double> atol, rtol;            // override the task's and the dtype's tolerance
  bool allow_streams = false;                  // let candidates create streams (scan)
  bool require_cuda_kernel = false;            // policy: the candidate must compile a __global__ kernel
  bool static_scan = true;                     // off only to exercise the run-time defences in tests
  bool skip_timing = false;
  bool prebuild = true;                        // build extensions in parallel before judging
  int build_jobs = 0;                          // 0: half the cores, at most 8
  std::string cache_dir;                       // empty: $KFORGE_CACHE_DIR/torch (default ~/.cache/kforge/torch)
  size_t max_source_bytes = 512 * 1024;
  RewardConfig reward = {"log", "eager", 10.0};
  // One worker at a time per listed device (indices as in eval/devices.hpp), judging a batch in
  // parallel; each worker is pinned to its device and told "cuda". Empty: `device` as given.
  std::vector<int> devices;
};

struct TorchJob {
  std::string task;       // the task file
  std::string candidate;  // the candidate file
};

class WorkerProcess;

class TorchEvaluator {
 public:
  explicit TorchEvaluator(TorchEvalOptions opts);
  ~TorchEvaluator();
  TorchEvaluator(const TorchEvaluator&) = delete;
  TorchEvaluator& operator=(const TorchEvaluator&) = delete;

  Verdict evaluate(const TorchJob& job);
  // Scans every candidate, builds the extensions in parallel, then judges them one by one.
  std::vector<Verdict> evaluate_batch(const std::vector<TorchJob>& jobs,
                                      const std::function<void(size_t, size_t, const Verdict&)>& progress = {});

  int workers_started() const { return workers_started_; }
  const TorchEvalOptions& options() const { return opts_; }
  // The worker command line (python, script, "serve").
  std::vector<std::string> worker_command() const;

 private:
  struct Prepared;
  Prepared prepare(const TorchJob& job) const;
  Verdict run_in_worker(const TorchJob& job, const std::string& build_dir, double load_timeout_s, size_t slot);

  TorchEvalOptions opts_;
  std::atomic<int64_t> next_id_{1};
  std::atomic<int> workers_started_{0};
};

// The Python interpreter for the worker: `configured` if set, else $KFORGE_PYTHON, else python3 on
// PATH (absolute path; empty when none is found).
std::string find_python(const std::string& configured = "");
// The folder holding kforge_worker/.
std::string python_worker_dir(const std::string& configured = "");
// `python3 kforge_worker probe`: {"python", "torch", "cuda", "device"}, or {"error": why}.
nlohmann::json probe_python(const std::string& python = "", const std::string& worker_dir = "");

// Where the extension of a candidate with this source is built ($cache_dir/ext/<content hash>;
// an empty cache_dir is the evaluator's default, $KFORGE_CACHE_DIR/torch): the judge builds it
// there, and a profile (eval/profile.hpp) finds it there.
std::string torch_build_dir(const TorchEvalOptions& opts, const std::string& candidate_source);

// Maps a scan rule of the Python scan to a reason code (forbidden_call for most).
std::string scan_rule_reason(const std::string& rule);

}  // namespace kforge
