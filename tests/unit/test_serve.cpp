// The evaluation service (src/service/) and kforge serve (src/serve/): the service's queues with a
// task kind of the test's own (timing-free, so the queue logic is checked exactly), the completion
// parser on a real task's seed, then a real `kforge serve` on loopback judging CPU PyTorch tasks
// (where python3 can import torch): auth, limits, the endpoints, the store, concurrent clients and
// kill -9 with a restart.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/subprocess.hpp"
#include "search/loop.hpp"
#include "core/text.hpp"
#include "serve/scorer.hpp"
#include "serve/server.hpp"
#include "serve/store.hpp"
#include "service/completion.hpp"
#include "service/eval_service.hpp"
#include "../support/process.hpp"
#include "torch/torch_eval.hpp"

namespace fs = std::filesystem;

namespace kforge {
namespace {

const std::string kSource = KFORGE_SOURCE_DIR;

bool have_torch() {
  static const bool yes = [] {
    if (find_python().empty()) return false;
    const nlohmann::json p = probe_python();
    return p.contains("torch") && p["torch"].is_string();
  }();
  return yes;
}

// ---------------------------------------------------------------------------------------------
// The service's queues, with a task kind whose judge records what happened to it.

struct Record {
  std::mutex m;
  std::map<size_t, int> active;      // slot -> batches being judged right now
  std::map<size_t, int> max_active;  // slot -> the most at once
  std::map<size_t, int> judged;      // slot -> candidates judged
  std::atomic<int> prepared{0};
  std::atomic<int> judges_made{0};
  size_t largest_batch = 0;
  std::set<int> prepare_nice, compiler_nice, judge_nice;  // nice values seen in prepare, its child, the judge
};

// This thread's nice value (Linux: per thread).
int thread_nice() {
  errno = 0;
  const int n = ::getpriority(PRIO_PROCESS, id_t(::syscall(SYS_gettid)));
  return errno ? -100 : n;
}

class CountingJudge : public SlotJudge {
 public:
  CountingJudge(Record& r, size_t slot) : r_(r), slot_(slot) {}
  void judge(const EvalTask&, const std::vector<std::string>& paths,
             const std::function<void(size_t, Verdict)>& done) override {
    {
      std::lock_guard<std::mutex> l(r_.m);
      r_.judge_nice.insert(thread_nice());
      r_.max_active[slot_] = std::max(r_.max_active[slot_], ++r_.active[slot_]);
      r_.largest_batch = std::max(r_.largest_batch, paths.size());
    }
    for (size_t i = 0; i < paths.size(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      Verdict v;
      v.candidate = paths[i];
      const std::string src = read_file(paths[i]);
      if (src.find("bad") != std::string::npos) v.reject(reason::kWrongResult, "said bad");
      else v.correct = true;
      v.details["source"] = src;
      {
        std::lock_guard<std::mutex> l(r_.m);
        ++r_.judged[slot_];
      }
      done(i, v);
    }
    std::lock_guard<std::mutex> l(r_.m);
    --r_.active[slot_];
  }

 private:
  Record& r_;
  size_t slot_;
};

class CountingTask : public EvalTask {
 public:
  CountingTask(const std::string& id, Record& r) : EvalTask(id), r_(r) {}
  std::string kind() const override { return "counting"; }
  std::string language() const override { return "python"; }
  std::string extension() const override { return ".txt"; }
  std::string entry_point() const override { return "main"; }
  const std::string& seed() const override { return seed_; }
  nlohmann::json describe() const override { return {{"id", id()}, {"kind", "counting"}}; }
  const RewardConfig& reward() const override { return reward_; }
  std::string judge_key() const override { return "counting"; }
  std::unique_ptr<SlotJudge> make_judge(const SlotInfo& slot) const override {
    ++r_.judges_made;
    return std::make_unique<CountingJudge>(r_, slot.index);
  }
  void prepare(const std::string& path) const override {
    EXPECT_TRUE(fs::exists(path));
    ++r_.prepared;
    std::lock_guard<std::mutex> l(r_.m);
    r_.prepare_nice.insert(thread_nice());
    if (read_file(path).find("compiler") == std::string::npos) return;
    // What a compiler started from here runs at: `nice` prints its own niceness.
    FILE* p = ::popen("nice", "r");
    ASSERT_TRUE(p);
    char buf[32] = {0};
    const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
    ::pclose(p);
    if (got) r_.compiler_nice.insert(std::atoi(buf));
  }

