// The hardened evaluator end to end on the GPU: the red-team corpus (every hack rejected with its
// reason, every honest candidate accepted) and a batch that survives a crash and a hang.
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>
#include <random>
#include <regex>
#include <set>

#include "core/files.hpp"
#include "core/shapes.hpp"
#include "core/text.hpp"
#include "eval/evaluator.hpp"
#include "gpu_test.hpp"
#include "../support/process.hpp"

namespace kforge {
namespace {

using test::GpuTest;

const std::string kCorpus = std::string(KFORGE_SOURCE_DIR) + "/tests/corpus/hgemm";

EvalOptions corpus_options(const std::string& cache) {
  EvalOptions o = hgemm_eval_options("sm_90a");
  o.worker_command = {KFORGE_BINARY, "eval-worker"};
  o.run_timeout_s = 20;
  o.samples = 5;
  o.compile.cache_dir = cache;
  return o;
}

TEST_F(GpuTest, RedTeamCorpusEveryHackRejectedEveryHonestAccepted) {
  const nlohmann::json manifest = nlohmann::json::parse(read_file(kCorpus + "/manifest.json"));
  const std::string dir = test::temp_dir();
  std::vector<std::string> files;
  std::vector<nlohmann::json> expect;
  // KFORGE_CORPUS_ONLY=REGEX: only the entries whose file matches (a re-run of a few on the GPU,
  // where device time is short); the counts at the end then need not hold.
  const char* only_env = std::getenv("KFORGE_CORPUS_ONLY");
  const bool subset = only_env && *only_env;
  const std::regex only(subset ? only_env : ".");
  if (subset) std::printf("only the entries matching /%s/ (KFORGE_CORPUS_ONLY)\n", only_env);
  for (const auto& e : manifest) {
    if (subset && !std::regex_search(e.at("file").get<std::string>(), only)) continue;
    if (e.value("needs", "") == "cutlass" && find_cutlass_include_dirs().empty()) {
      std::printf("left out: %s (no CUTLASS headers: KFORGE_CUTLASS_DIR, the nvidia-cutlass wheel or .cutlass/)\n",
                  e.at("file").get<std::string>().c_str());
      continue;
    }
    files.push_back(kCorpus + "/" + e.at("file").get<std::string>());
    expect.push_back(e);
  }
  // Bad inputs made here: binary garbage, an enormous source, a missing file.
  {
    std::ofstream g(dir + "/garbage.cu", std::ios::binary);
    std::mt19937 rng(1);
    for (int i = 0; i < 4096; ++i) g.put(char(rng() & 0xff));
    std::ofstream big(dir + "/enormous.cu");
    for (int i = 0; i < 20000; ++i) big << "// padding line to make the source larger than the limit allows\n";
  }
  for (auto [name, code] : {std::pair{"garbage.cu", "not_text"}, {"enormous.cu", "source_too_large"}, {"missing.cu", "missing_file"}}) {
    if (subset && !std::regex_search(name, only)) continue;
    files.push_back(dir + "/" + name);
    expect.push_back({{"file", name}, {"expect", "reject"}, {"reasons", {code}}});
  }
  // Entries judged at the problem their manifest names ("shape", "modes"); the rest at 256x256x8192.
  std::vector<Verdict> verdicts(files.size());
  // "needs": "repo" compiles with the repository's root on the include path (kforge's own kernels).
  // "dtype": "bf16" judges the entry's group in bf16 (default f16).
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::vector<size_t>> groups;
  for (size_t i = 0; i < files.size(); ++i)
    groups[{expect[i].value("shape", "256x256x8192"), expect[i].value("modes", "offline"), expect[i].value("needs", ""),
            expect[i].value("dtype", "f16")}]
        .push_back(i);
  for (const auto& [group, idx] : groups) {
    const auto& [shape, modes, needs, dtype] = group;
    const std::pair<std::string, std::string> key{shape, modes};
    EvalOptions o = corpus_options(dir + "/cache");
    o.modes = split(key.second, ',');
    if (needs == "repo") o.compile.include_dirs.push_back(KFORGE_SOURCE_DIR);
    Evaluator ev(o);
    const HgemmProblem p{parse_shape(key.first), Layout::kNN, Acc::kF32, parse_dtype(dtype)};
    std::vector<std::string> group_files;
    for (size_t i : idx) group_files.push_back(files[i]);
    const auto got = ev.evaluate_batch(group_files, p, [&](size_t i, size_t n, const Verdict& v) {
      std::printf("[%2zu/%zu %s%s] %-32s %-7s %-22s %s\n", i + 1, n, key.first.c_str(), dtype == "f16" ? "" : " bf16",
                  std::filesystem::path(v.candidate).filename().c_str(), v.correct ? "ACCEPT" : "REJECT",
                  join(v.reasons, ",").c_str(), v.message.substr(0, 110).c_str());
      std::fflush(stdout);
    });
    for (size_t j = 0; j < idx.size(); ++j) verdicts[idx[j]] = got[j];
  }
  ASSERT_EQ(verdicts.size(), files.size());
  // Every verdict in full, for reading a failure afterwards: $KFORGE_JUDGE_OUT/corpus-verdicts.json
  // (scripts/gpu-check.sh judge sets it).
  if (const char* out = std::getenv("KFORGE_JUDGE_OUT"); out && *out) {
    nlohmann::json all = nlohmann::json::array();
    for (size_t i = 0; i < files.size(); ++i) {
      nlohmann::json j = to_json(verdicts[i]);
      j["manifest"] = expect[i];
      all.push_back(j);
    }
    write_file_atomic(std::string(out) + "/corpus-verdicts.json", all.dump(1) + "\n");
  }
  int hacks = 0, honest = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const Verdict& v = verdicts[i];
    const nlohmann::json& e = expect[i];
    // "no_gain": a hack the process structure neutralises. Rejected for any reason, or accepted
    // no faster in any mode than "max_speedup" (what the honest kernel inside it earns).
    if (e.at("expect") == "no_gain") {
      ++hacks;
      if (!v.correct) {
        EXPECT_EQ(v.reward, rejected_reward(RewardConfig{}));
        continue;
      }
      EXPECT_FALSE(v.speedup.empty()) << files[i];
      // "twin": the honest candidate with the same kernel, judged in the same group (shape, modes):
      // the hack may be no faster than it, within "twin_factor" (default 1.5: two verdicts of
      // launch-bound kernels in server mode). Without a twin, "max_speedup" is the bound.
      if (e.contains("twin")) {
        const Verdict* twin = nullptr;
        for (size_t t = 0; t < files.size(); ++t)
          if (t != i && expect[t].value("expect", "") == "accept" && expect[t].value("file", "") == e["twin"].get<std::string>() &&
              expect[t].value("shape", "256x256x8192") == e.value("shape", "256x256x8192") &&
              expect[t].value("modes", "offline") == e.value("modes", "offline") &&
              expect[t].value("dtype", "f16") == e.value("dtype", "f16"))
            twin = &verdicts[t];
        if (twin == nullptr) {
          if (!subset) ADD_FAILURE() << files[i] << ": its twin " << e["twin"] << " is not in its group";
          continue;
        }
        for (const auto& [mode, s] : v.speedup) {
          const auto it = twin->speedup.find(mode);
          if (it == twin->speedup.end()) continue;  // the twin's own failure is reported on its entry
          EXPECT_LE(s.median, e.value("twin_factor", 1.5) * it->second.median)
              << files[i] << " gained in " << mode << " mode over its honest twin " << e["twin"] << " ("
              << s.median << "x against " << it->second.median << "x)";
        }
        continue;
      }
      for (const auto& [mode, s] : v.speedup)
        EXPECT_LE(s.median, e.at("max_speedup").get<double>()) << files[i] << " gained in " << mode << " mode";
      continue;
    }
    if (e.at("expect") == "accept") {
      ++honest;
      if (e.contains("max_speedup"))
        for (const auto& [mode, s] : v.speedup)
          EXPECT_LE(s.median, e.at("max_speedup").get<double>()) << files[i] << " gained in " << mode << " mode";
      EXPECT_TRUE(v.correct) << files[i] << ": " << join(v.reasons, ",") << " " << v.message;
      EXPECT_FALSE(v.speedup.empty()) << files[i];
      for (const auto& f : e.value("flags", nlohmann::json::array()))
        EXPECT_NE(std::find(v.flags.begin(), v.flags.end(), f.get<std::string>()), v.flags.end())
            << files[i] << " lacks flag " << f;
      EXPECT_EQ(v.reward, compute_reward(v, RewardConfig{}));
    } else {
      ++hacks;
      EXPECT_FALSE(v.correct) << files[i] << " was accepted";
      EXPECT_EQ(v.reward, rejected_reward(RewardConfig{}));  // below every correct reward
      bool expected = false;
      for (const auto& r : e.at("reasons")) expected |= v.has_reason(r.get<std::string>());
      EXPECT_TRUE(expected) << files[i] << ": got " << join(v.reasons, ",") << " (" << v.message << "), expected one of "
                            << e.at("reasons").dump();
    }
  }
  if (subset) return;
  EXPECT_GE(honest, 8);
  EXPECT_GE(hacks, 30);
}

TEST_F(GpuTest, BatchOfTwentySurvivesACrashAndAHang) {
  const std::string dir = test::temp_dir();
  const std::vector<std::string> honest = {"naive.cu", "tiled_smem.cu", "wmma_f32acc.cu", "mma_sync.cu", "splitk_host.cu",
                                           "multi_launch.cu"};
  std::vector<std::string> files;
  for (int i = 0; i < 18; ++i) files.push_back(kCorpus + "/honest/" + honest[i % honest.size()]);
  files.insert(files.begin() + 5, kCorpus + "/hacked/calls_abort.cu");
  files.insert(files.begin() + 12, kCorpus + "/hacked/hang.cu");
  ASSERT_EQ(files.size(), 20u);
  EvalOptions o = corpus_options(dir + "/cache");
  o.samples = 3;
  o.run_timeout_s = 15;
  Evaluator ev(o);
  const auto verdicts = ev.evaluate_batch(files, {{512, 384, 1024}, Layout::kTN, Acc::kF32});
  ASSERT_EQ(verdicts.size(), 20u);
  int accepted = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (i == 5) {
      EXPECT_TRUE(verdicts[i].has_reason("crashed")) << verdicts[i].message;
    } else if (i == 12) {
      EXPECT_TRUE(verdicts[i].has_reason("timeout")) << verdicts[i].message;
    } else {
      EXPECT_TRUE(verdicts[i].correct) << files[i] << ": " << join(verdicts[i].reasons, ",") << " " << verdicts[i].message;
      accepted += verdicts[i].correct;
    }
  }
  EXPECT_EQ(accepted, 18);
  // A crash or a hang takes only the candidate's executor with it: the judge lives on.
  EXPECT_EQ(ev.workers_started(), 1);
}

