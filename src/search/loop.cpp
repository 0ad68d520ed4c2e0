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
#include <cctype>
#include <iterator>
#include <thread>
#include <mutex>
#include <condition_variable>
#include <deque>
#include <exception>
#include <optional>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/subprocess.hpp"
#include "core/text.hpp"
#include "compile/compile.hpp"
#include "eval/profile.hpp"
#include "llm/prompt.hpp"
#include "llm/response.hpp"
#include "search/builtin_policy.hpp"
#include "service/eval_service.hpp"
#include "service/task.hpp"
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
          {"reward_penalties", penalties_to_json(o.eval.reward)},
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
                  {"reward_penalties", penalties_to_json(t.reward)},
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
  // A run keeps the penalties it began with (a run stored before they existed has none).
  penalties_from_json(j.value("reward_penalties", nlohmann::json::object()), o.eval.reward);
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
    penalties_from_json(t.value("reward_penalties", nlohmann::json::object()), to.reward);
    if (to.python.empty()) to.python = t.value("python", std::string());
    to.allow_streams = t.value("allow_streams", to.allow_streams);
    to.require_cuda_kernel = t.value("require_cuda_kernel", to.require_cuda_kernel);
    // The tolerances a run was judged with stay its own (null: the task's and the dtype's defaults).
    for (const auto& [key, dst] : {std::pair{"atol", &to.atol}, std::pair{"rtol", &to.rtol}})
      if (t.contains(key)) *dst = t[key].is_number() ? std::optional<double>(t[key].get<double>()) : std::nullopt;
  }
}

namespace {

// Seconds given for a time-out: positive and finite, at most a week.
void check_seconds(double s, const char* flag) {
  if (!(s > 0) || !(s <= 7 * 86400.0))
    KF_USAGE_ERROR("%s must be a number of seconds above 0 and at most 604800 (got %g)", flag, s);
}

void check_endpoint_url(const std::string& url) {
  const size_t scheme = url.find("://");
  const std::string s = scheme == std::string::npos ? "" : url.substr(0, scheme);
  if (s != "http" && s != "https")
    KF_USAGE_ERROR("--llm-url '%s' must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1)", url.c_str());
  const std::string rest = url.substr(scheme + 3);
  if (rest.empty() || rest[0] == '/' || rest[0] == ':')
    KF_USAGE_ERROR("--llm-url '%s' names no host (e.g. http://127.0.0.1:8000/v1)", url.c_str());
}

}  // namespace

