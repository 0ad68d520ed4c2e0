#include "search/loop.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <regex>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/subprocess.hpp"
#include "core/text.hpp"
#include "llm/prompt.hpp"
#include "llm/response.hpp"
#include "search/builtin_policy.hpp"
#include "search/program_db.hpp"
#include "search/reviewer.hpp"
#include "search/sampler.hpp"

namespace kforge {
namespace fs = std::filesystem;

HgemmProblem parse_hgemm_task(const std::string& task) {
  const std::vector<std::string> parts = split(task, ':');
  if (parts.size() < 2 || parts[0] != "hgemm")
    KF_USAGE_ERROR("bad task '%s' (expected hgemm:MxNxK, optionally :nn or :tn and :f32 or :f16)", task.c_str());
  HgemmProblem p;
  p.shape = parse_shape(parts[1]);
  for (size_t i = 2; i < parts.size(); ++i) {
    if (parts[i] == "nn" || parts[i] == "tn") p.layout = parse_layout(parts[i]);
    else if (parts[i] == "f32" || parts[i] == "f16") p.acc = parse_acc(parts[i]);
    else KF_USAGE_ERROR("bad task '%s': unknown part '%s'", task.c_str(), parts[i].c_str());
  }
  return p;
}

bool is_torch_task(const std::string& task) { return task.rfind("hgemm:", 0) != 0 && ends_with(task, ".py"); }

std::string torch_seed_from_task(const std::string& task_source) {
  static const std::regex model_word("\\bModel\\b");
  return "# kforge seed: the task's reference code with Model renamed ModelNew (pure PyTorch, about 1x eager).\n" +
         std::regex_replace(task_source, model_word, "ModelNew");
}

void check_torch_task_file(const std::string& path, const std::string& python_in) {
  std::error_code ec;
  if (!ends_with(path, ".py")) KF_USAGE_ERROR("task '%s' is neither hgemm:MxNxK nor a .py task file", path.c_str());
  if (!fs::is_regular_file(path, ec)) KF_USAGE_ERROR("no such task file: %s", path.c_str());
  const std::string source = read_file(path);
  if (source.find('\0') != std::string::npos) KF_USAGE_ERROR("task file '%s' is not text", path.c_str());
  const std::string python = find_python(python_in);
  if (python.empty()) return;  // the verdicts will say no_torch
  // Import the task the way the worker does (its own module name, never in sys.modules); a Python
  // without torch cannot judge anything, and its verdicts say so (no_torch): no check then.
  static const char* kCheck =
      "import sys, runpy\n"
      "try:\n"
      "    import torch\n"
      "except Exception:\n"
      "    sys.exit(0)\n"
      "ns = runpy.run_path(sys.argv[1], run_name='kforge_task_check')\n"
      "missing = [n for n in ('Model', 'get_inputs', 'get_init_inputs') if n not in ns]\n"
      "if missing:\n"
      "    print('the task defines no ' + ', '.join(missing))\n"
      "    sys.exit(3)\n";
  ProcessOptions po;
  po.timeout_s = 120;
  po.env = {"PYTHONDONTWRITEBYTECODE=1"};
  const ProcessResult r = run_process({python, "-c", kCheck, fs::absolute(path).string()}, po);
  if (r.ok()) return;
  if (r.timed_out) KF_USAGE_ERROR("importing task file '%s' took more than 120 s", path.c_str());
  std::string why(trim(r.out));
  if (why.empty()) {  // the last line of the traceback: "ImportError: ..."
    for (const std::string& line : split(r.err, '\n'))
      if (!trim(line).empty()) why = std::string(trim(line));
  }
  KF_USAGE_ERROR("task file '%s' cannot be used: %s", path.c_str(), why.empty() ? r.describe().c_str() : why.c_str());
}

nlohmann::json to_json(const OptimizeOptions& o) {
  nlohmann::json eps = nlohmann::json::array();
  for (const Endpoint& e : o.llm.endpoints)
    eps.push_back({{"url", e.url}, {"model", e.model}, {"weight", e.weight}, {"api_key_env", e.api_key_env},
                   {"usd_per_1k_prompt", e.usd_per_1k_prompt}, {"usd_per_1k_completion", e.usd_per_1k_completion}});
  nlohmann::json j = {{"task", o.task},
          {"policy", o.policy},
          {"endpoints", eps},
          {"budget_usd", std::isfinite(o.llm.budget_usd) ? nlohmann::json(o.llm.budget_usd) : nlohmann::json()},
          {"iterations", o.iterations},
          {"group_size", o.group_size},
          {"exemplars", o.exemplars},
          {"sampler", o.sampler},
          {"prompts_dir", o.prompts_dir},
          {"reward_clip", o.reward_clip},
          {"jump_factor", o.jump_factor},
          {"reviewer_model", o.reviewer_model},
          {"seed", o.seed},
          {"modes", o.eval.modes},
          {"samples", o.eval.samples},
          {"reward", o.eval.reward.kind},
          {"reward_clip_kind", o.eval.reward.clip},
          {"allow_streams", o.eval.scan.allow_streams},
          {"include_dirs", o.include_dirs},
          {"nvcc_flags", o.nvcc_flags}};
  if (is_torch_task(o.task)) {
    const TorchEvalOptions& t = o.torch;
    j["torch"] = {{"device", t.device},         {"baselines", t.baselines},
                  {"baseline", t.reward.mode},  {"samples", t.samples},
                  {"trials", t.trials},         {"compile_timeout_s", t.compile_timeout_s},
                  {"import_timeout_s", t.import_timeout_s}, {"run_timeout_s", t.run_timeout_s},
                  {"reward", t.reward.kind},    {"reward_clip_kind", t.reward.clip},
                  {"python", t.python},         {"allow_streams", t.allow_streams},
                  {"require_cuda_kernel", t.require_cuda_kernel}};
    j["torch"]["atol"] = t.atol ? nlohmann::json(*t.atol) : nlohmann::json();
    j["torch"]["rtol"] = t.rtol ? nlohmann::json(*t.rtol) : nlohmann::json();
  }
  return j;
}

void apply_stored_options(const nlohmann::json& j, OptimizeOptions& o) {
  o.task = j.at("task").get<std::string>();
  o.policy = j.value("policy", o.policy);
  if (o.iterations < 1) o.iterations = j.value("iterations", 10);  // unless given anew (to extend the run)
  o.group_size = j.value("group_size", o.group_size);
  o.exemplars = j.value("exemplars", o.exemplars);
  o.sampler = j.value("sampler", o.sampler);
  o.prompts_dir = j.value("prompts_dir", o.prompts_dir);
  o.reward_clip = j.value("reward_clip", o.reward_clip);
  o.jump_factor = j.value("jump_factor", o.jump_factor);
  if (o.reviewer_model.empty()) o.reviewer_model = j.value("reviewer_model", std::string());
  o.seed = j.value("seed", o.seed);
  o.eval.modes = j.value("modes", o.eval.modes);
  o.eval.samples = j.value("samples", o.eval.samples);
  o.eval.reward.kind = j.value("reward", o.eval.reward.kind);
  o.eval.reward.clip = j.value("reward_clip_kind", o.eval.reward.clip);
  o.eval.scan.allow_streams = j.value("allow_streams", o.eval.scan.allow_streams);
  o.include_dirs = j.value("include_dirs", o.include_dirs);
  o.nvcc_flags = j.value("nvcc_flags", o.nvcc_flags);
  if (o.llm.endpoints.empty()) {  // the transport may be given anew; otherwise the stored one
    for (const auto& e : j.value("endpoints", nlohmann::json::array())) {
      Endpoint ep;
      ep.url = e.at("url").get<std::string>();
      ep.model = e.at("model").get<std::string>();
      ep.weight = e.value("weight", 1.0);
      ep.api_key_env = e.value("api_key_env", ep.api_key_env);
      ep.usd_per_1k_prompt = e.value("usd_per_1k_prompt", 0.0);
      ep.usd_per_1k_completion = e.value("usd_per_1k_completion", 0.0);
      o.llm.endpoints.push_back(ep);
    }
  }
  if (!std::isfinite(o.llm.budget_usd) && j.contains("budget_usd") && j["budget_usd"].is_number())
    o.llm.budget_usd = j["budget_usd"].get<double>();
  if (j.contains("torch") && j["torch"].is_object()) {
    const nlohmann::json& t = j["torch"];
    TorchEvalOptions& to = o.torch;
    to.device = t.value("device", to.device);
    to.baselines = t.value("baselines", to.baselines);
    to.reward.mode = t.value("baseline", to.reward.mode);
    to.samples = t.value("samples", to.samples);
    to.trials = t.value("trials", to.trials);
    to.compile_timeout_s = t.value("compile_timeout_s", to.compile_timeout_s);
    to.import_timeout_s = t.value("import_timeout_s", to.import_timeout_s);
    to.run_timeout_s = t.value("run_timeout_s", to.run_timeout_s);
    to.reward.kind = t.value("reward", to.reward.kind);
    to.reward.clip = t.value("reward_clip_kind", to.reward.clip);
    if (to.python.empty()) to.python = t.value("python", std::string());
    to.allow_streams = t.value("allow_streams", to.allow_streams);
    to.require_cuda_kernel = t.value("require_cuda_kernel", to.require_cuda_kernel);
    // The tolerances a run was judged with stay its own (null: the task's and the dtype's defaults).
    for (const auto& [key, dst] : {std::pair{"atol", &to.atol}, std::pair{"rtol", &to.rtol}})
      if (t.contains(key)) *dst = t[key].is_number() ? std::optional<double>(t[key].get<double>()) : std::nullopt;
  }
}

namespace {

std::string seed_source() { return read_file(std::string(KFORGE_DATA_DIR) + "/seeds/hgemm_naive.cu"); }

std::string describe_task(const HgemmProblem& p) {
  return strf(
      "Write a CUDA HGEMM for an NVIDIA GPU (target %s): C[M,N] = A[M,K] * B[K,N] with M=%lld, N=%lld, K=%lld. "
      "A is row-major (leading dimension K). B is %s. C is row-major (leading dimension N). Inputs and output are "
      "fp16; accumulation must be %s. The file defines\n\n"
      "    extern \"C\" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream);\n\n"
      "(the header kforge/abi/hgemm.h is pre-included: args->problem holds m, n, k, layout and acc; args->a, "
      "args->b, args->c the device pointers; args->workspace and args->workspace_bytes the workspace when the file "
      "also defines size_t kforge_hgemm_workspace_size(const kforge_hgemm_problem*)). It returns 0 on success and "
      "launches all its work on `stream`. Speed is measured against cuBLASLt's best auto-tuned algorithm.",
      "sm_90a", (long long)p.shape.m, (long long)p.shape.n, (long long)p.shape.k,
      p.layout == Layout::kTN ? "column-major (stored as N rows of K, leading dimension K)"
                              : "row-major (leading dimension N)",
      p.acc == Acc::kF32 ? "fp32" : "fp16 or better");
}

std::string describe_torch_task(const std::string& task_file, const TorchEvalOptions& t) {
  return strf(
      "Make the PyTorch module `Model` of the task file %s (KernelBench format) faster on an NVIDIA GPU. Write a "
      "Python file that defines `class ModelNew(nn.Module)`: built with the arguments `get_init_inputs()` returns, "
      "called with the tensors `get_inputs()` returns (moved to the device), and returning the same outputs as "
      "`Model` (same structure, shapes and dtypes, within the task's tolerance). Put the work in CUDA kernels of "
      "your own, compiled at import with `torch.utils.cpp_extension.load_inline` and launched on PyTorch's current "
      "stream. Both modules start from the same seeded weights (where parameter names and shapes match, the "
      "reference's weights are copied into ModelNew). Every answer is checked on fresh random inputs and timed on "
      "%s against the reference run %s.",
      fs::path(task_file).filename().string().c_str(), t.device == "cpu" ? "the CPU" : t.device.c_str(),
      t.reward.mode == "eager"        ? "eagerly (as written)"
      : t.reward.mode == "compile"    ? "through torch.compile"
      : t.reward.mode == "compile_ro" ? "through torch.compile(mode=\"reduce-overhead\")"
                                      : "as one captured CUDA graph");
}

class Loop {
 public:
  Loop(const OptimizeOptions& o, const std::atomic<bool>& stop) : o_(o), stop_(stop) {}

