#include "torch/torch_eval.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/parallel.hpp"
#include "core/hash.hpp"
#include "core/subprocess.hpp"
#include "core/text.hpp"
#include "eval/devices.hpp"
#include "eval/worker_process.hpp"
#include "measure/ceilings.hpp"

namespace fs = std::filesystem;

namespace kforge {

std::string find_python(const std::string& configured) {
  std::string want = configured;
  if (want.empty()) {
    if (const char* p = std::getenv("KFORGE_PYTHON"); p && *p) want = p;
  }
  if (want.empty()) want = "python3";
  if (want.find('/') != std::string::npos) return fs::exists(want) ? fs::absolute(want).string() : "";
  const char* path = std::getenv("PATH");
  for (const std::string& dir : split(path ? path : "/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    const fs::path p = fs::path(dir) / want;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

std::string python_worker_dir(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* d = std::getenv("KFORGE_PYTHON_DIR"); d && *d) return d;
  return KFORGE_PYTHON_DIR;
}

nlohmann::json probe_python(const std::string& python_in, const std::string& worker_dir) {
  const std::string python = find_python(python_in);
  if (python.empty()) return {{"error", "no python3 found (set KFORGE_PYTHON)"}};
  ProcessOptions po;
  po.timeout_s = 60;
  po.env = {"PYTHONDONTWRITEBYTECODE=1"};
  const ProcessResult r = run_process({python, python_worker_dir(worker_dir) + "/kforge_worker", "probe"}, po);
  if (!r.ok()) return {{"error", "the worker probe failed: " + r.describe()}, {"python", python}};
  try {
    for (const std::string& line : split(r.out, '\n'))
      if (!trim(line).empty() && trim(line)[0] == '{') return nlohmann::json::parse(line);
  } catch (const std::exception&) {
  }
  return {{"error", "the worker probe printed no JSON"}, {"python", python}};
}

std::string scan_rule_reason(const std::string& rule) {
  if (rule == "missing_model_new") return reason::kMissingEntryPoint;
  if (rule == "syntax_error") return reason::kLoadError;
  if (rule == "not_text") return reason::kNotText;
  return reason::kForbiddenCall;
}

struct TorchEvaluator::Prepared {
  Verdict early;
  bool rejected = false;
  std::string build_dir;
  bool needs_build = false;
  std::string source;  // the candidate's code, read once (the length penalty counts its tokens)
  bool read = false;   // whether `source` was read (a missing file has none)
};

TorchEvaluator::TorchEvaluator(TorchEvalOptions opts) : opts_(std::move(opts)) {
  opts_.python = find_python(opts_.python);
  opts_.worker_dir = python_worker_dir(opts_.worker_dir);
  if (opts_.cache_dir.empty()) opts_.cache_dir = cache_dir() + "/torch";
  if (opts_.device != "cuda" && opts_.device != "cpu" && opts_.device.rfind("cuda:", 0) != 0)
    KF_USAGE_ERROR("device '%s': expected cuda, cuda:N or cpu", opts_.device.c_str());
  for (const std::string& b : opts_.baselines)
    if (b != "eager" && b != "compile" && b != "compile_ro" && b != "graph")
      KF_USAGE_ERROR("unknown baseline '%s' (expected eager, compile, compile_ro, graph)", b.c_str());
  if (opts_.samples < 3 || opts_.samples > 1000) KF_USAGE_ERROR("samples must be between 3 and 1000 (got %d)", opts_.samples);
  if (opts_.trials < 1 || opts_.trials > 100) KF_USAGE_ERROR("trials must be between 1 and 100 (got %d)", opts_.trials);
  ::signal(SIGPIPE, SIG_IGN);
  // Candidate code runs two processes below this one (kforge -> judge -> executor) under the same
  // user: a dumpable kforge would let it open /proc/<kforge>/fd (the judge's reply pipe) or write
  // /proc/<kforge>/mem. Non-dumpable, those need CAP_SYS_PTRACE (core dumps of kforge are off too).
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

TorchEvaluator::~TorchEvaluator() = default;

std::vector<std::string> TorchEvaluator::worker_command() const {
  return {opts_.python, "-u", opts_.worker_dir + "/kforge_worker", "serve"};
}

namespace {

// A secret per request (16 bytes of OS entropy, hex): the judge echoes it on every line it writes,
// a line without it was written into the reply pipe by someone else.
std::string request_key() {
  std::random_device rd;
  std::string key;
  for (int i = 0; i < 4; ++i) key += strf("%08x", unsigned(rd()));
  return key;
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TorchEvaluator::Prepared TorchEvaluator::prepare(const TorchJob& job) const {
  Prepared p;
  p.early.candidate = job.candidate;
  p.early.details["task"] = job.task;
  auto reject = [&](const std::string& code, const std::string& why) {
    p.early.reject(code, why);
    p.rejected = true;
    return p;
  };
  std::error_code ec;
  if (!fs::is_regular_file(job.task, ec)) return reject(reason::kTaskError, "no such task file: " + job.task);
  if (!fs::is_regular_file(job.candidate, ec)) return reject(reason::kMissingFile, "no such file: " + job.candidate);
  p.source = read_whole(job.candidate);
  p.read = true;
  const std::string& source = p.source;
  if (source.size() > opts_.max_source_bytes)
    return reject(reason::kSourceTooLarge,
                  strf("the source has %zu bytes; the limit is %zu", source.size(), opts_.max_source_bytes));
  if (source.find('\0') != std::string::npos) return reject(reason::kNotText, "the file holds NUL bytes: not source text");
  if (opts_.python.empty()) return reject(reason::kNoTorch, "no python3 to run the PyTorch worker (set KFORGE_PYTHON)");
  if (opts_.static_scan) {
    std::vector<std::string> argv = {opts_.python, opts_.worker_dir + "/kforge_worker", "scan", job.candidate,
                                     "--task", job.task};
    if (opts_.allow_streams) argv.push_back("--allow-streams");
    if (opts_.require_cuda_kernel) argv.push_back("--require-cuda-kernel");
    ProcessOptions po;
    po.timeout_s = 60;
    po.env = {"PYTHONDONTWRITEBYTECODE=1"};
    const ProcessResult r = run_process(argv, po);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(r.out);
    } catch (const std::exception&) {
      return reject(reason::kInternalError, "the static scan failed: " + r.describe() + ": " + r.err.substr(0, 400));
    }
    const nlohmann::json& fs_ = j.at("findings");
    if (!fs_.empty()) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& f : fs_)
        list.push_back(strf("line %d: %s (%s): %s", f.value("line", 0), f.value("symbol", "").c_str(),
                            f.value("rule", "").c_str(), f.value("text", "").c_str()));
      p.early.details["static_scan"] = list;
      // Forbidden calls first (they are what a hack looks like); otherwise the first finding's
      // own reason (a missing ModelNew, a syntax error).
      std::string code = scan_rule_reason(fs_[0].value("rule", ""));
      for (const auto& f : fs_)
        if (scan_rule_reason(f.value("rule", "")) == reason::kForbiddenCall) code = reason::kForbiddenCall;
      std::string msg;
      for (size_t i = 0; i < list.size() && msg.empty(); ++i)
        if (scan_rule_reason(fs_[i].value("rule", "")) == code) msg = list[i].get<std::string>();
      if (list.size() > 1) msg += strf(" (and %zu more)", list.size() - 1);
      return reject(code, msg);
    }
  }
  p.build_dir = torch_build_dir(opts_, source);
  p.needs_build = source.find("cpp_extension") != std::string::npos;
  return p;
}

std::string torch_build_dir(const TorchEvalOptions& opts, const std::string& candidate_source) {
  const std::string dir = opts.cache_dir.empty() ? cache_dir() + "/torch" : opts.cache_dir;
  return dir + "/ext/" + sha256_hex(candidate_source).substr(0, 16);
}

Verdict TorchEvaluator::evaluate(const TorchJob& job) { return evaluate_batch({job}).front(); }

std::vector<Verdict> TorchEvaluator::evaluate_batch(const std::vector<TorchJob>& jobs,
                                                    const std::function<void(size_t, size_t, const Verdict&)>& progress) {
  std::vector<Prepared> prepared;
  for (const TorchJob& j : jobs) prepared.push_back(prepare(j));

  // Build the extensions in parallel: each build is one `kforge_worker build` process (it imports
  // the candidate, which runs load_inline) with the compile time-out.
  std::vector<std::string> build_failure(jobs.size());
  std::vector<std::string> build_escape(jobs.size());  // processes the import left in a group of their own
  std::vector<double> build_seconds(jobs.size(), -1);
  if (opts_.prebuild) {
    std::vector<size_t> todo;
    for (size_t i = 0; i < jobs.size(); ++i)
      if (!prepared[i].rejected && prepared[i].needs_build) todo.push_back(i);
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    const int jobs_n = opts_.build_jobs > 0 ? opts_.build_jobs : std::clamp(cores / 2, 1, 8);
    run_on_slots(todo.size(), size_t(jobs_n), [&](size_t k, size_t) {
      const size_t i = todo[k];
      ProcessOptions po;
      po.timeout_s = opts_.compile_timeout_s;
      po.env = {"MAX_JOBS=2", "PYTHONDONTWRITEBYTECODE=1"};
      // The build kills whatever the import left running itself (its --deadline-s comes a little
      // before our time-out, whose group kill would miss processes that left the group).
      const ProcessResult r = run_process(
          {opts_.python, opts_.worker_dir + "/kforge_worker", "build", jobs[i].candidate, "--build-dir",
           prepared[i].build_dir, "--deadline-s", strf("%.1f", std::max(1.0, opts_.compile_timeout_s - 2.0))},
          po);
      build_seconds[i] = r.seconds;
      if (r.timed_out) build_failure[i] = strf("timed out after %.0f s", opts_.compile_timeout_s);
      // Its report is the last line of its stdout.
      const size_t end = r.out.find_last_not_of("\n");
      if (end != std::string::npos) {
        const size_t begin = r.out.rfind('\n', end);
        const std::string last = r.out.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin + 1));
        const nlohmann::json rep = nlohmann::json::parse(last, nullptr, false);
        if (rep.is_object() && rep.value("timed_out", false))
          build_failure[i] = strf("timed out after %.0f s", opts_.compile_timeout_s);
        if (rep.is_object() && rep.value("escaped", 0) > 0)
          build_escape[i] = strf("importing the candidate to build its extension left %d process(es) running in a "
                                 "process group of their own (killed): work outside the judged processes",
                                 rep.value("escaped", 0));
      }
    });
  }

  std::vector<Verdict> out(jobs.size());
  std::mutex progress_mutex;
  run_on_slots(jobs.size(), std::max<size_t>(1, opts_.devices.size()), [&](size_t i, size_t slot) {
    Verdict v;
    if (prepared[i].rejected) {
      v = prepared[i].early;
    } else if (!build_escape[i].empty()) {
      v.candidate = jobs[i].candidate;
      v.reject(reason::kChildProcess, build_escape[i]);
    } else if (!build_failure[i].empty()) {
      v.candidate = jobs[i].candidate;
      v.reject(reason::kCompileTimeout, "building the candidate's extension " + build_failure[i]);
    } else {
      // The import is quick once the extension is built: a hang there need not wait for a build's time-out.
      const bool built = !prepared[i].needs_build || (opts_.prebuild && build_seconds[i] >= 0);
      const double load_timeout =
          built && opts_.import_timeout_s > 0 ? opts_.import_timeout_s : opts_.compile_timeout_s;
      v = run_in_worker(jobs[i], prepared[i].build_dir, load_timeout, slot);
      if (!opts_.devices.empty()) v.details["device"] = opts_.devices[slot];
    }
    v.candidate = jobs[i].candidate;
    v.details["task"] = jobs[i].task;
    if (build_seconds[i] >= 0) v.details["build_s"] = build_seconds[i];
    apply_reward(v, opts_.reward, prepared[i].read ? &prepared[i].source : nullptr);
    std::lock_guard<std::mutex> lock(progress_mutex);
    if (progress) progress(i, jobs.size(), v);
    out[i] = std::move(v);
  });
  return out;
}

Verdict TorchEvaluator::run_in_worker(const TorchJob& job, const std::string& build_dir, double load_timeout_s,
                                      size_t slot) {
  nlohmann::json req = {{"id", next_id_++},
                        {"op", "torch"},
                        {"task", fs::absolute(job.task).string()},
                        {"candidate", fs::absolute(job.candidate).string()},
                        {"name", job.candidate},
                        {"device", opts_.devices.empty() ? opts_.device : std::string("cuda")},
                        {"baselines", opts_.baselines},
                        {"samples", opts_.samples},
                        {"trials", opts_.trials},
                        {"seed", opts_.seed},
                        {"build_dir", build_dir},
                        {"cache_dir", opts_.cache_dir},
                        {"skip_timing", opts_.skip_timing},
                        {"require_cuda_kernel", opts_.require_cuda_kernel},
                        {"load_timeout_s", load_timeout_s},
                        {"run_timeout_s", opts_.run_timeout_s},
                        {"exit_after", true}};
  const std::string key = request_key();
  req["key"] = key;
  if (opts_.atol) req["atol"] = *opts_.atol;
  if (opts_.rtol) req["rtol"] = *opts_.rtol;
  Verdict v;
  v.candidate = job.candidate;
  // One fresh worker per candidate (see torch_eval.hpp).
  std::vector<std::string> env = {"PYTHONDONTWRITEBYTECODE=1", "MAX_JOBS=2"};
  if (!opts_.devices.empty()) env.push_back(device_env(opts_.devices[slot]));
  // The worker dies with kforge (PR_SET_PDEATHSIG): a kill -9 or Ctrl-C of kforge must not leave
  // a judge running (it would load the CPU or GPU under the next measurement). This thread owns
  // the worker until it returns, so only kforge's death fires the signal.
  WorkerProcess worker(worker_command(), env, -1, /*die_with_parent=*/true);
  ++workers_started_;
  if (!worker.send(dump_json(req))) {
    v.reject(reason::kInternalError, "the Python worker could not be reached (" + worker.kill() + ")");
    return v;
  }
  std::string phase = "start";
  nlohmann::json phases = nlohmann::json::object();
  std::string line;
  while (true) {
    const double limit = phase == "loading" ? load_timeout_s : opts_.run_timeout_s;
    switch (worker.read_line(limit, line)) {
      case WorkerProcess::Read::kTimeout:
        worker.kill();
        if (phase == "loading")
          v.reject(reason::kCompileTimeout, strf("importing (building) the candidate took more than %.0f s; the worker "
                                                 "was killed",
                                                 load_timeout_s));
        else
          v.reject(reason::kTimeout, strf("no verdict within %.0f s after phase '%s': the candidate hangs or is far "
                                          "too slow; the worker was killed",
                                          opts_.run_timeout_s, phase.c_str()));
        v.details["phase"] = phase;
        return v;
      case WorkerProcess::Read::kEof: {
        const std::string how = worker.wait_exit();
        v.reject(reason::kCrashed, "the Python worker died in phase '" + phase + "': " + how);
        v.details["phase"] = phase;
        return v;
      }
      case WorkerProcess::Read::kLine:
        break;
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      worker.kill();
      v.reject(reason::kInternalError, std::string("the Python worker answered with malformed JSON: ") + e.what());
      return v;
    }
    if (!j.is_object() || !j.contains("key") || !j["key"].is_string() || j["key"].get<std::string>() != key) {
      worker.kill();
      v.reject("forged_reply", "a line on the judge's reply pipe did not carry this request's key: written by "
                               "something other than the judge");
      v.details["phase"] = phase;
      return v;
    }
    if (j.contains("phase")) {
      phase = j["phase"].get<std::string>();
      continue;
    }
    try {
      v = verdict_from_json(j);
    } catch (const Error& e) {
      worker.kill();
      v.reject(reason::kInternalError, std::string("the Python worker's verdict is malformed: ") + e.what());
      return v;
    }
    v.candidate = job.candidate;
    worker.wait_exit();
    return v;
  }
}

}  // namespace kforge
