// The eval worker (see hgemm_worker.hpp). Order of the checks for one candidate:
//   load (local symbol binding) -> verification on three input distributions, each in buffers
//   with guard bands, outputs poisoned, inputs checksummed, fresh contents in the same buffers ->
//   determinism (same inputs twice, identical bytes) -> side-stream and thread checks ->
//   paired timing against the best cuBLASLt algorithm with rotated inputs -> the outputs of the
//   timed calls re-checked, inputs re-checksummed -> plausibility against the counted floor.
#include "eval/hgemm_worker.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include "baselines/cublas.hpp"
#include "core/text.hpp"
#include "eval/device_checks.hpp"
#include "eval/verdict.hpp"
#include "gpu/cuda.hpp"
#include "gpu/device.hpp"
#include "measure/ceilings.hpp"
#include "measure/timer.hpp"

namespace kforge {

nlohmann::json to_json(const HgemmEvalRequest& r) {
  return {{"id", r.id},
          {"op", "hgemm"},
          {"so", r.so_path},
          {"name", r.name},
          {"m", r.problem.shape.m},
          {"n", r.problem.shape.n},
          {"k", r.problem.shape.k},
          {"layout", std::string(to_string(r.problem.layout))},
          {"acc", std::string(to_string(r.problem.acc))},
          {"modes", r.modes},
          {"samples", r.samples},
          {"seed", r.seed},
          {"skip_timing", r.skip_timing}};
}

HgemmEvalRequest hgemm_request_from_json(const nlohmann::json& j) {
  HgemmEvalRequest r;
  r.id = j.at("id").get<int64_t>();
  r.so_path = j.at("so").get<std::string>();
  r.name = j.value("name", r.so_path);
  r.problem.shape = {j.at("m").get<int64_t>(), j.at("n").get<int64_t>(), j.at("k").get<int64_t>()};
  r.problem.layout = parse_layout(j.at("layout").get<std::string>());
  r.problem.acc = parse_acc(j.at("acc").get<std::string>());
  r.modes = j.value("modes", std::vector<std::string>{"offline"});
  r.samples = j.value("samples", 7);
  r.seed = j.value("seed", uint64_t(1));
  r.skip_timing = j.value("skip_timing", false);
  return r;
}

namespace {

constexpr size_t kNoisyOutputBytes = 64 * 1024;
constexpr size_t kExcerptBytes = 2048;

int thread_count() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }


// A loaded candidate; dlclose on destruction.
struct Candidate {
  void* handle = nullptr;
  kforge_hgemm_fn fn = nullptr;
  kforge_hgemm_workspace_size_fn ws_fn = nullptr;
  bool keep_loaded = false;  // a thread of its own may still run its code: never unload it
  ~Candidate() {
    if (handle && !keep_loaded) ::dlclose(handle);
  }
};

// The candidate's stdout/stderr, captured in a file between requests.
class OutputCapture {
 public:
  OutputCapture() {
    char path[] = "/tmp/kforge-worker-out-XXXXXX";
    fd_ = ::mkstemp(path);
    if (fd_ < 0) KF_RUNTIME_ERROR("cannot create the worker's output capture file");
    ::unlink(path);
  }
  int fd() const { return fd_; }
  // Excerpt and size of what was printed since the last call; then empties the file.
  std::pair<std::string, size_t> take() {
    std::fflush(stdout);
    std::fflush(stderr);
    struct stat st {};
    ::fstat(fd_, &st);
    std::string excerpt(std::min<size_t>(size_t(st.st_size), kExcerptBytes), '\0');
    if (!excerpt.empty()) {
      const ssize_t got = ::pread(fd_, excerpt.data(), excerpt.size(), 0);
      excerpt.resize(got > 0 ? size_t(got) : 0);
    }
    if (::ftruncate(fd_, 0) != 0) { /* nothing useful to do */ }
    ::lseek(fd_, 0, SEEK_SET);
    return {excerpt, size_t(st.st_size)};
  }

