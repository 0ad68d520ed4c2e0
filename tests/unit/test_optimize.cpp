// kforge optimize against a scripted OpenAI-compatible server (real HTTP on loopback): several
// iterations stored whole, failed and malformed replies survived, and a run killed in the middle
// of an iteration resumes with no candidate lost or duplicated. On a machine without a GPU the
// evaluator's verdicts for compiled candidates say so; everything before it is real.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.hpp"
#include "core/subprocess.hpp"
#include "core/text.hpp"
#include "core/hash.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "eval/verdict.hpp"
#include "search/program_db.hpp"
#include "../support/process.hpp"
#include "../support/scripted_llm_server.hpp"

namespace kforge {
namespace {

using test::ScriptedLlmServer;
using test::ScriptStep;

const char* kForbidden =
    "## Performance Analysis\nThe seed is slow.\n## Code Implementation\n```cuda\n#include <cuda_fp16.h>\n"
    "extern \"C\" int kforge_hgemm(const kforge_hgemm_args* a, cudaStream_t s) { cudaDeviceSynchronize(); return 0; }\n```\n";
const char* kNoCode = "I think tiling would help, but here is no code.";
const char* kEnvProbe =
    "```cuda\n#include <cstdlib>\nextern \"C\" int kforge_hgemm(const kforge_hgemm_args* a, cudaStream_t s) {\n"
    "  return getenv(\"KFORGE\") ? 0 : 1;\n}\n```\n";
const char* kBadEdit = "<<<<<<< SEARCH\nthis line is not in the parent\n=======\nnor is this\n>>>>>>> REPLACE\n";
const char* kSyntaxError = "```cuda\nextern \"C\" int kforge_hgemm(const kforge_hgemm_args* a, cudaStream_t s) { return oops; }\n```\n";
const char* kGoodEdit =
    "## Algorithm Design\nSame algorithm, clearer accumulator.\n<<<<<<< SEARCH\n    float acc = 0.0f;\n=======\n"
    "    float acc = 0.0f;  // fp32 accumulator\n>>>>>>> REPLACE\n";

std::string optimize_cmd(const std::string& url, const std::string& dir, int iterations) {
  return strf("optimize --task hgemm:64x64x64 --llm-url %s --model scripted --group-size 2 --iterations %d --samples 3 "
              "--arch sm_90a --run-timeout 60 --run-dir %s",
              url.c_str(), iterations, dir.c_str());
}

TEST(Optimize, ScriptedServerIterationsAreStoredWhole) {
  ScriptedLlmServer server;
  server.push(ScriptedLlmServer::ok({kForbidden, kNoCode}));
  server.push(ScriptStep{429, R"({"error":"slow down"})", 0, std::string("0")});
  server.push(ScriptStep{200, "this is not JSON", 0, {}});
  server.push(ScriptedLlmServer::ok({kBadEdit, kEnvProbe}));
  server.push(ScriptedLlmServer::ok({kSyntaxError, kGoodEdit}));
  const std::string dir = test::temp_dir() + "/run";
  auto r = test::run_kforge(optimize_cmd(server.url(), dir, 3));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("3 iterations"), std::string::npos) << r.out;

  ProgramDb db(dir + "/kforge-search.db");
  const auto run = db.latest_run();
  ASSERT_TRUE(run);
  EXPECT_EQ(run->state, "complete");
  const auto cands = db.candidates(run->id);
  ASSERT_EQ(cands.size(), 7u);  // the seed and 3 groups of 2
  std::map<std::pair<int, int>, const CandidateRecord*> by_slot;
  for (const CandidateRecord& c : cands) {
    EXPECT_NE(c.status, "pending") << c.id;
    EXPECT_TRUE(c.advantage.has_value()) << c.id;
    EXPECT_TRUE(by_slot.emplace(std::pair{c.iteration, c.sample}, &c).second) << "duplicate slot " << c.iteration;
  }
  auto reasons = [](const CandidateRecord& c) { return c.verdict.is_object() ? c.verdict["reasons"].dump() : ""; };
  EXPECT_NE(reasons(*by_slot.at({1, 0})).find("forbidden_call"), std::string::npos) << reasons(*by_slot.at({1, 0}));
  EXPECT_EQ(by_slot.at({1, 1})->status, "invalid");
  EXPECT_NE(by_slot.at({1, 1})->error.find("no fenced code block"), std::string::npos) << by_slot.at({1, 1})->error;
  EXPECT_EQ(by_slot.at({2, 0})->status, "invalid");
  EXPECT_NE(by_slot.at({2, 0})->error.find("could not be applied"), std::string::npos) << by_slot.at({2, 0})->error;
  EXPECT_NE(reasons(*by_slot.at({2, 1})).find("forbidden_call"), std::string::npos);
  EXPECT_NE(reasons(*by_slot.at({3, 0})).find("compile_error"), std::string::npos) << reasons(*by_slot.at({3, 0}));
  EXPECT_EQ(by_slot.at({3, 1})->status, "evaluated");  // the edit applied to the seed and compiled
  EXPECT_NE(by_slot.at({3, 1})->source.find("// fp32 accumulator"), std::string::npos);
  EXPECT_EQ(by_slot.at({3, 1})->parents, std::vector<int64_t>{by_slot.at({0, 0})->id});
  // The prompt carries the task, the reference and (from iteration 2 on) feedback on what failed.
  const std::string prompt2 = by_slot.at({2, 0})->prompt;
  EXPECT_NE(prompt2.find("C[M,N] = A[M,K] * B[K,N]"), std::string::npos);
  EXPECT_NE(prompt2.find("naive_hgemm"), std::string::npos);
  EXPECT_NE(prompt2.find("could not be used"), std::string::npos);
  // Calls: one per iteration, plus the malformed reply recorded as an error (after a retried 429).
  const auto calls = db.llm_calls(run->id);
  ASSERT_EQ(calls.size(), 4u);
  int errors = 0;
  for (const auto& c : calls) errors += c.status == "error";
  EXPECT_EQ(errors, 1);
  EXPECT_EQ(server.request_count(), 5u);
  const auto first = server.requests().front().body;
  EXPECT_EQ(first["model"], "scripted");
  EXPECT_EQ(first["n"], 2);
}

TEST(Optimize, KilledMidIterationResumesWithoutLossOrDuplicates) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({kForbidden, kNoCode}));
  server.push(ScriptedLlmServer::ok({kForbidden, kNoCode}));
  ScriptStep slow = ScriptedLlmServer::ok({kForbidden, kNoCode});
  slow.delay_ms = 120000;  // iteration 2 waits here until the process is killed
  server.push(slow);
  const std::string dir = test::temp_dir() + "/run";
  const std::string kforge = KFORGE_BINARY;
  ProcessOptions po;
  po.timeout_s = 25;  // SIGKILL to the whole process group, mid-iteration
  std::vector<std::string> argv = {kforge};
  for (const std::string& a : split(optimize_cmd(server.url(), dir, 3), ' ')) argv.push_back(a);
  ProcessResult killed = run_process(argv, po);
  ASSERT_TRUE(killed.timed_out) << killed.describe() << "\n" << killed.err;
  int stored_before = 0;
  {
    ProgramDb db(dir + "/kforge-search.db");
    const auto run = db.latest_run();
    ASSERT_TRUE(run);
    EXPECT_EQ(run->state, "running");  // killed, not stopped cleanly
    EXPECT_LE(db.last_iteration(run->id), 1);
    stored_before = int(db.candidates(run->id).size());
  }
  auto resumed = test::run_kforge("optimize --resume " + dir);
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  ProgramDb db(dir + "/kforge-search.db");
  const auto run = db.latest_run();
  ASSERT_TRUE(run);
  EXPECT_EQ(run->state, "complete");
  const auto cands = db.candidates(run->id);
  EXPECT_GE(int(cands.size()), stored_before);
  ASSERT_EQ(cands.size(), 7u);
  std::set<std::pair<int, int>> slots;
  std::set<int64_t> ids;
  for (const CandidateRecord& c : cands) {
    EXPECT_NE(c.status, "pending");
    EXPECT_TRUE(slots.insert({c.iteration, c.sample}).second) << "duplicate " << c.iteration << "/" << c.sample;
    EXPECT_TRUE(ids.insert(c.id).second);
  }
  for (int it = 1; it <= 3; ++it) EXPECT_TRUE(slots.count({it, 0}) && slots.count({it, 1})) << "iteration " << it;
}