void check_optimize_options(const OptimizeOptions& o) {
  if (o.profile_top < 0 || o.profile_top > 100)
    KF_USAGE_ERROR("--profile-top must be a whole number from 0 to 100 (got %d)", o.profile_top);
  // The run folder.
  if (o.run_dir.empty()) KF_USAGE_ERROR("--run-dir must not be empty");
  {
    std::error_code ec;
    if (fs::exists(o.run_dir, ec) && !fs::is_directory(o.run_dir, ec))
      KF_USAGE_ERROR("--run-dir '%s' is a file, not a folder; give a folder (created when missing)", o.run_dir.c_str());
  }
  // The task and the policy.
  if (o.task.empty()) KF_USAGE_ERROR("--task is required (e.g. --task hgemm:4096x4096x64:tn), or --resume DIR");
  const bool torch = is_torch_task(o.task);
  if (torch) {
    std::error_code ec;
    if (!fs::is_regular_file(o.task, ec)) KF_USAGE_ERROR("no such task file: %s", o.task.c_str());
  } else {
    parse_hgemm_task(o.task);
  }
  if (o.policy != "llm" && o.policy != "builtin")
    KF_USAGE_ERROR("unknown --policy '%s' (expected llm or builtin)", o.policy.c_str());
  if (torch && o.policy == "builtin")
    KF_USAGE_ERROR("the builtin policy proposes HGEMM kernels only; PyTorch tasks need --policy llm");
  if (!o.seed_file.empty()) {
    if (!torch) KF_USAGE_ERROR("--seed-file applies to PyTorch tasks (an HGEMM run starts from kforge's naive kernel)");
    std::error_code ec;
    if (!fs::is_regular_file(o.seed_file, ec)) KF_USAGE_ERROR("no such seed file: %s", o.seed_file.c_str());
  }
  // The loop.
  if (o.iterations < 1) KF_USAGE_ERROR("--iterations must be at least 1 (got %d)", o.iterations);
  if (o.group_size < 1 || o.group_size > 64) KF_USAGE_ERROR("--group-size must be between 1 and 64 (got %d)", o.group_size);
  if (o.exemplars < 0 || o.exemplars > 16) KF_USAGE_ERROR("--exemplars must be between 0 and 16 (got %d)", o.exemplars);
  make_sampler(o.sampler);
  if (!(o.reward_clip > 0) || !std::isfinite(o.reward_clip))
    KF_USAGE_ERROR("--reward-clip must be a positive number (got %g)", o.reward_clip);
  if (!(o.jump_factor > 1) || !std::isfinite(o.jump_factor))
    KF_USAGE_ERROR("the jump factor must be a number above 1 (got %g)", o.jump_factor);
  if (!o.prompts_dir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(o.prompts_dir, ec))
      KF_USAGE_ERROR("--prompts '%s' is not a folder; give a folder of templates (see prompts/README.md)",
                     o.prompts_dir.c_str());
    PromptTemplates::load(o.prompts_dir);  // an unreadable template is a usage error
  }
  // The LLM: endpoints, client options, the cassette.
  const LlmOptions& l = o.llm;
  const bool replay = l.cassette_mode == CassetteMode::kReplay;
  if (o.policy == "llm" && l.endpoints.empty() && !replay)
    KF_USAGE_ERROR("the llm policy needs --llm-url and --model (or --replay --cassette FILE, or --policy builtin, "
                   "which needs no endpoint)");
  if (!o.reviewer_model.empty() && l.endpoints.empty())
    KF_USAGE_ERROR("--reviewer-model needs an endpoint (--llm-url)");
  for (const Endpoint& e : l.endpoints) {
    check_endpoint_url(e.url);
    if (e.model.empty()) KF_USAGE_ERROR("--model must not be empty (endpoint %s)", e.url.c_str());
    static const std::regex env_name("[A-Za-z_][A-Za-z0-9_]*");
    if (!e.api_key_env.empty() && !std::regex_match(e.api_key_env, env_name))
      KF_USAGE_ERROR("--api-key-env '%s' is not an environment variable name (letters, digits and _, e.g. "
                     "OPENAI_API_KEY)", e.api_key_env.c_str());
    if (!(e.usd_per_1k_prompt >= 0) || !std::isfinite(e.usd_per_1k_prompt))
      KF_USAGE_ERROR("--price-prompt must be a non-negative number of USD per 1,000 tokens (got %g)", e.usd_per_1k_prompt);
    if (!(e.usd_per_1k_completion >= 0) || !std::isfinite(e.usd_per_1k_completion))
      KF_USAGE_ERROR("--price-completion must be a non-negative number of USD per 1,000 tokens (got %g)",
                     e.usd_per_1k_completion);
  }
  if (l.concurrency < 1 || l.concurrency > 256)
    KF_USAGE_ERROR("--concurrency must be between 1 and 256 (got %d)", l.concurrency);
  check_seconds(l.timeout_s, "--llm-timeout");
  if (l.max_retries < 0 || l.max_retries > 100)
    KF_USAGE_ERROR("--llm-retries must be between 0 and 100 (got %d)", l.max_retries);
  if (std::isnan(l.budget_usd) || l.budget_usd < 0)
    KF_USAGE_ERROR("--budget-usd must be a non-negative number of USD (got %g)", l.budget_usd);
  if (l.budget_usd == 0 && o.policy == "llm" && !o.resume)
    KF_USAGE_ERROR("--budget-usd 0 allows no LLM call at all; give a positive cap (e.g. --budget-usd 5), or leave it "
                   "out for none");
  if (l.cassette_mode != CassetteMode::kOff && l.cassette_path.empty())
    KF_USAGE_ERROR("--record and --replay need --cassette FILE");
  if (l.cassette_mode == CassetteMode::kRecord) {
    std::error_code ec;
    if (fs::is_directory(l.cassette_path, ec))
      KF_USAGE_ERROR("--cassette '%s' is a folder; give a .jsonl file to record into", l.cassette_path.c_str());
    check_writable(l.cassette_path);
  }
  if (replay) check_replay_cassette(l.cassette_path);
  // The evaluator.
  if (!torch) {
    if (o.eval.modes.empty()) KF_USAGE_ERROR("--mode needs at least one timing mode");
    if (o.eval.samples < 1 || o.eval.samples > 10000)
      KF_USAGE_ERROR("--samples must be between 1 and 10000 (got %d)", o.eval.samples);
    check_seconds(o.eval.run_timeout_s, "--run-timeout");
    check_seconds(o.eval.compile.timeout_s, "--compile-timeout");
    rejected_reward(o.eval.reward);  // an unknown reward kind
  }
  const TorchEvalOptions& t = o.torch;
  if (!t.python.empty() && find_python(t.python).empty())
    KF_USAGE_ERROR("--python '%s': no such executable; give a Python 3 (with torch for PyTorch tasks), or leave "
                   "--python out ($KFORGE_PYTHON, else python3)",
                   t.python.c_str());
  // The PyTorch options are checked for every task: a bad one is a mistake even where it is unused.
  if (t.trials < 1 || t.trials > 1000) KF_USAGE_ERROR("--trials must be between 1 and 1000 (got %d)", t.trials);
  if (!(t.import_timeout_s >= 0) || t.import_timeout_s > 7 * 86400.0)
    KF_USAGE_ERROR("--import-timeout must be a number of seconds from 0 to 604800 (got %g)", t.import_timeout_s);
  static const std::regex device("cpu|cuda|cuda:[0-9]+");
  if (!std::regex_match(t.device, device))
    KF_USAGE_ERROR("unknown --device '%s' (expected cuda, cuda:N or cpu)", t.device.c_str());
  if (torch) {
    if (find_python(t.python).empty())
      KF_USAGE_ERROR("no Python found for the PyTorch worker: give --python PATH or set KFORGE_PYTHON");
    if (t.samples < 1 || t.samples > 10000)
      KF_USAGE_ERROR("--samples must be between 1 and 10000 (got %d)", t.samples);
    check_seconds(t.run_timeout_s, "--run-timeout");
    check_seconds(t.compile_timeout_s, "--compile-timeout");
    for (const auto& [flag, v] : {std::pair{"--atol", t.atol}, std::pair{"--rtol", t.rtol}})
      if (v && (!(*v >= 0) || !std::isfinite(*v)))
        KF_USAGE_ERROR("%s must be a non-negative number (got %g)", flag, *v);
    rejected_reward(t.reward);
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

// A source as a prompt shows it: decoded as its PEP 263 coding line declares when that is Latin-1
// (latin-1, iso-8859-1 and their aliases; a task file may say `# -*- coding: latin-1 -*-`),
// otherwise with every byte that is not UTF-8 written as U+FFFD. Prompts are JSON, and JSON is
// UTF-8; the candidate files themselves keep their bytes.
std::string prompt_text(const std::string& source) {
  if (is_valid_utf8(source)) return source;
  static const std::regex coding("^[ \t\f]*#.*?coding[:=][ \t]*([-\\w.]+)");
  const std::vector<std::string> lines = split(source.substr(0, 1024), '\n');
  for (size_t i = 0; i < lines.size() && i < 2; ++i) {
    std::smatch m;
    if (!std::regex_search(lines[i], m, coding)) continue;
    std::string enc = m[1].str();
    for (char& ch : enc) ch = ch == '_' ? '-' : char(std::tolower(static_cast<unsigned char>(ch)));
    static const char* const kLatin1[] = {"latin-1", "latin1", "iso-8859-1", "iso8859-1", "8859", "cp819",
                                          "l1", "iso-latin-1", "latin"};
    if (std::find(std::begin(kLatin1), std::end(kLatin1), enc) == std::end(kLatin1)) break;
    std::string out;
    out.reserve(source.size() + source.size() / 8);
    for (unsigned char ch : source) {
      if (ch < 0x80) {
        out += char(ch);
      } else {
        out += char(0xC0 | (ch >> 6));
        out += char(0x80 | (ch & 0x3F));
      }
    }
    return out;
  }
  return valid_utf8(source);
}

// The run folder's lock: an exclusive flock on kforge-search.lock, held while the loop runs, so
// that two kforge processes never drive one run (a second --resume is refused). The kernel drops
// it when the process ends, however it ends.
class RunLock {
 public:
  explicit RunLock(const std::string& run_dir) : path_(run_dir + "/kforge-search.lock") {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) KF_USAGE_ERROR("cannot create the lock file '%s': %s", path_.c_str(), std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      std::string holder(trim(read_file(path_)));
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK)
        KF_USAGE_ERROR("the run folder '%s' is in use by another kforge optimize%s; wait for it to end (or stop it "
                       "with Ctrl-C) before --resume",
                       run_dir.c_str(), holder.empty() ? "" : (" (pid " + holder + ")").c_str());
      KF_USAGE_ERROR("cannot lock '%s': %s", path_.c_str(), std::strerror(err));
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
      // The pid only makes the message of a refused second run clearer.
    }
  }
  ~RunLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
  }
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

