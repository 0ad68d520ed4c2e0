// PyTorch tasks on the GPU: the red-team corpus (every honest solution accepted, every hack
// rejected with its expected reason, with the static scan and with the run-time defences alone),
// and a full pass over kforge's own tasks against every baseline (eager, torch.compile,
// reduce-overhead, CUDA graphs) in under ten minutes, writing the metrics table.
// Skips where there is no GPU or no torch with CUDA for the worker's python3.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "core/files.hpp"
#include "core/text.hpp"
#include "gpu_test.hpp"
#include "torch/metrics.hpp"
#include "torch/torch_eval.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

namespace fs = std::filesystem;

const std::string kSource = KFORGE_SOURCE_DIR;

class TorchGpuTest : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    static const nlohmann::json probe = probe_python();
    if (!probe.value("cuda", false))
      GTEST_SKIP() << "SKIPPED: the worker's python has no torch with CUDA: " << probe.dump();
  }
};

// Where the tests leave their tables: $KFORGE_TORCH_OUT (scripts/gpu-check-pytorch.sh sets it), else a temporary folder.
std::string out_dir() {
  const char* d = std::getenv("KFORGE_TORCH_OUT");
  std::string dir = d && *d ? d : test::temp_dir();
  fs::create_directories(dir);
  return dir;
}

// First, so that it measures a cold start: every extension built, every baseline compiled.
TEST_F(TorchGpuTest, OwnTasksEveryBaselineUnderTenMinutes) {
  const std::string dir = out_dir();
  const auto t0 = std::chrono::steady_clock::now();
  const test::ProcessResult r =
      test::run_kforge("eval --tasks " + kSource + "/tasks/kforge --baselines all --metrics " + dir +
                       "/own-tasks-metrics.csv --metrics " + dir + "/own-tasks-metrics.json --out " + dir +
                       "/own-tasks-verdicts.json");
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s\nfull pass over the own tasks with every baseline: %.0f s\n", r.out.c_str(), wall);
  write_file_atomic(dir + "/own-tasks-table.txt", r.out + strf("wall %.0f s\n", wall));
  EXPECT_EQ(r.rc, 0) << r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0);
  EXPECT_LT(wall, 600.0);
  const nlohmann::json verdicts = nlohmann::json::parse(read_file(dir + "/own-tasks-verdicts.json"));
  ASSERT_GE(verdicts.size(), 10u);
  for (const auto& v : verdicts) {
    EXPECT_TRUE(v["correct"].get<bool>()) << v["candidate"] << ": " << v["message"];
    for (const char* b : {"eager", "compile", "compile_ro", "graph"})
      EXPECT_TRUE(v["speedup"].contains(b)) << v["candidate"] << " lacks baseline " << b << ": "
                                            << v["details"].value("baselines", nlohmann::json()).dump();
  }
  const nlohmann::json m = nlohmann::json::parse(read_file(dir + "/own-tasks-metrics.json"));
  EXPECT_EQ(m["solved"], m["tasks"]);
}

void check_corpus(bool scan) {
  const nlohmann::json manifest = nlohmann::json::parse(read_file(kSource + "/tests/corpus/torch/manifest.json"));
  std::vector<TorchJob> jobs;
  std::vector<nlohmann::json> expect;
  // KFORGE_CORPUS_ONLY=REGEX: only the entries whose file or task matches (the corpus split over
  // device calls, where device time is short); the counts at the end then need not hold.
  const char* only_env = std::getenv("KFORGE_CORPUS_ONLY");
  const bool subset = only_env && *only_env;
  const std::regex only(subset ? only_env : ".");
  if (subset) std::printf("only the entries matching /%s/ (KFORGE_CORPUS_ONLY)\n", only_env);
  for (const auto& e : manifest["entries"]) {
    if (subset && !std::regex_search(e["file"].get<std::string>() + " " + e["task"].get<std::string>(), only)) continue;
    const std::string key = scan ? "reasons" : "runtime_reasons";
    if (e["expect"] == "reject" && !e.contains(key)) continue;
    // The run-time pass needs no honest solution again (the first pass and the full pass accept them).
    if (!scan && e["expect"] == "accept") continue;
    jobs.push_back({kSource + "/" + e["task"].get<std::string>(), kSource + "/" + e["file"].get<std::string>()});
    expect.push_back(e);
  }
  TorchEvalOptions o;
  o.samples = 5;
  o.trials = 3;
  o.static_scan = scan;
  o.compile_timeout_s = 240;  // cold builds, eight at a time
  o.import_timeout_s = 30;    // bad/hang_at_import.py waits this long
  o.run_timeout_s = 240;
  TorchEvaluator ev(o);
  const auto t0 = std::chrono::steady_clock::now();
  const auto verdicts = ev.evaluate_batch(jobs, [&](size_t i, size_t n, const Verdict& v) {
    std::printf("[%2zu/%zu] %-22s %-22s %-7s %-22s %s\n", i + 1, n, fs::path(jobs[i].task).stem().c_str(),
                fs::path(v.candidate).filename().c_str(), v.correct ? "ACCEPT" : "REJECT", join(v.reasons, ",").c_str(),
                v.message.substr(0, v.correct ? 110 : 400).c_str());  // a rejection in full enough to act on
    std::fflush(stdout);
  });
  std::printf("corpus (%s): %.0f s\n", scan ? "with the scan" : "run-time defences only",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  int honest = 0, hacks = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const nlohmann::json& e = expect[i];
    const Verdict& v = verdicts[i];
    const nlohmann::json reasons = e.value(scan ? "reasons" : "runtime_reasons", nlohmann::json::array());
    if (scan && e.contains("scan_known_issue")) {
      std::printf("NOTE %s: %s (got %s)\n", jobs[i].candidate.c_str(), e["scan_known_issue"].get<std::string>().c_str(),
                  join(v.reasons, ",").c_str());
      continue;
    }
    if (e["expect"] == "accept" || reasons.empty()) {
      ++honest;
      EXPECT_TRUE(v.correct) << jobs[i].candidate << ": " << join(v.reasons, ",") << " " << v.message;
      EXPECT_TRUE(v.speedup.count("eager")) << jobs[i].candidate;
      continue;
    }
    ++hacks;
    EXPECT_FALSE(v.correct) << jobs[i].candidate << " was accepted";
    EXPECT_EQ(v.reward, rejected_reward(RewardConfig{}));  // below every correct reward
    bool expected = false;
    for (const auto& r : reasons) expected |= v.has_reason(r.get<std::string>());
    EXPECT_TRUE(expected) << jobs[i].candidate << ": got " << join(v.reasons, ",") << " (" << v.message
                          << "), expected one of " << reasons.dump();
  }
  if (!subset) {
    EXPECT_GE(honest, scan ? 10 : 1);
    EXPECT_GE(hacks, 12);
  }
  const std::string path = out_dir() + (scan ? "/corpus-verdicts.json" : "/corpus-runtime-verdicts.json");
  nlohmann::json all = nlohmann::json::array();
  for (const Verdict& v : verdicts) all.push_back(to_json(v));
  write_file_atomic(path, all.dump(2) + "\n");
}

TEST_F(TorchGpuTest, RedTeamCorpusWithTheStaticScan) { check_corpus(true); }

TEST_F(TorchGpuTest, RedTeamCorpusRunTimeDefencesOnly) { check_corpus(false); }

}  // namespace
}  // namespace kforge