TEST(Optimize, BadArgumentsAndEndpoints) {
  auto notask = test::run_kforge("optimize --llm-url http://127.0.0.1:9 --model m");
  EXPECT_EQ(notask.rc, 2);
  EXPECT_NE(notask.err.find("--task"), std::string::npos) << notask.err;
  auto badtask = test::run_kforge("optimize --task gemm:1x1x1 --policy builtin --run-dir " + test::temp_dir() + "/r");
  EXPECT_EQ(badtask.rc, 2);
  auto nourl = test::run_kforge("optimize --task hgemm:64x64x64 --run-dir " + test::temp_dir() + "/r");
  EXPECT_EQ(nourl.rc, 2);
  EXPECT_NE(nourl.err.find("--llm-url"), std::string::npos) << nourl.err;
  auto badmode = test::run_kforge("optimize --task hgemm:64x64x64 --policy builtin --mode fast --run-dir " +
                                  test::temp_dir() + "/r");
  EXPECT_EQ(badmode.rc, 2);
  EXPECT_NE(badmode.err.find("unknown mode"), std::string::npos) << badmode.err;
  auto noresume = test::run_kforge("optimize --resume " + test::temp_dir() + "/empty");
  EXPECT_EQ(noresume.rc, 2);
  EXPECT_NE(noresume.err.find("no run to resume"), std::string::npos) << noresume.err;
}

