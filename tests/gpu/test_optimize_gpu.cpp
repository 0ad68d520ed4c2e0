// kforge optimize end to end on the GPU against the scripted OpenAI-compatible server: honest
// kernels, broken code and hacks as answers; every candidate gets a verdict, the best speed-up is
// reported, and replaying the recorded cassette gives the same database contents apart from timings.
#include <filesystem>

#include "core/files.hpp"
#include "core/text.hpp"
#include "gpu_test.hpp"
#include "search/program_db.hpp"
#include "../support/process.hpp"
#include "../support/scripted_llm_server.hpp"

namespace kforge {
namespace {

using test::GpuTest;
using test::ScriptedLlmServer;

std::string fenced(const std::string& path) {
  return "## Performance Analysis\nTiles cut global traffic.\n## Code Implementation\n```cuda\n" +
         read_file(std::string(KFORGE_SOURCE_DIR) + "/tests/corpus/hgemm/" + path) + "\n```\n";
}

// Verdict facts that do not depend on timing: (iteration/sample, status, correct, reasons).
std::vector<std::string> contents(const std::string& dir) {
  ProgramDb db(dir + "/kforge-search.db");
  std::vector<std::string> rows;
  for (const CandidateRecord& c : db.candidates(db.latest_run()->id))
    rows.push_back(strf("%d/%d %s %d %s", c.iteration, c.sample, c.status.c_str(), int(c.correct),
                        c.verdict.is_object() ? c.verdict["reasons"].dump().c_str() : "-"));
  return rows;
}

TEST_F(GpuTest, OptimizeAgainstScriptedServerThenReplay) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({"no code today"}));
  server.push(ScriptedLlmServer::ok({fenced("honest/tiled_smem.cu"), fenced("hacked/no_write.cu")}));
  server.push(ScriptedLlmServer::ok({fenced("honest/wmma_f32acc.cu"), fenced("hacked/zero_inputs.cu")}));
  server.push(ScriptedLlmServer::ok({fenced("bad/syntax_error.cu"), fenced("honest/mma_sync.cu")}));
  const std::string base = test::temp_dir();
  const std::string common = " --task hgemm:1024x1024x1024:tn --model scripted --group-size 2 --iterations 3 "
                             "--samples 5 --run-timeout 60 --llm-url " + server.url();
  auto rec = test::run_kforge("optimize" + common + " --run-dir " + base + "/rec --record --cassette " + base + "/c.jsonl");
  ASSERT_EQ(rec.rc, 0) << rec.err;
  std::printf("%s", rec.out.c_str());
  EXPECT_NE(rec.out.find("best "), std::string::npos);
  ProgramDb db(base + "/rec/kforge-search.db");
  const auto run = db.latest_run();
  ASSERT_TRUE(run);
  int correct = 0;
  double best = 0;
  for (const CandidateRecord& c : db.candidates(run->id)) {
    EXPECT_NE(c.status, "pending") << c.id;
    EXPECT_TRUE(c.verdict.is_object()) << c.id;
    correct += c.correct;
    if (c.verdict.is_object() && !c.correct)
      std::printf("candidate %d rejected: %s\n", c.id, c.verdict.value("message", std::string()).c_str());
    best = std::max(best, c.score);
  }
  EXPECT_EQ(correct, 4);  // the seed and three honest kernels; two hacks and a syntax error rejected
  EXPECT_GT(best, 0.0);
  auto rep = test::run_kforge("optimize" + common + " --run-dir " + base + "/rep --replay --cassette " + base + "/c.jsonl");
  ASSERT_EQ(rep.rc, 0) << rep.err;
  EXPECT_EQ(contents(base + "/rec"), contents(base + "/rep"));
}

}  // namespace
}  // namespace kforge
