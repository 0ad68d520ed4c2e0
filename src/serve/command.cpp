// kforge serve: the reward server for RL trainers (the third front door). Flags and start-up only;
// the work is in serve/server.*, serve/scorer.*, serve/store.* and service/*.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/shapes.hpp"
#include "core/text.hpp"
#include "eval/devices.hpp"
#include "search/loop.hpp"
#include "serve/scorer.hpp"
#include "serve/server.hpp"
#include "serve/store.hpp"
#include "service/eval_service.hpp"
#include "torch/tasks.hpp"

namespace kforge {
namespace {

struct ServeCliOptions {
  std::vector<std::string> task_sets;
  std::string hgemm_shapes;
  std::string hgemm_layouts = "nn";
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string port_file;
  std::string token_file;
  bool no_auth = false;
  std::string store = "kforge-serve.db";
  bool reuse_verdicts = false;
  std::string reward = "log";
  std::string deviation_penalty, length_penalty;  // shaped rewards, off when empty (eval/verdict.hpp)
  std::string device = "cuda";
  std::string devices;
  int slots = 1;
  int samples = 0;
  int trials = 5;
  std::string baselines = "eager";
  std::string baseline = "eager";
  std::string modes = "offline";
  std::string arch;
  double compile_timeout = 300, import_timeout = 60, run_timeout = 300;
  double atol = -1, rtol = -1;
  bool allow_streams = false;
  bool require_cuda_kernel = false;
  size_t max_body = 32u << 20, max_completion = 256 * 1024, max_batch = 256, max_queue = 256;
  int http_threads = 64;
  double request_timeout = 3600;
  int prepare_jobs = 0;
  std::string work_dir;
  bool profile = false;
};

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

std::string read_token(const ServeCliOptions& o) {
  std::string token;
  if (!o.token_file.empty()) {
    token = std::string(trim(read_file(o.token_file)));
    if (token.empty()) KF_USAGE_ERROR("the token file '%s' is empty", o.token_file.c_str());
  } else if (const char* t = std::getenv("KFORGE_SERVE_TOKEN"); t && *t) {
    token = std::string(trim(t));
  }
  if (token.empty() && !o.no_auth)
    KF_USAGE_ERROR("kforge serve needs a token: --token-file FILE or $KFORGE_SERVE_TOKEN (or --no-auth, for a "
                   "server nobody else can reach)");
  if (!token.empty() && o.no_auth) KF_USAGE_ERROR("--no-auth and a token exclude each other");
  if (!token.empty() && token.size() < 16) KF_USAGE_ERROR("the token is shorter than 16 characters");
  return token;
}

void run_serve(const ServeCliOptions& o) {
  const std::string token = read_token(o);
  if (o.task_sets.empty() && o.hgemm_shapes.empty())
    KF_USAGE_ERROR("kforge serve needs tasks: --tasks SET.json|DIR and/or --hgemm-shapes MxNxK[:tn],...");
  RewardConfig reward = parse_reward(o.reward);
  set_reward_penalties(reward, o.deviation_penalty, o.length_penalty);

  ServiceOptions so;
  so.devices = o.devices.empty() ? std::vector<int>{} : parse_devices(o.devices);
  so.slots = o.slots;
  so.prepare_jobs = o.prepare_jobs;
  so.work_dir = o.work_dir;
  so.profile = o.profile;
  so.profile_options = profile_options_from_env();
  if (o.slots > 1 && !so.devices.empty()) KF_USAGE_ERROR("--slots is for the default device; --devices gives one slot per GPU");
  // Destroyed first of all at the end (reset below), while the scorer that its callbacks reach still lives.
  auto service_ptr = std::make_unique<EvalService>(so);
  EvalService& service = *service_ptr;

  if (!o.hgemm_shapes.empty()) {
    EvalOptions eo = hgemm_eval_options(o.arch);
    eo.reward = reward;
    eo.modes.clear();
    for (const std::string& m : split(o.modes, ','))
      if (!trim(m).empty()) eo.modes.push_back(std::string(trim(m)));
    if (eo.modes.empty()) KF_USAGE_ERROR("--modes is empty");
    eo.reward.mode = eo.modes.front();
    if (o.samples > 0) eo.samples = o.samples;
    eo.run_timeout_s = o.run_timeout;
    eo.compile.timeout_s = o.compile_timeout;
    eo.scan.allow_streams = o.allow_streams;
    std::vector<std::string> specs;
    if (o.hgemm_shapes.find(':') != std::string::npos) {
      for (const std::string& spec : split(o.hgemm_shapes, ','))
        if (!trim(spec).empty()) specs.push_back(std::string(trim(spec)));
    } else {  // "grid" (CUDA-L2's 1,000 shapes), a list, or a file of shapes; each in every --hgemm-layouts
      for (const Shape& sh : resolve_shapes(o.hgemm_shapes))
        for (const std::string& layout : split(o.hgemm_layouts, ','))
          if (!trim(layout).empty())
            specs.push_back(strf("%lldx%lldx%lld", (long long)sh.m, (long long)sh.n, (long long)sh.k) +
                            (trim(layout) == "nn" ? "" : ":" + std::string(trim(layout))));
    }
    for (const std::string& spec : specs) {
      const std::string id = "hgemm:" + spec;
      service.add_task(make_hgemm_task(id, parse_hgemm_task(id), eo));
    }
  }
  if (!o.task_sets.empty()) {
    TorchEvalOptions to;
    to.device = o.device;
    to.baselines = {"eager"};
    for (const std::string& b : split(o.baselines, ','))
      if (!trim(b).empty() && trim(b) != "eager") to.baselines.push_back(std::string(trim(b)));
    to.reward = reward;
    to.reward.mode = o.baseline;
    if (std::find(to.baselines.begin(), to.baselines.end(), o.baseline) == to.baselines.end())
      KF_USAGE_ERROR("--baseline '%s' is not among --baselines", o.baseline.c_str());
    if (o.samples > 0) to.samples = o.samples;
    to.trials = o.trials;
    to.compile_timeout_s = o.compile_timeout;
    to.import_timeout_s = o.import_timeout;
    to.run_timeout_s = o.run_timeout;
    if (o.atol >= 0) to.atol = o.atol;
    if (o.rtol >= 0) to.rtol = o.rtol;
    to.allow_streams = o.allow_streams;
    to.require_cuda_kernel = o.require_cuda_kernel;
    for (const std::string& set : o.task_sets)
      for (const TorchTask& t : load_task_set(set)) service.add_task(make_torch_task(t.id, t.file, to));
  }

  ServeStore store(o.store);
  ScorerOptions sc;
  sc.reuse_verdicts = o.reuse_verdicts;
  sc.max_batch = o.max_batch;
  sc.max_completion_bytes = o.max_completion;
  sc.max_pending = o.max_queue;
  sc.profile_all = o.profile;
  Scorer scorer(service, store, sc);

  ServeHttpOptions ho;
  ho.host = o.host;
  ho.port = o.port;
  ho.token = token;
  ho.max_body_bytes = o.max_body;
  ho.threads = o.http_threads;
  ho.request_timeout_s = o.request_timeout;
  ServeHttp http(ho, scorer, service, store);
  const int port = http.bind();
  const size_t recovered = scorer.recover();
  std::printf("kforge serve: %zu task(s), %zu slot(s), store %s%s\n", service.tasks().size(), service.slot_count(),
              o.store.c_str(), recovered ? strf(" (%zu pending request(s) from before, judged again)", recovered).c_str() : "");
  std::printf("kforge serve: listening on http://%s:%d\n", o.host.c_str(), port);
  std::fflush(stdout);
  if (!o.port_file.empty()) write_file_atomic(o.port_file, std::to_string(port) + "\n");

  ::signal(SIGINT, on_signal);
  ::signal(SIGTERM, on_signal);
  std::thread watcher([&] {
    while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    http.stop();
  });
  http.run();
  g_stop = true;
  watcher.join();
  // The batches being judged finish and are stored; what is still queued stays pending in the
  // store (the service says "not judged") and is judged when a server starts on it again.
  service_ptr.reset();
  std::printf("kforge serve: stopped\n");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeCliOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Reward server for RL trainers: scores completions with the hardened evaluator");
  cmd->add_option("--tasks", o->task_sets,
                  "A PyTorch task set (a folder of KernelBench-format task files, a KernelBench checkout, or a "
                  "listing of 'kforge tasks import'); its task ids (e.g. 01_relu, level1/1) are what clients name. "
                  "Repeatable");
  cmd->add_option("--hgemm-shapes", o->hgemm_shapes,
                  "HGEMM problems: MxNxK[:nn|tn][:f32|f16],... (task ids 'hgemm:MxNxK[...]'), or 'grid' (CUDA-L2's "
                  "1,000 shapes) or a file of shapes, each in every --hgemm-layouts");
  cmd->add_option("--hgemm-layouts", o->hgemm_layouts,
                  "Layouts for --hgemm-shapes grid or a file: nn,tn (ids of tn problems end in ':tn')")
      ->capture_default_str();
  cmd->add_option("--host", o->host, "Address to bind (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o->port, "Port (0: any free port; the chosen one is printed)")->capture_default_str();
  cmd->add_option("--port-file", o->port_file, "Write the bound port to this file once listening");
  cmd->add_option("--token-file", o->token_file,
                  "File holding the bearer token clients must send (else $KFORGE_SERVE_TOKEN); at least 16 characters");
  cmd->add_flag("--no-auth", o->no_auth, "Accept requests without a token (only where nobody else can connect)");
  cmd->add_option("--store", o->store,
                  "SQLite store of every request and verdict; a restart on the same store judges what was left "
                  "pending and never scores a stored request again")
      ->capture_default_str();
  cmd->add_flag("--reuse-verdicts", o->reuse_verdicts,
                "Answer identical code for the same task from its stored verdict instead of judging it again");
  cmd->add_option("--reward", o->reward,
                  "log, speedup, clipped:X (as in optimize), or correctness (1 correct, 0 rejected: CUDA-L1's stage 2)")
      ->capture_default_str();
  cmd->add_option("--deviation-penalty", o->deviation_penalty,
                  "W: take W x (the candidate's worst error over its tolerance bound, 0..1) off a correct candidate's "
                  "reward (CUDA-L2's shaped reward; off by default)")
      ->type_name("W");
  cmd->add_option("--length-penalty", o->length_penalty,
                  "W:TOKENS: take W per TOKENS of code beyond a budget of TOKENS tokens off a correct candidate's "
                  "reward (off by default); the parts are returned in reward_parts")
      ->type_name("W:TOKENS");
  cmd->add_option("--device", o->device, "PyTorch tasks: cuda or cpu")->capture_default_str();
  cmd->add_option("--devices", o->devices, "GPUs to judge on, one queue each: 0,1,...|all (default: the default device)");
  cmd->add_option("--slots", o->slots, "Judging queues on the default device (more than 1 only makes sense with --device cpu)")
      ->capture_default_str();
  cmd->add_option("--samples", o->samples, "Timed rounds per candidate (0: each evaluator's default)");
  cmd->add_option("--trials", o->trials, "PyTorch tasks: verification trials")->capture_default_str();
  cmd->add_option("--baselines", o->baselines, "PyTorch tasks: eager,compile,compile_ro,graph")->capture_default_str();
  cmd->add_option("--baseline", o->baseline, "PyTorch tasks: the baseline the reward's speed-up is against")
      ->capture_default_str();
  cmd->add_option("--modes", o->modes, "HGEMM tasks: offline,graph,server (the first is the reward's)")->capture_default_str();
  cmd->add_option("--arch", o->arch, "HGEMM tasks: nvcc target (default: the device's)");
  cmd->add_option("--compile-timeout", o->compile_timeout, "Seconds to compile (build) one candidate")->capture_default_str();
  cmd->add_option("--import-timeout", o->import_timeout, "PyTorch tasks: seconds to import a built candidate")
      ->capture_default_str();
  cmd->add_option("--run-timeout", o->run_timeout, "Seconds to verify and time one candidate")->capture_default_str();
  cmd->add_option("--atol", o->atol, "PyTorch tasks: absolute tolerance (default: the task's and dtype's)");
  cmd->add_option("--rtol", o->rtol, "PyTorch tasks: relative tolerance");
  cmd->add_flag("--allow-streams", o->allow_streams, "Let candidates create streams (static scan)");
  cmd->add_flag("--require-cuda-kernel", o->require_cuda_kernel, "PyTorch tasks: a candidate must launch a kernel of its own");
  cmd->add_option("--max-body-bytes", o->max_body, "Largest request body (413 beyond)")->capture_default_str();
  cmd->add_option("--max-completion-bytes", o->max_completion, "Largest completion (413 beyond)")->capture_default_str();
  cmd->add_option("--max-batch", o->max_batch, "Most items per request (413 beyond)")->capture_default_str();
  cmd->add_option("--max-queue", o->max_queue, "Most candidates waiting to be judged (429 with Retry-After beyond)")
      ->capture_default_str();
  cmd->add_option("--http-threads", o->http_threads, "HTTP worker threads (each waiting /v1/score call holds one)")
      ->capture_default_str();
  cmd->add_option("--request-timeout", o->request_timeout,
                  "Seconds a /v1/score or /get_reward call waits for its verdicts before answering 504 (they are "
                  "still judged and stored)")
      ->capture_default_str();
  cmd->add_option("--prepare-jobs", o->prepare_jobs, "Threads compiling candidates before they are queued (0: one per core)");
  cmd->add_option("--work-dir", o->work_dir, "Folder for candidate files (default $KFORGE_CACHE_DIR/service)");
  cmd->add_flag("--profile", o->profile,
                "Profile every correct candidate once more under Nsight Compute (ncu, in a process of its own) and "
                "return the metrics per kernel in each result's \"profile\" (or why not: profile.error); costs "
                "seconds of GPU time per correct candidate. Without it, an item of /v1/score or /v1/jobs asks for "
                "its own with \"profile\": true");
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace kforge