// --include-dir and --nvcc-flag are stored with the run (absolute folders), so --resume compiles
// alike; bad ones stop before the run folder exists.
TEST(Optimize, IncludeDirsAndNvccFlagsAreStoredWithTheRun) {
  const std::string root = test::temp_dir();
  std::filesystem::create_directories(root + "/inc");
  auto bad = test::run_kforge("optimize --task hgemm:64x64x64 --policy builtin --include-dir " + root +
                              "/missing --run-dir " + root + "/bad");
  EXPECT_EQ(bad.rc, 2) << bad.err;
  EXPECT_NE(bad.err.find("--include-dir"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(root + "/bad"));
  auto badflag = test::run_kforge("optimize --task hgemm:64x64x64 --policy builtin --nvcc-flag=-c --run-dir " + root +
                                  "/bad");
  EXPECT_EQ(badflag.rc, 2) << badflag.err;
  EXPECT_FALSE(std::filesystem::exists(root + "/bad"));

  auto r = test::run_kforge("optimize --task hgemm:64x64x64 --policy builtin --iterations 1 --group-size 1 "
                            "--include-dir " + root + "/inc/. --nvcc-flag=-DKF_OPT=1 --run-dir " + root + "/run");
  // Without a GPU no candidate can be judged, and the run says so (exit 1).
  const auto ok = [](const test::ProcessResult& p) {
    return p.rc == 0 || (p.rc == 1 && p.err.find("no candidate could be judged") != std::string::npos);
  };
  ASSERT_TRUE(ok(r)) << r.err;
  {
    ProgramDb db(root + "/run/kforge-search.db");
    const auto run = db.latest_run();
    ASSERT_TRUE(run);
    EXPECT_EQ(run->config["include_dirs"], nlohmann::json::array({root + "/inc"})) << run->config.dump();
    EXPECT_EQ(run->config["nvcc_flags"], nlohmann::json::array({"-DKF_OPT=1"})) << run->config.dump();
  }
  auto again = test::run_kforge("optimize --resume " + root + "/run --include-dir " + root + "/inc");
  EXPECT_EQ(again.rc, 2) << again.err;
  EXPECT_NE(again.err.find("stored with the run"), std::string::npos) << again.err;
  auto resumed = test::run_kforge("optimize --resume " + root + "/run --iterations 2");
  EXPECT_TRUE(ok(resumed)) << resumed.err;
}

// Shaped rewards (issue 16 item 2): bad --deviation-penalty / --length-penalty values are usage
// errors of optimize and eval (one line naming the flag and the fix, nothing created); good ones
// are stored with the run, and --resume rewards with the stored ones.
TEST(Optimize, RewardPenaltiesAreCheckedFirstAndStoredWithTheRun) {
  const std::string root = test::temp_dir();
  const std::string task = std::string(KFORGE_SOURCE_DIR) + "/tasks/kforge/01_relu.py";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--deviation-penalty -1", "--deviation-penalty"},   {"--deviation-penalty nan", "--deviation-penalty"},
      {"--deviation-penalty inf", "--deviation-penalty"},  {"--deviation-penalty 0.5x", "--deviation-penalty"},
      {"--length-penalty 0.5", "--length-penalty"},        {"--length-penalty -1:100", "--length-penalty"},
      {"--length-penalty nan:100", "--length-penalty"},    {"--length-penalty 0.5:0", "--length-penalty"},
      {"--length-penalty 0.5:1.5", "--length-penalty"},    {"--length-penalty 1:2:3", "--length-penalty"},
  };
  for (const auto& [flags, named] : bad) {
    for (const std::string& cmd :
         {"optimize --task hgemm:64x64x64 --policy builtin " + flags + " --run-dir " + root + "/bad",
          "eval hgemm --shape 64x64x64 " + flags + " --out " + root + "/bad/v.json " + root + "/none.cu",
          "eval --task " + task + " " + flags + " --out " + root + "/bad.json " + root + "/none.py"}) {
      auto r = test::run_kforge(cmd);
      EXPECT_EQ(r.rc, 2) << cmd << "\n" << r.err;
      EXPECT_NE(r.err.find(named), std::string::npos) << cmd << "\n" << r.err;
      EXPECT_NE(r.err.find("e.g. " + named), std::string::npos) << cmd << "\n" << r.err;  // the fix
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << cmd << "\n" << r.err;
      EXPECT_TRUE(r.out.empty()) << cmd;
    }
    EXPECT_FALSE(std::filesystem::exists(root + "/bad")) << flags;
    EXPECT_FALSE(std::filesystem::exists(root + "/bad.json")) << flags;
  }

  auto r = test::run_kforge("optimize --task hgemm:64x64x64 --policy builtin --iterations 1 --group-size 1 "
                            "--deviation-penalty 0.25 --length-penalty 0.5:3000 --run-dir " + root + "/run");
  const auto ok = [](const test::ProcessResult& p) {
    return p.rc == 0 || (p.rc == 1 && p.err.find("no candidate could be judged") != std::string::npos);
  };
  ASSERT_TRUE(ok(r)) << r.err;
  {
    ProgramDb db(root + "/run/kforge-search.db");
    const auto run = db.latest_run();
    ASSERT_TRUE(run);
    const nlohmann::json want = {{"deviation_weight", 0.25}, {"length_weight", 0.5}, {"length_budget", 3000}};
    EXPECT_EQ(run->config["reward_penalties"], want) << run->config.dump();
    // Every judged candidate's verdict carries its reward's parts.
    for (const CandidateRecord& c : db.candidates(run->id)) {
      if (c.status == "pending") continue;
      ASSERT_TRUE(c.verdict.contains("details") && c.verdict["details"].contains("reward")) << c.verdict.dump();
      const nlohmann::json& parts = c.verdict["details"]["reward"];
      EXPECT_EQ(parts["total"].get<double>(), c.reward) << parts.dump();
      EXPECT_EQ(parts["tokens"].get<long long>(), count_code_tokens(c.source)) << parts.dump();
    }
  }
  auto again = test::run_kforge("optimize --resume " + root + "/run --deviation-penalty 1");
  EXPECT_EQ(again.rc, 2) << again.err;
  EXPECT_NE(again.err.find("stored with the run"), std::string::npos) << again.err;
}

TEST(Optimize, UnreachableEndpointNeverEndsTheRun) {
  // Nothing listens on the port: every iteration's call fails, is recorded, and the run completes
  // (exit status 1: every call failed).
  const std::string dir = test::temp_dir() + "/run";
  auto r = test::run_kforge("optimize --task hgemm:64x64x64 --llm-url http://127.0.0.1:9 --model m --iterations 2 "
                            "--llm-retries 0 --arch sm_90a --run-dir " + dir);
  EXPECT_EQ(r.rc, 1) << r.err;  // a run that did nothing says so (issue 14 item 11)
  EXPECT_NE(r.err.find("LLM call failed"), std::string::npos) << r.err;
  ProgramDb db(dir + "/kforge-search.db");
  const auto run = db.latest_run();
  ASSERT_TRUE(run);
  EXPECT_EQ(db.llm_calls(run->id).size(), 2u);
  EXPECT_EQ(db.candidates(run->id).size(), 1u);  // the seed alone
}

}  // namespace
}  // namespace kforge

namespace kforge {
namespace {

// Prompts quote measured speed-ups, which differ between two runs on a GPU; their text otherwise must not.
std::string without_digits(std::string s) {
  std::erase_if(s, [](char ch) { return ch >= '0' && ch <= '9'; });
  return s;
}

// The stored contents of a run that do not depend on timing.
std::vector<std::string> run_contents(const std::string& dir) {
  ProgramDb db(dir + "/kforge-search.db");
  const auto run = db.latest_run();
  std::vector<std::string> rows;
  if (!run) return rows;
  for (const CandidateRecord& c : db.candidates(run->id)) {
    const std::string reasons = c.verdict.is_object() ? c.verdict["reasons"].dump() : "-";
    rows.push_back(strf("%d/%d %s %s %s %s %s", c.iteration, c.sample, c.policy.c_str(), c.status.c_str(),
                        reasons.c_str(), c.error.c_str(), sha256_hex(c.source + "\x1f" + without_digits(c.prompt)).c_str()));
  }
  return rows;
}

TEST(Optimize, ReplayingACassetteReproducesTheRun) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({kForbidden, kNoCode}));
  server.push(ScriptedLlmServer::ok({kForbidden, kBadEdit}));
  server.push(ScriptedLlmServer::ok({kEnvProbe, kNoCode}));
  const std::string base = test::temp_dir();
  auto rec = test::run_kforge(optimize_cmd(server.url(), base + "/recorded", 3) + " --record --cassette " + base +
                              "/llm.jsonl");
  ASSERT_EQ(rec.rc, 0) << rec.err;
  const size_t requests = server.request_count();
  // No server needed now: the same URL, nothing answering it but the cassette.
  auto rep = test::run_kforge(optimize_cmd(server.url(), base + "/replayed", 3) + " --replay --cassette " + base +
                              "/llm.jsonl");
  ASSERT_EQ(rep.rc, 0) << rep.err;
  EXPECT_EQ(server.request_count(), requests);  // replay touched no network
  const auto a = run_contents(base + "/recorded"), b = run_contents(base + "/replayed");
  ASSERT_EQ(a.size(), 7u);
  EXPECT_EQ(a, b);
}