 private:
  int fd_ = -1;
};

struct WorkerState {
  DeviceInfo dev;
  Stream stream;
  CublasHandles handles;
  Ceilings ceilings;
  // The auto-tuned baseline per problem, tuned once per worker, and how it was chosen.
  struct Baseline {
    cublasLtMatmulAlgo_t algo;
    std::string description;
  };
  std::map<std::string, Baseline> baselines;
};

// A fatal condition: the CUDA context may be unusable; the verdict is sent and the worker exits.
struct Fatal {
  std::string code, why;
};

void check_cuda_after_call(cudaStream_t s, Verdict& v, const std::string& when) {
  cudaError_t launch = cudaGetLastError();
  cudaError_t sync = cudaStreamSynchronize(s);
  if (sync != cudaSuccess) {
    // Errors surfacing at synchronisation are sticky: the context is gone.
    throw Fatal{reason::kCudaError, strf("%s: %s (%s)", when.c_str(), cudaGetErrorName(sync), cudaGetErrorString(sync))};
  }
  if (launch != cudaSuccess)
    v.reject(reason::kCudaError, strf("%s: %s (%s)", when.c_str(), cudaGetErrorName(launch), cudaGetErrorString(launch)));
}

class HgemmJudge {
 public:
  HgemmJudge(WorkerState& w, const HgemmEvalRequest& r, Candidate& c, Verdict& v)
      : w_(w), r_(r), p_(r.problem), c_(c), v_(v), s_(w.stream.get()) {}

  void run() {
    const Shape& sh = p_.shape;
    ws_bytes_ = c_.ws_fn ? c_.ws_fn(abi_problem()) : 0;
    if (ws_bytes_ > (size_t(8) << 30)) {
      v_.reject(reason::kCandidateError, strf("asks for %s of workspace", human_bytes(double(ws_bytes_)).c_str()));
      return;
    }
    Guarded a(elems_a(sh) * 2, "A"), b(elems_b(sh) * 2, "B"), c(elems_c(sh) * 2, "C"), ws(ws_bytes_, "workspace");
    const int threads_before = thread_count();

    // Three distributions, fresh contents in the same buffers: caches keyed on pointers fail.
    const Dist dists[] = {Dist::kNormal, Dist::kSmallInt, Dist::kUniform};
    uint64_t last_output = 0;
    for (int i = 0; i < 3 && v_.reasons.empty(); ++i) {
      a.arm(s_), b.arm(s_), c.arm(s_), ws.arm(s_);
      fill_random(a.as<__half>(), elems_a(sh), dists[i], r_.seed * 1000 + 2 * i, s_);
      fill_random(b.as<__half>(), elems_b(sh), dists[i], r_.seed * 1000 + 2 * i + 1, s_);
      const uint64_t in_sum = inputs_checksum(a, b, s_);
      verify_once(a, b, c, ws, dists[i], in_sum, strf("%s inputs", to_string(dists[i]).c_str()));
      if (i == 2 && v_.reasons.empty()) last_output = device_checksum(c.ptr(), c.bytes(), s_);
    }
    // Determinism: the same inputs again, identical bytes out.
    if (v_.reasons.empty()) {
      const uint64_t in_sum = inputs_checksum(a, b, s_);
      verify_once(a, b, c, ws, Dist::kUniform, in_sum, "uniform inputs, second run");
      if (v_.reasons.empty() && device_checksum(c.ptr(), c.bytes(), s_) != last_output)
        v_.reject(reason::kNondeterministic, "two runs on identical inputs gave different outputs");
    }
    if (!v_.reasons.empty() || r_.skip_timing) return finish_threads(threads_before);
    side_stream_check(a, b, c, ws);
    if (!v_.reasons.empty()) return;
    time_against_baseline();
    finish_threads(threads_before);
  }

 private:
  const kforge_hgemm_problem* abi_problem() {
    abi_ = p_.abi();
    return &abi_;
  }

  int call(const void* a, const void* b, void* c, void* ws, cudaStream_t s) {
    kforge_hgemm_args args{};
    args.problem = p_.abi();
    args.a = a;
    args.b = b;
    args.c = c;
    args.workspace = ws_bytes_ ? ws : nullptr;
    args.workspace_bytes = ws_bytes_;
    try {
      return c_.fn(&args, s);
    } catch (...) {
      return -1000;  // a C++ exception out of a C entry point
    }
  }