// Reasons that mean the judge could not judge (kforge's side, or the machine), not that the
// candidate failed: a run whose every candidate got one of them judged nothing.
bool judged_nothing(const Verdict& v) {
  for (const char* r : {reason::kInternalError, reason::kNoTorch, reason::kNoGpu, reason::kTaskError})
    if (v.has_reason(r)) return true;
  return false;
}

// One line for a verdict as it comes: "ACCEPT 1.234x" or "REJECT reason: message".
std::string verdict_line(const Verdict& v, double score) {
  if (v.correct) return strf("ACCEPT %.3fx", score);
  std::string msg = v.message.substr(0, 200);
  for (char& ch : msg)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return strf("REJECT %s: %s", v.reasons.empty() ? "rejected" : v.reasons.front().c_str(), valid_utf8(msg).c_str());
}

class Loop {
 public:
  Loop(const OptimizeOptions& o, const std::atomic<bool>& stop) : o_(o), stop_(stop) {}

  OptimizeSummary run() {
    const std::string db_path = o_.run_dir + "/kforge-search.db";
    if (o_.resume) {
      std::error_code ec;
      if (!fs::is_regular_file(db_path, ec))
        KF_USAGE_ERROR("no run to resume in '%s' (no kforge-search.db there); start a run with --task ... --run-dir %s",
                       o_.run_dir.c_str(), o_.run_dir.c_str());
      lock_ = std::make_unique<RunLock>(o_.run_dir);
      db_ = std::make_unique<ProgramDb>(db_path);
      auto r = db_->latest_run();
      if (!r) KF_USAGE_ERROR("no run to resume in '%s'", o_.run_dir.c_str());
      run_id_ = r->id;
      apply_stored_options(r->config, o_);
      check_optimize_options(o_);  // the stored options with those given anew, before anything is written
      db_->set_run_config(run_id_, to_json(o_));  // what was given anew (iterations, budget) stays the run's
      std::fprintf(stderr, "kforge optimize: resuming run %lld (%s) after iteration %d\n", (long long)run_id_,
                   o_.task.c_str(), db_->last_complete_iteration(run_id_));
      fs::create_directories(o_.run_dir + "/candidates");
    } else {
      check_optimize_options(o_);
      torch_ = is_torch_task(o_.task);
      // Everything the run needs is read before its folder is created.
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
      make_run_folder(o_.run_dir);
      lock_ = std::make_unique<RunLock>(o_.run_dir);
      db_ = std::make_unique<ProgramDb>(db_path);
      if (db_->latest_run())
        KF_USAGE_ERROR("'%s' already holds a search run: pass --resume to continue it, or another --run-dir",
                       o_.run_dir.c_str());
      run_id_ = db_->create_run(o_.task, to_json(o_));
      seed.run_id = run_id_;
      db_->add_candidate(seed);
      db_->complete_iteration(run_id_, 0);
    }
    torch_ = is_torch_task(o_.task);
    if (torch_) {
      task_source_ = read_file(o_.task);  // a task file gone since the run began: a clear error
    } else {
      problem_ = parse_hgemm_task(o_.task);
    }
    sampler_ = make_sampler(o_.sampler);
    templates_ = o_.prompts_dir.empty() ? PromptTemplates::builtin() : PromptTemplates::load(o_.prompts_dir);
    if (o_.policy == "llm") {
      LlmOptions lo = o_.llm;
      lo.spent_usd = db_->total_cost_usd(run_id_);  // the cap is the run's, across resumes
      lo.on_retry = [](const std::string& line) { std::fprintf(stderr, "kforge optimize: %s\n", line.c_str()); };
      lo.stop = &stop_;  // after a Ctrl-C the call in flight is not retried
      llm_ = std::make_unique<LlmClient>(lo);
    }
    if (!o_.reviewer_model.empty()) {
      LlmOptions ro = o_.llm;
      for (Endpoint& e : ro.endpoints) e.model = o_.reviewer_model;
      ro.cassette_mode = CassetteMode::kOff;  // reviews are not part of the recorded search
      ro.spent_usd = db_->total_cost_usd(run_id_);  // reviews count against the run's cap too
      reviewer_ = std::make_unique<LlmClient>(ro);
    }
    // Candidates are judged through the one evaluation service (src/service), as kforge serve and
    // eval judge: a slot per --devices GPU (else the default device), the candidates of a group
    // compiled on every core, then judged together (one batch per slot).
    {
      ServiceOptions so;
      so.devices = torch_ ? o_.torch.devices : o_.eval.devices;
      so.max_batch = 1024;
      service_ = std::make_unique<EvalService>(so);
      service_->add_task(torch_ ? make_torch_task(kServiceTask, o_.task, o_.torch)
                                : make_hgemm_task(kServiceTask, problem_, hgemm_eval_with_user_compile()));
    }
    db_->set_run_state(run_id_, "running");

    evaluate_pending();
    finish_groups();
    for (int it = 0; it <= db_->last_iteration(run_id_); ++it) profile_best(it);  // the seed; what a kill left
    OptimizeSummary sum;
    bool budget_gone = false;
    int dead_iterations = 0;  // consecutive iterations whose every LLM call failed
    for (int it = db_->last_complete_iteration(run_id_) + 1; it <= o_.iterations && !budget_gone; ++it) {
      if (stop_) break;
      const double best_before = best().second;
      const int ok_before = calls_ok_, failed_before = calls_failed_;
      budget_gone = !iteration(it);
      dead_iterations = calls_ok_ == ok_before && calls_failed_ > failed_before ? dead_iterations + 1 : 0;
      if (dead_iterations >= kDeadIterationsToStop) {
        std::fprintf(stderr, "kforge optimize: every LLM call of the last %d iterations failed; stopping (the last: %s)\n",
                     dead_iterations, last_call_error_.c_str());
        evaluate_pending();
        finish_groups();
        break;
      }
      evaluate_pending();
      remeasure_jump(it, best_before);
      finish_groups();
      profile_best(it);
      progress(it);
    }
    sum.interrupted = bool(stop_);
    sum.python = torch_;
    db_->set_run_state(run_id_, sum.interrupted ? "stopped" : "complete");
    sum.run_id = run_id_;
    sum.iterations_done = db_->last_complete_iteration(run_id_);
    for (const CandidateRecord& c : db_->candidates(run_id_)) {
      ++sum.candidates;
      sum.correct += c.correct;
    }
    std::tie(sum.best_id, sum.best_speedup) = best();
    sum.spent_usd = db_->total_cost_usd(run_id_);
    sum.budget_spent = budget_gone;
    // A run that did nothing says so (the caller exits non-zero with this line).
    if (calls_ok_ == 0 && calls_failed_ > 0)
      sum.failure = budget_gone && calls_failed_ == budget_refusals_
                        ? strf("the LLM budget is spent (%.4f USD of %.4f USD): give a higher --budget-usd with "
                               "--resume %s to go on",
                               sum.spent_usd, o_.llm.budget_usd, o_.run_dir.c_str())
                        : strf("every LLM call failed (%d call%s); the last: %s", calls_failed_,
                               calls_failed_ == 1 ? "" : "s", last_call_error_.c_str());
    else if (judged_ == 0 && not_judged_ > 0)
      sum.failure = strf("no candidate could be judged (%d tried): %s", not_judged_, first_not_judged_.c_str());
    return sum;
  }