  OptimizeSummary run() {
    fs::create_directories(o_.run_dir + "/candidates");
    db_ = std::make_unique<ProgramDb>(o_.run_dir + "/kforge-search.db");
    if (o_.resume) {
      auto r = db_->latest_run();
      if (!r) KF_USAGE_ERROR("no run to resume in '%s'", o_.run_dir.c_str());
      run_id_ = r->id;
      apply_stored_options(r->config, o_);
      std::fprintf(stderr, "kforge optimize: resuming run %lld (%s) after iteration %d\n", (long long)run_id_,
                   o_.task.c_str(), db_->last_iteration(run_id_));
    } else {
      if (db_->latest_run())
        KF_USAGE_ERROR("'%s' already holds a search run: pass --resume to continue it, or another --run-dir",
                       o_.run_dir.c_str());
      torch_ = is_torch_task(o_.task);
      std::string task_source;
      if (torch_) {
        o_.task = fs::absolute(o_.task).lexically_normal().string();  // resumable from any folder
        task_source = read_file(o_.task);
      }
      CandidateRecord seed;
      seed.policy = "seed";
      if (!torch_) {
        seed.source = seed_source();
        seed.analysis = "the seed: one thread per output element";
      } else if (!o_.seed_file.empty()) {
        seed.source = read_file(o_.seed_file);
        seed.analysis = "the seed: " + o_.seed_file;
        seed.language = "python";
      } else {
        seed.source = torch_seed_from_task(task_source);
        seed.analysis = "the seed: the reference code as ModelNew";
        seed.language = "python";
      }
      run_id_ = db_->create_run(o_.task, to_json(o_));
      seed.run_id = run_id_;
      db_->add_candidate(seed);
    }
    torch_ = is_torch_task(o_.task);
    if (torch_) {
      task_source_ = read_file(o_.task);  // a task file gone since the run began: a clear error
      if (o_.policy == "builtin")
        KF_USAGE_ERROR("the builtin policy proposes HGEMM kernels only; PyTorch tasks need --policy llm");
    } else {
      problem_ = parse_hgemm_task(o_.task);
    }
    sampler_ = make_sampler(o_.sampler);
    templates_ = o_.prompts_dir.empty() ? PromptTemplates::builtin() : PromptTemplates::load(o_.prompts_dir);
    if (o_.policy == "llm") {
      if (o_.llm.endpoints.empty()) KF_USAGE_ERROR("the llm policy needs an endpoint (--llm-url and --model)");
      llm_ = std::make_unique<LlmClient>(o_.llm);
    } else if (o_.policy != "builtin") {
      KF_USAGE_ERROR("unknown policy '%s' (expected llm or builtin)", o_.policy.c_str());
    }
    if (!o_.reviewer_model.empty()) {
      if (o_.llm.endpoints.empty()) KF_USAGE_ERROR("the reviewer needs an endpoint (--llm-url)");
      LlmOptions ro = o_.llm;
      for (Endpoint& e : ro.endpoints) e.model = o_.reviewer_model;
      ro.cassette_mode = CassetteMode::kOff;  // reviews are not part of the recorded search
      reviewer_ = std::make_unique<LlmClient>(ro);
    }
    if (torch_)
      torch_evaluator_ = std::make_unique<TorchEvaluator>(o_.torch);
    else
      evaluator_ = std::make_unique<Evaluator>(hgemm_eval_with_user_compile());
    db_->set_run_state(run_id_, "running");

    evaluate_pending();
    finish_groups();
    OptimizeSummary sum;
    bool budget_gone = false;
    for (int it = db_->last_iteration(run_id_) + 1; it <= o_.iterations && !budget_gone; ++it) {
      if (stop_) break;
      const double best_before = best().second;
      budget_gone = !iteration(it);
      evaluate_pending();
      remeasure_jump(it, best_before);
      finish_groups();
      progress(it);
    }
    sum.interrupted = bool(stop_);
    sum.python = torch_;
    db_->set_run_state(run_id_, sum.interrupted ? "stopped" : "complete");
    sum.run_id = run_id_;
    sum.iterations_done = db_->last_iteration(run_id_);
    for (const CandidateRecord& c : db_->candidates(run_id_)) {
      ++sum.candidates;
      sum.correct += c.correct;
    }
    std::tie(sum.best_id, sum.best_speedup) = best();
    sum.spent_usd = db_->total_cost_usd(run_id_);
    return sum;
  }