  CheckResult check(const __half* a, const __half* b, const __half* c, uint64_t seed) {
    const double work = p_.shape.flops();
    if (work <= 4e9) return check_full_gpu(p_, a, b, c, s_);
    return check_sampled_gpu(p_, a, b, c, 1024, seed, s_);
  }

  void verify_once(Guarded& a, Guarded& b, Guarded& c, Guarded& ws, Dist dist, uint64_t in_sum, const std::string& what) {
    poison_nan(c.as<__half>(), elems_c(p_.shape), s_);
    KF_CUDA(cudaStreamSynchronize(s_));
    const int rc = call(a.ptr(), b.ptr(), c.ptr(), ws.ptr(), s_);
    check_cuda_after_call(s_, v_, what);
    if (rc != 0) return v_.reject(reason::kCandidateError, strf("returned %d on %s", rc, what.c_str()));
    if (!v_.reasons.empty()) return;
    if (const uint64_t bad = a.damaged(s_) + b.damaged(s_) + c.damaged(s_) + ws.damaged(s_))
      return v_.reject(reason::kOutOfBounds, strf("%llu guard-band bytes around A, B, C or the workspace changed (%s)",
                                                  (unsigned long long)bad, what.c_str()));
    if (inputs_checksum(a, b, s_) != in_sum) return v_.reject(reason::kInputMutated, "the inputs changed during the call (" + what + ")");
    CheckResult res = check(a.as<__half>(), b.as<__half>(), c.as<__half>(), r_.seed + 99);
    if (!res.ok()) {
      // Right only once the whole device is idle: the work ran outside the given stream.
      KF_CUDA(cudaDeviceSynchronize());
      CheckResult later = check(a.as<__half>(), b.as<__half>(), c.as<__half>(), r_.seed + 99);
      if (later.ok())
        return v_.reject(reason::kSideStream, "the output was complete only after a device-wide synchronisation (" + what + ")");
      if (res.nonfinite > 0)
        return v_.reject(reason::kUnwrittenOutput, strf("%s (%s)", res.describe().c_str(), what.c_str()));
      return v_.reject(reason::kWrongResult, strf("%s (%s)", res.describe().c_str(), what.c_str()));
    }
    // Small integers are exact in fp32 accumulation while every |C| <= 2048 (fp16's exact range).
    if (dist == Dist::kSmallInt && p_.acc == Acc::kF32 && 4 * p_.shape.k <= 2048 && !res.exact)
      return v_.reject(reason::kWrongResult, "not bit-exact on small-integer inputs: " + res.describe());
    v_.details["checks"].push_back({{"inputs", what}, {"checked", res.checked}, {"worst_error_over_bound", res.worst_ratio}});
  }

  // Stream-event time against device-wide-sync time of the same back-to-back calls.
  void side_stream_check(Guarded& a, Guarded& b, Guarded& c, Guarded& ws) {
    Event start, stop;
    auto once = [&] {
      if (call(a.ptr(), b.ptr(), c.ptr(), ws.ptr(), s_) != 0) v_.reject(reason::kCandidateError, "returned non-zero while timed");
    };
    KF_CUDA(cudaDeviceSynchronize());
    start.record(s_);
    once();
    stop.record(s_);
    const double one_ms = elapsed_ms(start, stop);
    KF_CUDA(cudaDeviceSynchronize());
    const int n = std::clamp(int(2.0 / std::max(one_ms, 0.005)), 5, 200);
    start.record(s_);
    for (int i = 0; i < n; ++i) once();
    stop.record(s_);
    const double stream_ms = elapsed_ms(start, stop);
    KF_CUDA(cudaDeviceSynchronize());
    const double t0 = now_s();
    for (int i = 0; i < n; ++i) once();
    KF_CUDA(cudaDeviceSynchronize());
    const double device_ms = (now_s() - t0) * 1e3;
    check_cuda_after_call(s_, v_, "side-stream check");
    v_.details["stream_vs_device"] = {{"calls", n}, {"stream_ms", stream_ms}, {"device_ms", device_ms}};
    if (device_ms > 1.5 * stream_ms + 0.2)
      v_.reject(reason::kSideStream, strf("%d calls took %.3f ms by the given stream's events but %.3f ms until the "
                                          "device was idle: work escaped the stream",
                                          n, stream_ms, device_ms));
  }