 private:
  Record& r_;
  std::string seed_ = "x = 1\n";
  RewardConfig reward_;
};

TEST(ServiceQueues, EveryCandidateAnsweredOnceOneBatchPerSlotAtATime) {
  Record rec;
  ServiceOptions o;
  o.slots = 3;
  o.prepare_jobs = 2;
  o.max_batch = 4;
  o.work_dir = test::temp_dir();
  EvalService svc(o);
  svc.add_task(std::make_shared<CountingTask>("a", rec));
  svc.add_task(std::make_shared<CountingTask>("b", rec));
  EXPECT_THROW(svc.add_task(std::make_shared<CountingTask>("a", rec)), Error);
  EXPECT_THROW(svc.submit("nope", "x"), Error);

  constexpr int kThreads = 8, kEach = 25;
  std::mutex m;
  std::map<std::string, int> answers;  // source -> callbacks
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string src = strf("client %d item %d%s\n", t, i, i % 5 == 0 ? " bad" : "");
        svc.submit((i % 2) ? "a" : "b", src, [&, src](const Verdict& v) {
          std::lock_guard<std::mutex> l(m);
          ++answers[src];
          EXPECT_EQ(v.details.value("source", ""), src);  // its own verdict
          EXPECT_EQ(v.correct, src.find("bad") == std::string::npos);
          EXPECT_TRUE(v.details.contains("service"));
        });
      }
    });
  for (auto& th : threads) th.join();
  // A future too.
  std::future<Verdict> f = svc.submit("a", "by future\n");
  EXPECT_TRUE(f.get().correct);
  for (int i = 0; i < 500 && svc.stats().pending > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const EvalService::Stats st = svc.stats();
  EXPECT_EQ(st.pending, 0u);
  EXPECT_EQ(st.done, uint64_t(kThreads * kEach + 1));
  ASSERT_EQ(answers.size(), size_t(kThreads * kEach));
  for (const auto& [src, n] : answers) EXPECT_EQ(n, 1) << src;
  EXPECT_EQ(rec.prepared, kThreads * kEach + 1);
  EXPECT_LE(rec.judges_made, 3);  // one per slot (the tasks share a judge key)
  EXPECT_LE(rec.largest_batch, 4u);
  int total = 0;
  for (const auto& [slot, n] : rec.judged) total += n;
  EXPECT_EQ(total, kThreads * kEach + 1);
  EXPECT_GE(rec.judged.size(), 2u);  // the work spread over the slots
  for (const auto& [slot, n] : rec.max_active) EXPECT_EQ(n, 1) << "slot " << slot << " judged two batches at once";
}

// Compiling ahead yields the CPU to the judges: the prepare threads, and the processes they start,
// run at the process's nice value plus ServiceOptions::prepare_nice (10); the slots' threads at the
// process's own.
TEST(ServiceQueues, CompilesRunBelowTheJudgesPriority) {
  const int base = thread_nice();
  ASSERT_NE(base, -100);
  if (base >= 19) GTEST_SKIP() << "SKIPPED: this process already runs at nice 19";
  Record rec;
  ServiceOptions o;
  o.slots = 2;
  o.prepare_jobs = 3;
  o.work_dir = test::temp_dir();
  EvalService svc(o);
  svc.add_task(std::make_shared<CountingTask>("a", rec));
  std::vector<std::future<Verdict>> fs;
  for (int i = 0; i < 12; ++i) fs.push_back(svc.submit("a", strf("item %d%s\n", i, i % 4 == 0 ? " compiler" : "")));
  for (auto& f : fs) EXPECT_TRUE(f.get().correct);
  std::lock_guard<std::mutex> l(rec.m);
  EXPECT_EQ(rec.prepare_nice, std::set<int>{std::min(19, base + 10)});
  EXPECT_EQ(rec.compiler_nice, std::set<int>{std::min(19, base + 10)});
  EXPECT_EQ(rec.judge_nice, std::set<int>{base});
  EXPECT_EQ(thread_nice(), base);  // the caller's thread untouched
}

TEST(ServiceQueues, BoundedSubmitRefusesWhenFullAndStopAnswersTheRest) {
  Record rec;
  ServiceOptions o;
  o.slots = 1;
  o.prepare_jobs = 1;
  o.max_pending = 3;
  o.work_dir = test::temp_dir();
  std::atomic<int> answered{0}, internal{0};
  int accepted = 0;
  {
    EvalService svc(o);
    svc.add_task(std::make_shared<CountingTask>("a", rec));
    for (int i = 0; i < 10; ++i)
      accepted += svc.try_submit("a", strf("item %d\n", i), [&](const Verdict& v) {
        ++answered;
        internal += v.has_reason(reason::kInternalError);
      });
    EXPECT_GE(accepted, 3);
    EXPECT_LT(accepted, 10);  // judging 3 ms each cannot drain 10 submissions made back to back
  }
  // Every accepted candidate got exactly one answer, judged or "the service stopped".
  EXPECT_EQ(answered, accepted);
}

// ---------------------------------------------------------------------------------------------
// Completions, parsed as optimize parses an answer, on a real task's seed.

TEST(ServiceCompletion, FencedCodeEditsAgainstTheSeedBareCodeAndNone) {
  TorchEvalOptions o;
  auto task = make_torch_task("01_relu", kSource + "/tasks/kforge/01_relu.py", o);
  EXPECT_NE(task->seed().find("class ModelNew"), std::string::npos);
  const ExtractedCandidate code = extract_candidate(
      "## Analysis\nclamp.\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n```\n", *task);
  ASSERT_TRUE(code.ok) << code.error;
  EXPECT_EQ(code.how, "code");
  EXPECT_EQ(code.source.rfind("import torch", 0), 0u);
  const ExtractedCandidate edit = extract_candidate(
      "```python\n<<<<<<< SEARCH\n        return torch.relu(x)\n=======\n        return torch.clamp(x, min=0.0)\n"
      ">>>>>>> REPLACE\n```\n",
      *task);
  ASSERT_TRUE(edit.ok) << edit.error;
  EXPECT_EQ(edit.how, "edits");
  EXPECT_NE(edit.source.find("torch.clamp(x, min=0.0)"), std::string::npos);
  EXPECT_NE(edit.source.find("class ModelNew"), std::string::npos);
  const ExtractedCandidate bad_edit =
      extract_candidate("<<<<<<< SEARCH\nnot in the seed\n=======\nx\n>>>>>>> REPLACE\n", *task);
  EXPECT_FALSE(bad_edit.ok);
  EXPECT_NE(bad_edit.error.find("seed"), std::string::npos) << bad_edit.error;
  const ExtractedCandidate bare = extract_candidate("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n", *task);
  ASSERT_TRUE(bare.ok);
  EXPECT_EQ(bare.how, "bare");
  EXPECT_FALSE(extract_candidate("```cuda\n__global__ void k() {}\n```\n", *task).ok);  // no Python program
  EXPECT_FALSE(extract_candidate("   \n", *task).ok);
  EXPECT_FALSE(extract_candidate("I would write a faster kernel.", *task).ok);  // prose, no entry point
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
}

// HGEMM problems through the same service: the naive seed, and verdicts that need no GPU (a
// static-scan rejection, a compile error from nvcc) through the prepare pool and the slot's judge.
TEST(ServiceHgemm, SeedScanAndCompileVerdictsThroughTheService) {
  EvalOptions eo = hgemm_eval_options("sm_90a");
  eo.compile.cache_dir = test::temp_dir();
  eo.compile.cutlass = "";
  auto task = make_hgemm_task("hgemm:256x256x256", parse_hgemm_task("hgemm:256x256x256"), eo);
  EXPECT_EQ(task->language(), "cuda");
  EXPECT_NE(task->seed().find("kforge_hgemm"), std::string::npos);
  EXPECT_EQ(task->describe()["m"], 256);
  ServiceOptions o;
  o.work_dir = test::temp_dir();
  o.prepare_jobs = 1;
  EvalService svc(o);
  svc.add_task(task);
  const ExtractedCandidate scan = extract_candidate(
      "```cuda\nextern \"C\" int kforge_hgemm(const kforge_hgemm_args* a, cudaStream_t s) {\n"
      "  cudaStream_t mine; cudaStreamCreate(&mine); return 0;\n}\n```\n",
      *task);
  ASSERT_TRUE(scan.ok);
  std::future<Verdict> f1 = svc.submit(task->id(), scan.source);
  const Verdict v1 = f1.get();
  EXPECT_FALSE(v1.correct);
  EXPECT_TRUE(v1.has_reason(reason::kForbiddenCall)) << join(v1.reasons, ",") << " " << v1.message;
  EXPECT_TRUE(v1.details.contains("service"));
  if (!run_process({"nvcc", "--version"}).ok()) GTEST_SKIP() << "SKIPPED: nvcc not found on PATH";
  std::future<Verdict> f2 = svc.submit(
      task->id(), "extern \"C\" int kforge_hgemm(const kforge_hgemm_args* a, cudaStream_t s) { return this is not C++; }\n");
  const Verdict v2 = f2.get();
  EXPECT_TRUE(v2.has_reason(reason::kCompileError)) << join(v2.reasons, ",") << " " << v2.message;
  EXPECT_TRUE(v2.details.contains("compile"));
  EXPECT_LT(v2.reward, 0.0 + 1e-12);
}

// ---------------------------------------------------------------------------------------------
// The store

TEST(ServeStore, AdmitOnceCompleteOncePendingSurvivesReopen) {
  const std::string path = test::temp_dir() + "/s.db";
  {
    ServeStore s(path);
    ServeRecord r;
    r.request_id = "r1";
    r.task_id = "t";
    r.completion = "c";
    r.completion_sha = "h";
    r.code = "code";
    r.code_sha = "cs";
    auto a = s.admit({r, r}, "");
    ASSERT_EQ(a.size(), 2u);
    EXPECT_FALSE(a[0]);
    ASSERT_TRUE(a[1]);  // the second is the same id: already there
    EXPECT_EQ(a[1]->state, "pending");
    s.add_attempt("r1");
    EXPECT_EQ(s.pending().size(), 1u);
  }
  ServeStore s(path);
  ASSERT_EQ(s.pending().size(), 1u);
  EXPECT_EQ(s.pending()[0].attempts, 1);
  EXPECT_TRUE(s.complete("r1", {{"reward", 1.5}, {"correct", true}, {"judge_key", "k1"}}, "judged"));
  EXPECT_FALSE(s.complete("r1", {{"reward", 9.0}}, "judged"));  // done rows never change
  EXPECT_EQ(s.get("r1")->result["reward"], 1.5);
  ASSERT_TRUE(s.judged_result("t", "cs", "k1"));
  EXPECT_FALSE(s.judged_result("t", "other", "k1"));
  EXPECT_FALSE(s.judged_result("t", "cs", "k2"));  // judged under other settings
  s.create_job("j", {"r1"});
  EXPECT_EQ(s.job("j")->size(), 1u);
  EXPECT_FALSE(s.job("k"));
  EXPECT_EQ(s.counts().done, 1);
}

// ---------------------------------------------------------------------------------------------
// A real kforge serve on loopback

const std::string kToken = "test-token-0123456789abcdef";

const char* kHonest =
    "## Performance Analysis\nReLU is memory-bound.\n```python\nimport torch\nimport torch.nn as nn\n\n\n"
    "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n    def forward(self, x):\n"
    "        return x.clamp_min(0.0)\n```\n";

// A candidate the static scan refuses (a thread); `tag` makes its code unique.
std::string threaded(const std::string& tag) {
  return "```python\nimport threading\nimport torch\nimport torch.nn as nn\n# " + tag +
         "\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        threading.Thread(target=lambda: None).start()\n"
         "        return x.clamp_min(0.0)\n```\n";
}

class ServeProcess {
 public:
  // Starts kforge serve on a free port of 127.0.0.1 over `tasks_dir`, with `store`.
  ServeProcess(const std::string& tasks_dir, const std::string& store, const std::vector<std::string>& extra = {}) {
    dir_ = test::temp_dir();
    write_file_atomic(dir_ + "/token", kToken + "\n");
    std::vector<std::string> args = {KFORGE_BINARY, "serve", "--device", "cpu", "--samples", "3",
                                     "--trials", "1", "--store", store, "--port", "0", "--port-file", dir_ + "/port",
                                     "--token-file", dir_ + "/token", "--work-dir", dir_ + "/work",
                                     "--compile-timeout", "120", "--run-timeout", "300", "--atol", "0.001"};
    if (!tasks_dir.empty()) args.insert(args.begin() + 2, {"--tasks", tasks_dir});
    // A flag given in `extra` replaces the same flag of the defaults above.
    for (const std::string& e : extra) {
      if (e.rfind("--", 0) != 0) continue;
      auto at = std::find(args.begin() + 2, args.end(), e);
      if (at != args.end()) args.erase(at, at + 2);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      const std::string out = dir_ + "/out", err = dir_ + "/err";
      if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr)) ::_exit(127);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 600 && !fs::exists(dir_ + "/port"); ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (fs::exists(dir_ + "/port")) port_ = std::stoi(read_file(dir_ + "/port"));
  }
  ~ServeProcess() { kill(SIGTERM); }
  int port() const { return port_; }
  std::string log() const { return test::slurp(dir_ + "/err") + test::slurp(dir_ + "/out"); }
  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(-pid_, sig);  // its process group: the server and the judges it started
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  httplib::Client client(bool auth = true) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(900, 0);
    c.set_connection_timeout(10, 0);
    if (auth) c.set_default_headers({{"Authorization", "Bearer " + kToken}});
    return c;
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

std::string task_set() {
  const std::string dir = test::temp_dir() + "/set";
  fs::create_directories(dir);
  // The CPU corpus's ReLU (the same task on a smaller tensor: judged in seconds on a CPU).
  fs::copy_file(kSource + "/tests/corpus/torch/tasks_cpu/01_relu.py", dir + "/01_relu.py");
  return dir;
}

nlohmann::json items(const std::vector<std::tuple<std::string, std::string, std::string>>& list) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& [task, completion, id] : list) a.push_back({{"task_id", task}, {"completion", completion}, {"request_id", id}});
  return {{"items", a}};
}