TEST(Optimize, CtrlCStopsCleanlyAndResumeFinishes) {
  ScriptStep slow = ScriptedLlmServer::ok({kForbidden, kNoCode});
  slow.delay_ms = 1500;
  ScriptedLlmServer server(slow);
  const std::string dir = test::temp_dir() + "/run";
  std::vector<std::string> args = {KFORGE_BINARY};
  for (const std::string& a : split(optimize_cmd(server.url(), dir, 6), ' ')) args.push_back(a);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::freopen("/dev/null", "w", stdout);
    ::freopen("/dev/null", "w", stderr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  // Wait until the second LLM request is in flight, then press Ctrl-C.
  for (int i = 0; i < 600 && server.request_count() < 2; ++i) ::usleep(50000);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  {
    ProgramDb db(dir + "/kforge-search.db");
    const auto run = db.latest_run();
    ASSERT_TRUE(run);
    EXPECT_EQ(run->state, "stopped");
    EXPECT_LT(db.last_iteration(run->id), 6);
    for (const CandidateRecord& c : db.candidates(run->id)) EXPECT_NE(c.status, "pending");
  }
  auto resumed = test::run_kforge("optimize --resume " + dir);
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  ProgramDb db(dir + "/kforge-search.db");
  EXPECT_EQ(db.latest_run()->state, "complete");
  EXPECT_EQ(db.candidates(db.latest_run()->id).size(), 13u);  // the seed and 6 groups of 2
}

}  // namespace
}  // namespace kforge

// ---------------------------------------------------------------------------------------------
// PyTorch tasks (KernelBench format): the same loop with ModelNew candidates in Python, judged by
// the PyTorch worker on the CPU (--device cpu) where torch is installed.

#include "torch/torch_eval.hpp"

namespace kforge {
namespace {

bool have_torch() {
  static const bool yes = [] {
    if (find_python().empty()) return false;
    const nlohmann::json p = probe_python();
    return p.contains("torch") && p["torch"].is_string();
  }();
  return yes;
}

const char* kPyFull =
    "## Performance Analysis\nReLU is memory-bound.\n## Code Implementation\n```python\nimport torch\n"
    "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
    "    def forward(self, x):\n        return x.clamp_min(0.0)\n```\n";
// An edit against the seed (the task's code with Model renamed ModelNew).
const char* kPyEdit =
    "## Algorithm Design\nclamp instead of relu.\n```python\n<<<<<<< SEARCH\n        return torch.relu(x)\n=======\n"
    "        return torch.clamp(x, min=0.0)\n>>>>>>> REPLACE\n```\n";
const char* kPyThread =
    "```python\nimport threading\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        threading.Thread(target=lambda: None).start()\n        return x.clamp_min(0.0)\n```\n";
const char* kCudaOnly = "```cuda\n__global__ void relu(float* x) {}\n```\n";

std::string torch_optimize_cmd(const std::string& url, const std::string& dir, int iterations) {
  return strf("optimize --task %s/tasks/kforge/01_relu.py --llm-url %s --model scripted --group-size 2 --iterations %d "
              "--samples 3 --trials 1 --device cpu --run-timeout 300 --atol 0.001 --allow-streams --run-dir %s",
              KFORGE_SOURCE_DIR, url.c_str(), iterations, dir.c_str());
}

TEST(OptimizeTorch, PythonCandidatesJudgedOnCpuStoredAndResumable) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  ScriptedLlmServer server;
  server.push(ScriptedLlmServer::ok({kPyFull, kPyEdit}));
  server.push(ScriptedLlmServer::ok({kPyThread, kCudaOnly}));
  server.push(ScriptedLlmServer::ok({kPyFull, kNoCode}));
  const std::string dir = test::temp_dir() + "/run";
  auto r = test::run_kforge(torch_optimize_cmd(server.url(), dir, 2));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("2 iterations"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(".py)"), std::string::npos) << r.out;  // the best candidate's file
  {
    ProgramDb db(dir + "/kforge-search.db");
    const auto run = db.latest_run();
    ASSERT_TRUE(run);
    EXPECT_EQ(run->state, "complete");
    EXPECT_EQ(run->config["torch"]["device"], "cpu");
    // The judging policy is stored with the run, so that a resumed run is judged the same way.
    EXPECT_EQ(run->config["torch"]["atol"], 0.001);
    EXPECT_TRUE(run->config["torch"]["rtol"].is_null());
    EXPECT_EQ(run->config["torch"]["allow_streams"], true);
    EXPECT_EQ(run->config["torch"]["require_cuda_kernel"], false);
    const auto cands = db.candidates(run->id);
    ASSERT_EQ(cands.size(), 5u);  // the seed and 2 groups of 2
    std::map<std::pair<int, int>, CandidateRecord> by_slot;
    for (const CandidateRecord& c : cands) {
      EXPECT_EQ(c.language, "python") << c.id;
      EXPECT_NE(c.status, "pending") << c.id;
      EXPECT_TRUE(c.advantage.has_value()) << c.id;
      by_slot[{c.iteration, c.sample}] = c;
    }
    auto reasons = [](const CandidateRecord& c) { return c.verdict.is_object() ? c.verdict["reasons"].dump() : ""; };
    const CandidateRecord& seed = by_slot.at({0, 0});
    EXPECT_EQ(seed.policy, "seed");
    EXPECT_NE(seed.source.find("class ModelNew(nn.Module)"), std::string::npos);
    EXPECT_TRUE(seed.correct) << reasons(seed) << " " << seed.verdict.dump();
    EXPECT_GT(seed.score, 0);
    EXPECT_TRUE(by_slot.at({1, 0}).correct) << reasons(by_slot.at({1, 0}));
    EXPECT_TRUE(seed.verdict["speedup"].contains("eager"));
    const CandidateRecord& edited = by_slot.at({1, 1});
    EXPECT_NE(edited.source.find("torch.clamp(x, min=0.0)"), std::string::npos) << edited.source;
    EXPECT_TRUE(edited.correct) << reasons(edited);
    EXPECT_NE(reasons(by_slot.at({2, 0})).find("forbidden_call"), std::string::npos) << reasons(by_slot.at({2, 0}));
    EXPECT_EQ(by_slot.at({2, 1}).status, "invalid");
    EXPECT_NE(by_slot.at({2, 1}).error.find("`python`"), std::string::npos) << by_slot.at({2, 1}).error;
    for (const CandidateRecord& c : cands)
      if (c.status == "evaluated") EXPECT_TRUE(std::filesystem::exists(strf("%s/candidates/%lld.py", dir.c_str(), (long long)c.id)));
    // The prompt: the PyTorch task text, the task file as reference, python exemplars.
    const std::string prompt = by_slot.at({2, 0}).prompt;
    EXPECT_NE(prompt.find("ModelNew"), std::string::npos);
    EXPECT_NE(prompt.find("load_inline"), std::string::npos);
    EXPECT_NE(prompt.find("Earlier variants"), std::string::npos);
    EXPECT_NE(prompt.find("class ModelNew(nn.Module)"), std::string::npos);
    EXPECT_NE(prompt.find("```python\\n"), std::string::npos);  // the prompt is stored as JSON
    EXPECT_NE(prompt.find("return torch.relu(x)"), std::string::npos);  // the reference
    EXPECT_EQ(prompt.find("```cuda"), std::string::npos);
  }
  // Extending the run from another folder: the stored task path and PyTorch options (device cpu) apply.
  auto resumed = test::run_kforge("optimize --resume " + dir + " --iterations 3");
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  ProgramDb db(dir + "/kforge-search.db");
  const auto cands = db.candidates(db.latest_run()->id);
  ASSERT_EQ(cands.size(), 7u);
  EXPECT_TRUE(cands[5].correct) << cands[5].verdict.dump();
  EXPECT_EQ(cands[6].status, "invalid");
}

TEST(OptimizeTorch, BadTaskFilesAreUsageErrors) {
  const std::string dir = test::temp_dir();
  auto missing = test::run_kforge("optimize --task " + dir + "/none.py --llm-url http://127.0.0.1:9 --model m --run-dir " +
                                  dir + "/r1");
  EXPECT_EQ(missing.rc, 2);
  EXPECT_NE(missing.err.find("no such task file"), std::string::npos) << missing.err;
  std::ofstream(dir + "/task.txt") << "class Model: pass\n";
  auto not_py = test::run_kforge("optimize --task " + dir + "/task.txt --llm-url http://127.0.0.1:9 --model m --run-dir " +
                                 dir + "/r2");
  EXPECT_EQ(not_py.rc, 2);
  EXPECT_NE(not_py.err.find("not a .py task file"), std::string::npos) << not_py.err;
  const std::string relu = std::string(KFORGE_SOURCE_DIR) + "/tasks/kforge/01_relu.py";
  auto builtin = test::run_kforge("optimize --task " + relu + " --policy builtin --run-dir " + dir + "/r3");
  EXPECT_EQ(builtin.rc, 2);
  EXPECT_NE(builtin.err.find("HGEMM kernels only"), std::string::npos) << builtin.err;
  auto baseline = test::run_kforge("optimize --task " + relu + " --llm-url http://127.0.0.1:9 --model m --baseline fast "
                                   "--run-dir " + dir + "/r4");
  EXPECT_EQ(baseline.rc, 2);
  EXPECT_NE(baseline.err.find("unknown baseline"), std::string::npos) << baseline.err;
  auto atol = test::run_kforge("optimize --task " + relu + " --llm-url http://127.0.0.1:9 --model m --atol -3 "
                               "--run-dir " + dir + "/r7");
  EXPECT_EQ(atol.rc, 2);
  EXPECT_NE(atol.err.find("--atol"), std::string::npos) << atol.err;
  EXPECT_TRUE(atol.err.find("non-negative") != std::string::npos || atol.err.find("negative") != std::string::npos)
      << atol.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/r1/kforge-search.db"));
  auto help = test::run_kforge("optimize --help");
  EXPECT_EQ(help.rc, 0);
  for (const char* flag : {"--baseline", "--device", "--seed-file", ".py", "--atol", "--rtol", "--allow-streams",
                           "--require-cuda-kernel"}) EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: the import check needs torch (" << find_python() << ")";
  auto raises = test::run_kforge("optimize --task " + std::string(KFORGE_SOURCE_DIR) +
                                 "/tests/corpus/torch/bad/task_raises.py --llm-url http://127.0.0.1:9 --model m --run-dir " +
                                 dir + "/r5");
  EXPECT_EQ(raises.rc, 2);
  EXPECT_NE(raises.err.find("this task needs a module that is not installed"), std::string::npos) << raises.err;
  std::ofstream(dir + "/no_model.py") << "import torch\ndef get_inputs():\n    return []\n";
  auto no_model = test::run_kforge("optimize --task " + dir + "/no_model.py --llm-url http://127.0.0.1:9 --model m "
                                   "--run-dir " + dir + "/r6");
  EXPECT_EQ(no_model.rc, 2);
  EXPECT_NE(no_model.err.find("defines no Model"), std::string::npos) << no_model.err;
}

}  // namespace
}  // namespace kforge