  void finish_threads(int before) {
    const int after = thread_count();
    if (after > before)
      v_.reject(reason::kBackgroundThread, strf("the worker had %d threads before the candidate ran and %d after", before, after));
  }

  void time_against_baseline() {
    const Shape& sh = p_.shape;
    // Rotated input sets with different contents, more than 3x L2 where memory allows.
    const size_t set_in = (elems_a(sh) + elems_b(sh)) * 2, set_out = elems_c(sh) * 2;
    const double want = 3.2 * double(w_.dev.l2_bytes) / double(set_in + set_out);
    const size_t sets = size_t(std::clamp(std::ceil(want), 2.0, 4096.0));
    DeviceBuffer inputs(sets * set_in, "timing inputs"), out_c(sets * set_out, "candidate outputs"),
        out_b(sets * set_out, "baseline outputs"), ws(std::max<size_t>(ws_bytes_, 1), "timing workspace");
    fill_random(inputs.as<__half>(), sets * set_in / 2, Dist::kUniform, r_.seed * 7919 + 5, s_);
    poison_nan(out_c.as<__half>(), sets * set_out / 2, s_);
    const uint64_t in_sum = device_checksum(inputs.get(), inputs.bytes(), s_);
    auto a_of = [&](int64_t i) { return inputs.as<char>() + size_t(i % int64_t(sets)) * set_in; };
    auto b_of = [&](int64_t i) { return a_of(i) + elems_a(sh) * 2; };
    auto c_of = [&](const DeviceBuffer& o, int64_t i) { return o.as<char>() + size_t(i % int64_t(sets)) * set_out; };
    // The call indices the candidate itself got (the timer numbers every call, baseline's too).
    std::vector<int64_t> cand_calls;
    bool bad_rc = false;
    Launch cand = [&](cudaStream_t st, int64_t i) {
      cand_calls.push_back(i);
      if (call(a_of(i), b_of(i), c_of(out_c, i), ws.get(), st) != 0) bad_rc = true;
    };
    LtPlan plan(w_.handles, p_);
    const cublasLtMatmulAlgo_t algo = best_baseline_algo(plan, a_of(0), b_of(0), c_of(out_b, 0));
    Launch base = [&](cudaStream_t st, int64_t i) {
      plan.run(algo, {reinterpret_cast<const __half*>(a_of(i)), reinterpret_cast<const __half*>(b_of(i)),
                      reinterpret_cast<__half*>(c_of(out_b, i))},
               st);
    };
    Timer timer(s_, w_.dev.l2_bytes, r_.seed);
    const double floor = counted_floor_us(sh.flops(), hgemm_bytes(sh), w_.ceilings,
                                          double(sets) * double(set_in + set_out) >= 3.0 * double(w_.dev.l2_bytes)
                                              ? 0.0
                                              : double(w_.dev.l2_bytes));
    v_.details["timing"] = {{"input_sets", sets}, {"floor_us", floor}, {"baseline", w_.baselines.at(key()).description}};
    for (const std::string& mode_name : r_.modes) {
      TimingConfig cfg;
      cfg.mode = parse_mode(mode_name);
      cfg.samples = r_.samples;
      cfg.preroll = true;
      PairedTiming t;
      bool settled = false;
      for (int attempt = 0; attempt < 3 && !settled; ++attempt) {
        try {
          t = timer.time_paired(cand, base, cfg);
        } catch (const Error& e) {
          if (cfg.mode == Mode::kGraph) {  // a candidate that cannot be captured is not rejected for it
            cudaGetLastError();
            v_.flags.push_back("not_graph_capturable");
            settled = true;
            t = {};
            break;
          }
          throw;
        }
        const double speedup = 1.0 / t.ratio.median;
        settled = t.ratio.rel_spread() <= 0.25 && speedup < 50;
      }
      check_cuda_after_call(s_, v_, mode_name + " timing");
      if (bad_rc) v_.reject(reason::kCandidateError, "returned non-zero during timing");
      if (t.a.samples_us.empty()) continue;
      std::vector<double> speedups;
      for (size_t i = 0; i < t.a.samples_us.size(); ++i) speedups.push_back(t.b.samples_us[i] / t.a.samples_us[i]);
      v_.speedup[mode_name] = summarize(speedups);
      // A noisy ratio matters when it could make a win: a correct candidate whose every sample but the top
      // decile is slower than the baseline keeps its (small) speed-up, flagged, rather than scoring zero.
      if (!settled && v_.speedup[mode_name].p90 < 1.0)
        v_.flags.push_back("noisy_timing");
      else if (!settled)
        v_.reject(reason::kUnstableTiming,
                  strf("%s: the candidate/baseline ratio did not settle (median %.3f, spread %.0f%%) after 3 attempts",
                       mode_name.c_str(), t.ratio.median, 100 * t.ratio.rel_spread()));
      v_.candidate_us[mode_name] = t.a.per_call_us;
      v_.baseline_us[mode_name] = t.b.per_call_us;
      if (cfg.mode != Mode::kGraph && t.a.per_call_us.median < 0.9 * floor)
        v_.reject(reason::kImpossibleSpeed, strf("%s: %.2f us per call is under the counted floor of %.2f us",
                                                 mode_name.c_str(), t.a.per_call_us.median, floor));
      else if (t.a.per_call_us.median < floor)
        v_.flags.push_back("near_floor");
    }
    // The outputs of the candidate's last timed calls, checked against their own inputs.
    std::sort(cand_calls.begin(), cand_calls.end());
    cand_calls.erase(std::unique(cand_calls.begin(), cand_calls.end()), cand_calls.end());
    for (size_t j = 0; j < 4 && j < cand_calls.size() && v_.reasons.empty(); ++j) {
      const int64_t i = cand_calls[cand_calls.size() - 1 - j];
      CheckResult res = check(reinterpret_cast<const __half*>(a_of(i)), reinterpret_cast<const __half*>(b_of(i)),
                              reinterpret_cast<const __half*>(c_of(out_c, i)), r_.seed + 7 + j);
      if (!res.ok()) v_.reject(reason::kTimedOutputWrong, "an output of a timed call is wrong: " + res.describe());
    }
    if (device_checksum(inputs.get(), inputs.bytes(), s_) != in_sum)
      v_.reject(reason::kInputMutated, "the timing inputs changed during the timed calls");
  }

