#include "service/task.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "compile/compile.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/hash.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "search/loop.hpp"

namespace kforge {
namespace {

// ---------------------------------------------------------------------------------------------
// HGEMM problems

// One compile service per set of compile options (constructing one runs nvcc and the host
// compiler to learn their versions: a grid of 2,000 problems must not do that 2,000 times).
std::shared_ptr<CompileService> shared_compiler(const CompileOptions& c) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<CompileService>> by_key;
  const std::string key = dump_json({c.nvcc, c.arch, c.include_dirs, c.extra_flags, c.cutlass, c.timeout_s,
                                     c.max_source_bytes, c.max_log_bytes, c.cache_dir});
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<CompileService>& s = by_key[key];
  if (!s) s = std::make_shared<CompileService>(c);
  return s;
}

class HgemmJudge : public SlotJudge {
 public:
  HgemmJudge(EvalOptions opts, const SlotInfo& slot) : evaluator_(with_slot(std::move(opts), slot)) {}
  void judge(const EvalTask& task, const std::vector<std::string>& paths,
             const std::function<void(size_t, Verdict)>& done) override;

 private:
  static EvalOptions with_slot(EvalOptions o, const SlotInfo& slot) {
    o.devices.clear();
    if (slot.device >= 0) o.devices = {slot.device};
    return o;
  }
  Evaluator evaluator_;
};

class HgemmTask : public EvalTask {
 public:
  HgemmTask(const std::string& id, const HgemmProblem& p, const EvalOptions& o)
      : EvalTask(id), problem_(p), opts_(o), compiler_(shared_compiler(o.compile)) {
    seed_ = read_file(std::string(KFORGE_DATA_DIR) + "/seeds/hgemm_naive.cu");
    key_ = "hgemm/" + sha256_hex(dump_json({{"modes", o.modes},
                                            {"reward_penalties", penalties_to_json(o.reward)},
                                            {"samples", o.samples},
                                            {"seed", o.seed},
                                            {"reward", {o.reward.kind, o.reward.mode, o.reward.clip}},
                                            {"arch", o.compile.arch},
                                            {"flags", o.compile.extra_flags},
                                            {"includes", o.compile.include_dirs},
                                            {"run_timeout_s", o.run_timeout_s},
                                            {"skip_timing", o.skip_timing},
                                            {"allow_streams", o.scan.allow_streams}}))
                           .substr(0, 16);
  }
  std::string kind() const override { return "hgemm"; }
  std::string language() const override { return "cuda"; }
  std::string extension() const override { return ".cu"; }
  std::string entry_point() const override { return "kforge_hgemm"; }
  const std::string& seed() const override { return seed_; }
  nlohmann::json describe() const override {
    return {{"id", id()},
            {"kind", "hgemm"},
            {"m", problem_.shape.m},
            {"n", problem_.shape.n},
            {"k", problem_.shape.k},
            {"layout", problem_.layout == Layout::kTN ? "tn" : "nn"},
            {"acc", problem_.acc == Acc::kF32 ? "f32" : "f16"}};
  }
  std::string judge_key() const override { return key_; }
  const RewardConfig& reward() const override { return opts_.reward; }
  std::unique_ptr<SlotJudge> make_judge(const SlotInfo& slot) const override {
    return std::make_unique<HgemmJudge>(opts_, slot);
  }
  // Compiles into the content-hash cache the judge's evaluator reads (same compile options, so the
  // same key); its result is the evaluator's to report, so nothing is kept here.
  void prepare(const std::string& path) const override {
    try {
      compiler_->compile_file(path);
    } catch (const std::exception&) {
      // The evaluator compiles again and reports whatever went wrong in the verdict.
    }
  }
  nlohmann::json profile(const std::string& path, const ProfileOptions& popts) const override {
    try {
      const CompileResult c = compiler_->compile_file(path);
      if (!c.ok) return {{"tool", "ncu"}, {"error", "the candidate does not compile: " + c.failure},
                         {"error_code", profile_error::kNcuFailed}, {"seconds", 0.0}};
      return profile_hgemm_candidate(c.so_path, problem_, popts);
    } catch (const std::exception& e) {
      return {{"tool", "ncu"}, {"error", e.what()}, {"error_code", profile_error::kNcuFailed}, {"seconds", 0.0}};
    }
  }
  const HgemmProblem& problem() const { return problem_; }

 private:
  HgemmProblem problem_;
  EvalOptions opts_;
  std::shared_ptr<CompileService> compiler_;
  std::string seed_, key_;
};

void HgemmJudge::judge(const EvalTask& task, const std::vector<std::string>& paths,
                       const std::function<void(size_t, Verdict)>& done) {
  const auto& t = dynamic_cast<const HgemmTask&>(task);
  evaluator_.evaluate_batch(paths, t.problem(), [&](size_t i, size_t, const Verdict& v) { done(i, v); });
}

// ---------------------------------------------------------------------------------------------
// PyTorch task files

class TorchJudge : public SlotJudge {
 public:
  TorchJudge(TorchEvalOptions opts, const SlotInfo& slot) : evaluator_(with_slot(std::move(opts), slot)) {}
  void judge(const EvalTask& task, const std::vector<std::string>& paths,
             const std::function<void(size_t, Verdict)>& done) override;
  // One evaluate_batch for every task of the batch (as kforge eval --tasks judges a task set).
  void judge_mixed(const std::vector<const EvalTask*>& tasks, const std::vector<std::string>& paths,
                   const std::function<void(size_t, Verdict)>& done) override;