 private:
  // The run folder and its candidates/ folder, with a usage error naming the path on failure.
  static void make_run_folder(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(fs::path(dir) / "candidates", ec);
    if (ec) KF_USAGE_ERROR("cannot create the run folder '%s': %s; give another --run-dir", dir.c_str(),
                           ec.message().c_str());
  }

  std::pair<int64_t, double> best() const {
    int64_t id = 0;
    double s = 0;
    for (const CandidateRecord& c : db_->candidates(run_id_))
      if (c.correct && c.score > s) id = c.id, s = c.score;
    return {id, s};
  }

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

  // A candidate's score: its median speed-up in the reward's mode when correct, 0 otherwise.
  double score_of(const Verdict& v) const {
    const auto mode = v.speedup.find(reward_config().mode);
    return v.correct && mode != v.speedup.end() ? mode->second.median : 0.0;
  }

  std::string candidate_path(int64_t id) const {
    return strf("%s/candidates/%lld.%s", o_.run_dir.c_str(), (long long)id, torch_ ? "py" : "cu");
  }

  // Judges candidate files, storing each verdict as it comes (through `done`).
  // (`done` runs on a service thread while this one waits; a failure of the judge, or of `done`,
  // is rethrown here.)
  void judge(const std::vector<std::string>& paths, const std::function<void(size_t, const Verdict&)>& done) {
    service_->judge_files(kServiceTask, paths, done);
  }