// ---------------------------------------------------------------------------------------------
// Issue 14: options checked before anything exists, the budget across resumes, the run folder's
// lock, answers kept as they arrive, Ctrl-C, concurrency, replay, runs that did nothing, progress.
// Answers hold no code (kNoCode) or a call the static scan forbids (kForbidden): nothing to
// compile, so these stay quick on any machine. Without a GPU the seed cannot be judged, so a run
// whose answers hold no code judged nothing (exit 1); kForbidden answers are judged (rejected).

namespace kforge {
namespace {

// Starts kforge with `args` (split at spaces), its stderr into `err_file`; returns its pid.
pid_t spawn_kforge(const std::string& args, const std::string& err_file) {
  std::vector<std::string> argv_s = {KFORGE_BINARY};
  for (const std::string& a : split(args, ' '))
    if (!a.empty()) argv_s.push_back(a);
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::freopen("/dev/null", "w", stdout);
    ::freopen(err_file.c_str(), "w", stderr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits up to `seconds` for `pred`, polling.
bool wait_for(const std::function<bool()>& pred, double seconds) {
  for (int i = 0; i < int(seconds * 50); ++i) {
    if (pred()) return true;
    ::usleep(20000);
  }
  return pred();
}

// The exit status of `pid` if it ends within `seconds`, else -1 (then it is killed).
int wait_exit(pid_t pid, double seconds) {
  int status = 0;
  for (int i = 0; i < int(seconds * 50); ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    ::usleep(20000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

std::string no_code_cmd(const std::string& url, const std::string& dir, int iterations, int group = 1) {
  return strf("optimize --task hgemm:64x64x64 --llm-url %s --model scripted --group-size %d --iterations %d "
              "--samples 3 --arch sm_90a --run-dir %s",
              url.c_str(), group, iterations, dir.c_str());
}

// Item 1: --budget-usd 7 spent $9, then $18, then $27 over two resumes.
TEST(Optimize, BudgetIsTheRunsAcrossResumes) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({kForbidden}, 10, 20));  // 30 tokens at $0.3 each: $9 a call
  const std::string dir = test::temp_dir() + "/run";
  const std::string cmd = no_code_cmd(server.url(), dir, 3) + " --price-prompt 300 --price-completion 300 --budget-usd 7";
  auto first = test::run_kforge(cmd);
  EXPECT_EQ(first.rc, 0) << first.err;  // one paid answer, then the cap
  EXPECT_EQ(server.request_count(), 1u);
  EXPECT_NE(first.out.find("spending cap"), std::string::npos) << first.out;
  for (int i = 0; i < 2; ++i) {
    auto again = test::run_kforge("optimize --resume " + dir);
    EXPECT_EQ(again.rc, 1) << again.err;
    EXPECT_NE(again.err.find("budget is spent (9.0000 USD of 7.0000 USD)"), std::string::npos) << again.err;
    EXPECT_EQ(server.request_count(), 1u) << "a resume paid again";
  }
  ProgramDb db(dir + "/kforge-search.db");
  EXPECT_DOUBLE_EQ(db.total_cost_usd(db.latest_run()->id), 9.0);
  // A higher cap given with --resume lets the run go on ($18 < $20, so iterations 2 and 3 are
  // paid), and is the run's from then on.
  auto raised = test::run_kforge("optimize --resume " + dir + " --budget-usd 20");
  EXPECT_EQ(raised.rc, 0) << raised.err;
  EXPECT_EQ(server.request_count(), 3u);
  auto after = test::run_kforge("optimize --resume " + dir + " --iterations 4");
  EXPECT_EQ(after.rc, 1) << after.err;
  EXPECT_EQ(server.request_count(), 3u);
  EXPECT_NE(after.err.find("(27.0000 USD of 20.0000 USD)"), std::string::npos) << after.err;
}

// Item 2: two --resume of one run folder ran at once (duplicate slots, both exit 0).
TEST(Optimize, ARunFolderIsLocked) {
  ScriptStep slow = ScriptedLlmServer::ok({kNoCode});
  slow.delay_ms = 20000;
  ScriptedLlmServer server(slow);
  const std::string root = test::temp_dir();
  const pid_t pid = spawn_kforge(no_code_cmd(server.url(), root + "/run", 2), root + "/err1");
  ASSERT_TRUE(wait_for([&] { return server.request_count() >= 1; }, 120)) << test::slurp(root + "/err1");
  auto second = test::run_kforge("optimize --resume " + root + "/run");
  EXPECT_EQ(second.rc, 2) << second.err;
  EXPECT_NE(second.err.find("is in use by another kforge optimize (pid " + std::to_string(pid) + ")"),
            std::string::npos) << second.err;
  EXPECT_EQ(test::count_lines(second.err), 1) << second.err;
  auto fresh = test::run_kforge(no_code_cmd(server.url(), root + "/run", 2));
  EXPECT_EQ(fresh.rc, 2) << fresh.err;
  EXPECT_EQ(server.request_count(), 1u);
  ::kill(pid, SIGKILL);
  wait_exit(pid, 10);
  // Once the first is gone the folder can be resumed.
  server.set_default(ScriptedLlmServer::ok({kForbidden}));
  auto resumed = test::run_kforge("optimize --resume " + root + "/run");
  EXPECT_EQ(resumed.rc, 0) << resumed.err;
}

// Item 3 (and 7, 10): each bad option exited 2 only after a database with a "running" run was
// written, so the fixed command said "pass --resume". Nothing may exist before every option is checked.
TEST(Optimize, BadOptionsCreateNothing) {
  const std::string root = test::temp_dir();
  std::filesystem::create_directories(root + "/folder");
  std::ofstream(root + "/empty.jsonl") << "";
  const std::string base = "optimize --task hgemm:64x64x64 --llm-url http://127.0.0.1:9 --model m --run-dir " + root + "/r";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {base + " --sampler bogus", "sampler"},
      {base + " --prompts /nonexistent", "--prompts"},
      {base + " --replay --cassette " + root + "/typo.jsonl", "typo.jsonl"},
      {base + " --replay --cassette " + root + "/empty.jsonl", "no recorded exchange"},
      {base + " --replay --cassette " + root + "/folder", "is a folder"},
      {base + " --record --cassette /proc/x.jsonl", "/proc"},
      {base + " --concurrency 0", "--concurrency"},
      {base + " --llm-timeout 0", "--llm-timeout"},
      {base + " --llm-retries -1", "--llm-retries"},
      {base + " --price-prompt -1", "--price-prompt"},
      {base + " --trials 0", "--trials"},
      {base + " --policy bogus", "--policy"},
      {base + " --device bogus", "--device"},
      {base + " --python /nonexistent/python", "/nonexistent/python"},
      {base + " --run-timeout 0", "--run-timeout"},
      {base + " --compile-timeout 0", "--compile-timeout"},
      {base + " --reward-clip 0", "--reward-clip"},
      {base + " --samples 0", "--samples"},
      {base + " --seed-file /etc/hostname", "--seed-file"},
      {base + " --api-key-env 1BAD", "--api-key-env"},
      {"optimize --task hgemm:64x64x64 --llm-url ftp://x --model m --run-dir " + root + "/r", "http://"},
      {"optimize --task hgemm:64x64x64 --llm-url http:// --model m --run-dir " + root + "/r", "host"},
      {"optimize --resume " + root + "/typo_dir", "no run to resume"},
  };
  for (const auto& [cmd, says] : cases) {
    auto r = test::run_kforge(cmd);
    EXPECT_EQ(r.rc, 2) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << cmd << "\n" << r.err;
    EXPECT_EQ(test::count_lines(r.err), 1) << cmd << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(root + "/r")) << cmd;
    EXPECT_FALSE(std::filesystem::exists(root + "/typo_dir")) << cmd;
  }
  // --help says what bad input does.
  auto help = test::run_kforge("optimize --help");
  EXPECT_EQ(help.rc, 0);
  EXPECT_NE(help.out.find("a bad one exits 2 with one line naming the problem and the fix"), std::string::npos)
      << help.out;
  EXPECT_NE(help.out.find("Exit status:"), std::string::npos) << help.out;
  // A file as the run folder.
  std::ofstream(root + "/file") << "x";
  auto file = test::run_kforge("optimize --task hgemm:64x64x64 --policy builtin --run-dir " + root + "/file");
  EXPECT_EQ(file.rc, 2) << file.err;
  EXPECT_NE(file.err.find("is a file"), std::string::npos) << file.err;
}

// Item 7: --python /nonexistent/python or --run-timeout 0 ran 10 iterations and paid for LLM calls.
TEST(Optimize, MissingPythonOrZeroRunTimeoutStopBeforeAnyCall) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({kNoCode}));
  const std::string root = test::temp_dir();
  const std::string relu = std::string(KFORGE_SOURCE_DIR) + "/tasks/kforge/01_relu.py";
  for (const std::string& bad : {"--python /nonexistent/python", "--run-timeout 0", "--import-timeout -1"}) {
    auto r = test::run_kforge("optimize --task " + relu + " --device cpu --llm-url " + server.url() +
                              " --model m --iterations 2 " + bad + " --run-dir " + root + "/r");
    EXPECT_EQ(r.rc, 2) << bad << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(root + "/r")) << bad;
  }
  EXPECT_EQ(server.request_count(), 0u);
}