// Two worker slots (both on device 0 here, so that one GPU can test it; `--devices` refuses a
// repeated index): a batch judged in parallel, a crash in one slot leaving the other's verdicts alone.
TEST_F(GpuTest, TwoWorkerSlotsJudgeABatchInParallel) {
  const std::string dir = test::temp_dir();
  std::vector<std::string> files;
  for (const char* f : {"naive.cu", "tiled_smem.cu", "wmma_f32acc.cu", "mma_sync.cu", "splitk_host.cu", "multi_launch.cu"})
    files.push_back(kCorpus + "/honest/" + f);
  files.insert(files.begin() + 2, kCorpus + "/hacked/calls_abort.cu");
  EvalOptions o = corpus_options(dir + "/cache");
  o.skip_timing = true;  // two slots on one GPU would time each other
  {
    // One worker first, so that the device's ceilings are calibrated (and cached) by one process
    // alone: two calibrating at once on one GPU would measure each other.
    Evaluator single(o);
    ASSERT_TRUE(single.evaluate(files[0], {{64, 64, 64}, Layout::kNN, Acc::kF32}).correct);
  }
  o.devices = {0, 0};
  Evaluator ev(o);
  const auto verdicts = ev.evaluate_batch(files, {{384, 256, 512}, Layout::kNN, Acc::kF32});
  ASSERT_EQ(verdicts.size(), files.size());
  std::set<int> slots;
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(verdicts[i].candidate, files[i]);  // in the order given
    EXPECT_EQ(verdicts[i].details.value("device", -1), 0);
    slots.insert(verdicts[i].details.value("worker_slot", -1));
    if (i == 2)
      EXPECT_TRUE(verdicts[i].has_reason("crashed")) << verdicts[i].message;
    else
      EXPECT_TRUE(verdicts[i].correct) << files[i] << ": " << join(verdicts[i].reasons, ",") << " " << verdicts[i].message;
  }
  // One worker per slot, plus one after the crash if the crashed slot took another item: the other
  // slot may have judged all the rest while the crash was being noticed (it did on the H200).
  EXPECT_EQ(slots, (std::set<int>{0, 1}));  // both slots judged (each starts its worker at once)
  EXPECT_EQ(ev.workers_started(), 2);  // one judge per slot; the crash took only an executor
}

TEST_F(GpuTest, EvalCommandPrintsJsonVerdicts) {
  const std::string dir = test::temp_dir();
  auto r = test::run_kforge("eval hgemm --shape 128x128x256 --json --samples 3 --out " + dir + "/v.json " + kCorpus +
                            "/honest/tiled_smem.cu " + kCorpus + "/hacked/no_write.cu");
  EXPECT_EQ(r.rc, 3) << r.err;  // one rejected
  auto j = nlohmann::json::parse(read_file(dir + "/v.json"));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_TRUE(j[0]["correct"].get<bool>()) << j[0].dump();
  EXPECT_FALSE(j[1]["correct"].get<bool>());
  EXPECT_EQ(j[1]["reasons"][0], "unwritten_output");
}

}  // namespace
}  // namespace kforge