  // Profiles the `profile_top` fastest correct candidates of iteration `it` that have no profile
  // yet (eval/profile.hpp), one after another on this thread (nothing else is judged meanwhile),
  // and stores each with its verdict. A profile that cannot be taken stores why (profile.error);
  // after ncu was found missing, no further profile is tried in this run.
  void profile_best(int it) {
    if (o_.no_profile || o_.profile_top <= 0 || ncu_missing_ || o_.policy == "builtin") return;
    std::vector<CandidateRecord> cs;
    for (const CandidateRecord& c : db_->candidates(run_id_)) {
      if (c.iteration != it || !c.correct || !c.verdict.is_object()) continue;
      const nlohmann::json& d = c.verdict.value("details", nlohmann::json::object());
      if (d.is_object() && d.contains("profile")) continue;
      cs.push_back(c);
    }
    // Already profiled candidates of the iteration count against its share.
    int done = 0;
    for (const CandidateRecord& c : db_->candidates(run_id_))
      if (c.iteration == it && c.verdict.is_object() && c.verdict.value("details", nlohmann::json::object()).contains("profile"))
        ++done;
    std::stable_sort(cs.begin(), cs.end(), [](const CandidateRecord& a, const CandidateRecord& b) { return a.score > b.score; });
    for (size_t i = 0; i < cs.size() && done < o_.profile_top && !stop_; ++i, ++done) {
      const CandidateRecord& c = cs[i];
      const std::string path = candidate_path(c.id);
      write_file_atomic(path, c.source);
      nlohmann::json p;
      ProfileOptions po = o_.profile;
      if (torch_) {
        if (!o_.torch.devices.empty()) po.device = o_.torch.devices.front();
        p = profile_torch_candidate(o_.task, path, torch_build_dir(o_.torch, c.source), o_.torch, po);
      } else {
        if (!o_.eval.devices.empty()) po.device = o_.eval.devices.front();
        try {
          if (!profile_compiler_) profile_compiler_ = std::make_unique<CompileService>(hgemm_eval_with_user_compile().compile);
          const CompileResult r = profile_compiler_->compile_file(path);
          p = r.ok ? profile_hgemm_candidate(r.so_path, problem_, po)
                   : nlohmann::json{{"tool", "ncu"}, {"error", "the candidate does not compile: " + r.failure},
                                    {"error_code", profile_error::kNcuFailed}, {"seconds", 0.0}};
        } catch (const std::exception& e) {
          p = {{"tool", "ncu"}, {"error", e.what()}, {"error_code", profile_error::kNcuFailed}, {"seconds", 0.0}};
        }
      }
      db_->set_profile(c.id, p);
      std::fprintf(stderr, "kforge optimize: candidate %lld: %s\n", (long long)c.id, profile_summary(p).c_str());
      if (p.value("error_code", std::string()) == profile_error::kNcuMissing ||
          p.value("error_code", std::string()) == profile_error::kNcuPermission) {
        ncu_missing_ = true;
        break;
      }
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
    std::fprintf(stderr, "kforge optimize: judging %zu candidate%s\n", pending.size(), pending.size() == 1 ? "" : "s");
    // Each verdict is stored (and shown) as soon as it exists: a kill loses at most the candidate being judged.
    judge(paths, [&](size_t i, const Verdict& v) {
      const double score = score_of(v);
      db_->record_verdict(pending[i].id, to_json(v), v.correct, score, v.correct ? v.reward : rejected_reward(reward_config()));
      std::fprintf(stderr, "kforge optimize: candidate %lld (iteration %d, sample %d): %s\n", (long long)pending[i].id,
                   pending[i].iteration, pending[i].sample, verdict_line(v, score).c_str());
      if (judged_nothing(v)) {
        if (not_judged_++ == 0) first_not_judged_ = valid_utf8(v.message.substr(0, 300));
      } else {
        ++judged_;
      }
    });
  }

  // Group-normalised advantages for every group of a finished iteration that lacks them. A
  // rejected or invalid member enters with rejected_reward(), below every correct member
  // (group_input), so it never gets a higher advantage than a correct one.
  void finish_groups() {
    std::map<std::pair<int, int>, std::vector<CandidateRecord>> groups;
    for (const CandidateRecord& c : db_->candidates(run_id_)) groups[{c.iteration, c.group}].push_back(c);
    for (const auto& [key, members] : groups) {
      const bool complete = std::none_of(members.begin(), members.end(), [](const CandidateRecord& c) { return c.status == "pending"; });
      const bool missing = std::any_of(members.begin(), members.end(), [](const CandidateRecord& c) { return !c.advantage; });
      if (!complete || !missing) continue;
      const auto iter = db_->iteration(run_id_, key.first);
      if (!iter || !iter->complete) continue;  // more answers may come on --resume
      std::vector<double> rewards;
      for (const CandidateRecord& c : members)
        rewards.push_back(group_input(c.correct, c.reward, o_.reward_clip, reward_config()));
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
      double reward = rejected_reward(reward_config());
      if (correct) {
        // The lower measurement's reward, penalties included, with its parts where a trainer reads them.
        Verdict lower = score2 < c.score ? again : verdict_from_json(c.verdict);
        const RewardParts parts = reward_parts(lower, reward_config(), &c.source);
        reward = parts.total;
        if (verdict.contains("details") && verdict["details"].is_object()) verdict["details"]["reward"] = to_json(parts);
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
        score = 0;
        reward = rejected_reward(reward_config());
        if (verdict.contains("details") && verdict["details"].is_object()) {
          Verdict flagged;  // the parts of a rejection: the floor, nothing else applies
          flagged.reject(reason::kReviewerFlagged, "flagged");
          verdict["details"]["reward"] = to_json(reward_parts(flagged, reward_config(), &c.source));
        }
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

  // The prompt and parent of iteration `it`: as stored when the iteration was begun (a resumed
  // iteration keeps its prompt, so one group never mixes two prompts), else drawn now and stored.
  std::pair<std::vector<ChatMessage>, CandidateRecord> prompt_for(int it, std::mt19937_64& rng) {
    if (const auto rec = db_->iteration(run_id_, it); rec && !rec->prompt.empty()) {
      const auto parent = db_->candidate(rec->parent);
      const nlohmann::json j = nlohmann::json::parse(rec->prompt, nullptr, false);
      if (parent && j.is_array()) {
        std::vector<ChatMessage> messages;
        for (const auto& m : j) messages.push_back({m.value("role", ""), m.value("content", "")});
        return {messages, *parent};
      }
    }
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
    if (o_.policy == "builtin") return {{}, parent};
    PromptInputs in;
    if (torch_) {
      in.task = describe_torch_task(o_.task, o_.torch);
      in.reference = prompt_text(task_source_);
      in.language = "python";
    } else {
      in.task = describe_task(problem_);
      in.reference = prompt_text(all.front().source);
    }
    for (const CandidateRecord& c : shown) {
      Exemplar e;
      e.id = c.id;
      e.source = prompt_text(c.source);
      e.correct = c.correct;
      e.speedup = c.score;
      if (!c.correct && c.verdict.is_object()) e.notes = c.verdict.value("message", "");
      if (!o_.no_profile && c.verdict.is_object() && c.verdict.contains("details") && c.verdict["details"].is_object() &&
          c.verdict["details"].contains("profile"))
        e.profile = render_profile_table(c.verdict["details"]["profile"]);
      in.exemplars.push_back(e);
    }
    in.feedback = feedback_from(all, it - 1);
    const std::vector<ChatMessage> messages = build_prompt(in, templates_);
    nlohmann::json prompt_json = nlohmann::json::array();
    for (const ChatMessage& m : messages) prompt_json.push_back({{"role", m.role}, {"content", m.content}});
    db_->begin_iteration(run_id_, it, parent.id, dump_json(prompt_json));
    return {messages, parent};
  }

  // What one LLM request of an iteration came back with.
  struct Answer {
    int n = 0;  // choices asked for
    std::optional<ChatResponse> response;
    std::optional<LlmError> error;
    std::exception_ptr other;  // anything else (a cassette that cannot be written): rethrown
  };

  // Joins the threads of an iteration's requests however the iteration ends.
  struct JoinAll {
    std::vector<std::thread>& threads;
    ~JoinAll() {
      for (std::thread& t : threads)
        if (t.joinable()) t.join();
    }
  };

  // One prompt, one group of candidates. False when the spending cap is reached. Each paid answer
  // is stored (its candidates and its call, in one transaction) as it arrives; the iteration is
  // marked finished only when its group is full or the loop gives up on the rest, so a kill,
  // Ctrl-C or the spending cap leaves it to --resume, which asks only for what is missing.
  bool iteration(int it) {
    std::mt19937_64 rng(o_.seed * 1000003ull + uint64_t(it));
    auto [messages, parent] = prompt_for(it, rng);
    int have = 0;
    for (const CandidateRecord& c : db_->candidates(run_id_)) have += c.iteration == it;
    if (o_.policy == "builtin") {
      const auto parent_cfg = TiledConfig::from_json(nlohmann::json::parse(parent.analysis, nullptr, false));
      std::vector<CandidateRecord> group;
      for (int s = 0; s < o_.group_size; ++s) {
        const TiledConfig cfg = propose_config(parent_cfg, rng);  // drawn for every sample: the same on resume
        if (s < have) continue;
        CandidateRecord c = make_record(it, s, "builtin", parent.id);
        c.source = tiled_hgemm_source(cfg);
        c.analysis = dump_json(cfg.to_json());
        group.push_back(c);
      }
      db_->add_candidates(group);
      db_->complete_iteration(run_id_, it);
      return true;
    }
    nlohmann::json prompt_json = nlohmann::json::array();
    for (const ChatMessage& m : messages) prompt_json.push_back({{"role", m.role}, {"content", m.content}});
    const std::string prompt_text = dump_json(prompt_json);

    // Prompt tokens are paid per request, so the whole group is asked for in one request (n = G).
    // An endpoint that answers with fewer choices than asked ignores n: the rest of the group is
    // then asked for with n = 1 by up to --concurrency requests at once (one at a time in replay,
    // whose answers come in the recorded order).
    const int concurrency = o_.llm.cassette_mode == CassetteMode::kReplay ? 1 : std::max(1, o_.llm.concurrency);
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Answer> done;
    std::vector<std::thread> threads;
    JoinAll join_all{threads};
    std::exception_ptr failure;
    int in_flight = 0, asked_for = 0, attempts = 0;
    bool budget_ok = true, give_up = false;
    auto launch = [&](int n) {
      ++in_flight;
      ++attempts;
      asked_for += n;
      std::fprintf(stderr, "kforge optimize: iteration %d: asking the LLM for %d candidate%s\n", it, n, n == 1 ? "" : "s");
      threads.emplace_back([&, n] {
        Answer a;
        a.n = n;
        ChatRequest req;
        req.messages = messages;
        req.n = n;
        try {
          a.response = llm_->chat(req);
        } catch (const LlmError& e) {
          a.error = e;
        } catch (...) {
          a.other = std::current_exception();
        }
        std::lock_guard lock(mu);
        done.push_back(std::move(a));
        cv.notify_all();
      });
    };
    const int max_attempts = o_.group_size + 2;
    for (;;) {
      // Ask for what is missing and not already asked for, unless stopping.
      const int missing = o_.group_size - have - asked_for;
      if (!stop_ && budget_ok && !give_up && missing > 0 && attempts < max_attempts) {
        if (!ignores_n_) {
          if (in_flight == 0) launch(missing);
        } else {
          while (in_flight < concurrency && o_.group_size - have - asked_for > 0 && attempts < max_attempts) launch(1);
        }
      }
      if (in_flight == 0) break;
      Answer a;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return !done.empty(); });
        a = std::move(done.front());
        done.pop_front();
      }
      --in_flight;
      asked_for -= a.n;
      if (a.other) {
        if (!failure) failure = a.other;
        give_up = true;
        continue;
      }
      LlmCallRecord call;
      call.run_id = run_id_;
      call.iteration = it;
      if (a.error) {
        const LlmError& e = *a.error;
        call.status = "error";
        call.error = e.what();
        std::fprintf(stderr, "kforge optimize: iteration %d: LLM call failed: %s\n", it, e.what());
        db_->add_llm_call(call);
        ++calls_failed_;
        last_call_error_ = e.what();
        if (e.kind() == LlmError::Kind::kBudget) {
          budget_ok = false;
          ++budget_refusals_;
        } else if (e.kind() == LlmError::Kind::kAuth || e.kind() == LlmError::Kind::kUnreachable ||
                   e.kind() == LlmError::Kind::kReplayMiss) {
          give_up = true;  // no point asking again this iteration; the next one tries anew
        }
        continue;
      }
      const ChatResponse& resp = *a.response;
      ++calls_ok_;
      call.endpoint = resp.endpoint;
      call.model = resp.model;
      call.prompt_tokens = resp.prompt_tokens;
      call.completion_tokens = resp.completion_tokens;
      call.latency_s = resp.latency_s;
      call.cost_usd = resp.cost_usd;
      call.status = "ok";
      std::vector<CandidateRecord> group;
      for (const std::string& text : resp.choices) {
        if (have + int(group.size()) >= o_.group_size) break;
        group.push_back(from_response(it, have + int(group.size()), "llm:" + resp.model, parent, text, prompt_text));
      }
      const std::vector<int64_t> ids = db_->add_answer(call, group);
      have += int(group.size());
      std::string id_list;
      for (int64_t id : ids) id_list += (id_list.empty() ? "" : ", ") + std::to_string(id);
      std::fprintf(stderr, "kforge optimize: iteration %d: the LLM answered %zu choice%s in %.1f s (%d+%d tokens, $%.4f)%s%s\n",
                   it, resp.choices.size(), resp.choices.size() == 1 ? "" : "s", resp.latency_s, resp.prompt_tokens,
                   resp.completion_tokens, resp.cost_usd, ids.empty() ? "" : ": candidates ", id_list.c_str());
      if (int(resp.choices.size()) < a.n) ignores_n_ = true;
      if (resp.choices.empty()) give_up = true;
    }
    for (std::thread& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);
    // Finished unless interrupted or out of budget with samples missing (then --resume finishes it).
    if (have >= o_.group_size || (!stop_ && budget_ok)) db_->complete_iteration(run_id_, it);
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
  std::unique_ptr<RunLock> lock_;
  std::unique_ptr<ProgramDb> db_;
  int64_t run_id_ = 0;
  HgemmProblem problem_;
  bool torch_ = false;       // a PyTorch task (candidates are ModelNew files, language "python")
  std::string task_source_;  // its task file's text (the reference shown in prompts)
  static constexpr const char* kServiceTask = "optimize";  // the run's one task in service_
  std::unique_ptr<EvalService> service_;                    // judges the run's candidates
  std::unique_ptr<Sampler> sampler_;
  PromptTemplates templates_;
  std::unique_ptr<LlmClient> llm_, reviewer_;
  std::unique_ptr<CompileService> profile_compiler_;  // profiles: the judged candidate's shared object, from the cache
  bool ncu_missing_ = false;  // ncu missing or refused: no further profile is tried
  bool ignores_n_ = false;   // the endpoint answered fewer choices than asked: ask n = 1, concurrently
  // This invocation's outcome, for the exit status: a run that did nothing must not report success.
  int calls_ok_ = 0, calls_failed_ = 0, budget_refusals_ = 0;
  // A run stops after this many iterations in a row in which every LLM call failed (an endpoint
  // that is gone does not keep a run of --iterations 1000000 going).
  static constexpr int kDeadIterationsToStop = 3;
  std::string last_call_error_;
  int judged_ = 0, not_judged_ = 0;
  std::string first_not_judged_;
};

}  // namespace

OptimizeSummary run_optimize(const OptimizeOptions& opts, const std::atomic<bool>& stop) { return Loop(opts, stop).run(); }

std::vector<ChatMessage> first_prompt(const std::string& task, const TorchEvalOptions& torch,
                                      const std::string& prompts_dir) {
  const PromptTemplates templates = prompts_dir.empty() ? PromptTemplates::builtin() : PromptTemplates::load(prompts_dir);
  PromptInputs in;
  if (is_torch_task(task)) {
    in.task = describe_torch_task(task, torch);
    in.reference = prompt_text(read_file(task));
    in.language = "python";
  } else {
    in.task = describe_task(parse_hgemm_task(task));
    in.reference = prompt_text(seed_source());
  }
  return build_prompt(in, templates);
}

}  // namespace kforge