// Item 6: with one choice per call, a kill after 3 of 4 answers kept no candidate; resume paid again for all 4.
TEST(Optimize, AnswersThatArrivedAreKept) {
  ScriptedLlmServer server;
  for (int i = 0; i < 3; ++i) server.push(ScriptedLlmServer::ok({kNoCode}));
  ScriptStep hang = ScriptedLlmServer::ok({kNoCode});
  hang.delay_ms = 60000;
  server.set_default(hang);
  const std::string root = test::temp_dir();
  const pid_t pid = spawn_kforge(no_code_cmd(server.url(), root + "/run", 1, 4) + " --concurrency 1", root + "/err");
  ASSERT_TRUE(wait_for([&] { return server.request_count() >= 4; }, 120)) << test::slurp(root + "/err");
  ::usleep(300000);
  ::kill(pid, SIGKILL);
  wait_exit(pid, 10);
  std::string prompt;
  {
    ProgramDb db(root + "/run/kforge-search.db");
    const auto run = db.latest_run();
    ASSERT_TRUE(run);
    int kept = 0;
    for (const CandidateRecord& c : db.candidates(run->id))
      if (c.iteration == 1) ++kept, prompt = c.prompt;
    EXPECT_EQ(kept, 3) << "the paid answers were not stored";
    EXPECT_EQ(db.llm_calls(run->id).size(), 3u);
  }
  server.set_default(ScriptedLlmServer::ok({kNoCode}));
  auto resumed = test::run_kforge("optimize --resume " + root + "/run");
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  EXPECT_EQ(server.request_count(), 5u);  // only the missing answer was asked for again
  ProgramDb db(root + "/run/kforge-search.db");
  const auto run = db.latest_run();
  std::set<int> samples;
  for (const CandidateRecord& c : db.candidates(run->id)) {
    if (c.iteration != 1) continue;
    EXPECT_TRUE(samples.insert(c.sample).second) << "duplicate sample " << c.sample;
    EXPECT_EQ(c.prompt, prompt) << "one group, two prompts";
    EXPECT_TRUE(c.advantage.has_value());
  }
  EXPECT_EQ(samples, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(server.requests().back().body["n"], 1);
}

// Item 8: Ctrl-C during a slow LLM call printed nothing and three SIGINTs were ignored.
TEST(Optimize, CtrlCSaysStoppingAndASecondAbortsAtOnce) {
  ScriptStep slow = ScriptedLlmServer::ok({kNoCode});
  slow.delay_ms = 30000;
  ScriptedLlmServer server(slow);
  const std::string root = test::temp_dir();
  const pid_t pid = spawn_kforge(no_code_cmd(server.url(), root + "/run", 3), root + "/err");
  ASSERT_TRUE(wait_for([&] { return server.request_count() >= 1; }, 120)) << test::slurp(root + "/err");
  ::kill(pid, SIGINT);
  EXPECT_TRUE(wait_for([&] { return test::slurp(root + "/err").find("stopping after this step") != std::string::npos; }, 5))
      << test::slurp(root + "/err");
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid, 5), 130) << test::slurp(root + "/err");
  EXPECT_NE(test::slurp(root + "/err").find("--resume " + root + "/run"), std::string::npos);
  server.set_default(ScriptedLlmServer::ok({kNoCode}));
  auto resumed = test::run_kforge("optimize --resume " + root + "/run");
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  ProgramDb db(root + "/run/kforge-search.db");
  EXPECT_EQ(db.latest_run()->state, "complete");
  EXPECT_EQ(db.candidates(db.latest_run()->id).size(), 4u);  // the seed and 3 groups of 1
}