 private:
  std::pair<int64_t, double> best() const {
    int64_t id = 0;
    double s = 0;
    for (const CandidateRecord& c : db_->candidates(run_id_))
      if (c.correct && c.score > s) id = c.id, s = c.score;
    return {id, s};
  }

  // A candidate's score: its median speed-up in the reward's mode when correct, 0 otherwise.
  // o_.eval with the run's include folders and nvcc arguments (checked again: a stored folder may
  // be gone since the run began).
  EvalOptions hgemm_eval_with_user_compile() const {
    EvalOptions e = o_.eval;
    const std::vector<std::string> dirs = checked_include_dirs(o_.include_dirs);
    check_nvcc_flags(o_.nvcc_flags);
    e.compile.include_dirs.insert(e.compile.include_dirs.end(), dirs.begin(), dirs.end());
    e.compile.extra_flags.insert(e.compile.extra_flags.end(), o_.nvcc_flags.begin(), o_.nvcc_flags.end());
    return e;
  }

  const RewardConfig& reward_config() const { return torch_ ? o_.torch.reward : o_.eval.reward; }

  double score_of(const Verdict& v) const {
    const auto mode = v.speedup.find(reward_config().mode);
    return v.correct && mode != v.speedup.end() ? mode->second.median : 0.0;
  }