  std::string key() const {
    return p_.shape.str() + std::string(to_string(p_.layout)) + std::string(to_string(p_.acc));
  }

  // cuBLASLt auto-tuned: every algorithm its heuristic offers, timed briefly, the best kept; once
  // per problem and worker (a batch judges many candidates of one problem).
  cublasLtMatmulAlgo_t best_baseline_algo(const LtPlan& plan, const void* a, const void* b, void* c) {
    if (auto it = w_.baselines.find(key()); it != w_.baselines.end()) return it->second.algo;
    const auto algos = plan.heuristics(100);
    if (algos.empty()) KF_RUNTIME_ERROR("cuBLASLt offers no algorithm for %s", p_.shape.str().c_str());
    Timer timer(s_, w_.dev.l2_bytes, 3);
    TimingConfig cfg;
    cfg.samples = 3;
    size_t best = 0;
    double best_us = INFINITY;
    const GemmOperands ops{static_cast<const __half*>(a), static_cast<const __half*>(b), static_cast<__half*>(c)};
    for (size_t i = 0; i < algos.size(); ++i) {
      if (!plan.run(algos[i].algo, ops, s_)) continue;
      const double us = timer.time([&](cudaStream_t st, int64_t) { plan.run(algos[i].algo, ops, st); }, cfg).per_call_us.median;
      if (us < best_us) best_us = us, best = i;
    }
    w_.baselines[key()] = {algos[best].algo, strf("cuBLASLt auto-tuned (best of %zu): ", algos.size()) +
                                                 describe_algo(algos[best].algo, algos[best].workspaceSize)};
    return algos[best].algo;
  }