// Item 9: with --concurrency 4 requests still arrived strictly one after another.
TEST(Optimize, ConcurrencyRunsRequestsAtOnce) {
  ScriptStep one = ScriptedLlmServer::ok({kForbidden});  // one choice whatever n asks: the endpoint ignores n
  one.delay_ms = 400;
  ScriptedLlmServer server(one);
  const std::string dir = test::temp_dir() + "/run";
  auto r = test::run_kforge(no_code_cmd(server.url(), dir, 2, 4) + " --concurrency 4");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(server.max_in_flight(), 4);
  EXPECT_EQ(server.request_count(), 8u);
  EXPECT_EQ(server.requests().front().body["n"], 4);  // the group in one request first
  ProgramDb db(dir + "/kforge-search.db");
  std::set<std::pair<int, int>> slots;
  for (const CandidateRecord& c : db.candidates(db.latest_run()->id))
    EXPECT_TRUE(slots.insert({c.iteration, c.sample}).second) << c.iteration << "/" << c.sample;
  EXPECT_EQ(slots.size(), 9u);
  // --concurrency 1: one at a time.
  ScriptedLlmServer serial(one);
  auto s = test::run_kforge(no_code_cmd(serial.url(), test::temp_dir() + "/run", 1, 3) + " --concurrency 1");
  ASSERT_EQ(s.rc, 0) << s.err;
  EXPECT_EQ(serial.max_in_flight(), 1);
}