  std::string candidate_path(int64_t id) const {
    return strf("%s/candidates/%lld.%s", o_.run_dir.c_str(), (long long)id, torch_ ? "py" : "cu");
  }

  // Judges candidate files, storing each verdict as it comes (through `done`).
  void judge(const std::vector<std::string>& paths, const std::function<void(size_t, const Verdict&)>& done) {
    if (torch_) {
      std::vector<TorchJob> jobs;
      for (const std::string& p : paths) jobs.push_back({o_.task, p});
      torch_evaluator_->evaluate_batch(jobs, [&](size_t i, size_t, const Verdict& v) { done(i, v); });
    } else {
      evaluator_->evaluate_batch(paths, problem_, [&](size_t i, size_t, const Verdict& v) { done(i, v); });
    }
  }

  void evaluate_pending() {
    const std::vector<CandidateRecord> pending = db_->pending_candidates(run_id_);
    if (pending.empty()) return;
    std::vector<std::string> paths;
    for (const CandidateRecord& c : pending) {
      paths.push_back(candidate_path(c.id));
      write_file_atomic(paths.back(), c.source);
    }
    // Each verdict is stored as soon as it exists: a kill loses at most the candidate being judged.
    judge(paths, [&](size_t i, const Verdict& v) {
      db_->record_verdict(pending[i].id, to_json(v), v.correct, score_of(v), v.reward);
    });
  }

