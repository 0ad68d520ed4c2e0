#include "eval/evaluator.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <fcntl.h>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/parallel.hpp"
#include "core/text.hpp"
#include "eval/devices.hpp"
#include "eval/hgemm_worker.hpp"
#include "eval/worker_process.hpp"
#include "gpu/device.hpp"

namespace kforge {

std::string self_executable() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) KF_RUNTIME_ERROR("cannot find this program's own path (/proc/self/exe)");
  return std::string(buf, size_t(n));
}

std::string abi_include_dir() {
  if (const char* d = std::getenv("KFORGE_INCLUDE_DIR"); d && *d) return d;
  return KFORGE_INCLUDE_DIR;
}

EvalOptions hgemm_eval_options(const std::string& arch) {
  EvalOptions o;
  std::string target = arch;
  if (target.empty()) {
    target = "sm_90a";
    if (!gpu_unavailable_reason()) {
      const DeviceInfo d = query_device(0);
      // wgmma and setmaxnreg need the "a" target on Hopper.
      if (!(d.cc_major == 9 && d.cc_minor == 0)) target = strf("sm_%d%d", d.cc_major, d.cc_minor);
    }
  }
  o.compile.arch = target;
  o.compile.include_dirs = {abi_include_dir()};
  o.compile.extra_flags = {"-include", "kforge/abi/hgemm.h"};
  return o;
}

struct Evaluator::Prepared {
  std::string source;
  Verdict early;  // a rejection before compiling (missing file, forbidden call, ...), if any
  bool rejected = false;
};

Evaluator::Evaluator(EvalOptions opts) : opts_(std::move(opts)), compiler_(opts_.compile) {
  if (opts_.worker_command.empty()) opts_.worker_command = {self_executable(), "eval-worker"};
  workers_.resize(std::max<size_t>(1, opts_.devices.size()));
  // A worker that dies must not take the evaluator with it through a broken pipe.
  ::signal(SIGPIPE, SIG_IGN);
}

// Each judge is let end on the end of its requests: it ends its executors itself and reaps them,
// and this process waits for it. Killed instead, its executors die by their parent-death signal
// with no one waiting, and the next kforge process on the GPU meets their contexts being torn
// down (the GPU busy for a moment: a 192 us idle probe made an honest verdict `gpu_not_idle`).
Evaluator::~Evaluator() {
  for (auto& w : workers_)
    if (w) w->close_and_wait();
}

int Evaluator::workers_started() const { return workers_started_; }

Evaluator::Prepared Evaluator::prepare_source(const std::string& path) const {
  Prepared p;
  p.early.candidate = path;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    p.early.reject(reason::kMissingFile, "no such file: " + path);
    p.rejected = true;
    return p;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  p.source = ss.str();
  if (p.source.size() > opts_.compile.max_source_bytes) {
    p.early.reject(reason::kSourceTooLarge, strf("the source has %zu bytes; the limit is %zu", p.source.size(),
                                                 opts_.compile.max_source_bytes));
    p.rejected = true;
    return p;
  }
  if (p.source.find('\0') != std::string::npos) {
    p.early.reject(reason::kNotText, "the file holds NUL bytes: not source text");
    p.rejected = true;
    return p;
  }
  const auto findings = static_scan(p.source, opts_.scan);
  if (!findings.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const ScanFinding& f : findings) list.push_back(f.describe());
    p.early.details["static_scan"] = list;
    p.early.reject(reason::kForbiddenCall, findings.front().describe() +
                                               (findings.size() > 1 ? strf(" (and %zu more)", findings.size() - 1) : ""));
    p.rejected = true;
  }
  return p;
}

Verdict Evaluator::evaluate(const std::string& path, const HgemmProblem& problem) {
  return evaluate_batch({path}, problem).front();
}

std::vector<Verdict> Evaluator::evaluate_batch(const std::vector<std::string>& paths, const HgemmProblem& problem,
                                               const std::function<void(size_t, size_t, const Verdict&)>& progress) {
  std::vector<Prepared> prepared;
  std::vector<std::pair<std::string, std::string>> to_compile;
  std::vector<size_t> compile_slot(paths.size(), SIZE_MAX);
  for (size_t i = 0; i < paths.size(); ++i) {
    prepared.push_back(prepare_source(paths[i]));
    if (!prepared.back().rejected) {
      compile_slot[i] = to_compile.size();
      to_compile.push_back({std::filesystem::path(paths[i]).filename().string(), prepared.back().source});
    }
  }
  const int jobs = opts_.compile_jobs > 0 ? opts_.compile_jobs : int(std::max(1u, std::thread::hardware_concurrency()));
  const std::vector<CompileResult> compiled = compiler_.compile_all(to_compile, jobs);
  std::vector<Verdict> out(paths.size());
  std::mutex progress_mutex;
  run_on_slots(paths.size(), workers_.size(), [&](size_t i, size_t slot) {
    Verdict v = prepared[i].rejected ? prepared[i].early : judge(paths[i], compiled[compile_slot[i]], problem, slot);
    // A missing file has no source to count; every other verdict's reward sees the code it judged.
    const bool read = !(prepared[i].rejected && prepared[i].early.has_reason(reason::kMissingFile));
    apply_reward(v, opts_.reward, read ? &prepared[i].source : nullptr);
    std::lock_guard<std::mutex> lock(progress_mutex);
    if (progress) progress(i, paths.size(), v);
    out[i] = std::move(v);
  });
  return out;
}