// Item 10: --replay needed --llm-url and --model; an empty cassette ran 0 iterations with exit 0.
TEST(Optimize, ReplayNeedsNoEndpoint) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({kForbidden}));
  const std::string root = test::temp_dir();
  auto rec = test::run_kforge(no_code_cmd(server.url(), root + "/recorded", 2) + " --record --cassette " + root + "/c.jsonl");
  ASSERT_EQ(rec.rc, 0) << rec.err;
  auto rep = test::run_kforge("optimize --task hgemm:64x64x64 --group-size 1 --iterations 2 --samples 3 --arch sm_90a "
                              "--replay --cassette " + root + "/c.jsonl --run-dir " + root + "/replayed");
  ASSERT_EQ(rep.rc, 0) << rep.err;
  EXPECT_EQ(server.request_count(), 2u);
  EXPECT_EQ(run_contents(root + "/recorded"), run_contents(root + "/replayed"));
}

// Item 11 (and 23): nothing listening at the URL, every call failed, and the run exited 0.
TEST(Optimize, ARunThatDidNothingExitsNonZero) {
  const std::string dir = test::temp_dir() + "/run";
  auto r = test::run_kforge("optimize --task hgemm:64x64x64 --llm-url http://127.0.0.1:9/v1 --model x --iterations 1 "
                            "--llm-retries 0 --arch sm_90a --run-dir " + dir);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("kforge optimize: error: every LLM call failed (1 call)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("http://127.0.0.1:9/v1/chat/completions"), std::string::npos) << r.err;
  // Every verdict the judge's failure: a Python that cannot import torch judges nothing.
  const std::string root = test::temp_dir();
  std::ofstream(root + "/python") << "#!/bin/sh\nexec python3 -S -I \"$@\"\n";
  std::filesystem::permissions(root + "/python", std::filesystem::perms::owner_all);
  ScriptedLlmServer server(ScriptedLlmServer::ok({kPyFull}));
  auto t = test::run_kforge("optimize --task " + std::string(KFORGE_SOURCE_DIR) + "/tasks/kforge/01_relu.py --device cpu "
                            "--llm-url " + server.url() + " --model m --iterations 1 --group-size 1 --python " + root +
                            "/python --run-dir " + root + "/run");
  if (t.err.find("no_torch") == std::string::npos) GTEST_SKIP() << "SKIPPED: this python imports torch even with -S -I";
  EXPECT_EQ(t.rc, 1) << t.err;
  EXPECT_NE(t.err.find("kforge optimize: error: no candidate could be judged (2 tried)"), std::string::npos) << t.err;
}

// Item 12: nothing was printed until the first iteration ended, and retries were silent.
TEST(Optimize, ProgressShowsEachCallRetryAndVerdictAsItHappens) {
  ScriptedLlmServer server;
  server.push(ScriptStep{500, R"({"error":"busy"})", 0, {}});
  server.push(ScriptedLlmServer::ok({kForbidden, kNoCode}));
  const std::string dir = test::temp_dir() + "/run";
  auto r = test::run_kforge(no_code_cmd(server.url(), dir, 1, 2) + " --llm-retries 2");
  ASSERT_EQ(r.rc, 0) << r.err;
  size_t at = 0;
  for (const std::string& line :
       {std::string("candidate 1 (iteration 0, sample 0): "), std::string("iteration 1: asking the LLM for 2 candidates"),
        std::string("/v1/chat/completions answered HTTP 500: retry 1 of 2 in "),
        std::string("iteration 1: the LLM answered 2 choices in "), std::string("judging 1 candidate"),
        std::string("(iteration 1, sample 0): REJECT forbidden_call"), std::string("iteration 1/1  best")}) {
    const size_t pos = r.err.find(line, at);
    EXPECT_NE(pos, std::string::npos) << "'" << line << "' missing or out of order in\n" << r.err;
    if (pos != std::string::npos) at = pos;
  }
}

}  // namespace
}  // namespace kforge

namespace kforge {
namespace {

// Item 22: bytes that are not UTF-8 in a task, a seed file or a prompt template crashed with a raw
// [json.exception.type_error.316], and every resume crashed the same way. A task that declares
// latin-1 (PEP 263) is shown in the prompt as it declares; other bytes are shown as U+FFFD.
TEST(OptimizeTorch, NonUtf8TaskSeedAndTemplatesNeverCrash) {
  if (!have_torch()) GTEST_SKIP() << "SKIPPED: torch is not installed for " << find_python();
  const std::string root = test::temp_dir();
  std::ofstream(root + "/task.py") << "# -*- coding: latin-1 -*-\n# caf\xe9 cr\xe8me\nimport torch\nimport torch.nn as nn\n\n\n"
                                      "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\n"
                                      "def get_inputs():\n    return [torch.randn(64, 64)]\n\n\ndef get_init_inputs():\n"
                                      "    return []\n";
  std::ofstream(root + "/seed.py") << "# seed \xff\xfe\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                                      "    def forward(self, x):\n        return torch.relu(x)\n";
  std::filesystem::create_directories(root + "/prompts");
  std::ofstream(root + "/prompts/system.md") << "You write fast kernels. R\xe9sum\xe9: be correct.\n";
  ScriptedLlmServer server(ScriptedLlmServer::ok({kPyFull}));
  const std::string cmd = "optimize --task " + root + "/task.py --device cpu --llm-url " + server.url() +
                          " --model m --iterations 1 --group-size 1 --samples 3 --trials 1 --run-timeout 300 "
                          "--seed-file " + root + "/seed.py --prompts " + root + "/prompts --record --cassette " + root +
                          "/c.jsonl --run-dir " + root + "/run";
  auto r = test::run_kforge(cmd);
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(server.request_count(), 1u);
  const nlohmann::json body = server.requests().front().body;
  ASSERT_TRUE(body.is_object()) << server.requests().front().raw_body.substr(0, 300);
  const std::string system = body["messages"][0]["content"], user = body["messages"][1]["content"];
  EXPECT_NE(system.find("R\xef\xbf\xbdsum"), std::string::npos) << system;  // no declaration: U+FFFD
  EXPECT_NE(user.find("# caf\xc3\xa9 cr\xc3\xa8me"), std::string::npos) << user.substr(0, 2000);  // as declared
  EXPECT_NE(user.find("# seed \xef\xbf\xbd\xef\xbf\xbd"), std::string::npos) << user.substr(0, 4000);
  auto resumed = test::run_kforge("optimize --resume " + root + "/run --iterations 2");
  EXPECT_EQ(resumed.rc, 0) << resumed.err;
  EXPECT_EQ(resumed.err.find("json.exception"), std::string::npos) << resumed.err;
  EXPECT_EQ(server.request_count(), 2u);
}

}  // namespace
}  // namespace kforge