  // Group-normalised advantages for every complete group that lacks them.
  void finish_groups() {
    std::map<std::pair<int, int>, std::vector<CandidateRecord>> groups;
    for (const CandidateRecord& c : db_->candidates(run_id_)) groups[{c.iteration, c.group}].push_back(c);
    for (const auto& [key, members] : groups) {
      const bool complete = std::none_of(members.begin(), members.end(), [](const CandidateRecord& c) { return c.status == "pending"; });
      const bool missing = std::any_of(members.begin(), members.end(), [](const CandidateRecord& c) { return !c.advantage; });
      if (!complete || !missing) continue;
      std::vector<double> rewards;
      for (const CandidateRecord& c : members) rewards.push_back(clip_reward(c.correct ? c.reward : 0.0, o_.reward_clip));
      const std::vector<double> adv = group_advantages(rewards);
      std::vector<std::pair<int64_t, double>> updates;
      for (size_t i = 0; i < members.size(); ++i) updates.push_back({members[i].id, adv[i]});
      db_->set_advantages(updates);
    }
  }

  // A sudden jump of the best speed-up is measured again; the lower figure stands.
  void remeasure_jump(int it, double best_before) {
    if (best_before <= 0) return;
    for (const CandidateRecord& c : db_->candidates(run_id_)) {
      if (c.iteration != it || !c.correct || c.score < o_.jump_factor * best_before) continue;
      std::fprintf(stderr, "kforge optimize: candidate %lld jumped to %.3fx (best was %.3fx): measuring it again\n",
                   (long long)c.id, c.score, best_before);
      Verdict again;
      judge({candidate_path(c.id)}, [&](size_t, const Verdict& v) { again = v; });
      const double score2 = score_of(again);
      nlohmann::json verdict = c.verdict;
      verdict["remeasured"] = to_json(again);
      bool correct = again.correct;
      double score = std::min(c.score, score2);
      double reward = 0;
      if (correct) {
        Verdict lower = score2 < c.score ? again : verdict_from_json(c.verdict);
        reward = compute_reward(lower, reward_config());
      }
      if (correct && reviewer_) review(c, best_before, verdict, correct, score, reward);
      db_->record_verdict(c.id, verdict, correct, score, reward);
    }
  }