 private:
  static TorchEvalOptions with_slot(TorchEvalOptions o, const SlotInfo& slot) {
    o.devices.clear();
    if (slot.device >= 0) o.devices = {slot.device};
    return o;
  }
  TorchEvaluator evaluator_;
};

class TorchFileTask : public EvalTask {
 public:
  TorchFileTask(const std::string& id, const std::string& file, const TorchEvalOptions& o)
      : EvalTask(id), file_(std::filesystem::absolute(file).lexically_normal().string()), opts_(o) {
    const std::string text = read_file(file_);
    seed_ = torch_seed_from_task(text);
    key_ = "torch/" + sha256_hex(dump_json({{"device", o.device},
                                            {"reward_penalties", penalties_to_json(o.reward)},
                                            {"baselines", o.baselines},
                                            {"samples", o.samples},
                                            {"trials", o.trials},
                                            {"seed", o.seed},
                                            {"reward", {o.reward.kind, o.reward.mode, o.reward.clip}},
                                            {"timeouts", {o.compile_timeout_s, o.import_timeout_s, o.run_timeout_s}},
                                            {"atol", o.atol ? *o.atol : -1.0},
                                            {"rtol", o.rtol ? *o.rtol : -1.0},
                                            {"allow_streams", o.allow_streams},
                                            {"require_cuda_kernel", o.require_cuda_kernel},
                                            {"skip_timing", o.skip_timing},
                                            {"cache_dir", o.cache_dir}}))
                          .substr(0, 16);
  }
  std::string kind() const override { return "torch"; }
  std::string language() const override { return "python"; }
  std::string extension() const override { return ".py"; }
  std::string entry_point() const override { return "ModelNew"; }
  const std::string& seed() const override { return seed_; }
  nlohmann::json describe() const override {
    return {{"id", id()}, {"kind", "torch"}, {"file", std::filesystem::path(file_).filename().string()}};
  }
  std::string judge_key() const override { return key_; }
  const RewardConfig& reward() const override { return opts_.reward; }
  std::unique_ptr<SlotJudge> make_judge(const SlotInfo& slot) const override {
    return std::make_unique<TorchJudge>(opts_, slot);
  }
  nlohmann::json profile(const std::string& path, const ProfileOptions& popts) const override {
    try {
      return profile_torch_candidate(file_, path, torch_build_dir(opts_, read_file(path)), opts_, popts);
    } catch (const std::exception& e) {
      return {{"tool", "ncu"}, {"error", e.what()}, {"error_code", profile_error::kNcuFailed}, {"seconds", 0.0}};
    }
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  TorchEvalOptions opts_;
  std::string seed_, key_;
};

void TorchJudge::judge(const EvalTask& task, const std::vector<std::string>& paths,
                       const std::function<void(size_t, Verdict)>& done) {
  const auto& t = dynamic_cast<const TorchFileTask&>(task);
  std::vector<TorchJob> jobs;
  for (const std::string& p : paths) jobs.push_back({t.file(), p});
  evaluator_.evaluate_batch(jobs, [&](size_t i, size_t, const Verdict& v) { done(i, v); });
}

void TorchJudge::judge_mixed(const std::vector<const EvalTask*>& tasks, const std::vector<std::string>& paths,
                             const std::function<void(size_t, Verdict)>& done) {
  std::vector<TorchJob> jobs;
  for (size_t i = 0; i < paths.size(); ++i) jobs.push_back({dynamic_cast<const TorchFileTask&>(*tasks[i]).file(), paths[i]});
  evaluator_.evaluate_batch(jobs, [&](size_t i, size_t, const Verdict& v) { done(i, v); });
}

}  // namespace

void SlotJudge::judge_mixed(const std::vector<const EvalTask*>& tasks, const std::vector<std::string>& paths,
                            const std::function<void(size_t, Verdict)>& done) {
  // Each task's candidates, in the order its first one comes.
  std::vector<const EvalTask*> order;
  for (const EvalTask* t : tasks)
    if (std::find(order.begin(), order.end(), t) == order.end()) order.push_back(t);
  for (const EvalTask* t : order) {
    std::vector<size_t> at;
    std::vector<std::string> ps;
    for (size_t i = 0; i < paths.size(); ++i)
      if (tasks[i] == t) at.push_back(i), ps.push_back(paths[i]);
    judge(*t, ps, [&](size_t j, Verdict v) {
      if (j < at.size()) done(at[j], std::move(v));
    });
  }
}

nlohmann::json EvalTask::profile(const std::string&, const ProfileOptions&) const {
  return {{"tool", "ncu"},
          {"error", "tasks of kind '" + kind() + "' have no profiler"},
          {"error_code", profile_error::kNcuFailed},
          {"seconds", 0.0}};
}

std::shared_ptr<EvalTask> make_hgemm_task(const std::string& id, const HgemmProblem& problem, const EvalOptions& opts) {
  return std::make_shared<HgemmTask>(id, problem, opts);
}

std::shared_ptr<EvalTask> make_torch_task(const std::string& id, const std::string& task_file,
                                          const TorchEvalOptions& opts) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(task_file, ec)) KF_USAGE_ERROR("no such task file: %s", task_file.c_str());
  return std::make_shared<TorchFileTask>(id, task_file, opts);
}

}  // namespace kforge