Verdict Evaluator::judge(const std::string& path, const CompileResult& compiled, const HgemmProblem& problem,
                         size_t slot) {
  nlohmann::json compile_info = {{"key", compiled.key},
                                 {"cache_hit", compiled.cache_hit},
                                 {"seconds", compiled.seconds},
                                 {"command", join(compiled.command, " ")},
                                 {"nvcc", compiler_.nvcc_version()}};
  if (!compiled.log.empty()) compile_info["log"] = compiled.log;
  if (!compiled.ok) {
    Verdict v;
    v.candidate = path;
    const std::string code = compiled.failure == "compile_timeout"    ? reason::kCompileTimeout
                             : compiled.failure == "source_too_large" ? reason::kSourceTooLarge
                             : compiled.failure == "not_text"         ? reason::kNotText
                             : compiled.failure == "missing_file"     ? reason::kMissingFile
                             : compiled.failure == "nvcc_missing"     ? reason::kInternalError
                                                                      : reason::kCompileError;
    const std::string first_error = [&] {
      for (const std::string& l : split(compiled.log, '\n'))
        if (l.find("error") != std::string::npos) return l;
      return compiled.failure;
    }();
    v.reject(code, compiled.failure == "nvcc_missing" ? "nvcc is not available to compile candidates"
                                                      : compiled.failure + ": " + first_error);
    v.details["compile"] = compile_info;
    return v;
  }
  Verdict v = run_in_worker(path, compiled.so_path, problem, slot);
  v.details["compile"] = compile_info;
  if (!opts_.devices.empty()) v.details["device"] = opts_.devices[slot];
  if (workers_.size() > 1) v.details["worker_slot"] = slot;  // which of the parallel workers judged it
  return v;
}

Verdict Evaluator::run_in_worker(const std::string& name, const std::string& so_path, const HgemmProblem& problem,
                                 size_t slot) {
  std::unique_ptr<WorkerProcess>& worker = workers_[slot];
  HgemmEvalRequest req;
  req.id = next_id_++;
  req.so_path = so_path;
  req.name = name;
  req.problem = problem;
  req.modes = opts_.modes;
  req.samples = opts_.samples;
  req.seed = opts_.seed;
  req.skip_timing = opts_.skip_timing;
  req.run_timeout_s = opts_.run_timeout_s;
  Verdict v;
  v.candidate = name;
  if (!worker) {
    std::vector<std::string> env;
    if (!opts_.devices.empty()) env.push_back(device_env(opts_.devices[slot]));
    worker = std::make_unique<WorkerProcess>(opts_.worker_command, env);
    ++workers_started_;
  }
  if (!worker->send(dump_json(to_json(req)))) {
    const std::string how = worker->kill();
    worker.reset();
    v.reject(reason::kInternalError, "the eval worker could not be reached (" + how + ")");
    return v;
  }
  std::string line;
  // The judge bounds every request to the candidate's executor by run_timeout_s itself and answers
  // with a verdict; this outer bound covers the judge (its baseline's auto-tuning included).
  switch (worker->read_line(4 * opts_.run_timeout_s + 300, line)) {
    case WorkerProcess::Read::kTimeout: {
      worker->kill();
      worker.reset();
      v.reject(reason::kTimeout, strf("no verdict within %.0f s: the candidate hangs or is far too slow; the worker "
                                      "was killed",
                                      opts_.run_timeout_s));
      return v;
    }
    case WorkerProcess::Read::kEof: {
      const std::string how = worker->wait_exit();
      worker.reset();
      v.reject(reason::kCrashed, "the worker died while running the candidate: " + how);
      return v;
    }
    case WorkerProcess::Read::kLine:
      break;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const std::exception& e) {
    worker->kill();
    worker.reset();
    v.reject(reason::kInternalError, std::string("the worker answered with malformed JSON: ") + e.what());
    return v;
  }
  v = verdict_from_json(j);
  v.candidate = name;
  // Files of kforge's cache that appeared or changed while the candidate ran (the judge lists
  // them): this process's own work ahead of the queue (candidates' files, compiled objects), or
  // planted ones (an object under the key of code not yet judged would be loaded past the static
  // scan). Anything this process did not write is tampering, and is deleted.
  if (v.details.contains("cache_objects"))
    for (const auto& o : v.details["cache_objects"]) {
      FileStamp st;
      st.ino = o.value("ino", uintmax_t(0)), st.size = o.value("size", uintmax_t(0));
      st.mtime_ns = o.value("mtime_ns", int64_t(0)), st.ctime_ns = o.value("ctime_ns", int64_t(0));
      const std::string path = o.value("path", "");
      if (path.empty() || is_own_write(path, st)) continue;
      v.reasons.insert(v.reasons.begin(), reason::kTampered);
      v.correct = false;
      v.message = "a file that this kforge process did not write appeared or changed in its cache while the candidate "
                  "ran: " + path + " (kforge processes judging at the same time need a cache folder each: KFORGE_CACHE_DIR)";
      std::error_code ec;
      std::filesystem::remove(path, ec);  // never loaded: the next compile of that key rebuilds it
      break;
    }
  if (j.value("fatal", false)) {
    worker->wait_exit();
    worker.reset();
  }
  return v;
}

}  // namespace kforge