  // Asks the reviewer whether a sudden winner cheats; a HACK verdict rejects it.
  void review(const CandidateRecord& c, double best_before, nlohmann::json& verdict, bool& correct, double& score,
              double& reward) {
    CandidateRecord shown = c;
    shown.score = score;
    const std::vector<CandidateRecord> hacks = similar_hacks(c.source, db_->candidates(run_id_), 2);
    ChatRequest req;
    req.messages = review_prompt(shown, best_before, hacks);
    req.temperature = 0;
    LlmCallRecord call;
    call.run_id = run_id_;
    call.iteration = c.iteration;
    try {
      const ChatResponse resp = reviewer_->chat(req);
      call = {0, run_id_, c.iteration, c.group, resp.endpoint, resp.model, resp.prompt_tokens, resp.completion_tokens,
              resp.latency_s, resp.cost_usd, "ok", "", ""};
      const Review r = parse_review(resp.choices.empty() ? "" : resp.choices.front());
      nlohmann::json ids = nlohmann::json::array();
      for (const CandidateRecord& h : hacks) ids.push_back(h.id);
      verdict["review"] = {{"hack", r.hack}, {"understood", r.understood}, {"compared_with", ids},
                           {"text", r.text.substr(0, 4000)}};
      if (r.hack) {
        correct = false;
        score = reward = 0;
        verdict["correct"] = false;
        verdict["reasons"].push_back(reason::kReviewerFlagged);
        verdict["message"] = "the LLM reviewer judged this sudden winner a hack";
        std::fprintf(stderr, "kforge optimize: the reviewer flagged candidate %lld as a hack\n", (long long)c.id);
      }
    } catch (const LlmError& e) {
      call.status = "error";
      call.error = e.what();
      verdict["review"] = {{"error", e.what()}};
    }
    db_->add_llm_call(call);
  }

