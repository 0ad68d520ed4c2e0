// Tasks of the evaluation service: what a candidate is judged against, behind one interface, so
// that callers (kforge serve, eval and optimize) never branch on the kind of task.
//
// A task knows its id, the language its candidates are written in (parse_response's language),
// the seed source that SEARCH/REPLACE edits apply to, and how to make the judge that evaluates its
// candidates on one device slot. Judges of tasks that share a judge_key() are shared on a slot (one
// Evaluator for every HGEMM shape with the same options, one TorchEvaluator for every PyTorch task).
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/evaluator.hpp"
#include "eval/profile.hpp"
#include "eval/verdict.hpp"
#include "ops/hgemm.hpp"
#include "torch/torch_eval.hpp"

namespace kforge {

// Where a judge runs: slot `index` of the service, on `device` (an index as in eval/devices.hpp)
// or, when device < 0, on the default device its options name (the CPU for --device cpu).
struct SlotInfo {
  size_t index = 0;
  int device = -1;
};

class EvalTask;

// Judges batches of candidate files of tasks of one kind on one slot. Used by one thread at a time
// (the slot's); each slot has its own judges, so two slots never share a worker.
class SlotJudge {
 public:
  virtual ~SlotJudge() = default;
  // Judges `paths` (candidate files) against `task`; calls done(i, verdict) once per path as
  // each verdict comes, in any order. Never throws for a candidate's faults.
  virtual void judge(const EvalTask& task, const std::vector<std::string>& paths,
                     const std::function<void(size_t, Verdict)>& done) = 0;
  // A batch of candidates of several tasks sharing one judge_key() (tasks[i] is paths[i]'s): by
  // default each task's candidates in turn through judge(); a judge that takes several tasks at
  // once (the PyTorch one: extensions of the whole batch build in parallel) overrides it.
  virtual void judge_mixed(const std::vector<const EvalTask*>& tasks, const std::vector<std::string>& paths,
                           const std::function<void(size_t, Verdict)>& done);
};

class EvalTask {
 public:
  virtual ~EvalTask() = default;
  const std::string& id() const { return id_; }
  virtual std::string kind() const = 0;       // "hgemm", "torch"
  virtual std::string language() const = 0;   // "cuda" or "python" (parse_response's language)
  virtual std::string extension() const = 0;  // of candidate files: ".cu", ".py"
  virtual const std::string& seed() const = 0;  // the source SEARCH/REPLACE edits apply to
  virtual std::string entry_point() const = 0;   // what every candidate defines: "kforge_hgemm", "ModelNew"
  virtual nlohmann::json describe() const = 0;  // {"id", "kind", ...} for listings
  // The reward its judge gives (its mode is this kind's: "offline" for HGEMM, a baseline for PyTorch).
  virtual const RewardConfig& reward() const = 0;
  // Tasks with equal keys share one judge per slot.
  virtual std::string judge_key() const = 0;
  virtual std::unique_ptr<SlotJudge> make_judge(const SlotInfo& slot) const = 0;
  // Work done on a CPU core before the candidate is queued for a slot (compiling it, so that the
  // judge finds it in the compile cache). Thread-safe; never throws for a candidate's faults.
  virtual void prepare(const std::string& /*path*/) const {}
  // Profiles a candidate file already judged correct under Nsight Compute (eval/profile.hpp), in a
  // process of its own: the profile, or {"error", "error_code"}. Never throws for a candidate's
  // faults. Call it where nothing else is being timed on that GPU (a slot's thread between verdicts).
  // The default: a task kind without a profiler.
  virtual nlohmann::json profile(const std::string& path, const ProfileOptions& opts) const;

 protected:
  explicit EvalTask(std::string id) : id_(std::move(id)) {}

 private:
  std::string id_;
};

// "hgemm:MxNxK[:nn|tn][:f32|f16]" judged by the hardened HGEMM evaluator with `opts` (its devices
// are ignored: the service gives each slot its device). The seed is kforge's naive kernel.
std::shared_ptr<EvalTask> make_hgemm_task(const std::string& id, const HgemmProblem& problem, const EvalOptions& opts);
// A KernelBench-format task file judged by the PyTorch evaluator with `opts` (devices ignored, as
// above). The id is the caller's (a task set's id, e.g. "01_relu" or "level1/1"); the seed is the
// task's own code with Model renamed ModelNew, as optimize seeds its search.
std::shared_ptr<EvalTask> make_torch_task(const std::string& id, const std::string& task_file,
                                          const TorchEvalOptions& opts);

}  // namespace kforge