nlohmann::json body_of(const httplib::Result& r) {
  if (!r) return nullptr;
  return nlohmann::json::parse(r->body, nullptr, false);
}

TEST(ServeHttp, AuthLimitsMalformedAndUnknownTasks) {
  const std::string store = test::temp_dir() + "/s.db";
  ServeProcess srv(task_set(), store, {"--max-batch", "4", "--max-completion-bytes", "2000", "--max-body-bytes", "20000",
                                       "--max-queue", "2"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  auto open = srv.client(false);
  auto health = open.Get("/v1/health");
  ASSERT_TRUE(health) << srv.log();
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(body_of(health)["tasks"], 1);
  const std::string one = dump_json(items({{"01_relu", "no code here", "a1"}}));
  auto r = open.Post("/v1/score", one, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_TRUE(body_of(r).contains("error"));
  EXPECT_EQ(open.Get("/metrics")->status, 401);
  httplib::Client wrong("127.0.0.1", srv.port());
  wrong.set_default_headers({{"Authorization", "Bearer test-token-0123456789abcdeX"}});
  EXPECT_EQ(wrong.Post("/v1/score", one, "application/json")->status, 403);
  EXPECT_EQ(wrong.Post("/get_reward", "{}", "application/json")->status, 403);
  // /get_reward takes the token in the URL too (OpenRLHF sends no headers).
  auto q = open.Post(("/get_reward?token=" + kToken).c_str(), "{\"query\": []}", "application/json");
  EXPECT_EQ(q->status, 400) << q->body;  // authenticated; no labels

  auto c = srv.client();
  auto bad_json = c.Post("/v1/score", "{not json", "application/json");
  EXPECT_EQ(bad_json->status, 400);
  EXPECT_NE(body_of(bad_json)["error"].get<std::string>().find("not JSON"), std::string::npos);
  EXPECT_EQ(c.Post("/v1/score", "{\"items\": 3}", "application/json")->status, 400);
  EXPECT_EQ(c.Post("/v1/score", "{\"items\": [{\"task_id\": \"01_relu\"}]}", "application/json")->status, 400);
  auto unknown = c.Post("/v1/score", dump_json(items({{"99_nope", "x", "u1"}})), "application/json");
  EXPECT_EQ(unknown->status, 404);
  EXPECT_NE(body_of(unknown)["error"].get<std::string>().find("99_nope"), std::string::npos);
  auto big_completion = c.Post("/v1/score", dump_json(items({{"01_relu", std::string(3000, 'x'), "b1"}})), "application/json");
  EXPECT_EQ(big_completion->status, 413);
  EXPECT_NE(body_of(big_completion)["error"].get<std::string>().find("limit"), std::string::npos);
  auto big_body = c.Post("/v1/score", std::string(30000, ' '), "application/json");
  ASSERT_TRUE(big_body);
  EXPECT_EQ(big_body->status, 413);
  EXPECT_TRUE(body_of(big_body).contains("error")) << big_body->body;
  auto big_batch = c.Post("/v1/score",
                          dump_json(items({{"01_relu", "a", "1"}, {"01_relu", "b", "2"}, {"01_relu", "c", "3"},
                                           {"01_relu", "d", "4"}, {"01_relu", "e", "5"}})),
                          "application/json");
  EXPECT_EQ(big_batch->status, 413);
  // Three candidates to judge with room for two: 429 with Retry-After, and nothing stored.
  auto full = c.Post("/v1/jobs",
                     dump_json(items({{"01_relu", threaded("q1"), "q1"}, {"01_relu", threaded("q2"), "q2"},
                                      {"01_relu", threaded("q3"), "q3"}})),
                     "application/json");
  EXPECT_EQ(full->status, 429) << full->body;
  EXPECT_TRUE(full->has_header("Retry-After"));
  EXPECT_GE(std::stoi(full->get_header_value("Retry-After")), 1);
  // A completion without code is answered at once, lowest reward, and stored.
  auto none = c.Post("/v1/score", one, "application/json");
  ASSERT_EQ(none->status, 200) << none->body;
  const nlohmann::json res = body_of(none)["results"][0];
  EXPECT_EQ(res["request_id"], "a1");
  EXPECT_FALSE(res["correct"]);
  EXPECT_EQ(res["reasons"][0], kInvalidCompletion);
  // A request id reused for another completion is a conflict.
  EXPECT_EQ(c.Post("/v1/score", dump_json(items({{"01_relu", "other text", "a1"}})), "application/json")->status, 409);
  auto metrics = c.Get("/metrics");
  ASSERT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("kforge_serve_queue_depth"), std::string::npos);
  EXPECT_NE(metrics->body.find("kforge_serve_items_total{origin=\"invalid\"} 1"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("kforge_serve_rejected_full_total 1"), std::string::npos);
  EXPECT_NE(metrics->body.find("code=\"401\""), std::string::npos);
  srv.kill(SIGTERM);
  ServeStore s(store);
  EXPECT_EQ(s.counts().done, 1);  // only a1: the refused batches stored nothing
  EXPECT_EQ(s.counts().pending, 0);
}

// HGEMM problems by id over HTTP (no GPU needed for these verdicts): listed, scored, unknown ones 404.
TEST(ServeHttp, HgemmTasksByIdOverHttp) {
  const std::string store = test::temp_dir() + "/s.db";
  ServeProcess srv("", store, {"--hgemm-shapes", "64x64x64,128x128x64:tn", "--arch", "sm_90a"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  auto c = srv.client();
  auto tasks = body_of(c.Get("/v1/tasks"));
  ASSERT_EQ(tasks["tasks"].size(), 2u) << tasks.dump();
  EXPECT_EQ(tasks["tasks"][0]["id"], "hgemm:128x128x64:tn");
  EXPECT_EQ(tasks["tasks"][0]["layout"], "tn");
  const std::string stream =
      "```cuda\nextern \"C\" int kforge_hgemm(const kforge_hgemm_args* a, cudaStream_t s) {\n"
      "  cudaStream_t mine; cudaStreamCreate(&mine); return 0;\n}\n```\n";
  auto r = c.Post("/v1/score",
                  dump_json(items({{"hgemm:64x64x64", stream, "g1"},
                                   {"hgemm:64x64x64", "<<<<<<< SEARCH\nnot in the seed\n=======\nx\n>>>>>>> REPLACE\n", "g2"}})),
                  "application/json");
  ASSERT_EQ(r->status, 200) << r->body << srv.log();
  const nlohmann::json res = body_of(r)["results"];
  EXPECT_EQ(res[0]["reasons"][0], "forbidden_call") << res[0].dump(1);
  EXPECT_EQ(res[1]["reasons"][0], kInvalidCompletion) << res[1].dump(1);
  EXPECT_NE(res[1]["message"].get<std::string>().find("seed"), std::string::npos);
  EXPECT_EQ(c.Post("/v1/score", dump_json(items({{"hgemm:32x32x32", stream, "g3"}})), "application/json")->status, 404);
  srv.kill(SIGTERM);
  // CUDA-L2's grid as a task set: 1,000 shapes in both layouts.
  ServeProcess grid("", test::temp_dir() + "/g.db", {"--hgemm-shapes", "grid", "--hgemm-layouts", "nn,tn", "--arch", "sm_90a"});
  ASSERT_GT(grid.port(), 0) << grid.log();
  auto g = grid.client();
  EXPECT_EQ(body_of(g.Get("/v1/health"))["tasks"], 2000);
  auto listed = body_of(g.Get("/v1/tasks"));
  std::set<std::string> ids;
  for (const auto& t : listed["tasks"]) ids.insert(t["id"].get<std::string>());
  EXPECT_TRUE(ids.count("hgemm:16384x64x12288:tn"));
  EXPECT_TRUE(ids.count("hgemm:64x64x64"));
}

TEST(ServeHttp, ScoresRealCandidatesEndpointsAndRepeatsFromTheStore) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string store = test::temp_dir() + "/s.db";
  ServeProcess srv(task_set(), store);
  ASSERT_GT(srv.port(), 0) << srv.log();
  auto c = srv.client();
  auto r = c.Post("/v1/score",
                  dump_json(items({{"01_relu", kHonest, "h1"}, {"01_relu", threaded("t1"), "t1"},
                                   {"01_relu", "I cannot help with that.", "n1"}})),
                  "application/json");
  ASSERT_TRUE(r) << srv.log();
  ASSERT_EQ(r->status, 200) << r->body << srv.log();
  const nlohmann::json res = body_of(r)["results"];
  ASSERT_EQ(res.size(), 3u);
  const nlohmann::json& h = res[0];
  EXPECT_EQ(h["request_id"], "h1");
  EXPECT_TRUE(h["correct"]) << h.dump(1);
  ASSERT_TRUE(h["speedup"].contains("eager")) << h.dump(1);
  for (const char* k : {"median", "p10", "p90"}) EXPECT_GT(h["speedup"]["eager"][k].get<double>(), 0) << k;
  EXPECT_EQ(h["code_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(h["extracted"], "code");
  EXPECT_GT(h["timings"]["judge_s"].get<double>(), 0);
  EXPECT_FALSE(res[1]["correct"]);
  EXPECT_EQ(res[1]["reasons"][0], "forbidden_call") << res[1].dump(1);
  EXPECT_EQ(res[2]["reasons"][0], kInvalidCompletion);
  // A rejection never out-earns an accepted candidate.
  EXPECT_LE(res[1]["reward"].get<double>(), h["reward"].get<double>() + 1e-12);
  EXPECT_LE(res[2]["reward"].get<double>(), h["reward"].get<double>() + 1e-12);

  // The same request ids again: the stored verdicts, nothing judged again.
  auto again = c.Post("/v1/score",
                      dump_json(items({{"01_relu", kHonest, "h1"}, {"01_relu", threaded("t1"), "t1"}})), "application/json");
  ASSERT_EQ(again->status, 200);
  const nlohmann::json res2 = body_of(again)["results"];
  EXPECT_EQ(res2[0]["from_store"], true);
  EXPECT_EQ(res2[0]["reward"], h["reward"]);
  EXPECT_EQ(res2[0]["speedup"], h["speedup"]);

  // Jobs: submit and poll (the honest code under a new id: judged again, no --reuse-verdicts).
  auto job = c.Post("/v1/jobs", dump_json(items({{"01_relu", threaded("j1"), "j1"}, {"01_relu", "nothing", "j2"}})),
                    "application/json");
  ASSERT_EQ(job->status, 202) << job->body;
  const std::string job_id = body_of(job)["job_id"];
  nlohmann::json polled;
  for (int i = 0; i < 600; ++i) {
    polled = body_of(c.Get(("/v1/jobs/" + job_id).c_str()));
    if (polled["state"] == "done") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(polled["state"], "done") << polled.dump(1);
  EXPECT_EQ(polled["results"][0]["request_id"], "j1");
  EXPECT_EQ(polled["results"][0]["reasons"][0], "forbidden_call");
  EXPECT_EQ(c.Get("/v1/jobs/job-none")->status, 404);

  // OpenRLHF's protocol: query = prompt + response, labels = task ids.
  const std::string prompt = "<|user|>make relu fast<|assistant|>";
  nlohmann::json orl = {{"query", {prompt + kHonest, prompt + threaded("o1"), prompt + "no code"}},
                        {"prompts", {prompt, prompt, prompt}},
                        {"labels", {"01_relu", "{\"task_id\": \"01_relu\"}", "01_relu"}}};
  auto g = c.Post("/get_reward", dump_json(orl), "application/json");
  ASSERT_EQ(g->status, 200) << g->body;
  const nlohmann::json gr = body_of(g);
  ASSERT_EQ(gr["rewards"].size(), 3u);
  ASSERT_EQ(gr["scores"].size(), 3u);
  EXPECT_EQ(gr["scores"][0], 1.0);
  EXPECT_EQ(gr["scores"][1], 0.0);
  EXPECT_EQ(gr["extra_logs"]["kforge_correct"].size(), 3u);
  EXPECT_GT(gr["extra_logs"]["kforge_speedup"][0].get<double>(), 0);
  EXPECT_LE(gr["rewards"][1].get<double>(), gr["rewards"][0].get<double>() + 1e-12);
  // The same queries again come from the store: same rewards.
  auto g2 = c.Post("/get_reward", dump_json(orl), "application/json");
  EXPECT_EQ(body_of(g2)["rewards"], gr["rewards"]);
  auto bad = c.Post("/get_reward", dump_json({{"query", {"a"}}, {"labels", {"01_relu", "01_relu"}}}), "application/json");
  EXPECT_EQ(bad->status, 400);
  auto unknown = c.Post("/get_reward", dump_json({{"query", {"a"}}, {"labels", {"nope"}}}), "application/json");
  EXPECT_EQ(unknown->status, 404);

  srv.kill(SIGTERM);
  ServeStore s(store);
  const ServeStore::Counts n = s.counts();
  EXPECT_EQ(n.pending, 0);
  // Each judged row was handed to the evaluator exactly once.
  for (const char* id : {"h1", "t1", "j1"}) EXPECT_EQ(s.get(id)->attempts, 1) << id;
  EXPECT_EQ(s.get("n1")->attempts, 0);
}

// 1,024 requests from 32 clients at once, with a candidate that hangs and one that crashes in the
// mix: every request answered exactly once with its own result; identical code judged once
// (--reuse-verdicts); the hang costs its own time-out, the crash its own verdict.
const char* kHang =
    "```python\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        while True:\n"
    "            pass\n        return x\n```\n";
const char* kSegv =
    "```python\nimport faulthandler\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
    "        faulthandler._sigsegv()\n        return x\n```\n";

TEST(ServeHttp, ThousandRequestsFrom32ClientsWithAHangAndACrash) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string store = test::temp_dir() + "/s.db";
  // The PyTorch judge's run time-out spans the whole verdict, the judge's own start included: on two
  // cores shared with builds an honest verdict took 25 s (10 s of it the judge's start), so 30.
  constexpr double kRunTimeout = 30;
  ServeProcess srv(task_set(), store, {"--reuse-verdicts", "--slots", "2", "--max-queue", "2000", "--run-timeout", "30"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  constexpr int kClients = 32, kEach = 32;
  std::mutex m;
  std::map<std::string, int> seen;
  std::map<std::string, nlohmann::json> by_id;
  std::map<std::string, double> latency_of;
  std::vector<double> latency;
  std::atomic<int> failures{0};
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  const auto t_start = std::chrono::steady_clock::now();
  for (int t = 0; t < kClients; ++t)
    threads.emplace_back([&, t] {
      auto c = srv.client();
      for (int i = 0; i < kEach; ++i) {
        const std::string id = strf("c%d-%d", t, i);
        std::string completion;
        if (t == 0 && i == 1) completion = kHang;
        else if (t == 1 && i == 1) completion = kSegv;
        else if (i % 3 == 0) completion = kHonest;               // the same code from everyone: judged once
        else if (i % 3 == 1) completion = "no code, sorry";      // answered at once
        else completion = threaded(strf("client %d", t));       // one scan rejection per client, then reused
        const auto t0 = std::chrono::steady_clock::now();
        auto r = c.Post("/v1/score", dump_json(items({{"01_relu", completion, id}})), "application/json");
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::lock_guard<std::mutex> l(m);
        if (!r || r->status != 200) {
          ++failures;
          errors.push_back(id + ": " + (r ? strf("HTTP %d %s", r->status, r->body.substr(0, 200).c_str())
                                          : "transport error " + httplib::to_string(r.error())));
          continue;
        }
        const nlohmann::json res = body_of(r)["results"];
        latency.push_back(s);
        latency_of[id] = s;
        for (const auto& x : res) ++seen[x["request_id"].get<std::string>()];
        if (res.size() != 1 || res[0]["request_id"] != id) ++failures;
        else by_id[id] = res[0];
      }
    });
  for (auto& th : threads) th.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  EXPECT_EQ(failures, 0) << join(errors, "\n") << "\n" << srv.log().substr(0, 4000);
  EXPECT_EQ(seen.size(), size_t(kClients * kEach));
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id;
  for (const auto& [id, r] : by_id) {
    const int t = std::stoi(id.substr(1)), i = std::stoi(id.substr(id.find('-') + 1));
    if (t == 0 && i == 1) EXPECT_EQ(r["reasons"][0], "timeout") << r.dump(1);
    else if (t == 1 && i == 1) EXPECT_EQ(r["reasons"][0], "crashed") << r.dump(1);
    else if (i % 3 == 0) EXPECT_TRUE(r["correct"].get<bool>()) << r.dump(1);
    else if (i % 3 == 1) EXPECT_EQ(r["reasons"][0], kInvalidCompletion);
    else EXPECT_EQ(r["reasons"][0], "forbidden_call") << r.dump(1);
  }
  std::sort(latency.begin(), latency.end());
  ASSERT_FALSE(latency.empty());
  std::printf("%zu requests from %d clients in %.1f s: p50 %.2f s, p99 %.2f s, max %.2f s\n", latency.size(), kClients,
              wall, latency[latency.size() / 2], latency[std::min(latency.size() - 1, latency.size() * 99 / 100)],
              latency.back());
  // The hang costs its own time-out and no more, the crash no time-out at all, and nobody else
  // waits for them beyond that: no other request took longer than the hang's and the crash's own
  // judging plus twice the longest judging of a normal candidate (one batch ahead of it, then its
  // own) and 15 s of slack (HTTP, two busy cores). A hang that held a slot past its time-out, a
  // crash that cost a time-out, or a slot left stuck fails this.
  const std::string hang = "c0-1", crash = "c1-1";
  ASSERT_TRUE(by_id.count(hang) && by_id.count(crash));
  const double hang_judge = by_id[hang]["timings"]["judge_s"].get<double>();
  EXPECT_GE(hang_judge, kRunTimeout - 5) << by_id[hang].dump(1);  // the judge's deadline is 3 s inside it
  EXPECT_LT(hang_judge, kRunTimeout + 15) << by_id[hang].dump(1);
  EXPECT_LT(by_id[crash]["timings"]["judge_s"].get<double>(), kRunTimeout) << by_id[crash].dump(1);
  double normal_judge = 0;  // the longest judging of anything but the hang and the crash
  for (const auto& [id, r] : by_id)
    if (id != hang && id != crash && r.contains("timings") && r["timings"].contains("judge_s"))
      normal_judge = std::max(normal_judge, r["timings"]["judge_s"].get<double>());
  EXPECT_GT(normal_judge, 0);  // the honest candidate was judged
  const double crash_judge = by_id[crash]["timings"]["judge_s"].get<double>();
  const double bound = hang_judge + crash_judge + 2 * normal_judge + 15;
  for (const auto& [id, s] : latency_of)
    if (id != hang) EXPECT_LT(s, bound) << id << " waited " << s << " s (hang's judging " << hang_judge
                                        << " s, longest normal judging " << normal_judge << " s)";
  std::printf("hang judged in %.1f s (time-out %.0f s), crash in %.1f s, longest normal judging %.1f s, "
              "slowest other request %.1f s (bound %.1f s)\n", hang_judge, kRunTimeout, crash_judge, normal_judge,
              [&] { double m = 0; for (const auto& [id, s] : latency_of) if (id != hang) m = std::max(m, s); return m; }(),
              bound);
  srv.kill(SIGTERM);
  ServeStore s(store);
  const ServeStore::Counts n = s.counts();
  EXPECT_EQ(n.done, kClients * kEach);
  EXPECT_EQ(n.pending, 0);
  EXPECT_EQ(n.judged, 1 + kClients + 2);  // the honest code, one threaded variant per client, the hang, the crash
  EXPECT_EQ(n.attempts, n.judged);       // each judged once
}

// kill -9 under load, restart on the same store, clients retry with the same request ids:
// nothing lost, nothing finished scored twice.
TEST(ServeHttp, KillNineRestartLosesNothingScoresNothingTwice) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string set = task_set();
  const std::string store = test::temp_dir() + "/s.db";
  std::vector<std::tuple<std::string, std::string, std::string>> list;
  for (int i = 0; i < 6; ++i) list.push_back({"01_relu", threaded(strf("k%d", i)), strf("k%d", i)});
  list.push_back({"01_relu", kHonest, "honest"});
  list.push_back({"01_relu", "no code", "none"});
  list.push_back({"01_relu", kHonest, "honest-again"});  // the same code: answered with honest's verdict
  std::string job_id;
  std::map<std::string, nlohmann::json> done_before;
  {
    ServeProcess srv(set, store, {"--reuse-verdicts"});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    // The honest candidate goes first so that it is being judged when the server dies.
    std::rotate(list.begin(), list.begin() + 6, list.begin() + 7);
    auto job = c.Post("/v1/jobs", dump_json(items(list)), "application/json");
    ASSERT_EQ(job->status, 202) << job->body;
    job_id = body_of(job)["job_id"];
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    srv.kill(SIGKILL);
  }
  {
    ServeStore s(store);
    const ServeStore::Counts n = s.counts();
    EXPECT_EQ(n.pending + n.done, int64_t(list.size()));  // every accepted request is there
    EXPECT_GE(n.pending, 1);  // the honest one was still being judged
    for (const auto& [task, completion, id] : list) {
      auto r = s.get(id);
      ASSERT_TRUE(r) << id;
      if (r->state == "done") done_before[id] = r->result;
    }
  }
  ServeProcess srv(set, store, {"--reuse-verdicts"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  EXPECT_NE(srv.log().find("judged again"), std::string::npos) << srv.log();
  auto c = srv.client();
  // The client retries its batch with the same request ids.
  auto r = c.Post("/v1/score", dump_json(items(list)), "application/json");
  ASSERT_EQ(r->status, 200) << r->body << srv.log();
  const nlohmann::json res = body_of(r)["results"];
  ASSERT_EQ(res.size(), list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(res[i]["request_id"], std::get<2>(list[i]));
    EXPECT_EQ(res[i]["status"], "done");
  }
  EXPECT_TRUE(res[0]["correct"]) << res[0].dump(1);
  EXPECT_EQ(res.back()["reward"], res[0]["reward"]);  // honest-again: honest's verdict
  auto polled = body_of(c.Get(("/v1/jobs/" + job_id).c_str()));
  EXPECT_EQ(polled["state"], "done") << polled.dump(1);
  srv.kill(SIGTERM);
  ServeStore s(store);
  EXPECT_EQ(s.counts().pending, 0);
  EXPECT_EQ(s.counts().done, int64_t(list.size()));
  for (const auto& [task, completion, id] : list) {
    auto row = s.get(id);
    if (done_before.count(id)) {
      EXPECT_EQ(row->result, done_before[id]) << id << " changed after the restart";
      EXPECT_LE(row->attempts, 1) << id;
    } else {
      EXPECT_LE(row->attempts, 2) << id;  // judged at most once more, after the restart
    }
  }
  EXPECT_EQ(s.get("honest-again")->attempts, 0);  // never judged itself
  EXPECT_EQ(s.get("honest-again")->origin, "reused");
}

// kill -9 while 8 clients are submitting, restart on the same store and port; each client retries
// whatever got no answer with the same request ids until it gets one. Nothing lost (every request
// answered, every one stored done), nothing scored twice (an answer given before the kill is what
// the store still holds and what a retry gets; a row done before the kill was judged once; no row
// judged more than once after the restart).
TEST(ServeHttp, KillNineUnderLoadFromEightClientsRetries) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string set = task_set();
  const std::string store = test::temp_dir() + "/s.db";
  auto srv = std::make_unique<ServeProcess>(set, store, std::vector<std::string>{"--slots", "2"});
  ASSERT_GT(srv->port(), 0) << srv->log();
  const std::string port = std::to_string(srv->port());
  constexpr int kClients = 8, kEach = 6;
  std::mutex m;
  std::map<std::string, nlohmann::json> first_answer;  // request id -> the first answer its client got
  std::map<std::string, int> answers;                  // request id -> answers received (retries included)
  std::atomic<int> transport_errors{0}, answered_before_kill{0};
  std::atomic<bool> killed{false};
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        // Two items a request: a unique honest candidate for three clients' first requests (judged
        // for seconds, so the kill finds them in flight), else a unique scan rejection; and a
        // completion without code (answered at once).
        const std::string a = strf("u%d-%d-a", t, i), b = strf("u%d-%d-b", t, i);
        std::string code = threaded(a);
        if (i == 0 && t < 3) code = std::string(kHonest).replace(std::string(kHonest).find("import torch\n"), 0, "# " + a + "\n");
        const std::string body = dump_json(items({{"01_relu", code, a}, {"01_relu", "no code " + b, b}}));
        for (int attempt = 0;; ++attempt) {
          httplib::Client c("127.0.0.1", std::stoi(port));
          c.set_read_timeout(600, 0);
          c.set_connection_timeout(2, 0);
          c.set_default_headers({{"Authorization", "Bearer " + kToken}});
          auto r = c.Post("/v1/score", body, "application/json");
          if (r && r->status == 200) {
            const nlohmann::json res = body_of(r)["results"];
            std::lock_guard<std::mutex> l(m);
            if (!killed) ++answered_before_kill;
            for (const auto& x : res) {
              const std::string id = x["request_id"];
              ++answers[id];
              if (!first_answer.count(id)) first_answer[id] = x;
            }
            break;
          }
          ++transport_errors;  // the server is down (or answering 503 while it stops): retry, same ids
          if (attempt > 300) {
            std::lock_guard<std::mutex> l(m);
            errors.push_back(a + ": no answer after 300 retries");
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
      }
    });
  // Under load: kill once some requests were answered and honest work is being judged.
  for (int i = 0; i < 600 && answered_before_kill < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::map<std::string, nlohmann::json> done_at_kill;
  {
    std::lock_guard<std::mutex> l(m);
    killed = true;
    srv->kill(SIGKILL);
  }
  {
    ServeStore s(store);
    const ServeStore::Counts n = s.counts();
    EXPECT_GE(n.pending, 1) << "the kill found nothing in flight";
    for (int t = 0; t < kClients; ++t)
      for (int i = 0; i < kEach; ++i)
        for (const char* k : {"a", "b"})
          if (auto r = s.get(strf("u%d-%d-%s", t, i, k)); r && r->state == "done") done_at_kill[r->request_id] = r->result;
  }
  // Every answer given before the kill had been stored done (committed before it was answered).
  {
    std::lock_guard<std::mutex> l(m);
    for (const auto& [id, x] : first_answer) EXPECT_TRUE(done_at_kill.count(id)) << id << " answered but not stored";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // clients retry against nothing meanwhile
  srv = std::make_unique<ServeProcess>(set, store, std::vector<std::string>{"--slots", "2", "--port", port});
  ASSERT_EQ(srv->port(), std::stoi(port)) << srv->log();
  for (auto& th : threads) th.join();
  EXPECT_TRUE(errors.empty()) << join(errors, "\n") << srv->log();
  EXPECT_GT(transport_errors, 0) << "no client noticed the kill";
  srv->kill(SIGTERM);
  ServeStore s(store);
  EXPECT_EQ(s.counts().pending, 0);
  EXPECT_EQ(s.counts().done, 2 * kClients * kEach);
  int honest_correct = 0;
  for (int t = 0; t < kClients; ++t)
    for (int i = 0; i < kEach; ++i)
      for (const char* k : {"a", "b"}) {
        const std::string id = strf("u%d-%d-%s", t, i, k);
        auto row = s.get(id);
        ASSERT_TRUE(row) << id << " lost";
        EXPECT_EQ(row->state, "done") << id;
        ASSERT_TRUE(first_answer.count(id)) << id << " never answered";
        EXPECT_EQ(answers[id], 1) << id << " answered more than once";
        // The client's answer is the stored verdict (a retry after the restart got the stored one).
        EXPECT_EQ(first_answer[id]["reward"], row->result["reward"]) << id;
        EXPECT_EQ(first_answer[id]["reasons"], row->result["reasons"]) << id;
        if (done_at_kill.count(id)) {
          EXPECT_EQ(row->result, done_at_kill[id]) << id << " changed after the restart";
          EXPECT_LE(row->attempts, 1) << id;
        } else {
          EXPECT_LE(row->attempts, 2) << id;  // at most once more, after the restart
        }
        if (k[0] == 'a' && i == 0 && t < 3 && row->result.value("correct", false)) ++honest_correct;
      }
  EXPECT_EQ(honest_correct, 3);
  std::printf("kill -9 with %zu of %d requests done and the rest pending or not yet sent; %d failed attempts "
              "retried; after the restart all %d done, each answered once\n",
              done_at_kill.size(), 2 * kClients * kEach, transport_errors.load(), 2 * kClients * kEach);
}

}  // namespace
}  // namespace kforge

namespace kforge {
namespace {

// The Python client package (python/kforge_client) against a real server: its /v1/score client,
// the TRL reward function, the verl adapter and the OpenRLHF request (tests/python/test_kforge_client.py).
TEST(ServeClient, PythonClientTrlAndVerlAdapters) {
  const std::string store = test::temp_dir() + "/s.db";
  ServeProcess srv(task_set(), store);
  ASSERT_GT(srv.port(), 0) << srv.log();
  const std::string cmd = strf("KFORGE_SERVE_URL=http://127.0.0.1:%d KFORGE_SERVE_TOKEN=%s python3 %s/tests/python/"
                               "test_kforge_client.py 2>&1",
                               srv.port(), kToken.c_str(), kSource.c_str());
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out << srv.log();
  EXPECT_NE(out.find("OK"), std::string::npos) << out;
}

// verl itself calls the adapter: its loader (get_custom_reward_fn, the path as pkg://... and as a
// file, reward_kwargs with the server's url and token) and its NaiveRewardManager over a DataProto
// (tests/python/test_verl_reward_manager.py). Needs verl: $KFORGE_VERL_PYTHON (a Python with verl,
// e.g. a venv made with --system-site-packages and `pip install verl`), else python3 when it has it.
TEST(ServeClient, VerlRewardManagerCallsTheAdapter) {
  // $KFORGE_VERL_PYTHON, else the virtual environment install-deps.sh makes (KFORGE_WITH_VERL=1), else python3.
  std::string py = std::getenv("KFORGE_VERL_PYTHON") ? std::getenv("KFORGE_VERL_PYTHON")
                   : fs::exists(kSource + "/.verl-venv/bin/python") ? kSource + "/.verl-venv/bin/python"
                                                                     : "python3";
  if (std::system((py + " -c 'import verl.workers.reward_manager.naive' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "SKIPPED: verl is not installed for " << py
                 << " (KFORGE_WITH_VERL=1 scripts/install-deps.sh, or set KFORGE_VERL_PYTHON to a Python with verl)";
  const std::string store = test::temp_dir() + "/s.db";
  ServeProcess srv(task_set(), store);
  ASSERT_GT(srv.port(), 0) << srv.log();
  const std::string cmd = strf("KFORGE_SERVE_URL=http://127.0.0.1:%d KFORGE_SERVE_TOKEN=%s %s %s/tests/python/"
                               "test_verl_reward_manager.py 2>&1",
                               srv.port(), kToken.c_str(), py.c_str(), kSource.c_str());
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out << srv.log();
  EXPECT_NE(out.find("OK"), std::string::npos) << out;
}

}  // namespace
}  // namespace kforge

namespace kforge {
namespace {

// examples/rl/trl_grpo.py: a few GRPO steps of TRL on a tiny random model against a kforge serve
// (--device cpu) it starts itself; the kforge rewards must reach the trainer's logs.
TEST(ServeTrl, GrpoExampleGetsRewardsFromTheServer) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  if (std::system("python3 -c 'import trl, transformers, datasets' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "SKIPPED: trl is not installed (KFORGE_WITH_TRL=1 scripts/install-deps.sh)";
  const std::string cmd = strf("cd %s && timeout 900 python3 %s/examples/rl/trl_grpo.py --kforge %s --steps 2 2>&1",
                               test::temp_dir().c_str(), kSource.c_str(), KFORGE_BINARY);
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out.substr(out.size() > 6000 ? out.size() - 6000 : 0);
  EXPECT_NE(out.find("kforge rewards per step:"), std::string::npos) << out.substr(out.size() > 3000 ? out.size() - 3000 : 0);
  EXPECT_NE(out.find("OK: 2 GRPO steps"), std::string::npos);
}

}  // namespace
}  // namespace kforge

// ---------------------------------------------------------------------------------------------
// kforge data export: from a run database to JSON lines that datasets and the trainers read.

#include "data/export.hpp"
#include "search/program_db.hpp"

namespace kforge {
namespace {

// A run folder with one iteration: the seed, then a group of two LLM answers (one correct).
std::string make_run(const std::string& task) {
  const std::string dir = test::temp_dir() + "/run";
  fs::create_directories(dir);
  ProgramDb db(dir + "/kforge-search.db");
  const int64_t run = db.create_run(task, nlohmann::json::object());
  CandidateRecord seed;
  seed.run_id = run;
  seed.policy = "seed";
  seed.source = "seed source\n";
  const int64_t seed_id = db.add_candidate(seed);
  db.record_verdict(seed_id, {{"correct", true}}, true, 1.0, 0.0);
  const nlohmann::json prompt = nlohmann::json::array(
      {{{"role", "system"}, {"content", "You write kernels."}}, {{"role", "user"}, {"content", "Make it faster. #1 scored 1.00x"}}});
  db.begin_iteration(run, 1, seed_id, dump_json(prompt));
  std::vector<CandidateRecord> group(2);
  for (int i = 0; i < 2; ++i) {
    group[i].run_id = run;
    group[i].iteration = 1;
    group[i].sample = i;
    group[i].policy = "llm:m";
    group[i].parents = {seed_id};
    group[i].prompt = dump_json(prompt);
    group[i].analysis = strf("analysis %d", i);
    group[i].source = strf("source %d\n", i);
  }
  const auto ids = db.add_candidates(group);
  db.record_verdict(ids[0], {{"correct", true}}, true, 1.5, std::log(1.5));
  db.record_verdict(ids[1], {{"correct", false}}, false, 0.0, -8.0);
  db.set_advantages({{ids[0], 1.0}, {ids[1], -1.0}});
  db.complete_iteration(run, 1);
  return dir;
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> rows;
  for (const std::string& line : split(read_file(path), '\n'))
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

TEST(DataExport, PromptsSftAndGroupsFromARunDatabase) {
  EXPECT_EQ(serve_task_id("hgemm:64x64x64:tn"), "hgemm:64x64x64:tn");
  EXPECT_EQ(serve_task_id("/x/tasks/01_relu.py"), "01_relu");
  const std::string run = make_run("/somewhere/tasks/01_relu.py");
  const std::string out = test::temp_dir();
  for (const char* kind : {"prompts", "sft", "groups"}) {
    auto r = test::run_kforge(strf("data export --kind %s --db %s --out %s/%s.jsonl", kind, run.c_str(), out.c_str(), kind));
    ASSERT_EQ(r.rc, 0) << kind << ": " << r.err;
  }
  const auto prompts = read_jsonl(out + "/prompts.jsonl");
  ASSERT_EQ(prompts.size(), 1u);
  EXPECT_EQ(prompts[0]["task_id"], "01_relu");
  EXPECT_EQ(prompts[0]["prompt"][1]["content"], "Make it faster. #1 scored 1.00x");
  EXPECT_EQ(prompts[0]["reward_model"]["ground_truth"], "01_relu");
  const auto sft = read_jsonl(out + "/sft.jsonl");
  ASSERT_EQ(sft.size(), 1u);  // the correct LLM answer only (not the seed, not the rejected one)
  EXPECT_EQ(sft[0]["completion"][0]["role"], "assistant");
  EXPECT_NE(sft[0]["completion"][0]["content"].get<std::string>().find("analysis 0\n\n```cuda\nsource 0\n```"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(sft[0]["speedup"].get<double>(), 1.5);
  const auto groups = read_jsonl(out + "/groups.jsonl");
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]["completions"].size(), 2u);
  EXPECT_EQ(groups[0]["advantages"], nlohmann::json({1.0, -1.0}));
  EXPECT_EQ(groups[0]["rewards"][1], -8.0);
  EXPECT_EQ(groups[0]["correct"], nlohmann::json({true, false}));
  // Bad input: a usage error, nothing written.
  EXPECT_EQ(test::run_kforge(strf("data export --kind nope --db %s --out %s/x.jsonl", run.c_str(), out.c_str())).rc, 2);
  EXPECT_EQ(test::run_kforge(strf("data export --db %s/none --out %s/y.jsonl", out.c_str(), out.c_str())).rc, 2);
  EXPECT_FALSE(fs::exists(out + "/x.jsonl"));
  EXPECT_FALSE(fs::exists(out + "/y.jsonl"));
  // The files are what datasets.load_dataset("json") reads, where the datasets package is installed.
  if (std::system("python3 -c 'import datasets' >/dev/null 2>&1") == 0) {
    const std::string py = strf(
        "python3 -c \"import datasets; d = datasets.load_dataset('json', data_files='%s/prompts.jsonl', split='train'); "
        "assert d[0]['task_id'] == '01_relu' and d[0]['prompt'][0]['role'] == 'system'; "
        "g = datasets.load_dataset('json', data_files='%s/groups.jsonl', split='train'); assert g[0]['advantages'] == [1.0, -1.0]; "
        "print('LOADED')\" 2>&1",
        out.c_str(), out.c_str());
    FILE* p = ::popen(py.c_str(), "r");
    std::string text;
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) text.append(buf, n);
    EXPECT_EQ(WEXITSTATUS(::pclose(p)), 0) << text;
    EXPECT_NE(text.find("LOADED"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace kforge

namespace kforge {
namespace {

// Shaped rewards and the correctness reward through kforge serve: the parts come back with each
// result, and --reuse-verdicts never answers from a verdict judged under other reward settings.
TEST(ServeHttp, RewardKindsPenaltiesAndReuseOnlyUnderTheSameSettings) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string store = test::temp_dir() + "/s.db", tasks = task_set();
  nlohmann::json shaped;
  {
    ServeProcess srv(tasks, store, {"--reuse-verdicts", "--length-penalty", "0.5:10"});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    auto r = c.Post("/v1/score", dump_json(items({{"01_relu", kHonest, "p1"}})), "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "") << srv.log();
    shaped = body_of(r)["results"][0];
    ASSERT_TRUE(shaped["correct"]) << shaped.dump(1);
    const nlohmann::json& parts = shaped["reward_parts"];
    ASSERT_TRUE(parts.is_object()) << shaped.dump(1);
    EXPECT_GT(parts["tokens"].get<double>(), 10);  // the candidate is longer than the budget: penalised
    EXPECT_GT(parts["length_penalty"].get<double>(), 0);
    EXPECT_NEAR(shaped["reward"].get<double>(), parts["total"].get<double>(), 1e-12);
    EXPECT_LT(shaped["reward"].get<double>(), parts["speedup_term"].get<double>());
  }
  {  // The same store, another reward: the identical code is judged again, not reused.
    ServeProcess srv(tasks, store, {"--reuse-verdicts", "--reward", "correctness"});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    auto r = c.Post("/v1/score", dump_json(items({{"01_relu", kHonest, "p2"}, {"01_relu", threaded("c1"), "c2"}})),
                    "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "") << srv.log();
    const nlohmann::json res = body_of(r)["results"];
    EXPECT_FALSE(res[0].contains("reused_from")) << res[0].dump(1);
    EXPECT_EQ(res[0]["reward"], 1.0) << res[0].dump(1);
    EXPECT_EQ(res[1]["reward"], 0.0) << res[1].dump(1);
    // Under these settings it is reused.
    auto again = c.Post("/v1/score", dump_json(items({{"01_relu", kHonest, "p3"}})), "application/json");
    ASSERT_TRUE(again && again->status == 200);
    EXPECT_EQ(body_of(again)["results"][0]["reused_from"], "p2");
  }
  // A bad penalty is a usage error before anything starts.
  const ProcessResult bad = run_process({KFORGE_BINARY, "serve", "--tasks", tasks, "--no-auth", "--length-penalty", "abc"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("length"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace kforge
