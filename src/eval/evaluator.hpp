// The evaluator: the one path from a candidate file to a verdict. It reads and scans the source,
// compiles it through the compile service, and hands the shared object to an isolated worker
// process (hgemm_worker.hpp) with a hard time-out. A worker that crashes, hangs or reports a
// sticky CUDA error is killed and replaced; the candidate gets a verdict saying why, and the
// evaluator (and the batch) goes on.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compile/compile.hpp"
#include "eval/static_scan.hpp"
#include "eval/verdict.hpp"
#include "ops/hgemm.hpp"

namespace kforge {

class WorkerProcess;

struct EvalOptions {
  std::vector<std::string> worker_command;  // default: {this program, "eval-worker"}
  double run_timeout_s = 60;                // per candidate: verification and timing together
  CompileOptions compile;
  ScanPolicy scan;
  RewardConfig reward;
  std::vector<std::string> modes = {"offline"};
  int samples = 7;
  uint64_t seed = 1;
  int compile_jobs = 0;  // 0: one per core
  bool skip_timing = false;
  // One worker per listed device (indices as in eval/devices.hpp), judging a batch in parallel;
  // empty: one worker on the default device.
  std::vector<int> devices;
};

class Evaluator {
 public:
  explicit Evaluator(EvalOptions opts);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  Verdict evaluate(const std::string& path, const HgemmProblem& problem);
  // Compiles every candidate first (in parallel), then judges them, one at a time per device
  // (several devices: in parallel; each verdict's details name its device). `progress` (may be
  // empty) is called after each verdict with (index, count, verdict), one call at a time, in the
  // order the verdicts come.
  std::vector<Verdict> evaluate_batch(const std::vector<std::string>& paths, const HgemmProblem& problem,
                                      const std::function<void(size_t, size_t, const Verdict&)>& progress = {});

  // How many worker processes were started so far (restarts after crashes count).
  int workers_started() const;

 private:
  struct Prepared;
  Prepared prepare_source(const std::string& path) const;
  Verdict judge(const std::string& path, const CompileResult& compiled, const HgemmProblem& problem, size_t slot);
  Verdict run_in_worker(const std::string& name, const std::string& so_path, const HgemmProblem& problem, size_t slot);

  EvalOptions opts_;
  CompileService compiler_;
  std::vector<std::unique_ptr<WorkerProcess>> workers_;  // one slot per device (at least one)
  std::atomic<int64_t> next_id_{1};
  std::atomic<int> workers_started_{0};
};

// The program that is running (readlink /proc/self/exe).
std::string self_executable();

// Evaluator options for HGEMM candidates: kforge's ABI headers on the include path and
// kforge/abi/hgemm.h pre-included (so a wrongly typed entry point fails to compile), the target
// `arch` or, when empty, the device's (sm_90a on Hopper; sm_90a without a device).
EvalOptions hgemm_eval_options(const std::string& arch);
// The folder holding kforge/abi/*.h: $KFORGE_INCLUDE_DIR, else the source tree's include/.
std::string abi_include_dir();

}  // namespace kforge