  // One prompt, one group of candidates. False when the spending cap is reached.
  bool iteration(int it) {
    std::mt19937_64 rng(o_.seed * 1000003ull + uint64_t(it));
    const std::vector<CandidateRecord> all = db_->candidates(run_id_);
    std::vector<Scored> pool;
    for (const CandidateRecord& c : all)
      if (c.correct) pool.push_back({c.id, c.score, int(c.id % 4)});
    std::vector<int64_t> picks = sampler_->pick(pool, o_.exemplars, rng);
    std::vector<CandidateRecord> shown;
    for (const CandidateRecord& c : all)
      if (std::find(picks.begin(), picks.end(), c.id) != picks.end()) shown.push_back(c);
    if (shown.empty()) shown.push_back(all.front());  // nothing correct yet: start from the seed
    const CandidateRecord parent = *std::max_element(shown.begin(), shown.end(), [](const auto& a, const auto& b) {
      return a.score < b.score;
    });
    std::vector<CandidateRecord> group;
    if (o_.policy == "builtin") {
      const auto parent_cfg = TiledConfig::from_json(nlohmann::json::parse(parent.analysis, nullptr, false));
      for (int s = 0; s < o_.group_size; ++s) {
        const TiledConfig cfg = propose_config(parent_cfg, rng);
        CandidateRecord c = make_record(it, s, "builtin", parent.id);
        c.source = tiled_hgemm_source(cfg);
        c.analysis = dump_json(cfg.to_json());
        group.push_back(c);
      }
      db_->add_candidates(group);
      return true;
    }
    PromptInputs in;
    if (torch_) {
      in.task = describe_torch_task(o_.task, o_.torch);
      in.reference = task_source_;
      in.language = "python";
    } else {
      in.task = describe_task(problem_);
      in.reference = all.front().source;
    }
    for (const CandidateRecord& c : shown) {
      Exemplar e;
      e.id = c.id;
      e.source = c.source;
      e.correct = c.correct;
      e.speedup = c.score;
      if (!c.correct && c.verdict.is_object()) e.notes = c.verdict.value("message", "");
      in.exemplars.push_back(e);
    }
    in.feedback = feedback_from(all, it - 1);
    const std::vector<ChatMessage> messages = build_prompt(in, templates_);
    nlohmann::json prompt_json = nlohmann::json::array();
    for (const ChatMessage& m : messages) prompt_json.push_back({{"role", m.role}, {"content", m.content}});
    bool budget_ok = true;
    for (int attempt = 0; int(group.size()) < o_.group_size && attempt < o_.group_size + 2; ++attempt) {
      ChatRequest req;
      req.messages = messages;
      req.n = o_.group_size - int(group.size());
      LlmCallRecord call;
      call.run_id = run_id_;
      call.iteration = it;
      try {
        const ChatResponse resp = llm_->chat(req);
        call.endpoint = resp.endpoint;
        call.model = resp.model;
        call.prompt_tokens = resp.prompt_tokens;
        call.completion_tokens = resp.completion_tokens;
        call.latency_s = resp.latency_s;
        call.cost_usd = resp.cost_usd;
        call.status = "ok";
        for (const std::string& text : resp.choices) {
          if (int(group.size()) >= o_.group_size) break;
          group.push_back(from_response(it, int(group.size()), "llm:" + resp.model, parent, text, dump_json(prompt_json)));
        }
        if (resp.choices.empty()) break;
      } catch (const LlmError& e) {
        call.status = "error";
        call.error = e.what();
        std::fprintf(stderr, "kforge optimize: iteration %d: LLM call failed: %s\n", it, e.what());
        db_->add_llm_call(call);
        if (e.kind() == LlmError::Kind::kBudget) {
          budget_ok = false;
          break;
        }
        if (e.kind() == LlmError::Kind::kAuth || e.kind() == LlmError::Kind::kUnreachable ||
            e.kind() == LlmError::Kind::kReplayMiss)
          break;  // no point asking again this iteration; the next one tries anew
        continue;
      }
      db_->add_llm_call(call);
    }
    if (!group.empty()) db_->add_candidates(group);
    return budget_ok;
  }