  WorkerState& w_;
  const HgemmEvalRequest& r_;
  const HgemmProblem& p_;
  Candidate& c_;
  Verdict& v_;
  cudaStream_t s_;
  size_t ws_bytes_ = 0;
  kforge_hgemm_problem abi_{};
};

// Loads the candidate with local symbol binding; false (and a rejection) when it cannot be used.
bool load_candidate(const HgemmEvalRequest& r, Candidate& c, Verdict& v) {
  c.handle = ::dlopen(r.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!c.handle) {
    const char* e = ::dlerror();
    v.reject(reason::kLoadError, std::string("dlopen failed: ") + (e ? e : "?"));
    return false;
  }
  c.fn = reinterpret_cast<kforge_hgemm_fn>(::dlsym(c.handle, "kforge_hgemm"));
  c.ws_fn = reinterpret_cast<kforge_hgemm_workspace_size_fn>(::dlsym(c.handle, "kforge_hgemm_workspace_size"));
  if (!c.fn) {
    v.reject(reason::kMissingEntryPoint, "the shared object does not define kforge_hgemm");
    return false;
  }
  return true;
}

// Judges a loaded candidate; sets `fatal` when the worker must not go on.
void judge_candidate(WorkerState& w, const HgemmEvalRequest& r, Candidate& c, Verdict& v, bool& fatal) {
  size_t free_before = 0, total = 0;
  cudaMemGetInfo(&free_before, &total);
  try {
    HgemmJudge(w, r, c, v).run();
  } catch (const Fatal& f) {
    v.reject(f.code, f.why);
    fatal = true;
  } catch (const Error& e) {
    const std::string what = e.what();
    v.reject(what.find("out of GPU memory") != std::string::npos ? reason::kOutOfMemory : reason::kCudaError, what);
    fatal = true;  // state unknown: start afresh
  }
  if (v.has_reason(reason::kBackgroundThread) || fatal) {
    c.keep_loaded = true;  // the worker is replaced instead
    fatal = true;
  }
  size_t free_after = 0;
  if (cudaMemGetInfo(&free_after, &total) != cudaSuccess || free_after + total / 8 < free_before) {
    v.flags.push_back("leaked_device_memory");
    fatal = true;  // the memory goes back when this process exits
  }
}

void write_line(int fd, const std::string& line) {
  std::string data = line + "\n";
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n <= 0) {
      if (errno == EINTR) continue;
      std::_Exit(3);  // the evaluator is gone
    }
    off += size_t(n);
  }
}

}  // namespace

int run_eval_worker() {
  // The protocol keeps a private copy of stdout; fds 1 and 2 go to the capture file.
  const int proto = ::dup(1);
  OutputCapture capture;
  ::dup2(capture.fd(), 1);
  ::dup2(capture.fd(), 2);
  std::unique_ptr<WorkerState> w;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (trim(line).empty()) continue;
    nlohmann::json reply;
    bool fatal = false;
    int64_t id = -1;
    try {
      const HgemmEvalRequest req = hgemm_request_from_json(nlohmann::json::parse(line));
      id = req.id;
      Verdict v;
      v.candidate = req.name;
      Candidate c;
      if (load_candidate(req, c, v)) {
        if (!w) {  // the GPU is set up on the first candidate that loads
          require_gpu();
          w = std::make_unique<WorkerState>();
          w->dev = query_device(0);
          w->ceilings = load_or_calibrate_ceilings(w->dev, w->stream.get(), false);
          capture.take();  // the worker's own messages are not the candidate's output
        }
        judge_candidate(*w, req, c, v, fatal);
      }
      v.correct = v.reasons.empty();
      auto [excerpt, printed] = capture.take();
      if (printed > kNoisyOutputBytes) v.flags.push_back("noisy_output");
      if (printed) v.details["output"] = {{"bytes", printed}, {"excerpt", excerpt}};
      reply = to_json(v);
    } catch (const std::exception& e) {
      Verdict v;
      v.reject(reason::kInternalError, std::string("the worker could not evaluate the request: ") + e.what());
      capture.take();
      reply = to_json(v);
      fatal = true;
    }
    reply["id"] = id;
    reply["fatal"] = fatal;
    write_line(proto, reply.dump());
    if (fatal) return 0;
  }
  return 0;
}

}  // namespace kforge