  CandidateRecord make_record(int it, int sample, const std::string& policy, int64_t parent) const {
    CandidateRecord c;
    c.run_id = run_id_;
    c.iteration = it;
    c.group = 0;
    c.sample = sample;
    c.policy = policy;
    c.parents = {parent};
    c.language = torch_ ? "python" : "cuda";
    return c;
  }

  CandidateRecord from_response(int it, int sample, const std::string& policy, const CandidateRecord& parent,
                                const std::string& text, const std::string& prompt) const {
    CandidateRecord c = make_record(it, sample, policy, parent.id);
    c.prompt = prompt;
    const ParsedResponse parsed = parse_response(text, torch_ ? "python" : "cuda");
    c.analysis = parsed.analysis;
    if (!parsed.edits.empty()) {
      const EditOutcome out = apply_edits(parent.source, parsed.edits);
      if (out.ok) {
        c.source = out.source;
        return c;
      }
      if (!parsed.code) {
        c.status = "invalid";
        c.error = "the edits could not be applied to candidate " + std::to_string(parent.id) + ": " + out.error;
        return c;
      }
    }
    if (parsed.code) {
      c.source = *parsed.code;
      return c;
    }
    c.status = "invalid";
    c.error = parsed.error;
    return c;
  }

  // What went wrong in the previous iteration, for the next prompt.
  static std::string feedback_from(const std::vector<CandidateRecord>& all, int it) {
    std::string out;
    int n = 0;
    for (const CandidateRecord& c : all) {
      if (c.iteration != it || n >= 3) continue;
      if (c.status == "invalid") {
        out += strf("- A response of the last round could not be used: %s\n", c.error.c_str());
        ++n;
      } else if (!c.correct && c.verdict.is_object()) {
        out += strf("- Candidate %lld was rejected: %s\n", (long long)c.id, c.verdict.value("message", "").substr(0, 400).c_str());
        ++n;
      }
    }
    return out;
  }

  void progress(int it) const {
    int total = 0, correct = 0;
    for (const CandidateRecord& c : db_->candidates(run_id_)) total += 1, correct += c.correct;
    const auto [id, sp] = best();
    std::fprintf(stderr, "iteration %d/%d  best %.3fx%s  candidates %d (%d correct)  LLM calls %zu  spent $%.4f\n", it,
                 o_.iterations, sp, id ? strf(" (#%lld)", (long long)id).c_str() : "", total, correct,
                 db_->llm_calls(run_id_).size(), db_->total_cost_usd(run_id_));
  }

  OptimizeOptions o_;
  const std::atomic<bool>& stop_;
  std::unique_ptr<ProgramDb> db_;
  int64_t run_id_ = 0;
  HgemmProblem problem_;
  bool torch_ = false;       // a PyTorch task (candidates are ModelNew files, language "python")
  std::string task_source_;  // its task file's text (the reference shown in prompts)
  std::unique_ptr<TorchEvaluator> torch_evaluator_;
  std::unique_ptr<Sampler> sampler_;
  PromptTemplates templates_;
  std::unique_ptr<LlmClient> llm_, reviewer_;
  std::unique_ptr<Evaluator> evaluator_;
};

}  // namespace

OptimizeSummary run_optimize(const OptimizeOptions& opts, const std::atomic<bool>& stop) { return Loop(opts, stop).run(); }

}  // namespace kforge
