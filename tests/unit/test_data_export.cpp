// kforge data export --kind prompts from task sets, without a run (issue 15: the prompts a trainer
// needs, loadable with datasets.load_dataset("json", ...)); with a run of one of the tasks, that
// task's row is the run's latest prompt.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../support/process.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "search/program_db.hpp"

namespace fs = std::filesystem;

namespace kforge {
namespace {

const std::string kSource = KFORGE_SOURCE_DIR;

std::vector<nlohmann::json> rows_of(const std::string& path) {
  std::vector<nlohmann::json> rows;
  for (const std::string& line : split(read_file(path), '\n'))
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

TEST(DataExport, PromptsOfATaskSetWithoutARun) {
  const std::string out = test::temp_dir();
  const std::string set = kSource + "/tasks/kforge";
  auto r = test::run_kforge("data export --kind prompts --tasks " + set + " --device cpu --out " + out + "/p.jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto rows = rows_of(out + "/p.jsonl");
  size_t n_tasks = 0;
  for (const auto& e : fs::directory_iterator(set)) n_tasks += e.path().extension() == ".py";
  ASSERT_EQ(rows.size(), n_tasks);
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& row = rows[i];
    const std::string id = row["task_id"];
    EXPECT_TRUE(fs::exists(set + "/" + id + ".py")) << id;
    EXPECT_EQ(row["data_source"], "kforge");
    EXPECT_EQ(row["reward_model"]["ground_truth"], id);
    EXPECT_EQ(row["extra_info"]["task_id"], id);
    EXPECT_EQ(row["extra_info"]["index"], i);
    ASSERT_EQ(row["prompt"].size(), 2u) << row.dump();
    EXPECT_EQ(row["prompt"][0]["role"], "system");
    EXPECT_EQ(row["prompt"][1]["role"], "user");
    const std::string user = row["prompt"][1]["content"];
    // optimize's PyTorch templates: the task file named, timed on the CPU, its code as the reference,
    // nothing measured yet.
    EXPECT_NE(user.find(id + ".py (KernelBench format)"), std::string::npos) << user.substr(0, 400);
    EXPECT_NE(user.find("the CPU"), std::string::npos) << user.substr(0, 600);
    EXPECT_NE(user.find("class Model"), std::string::npos);
    EXPECT_NE(user.find("None yet: this is the first attempt."), std::string::npos);
  }

  // HGEMM problems as serve names them; a run of one of the set's tasks gives that row its prompt.
  const std::string run = out + "/run";
  fs::create_directories(run);
  {
    ProgramDb db(run + "/kforge-search.db");
    const int64_t id = db.create_run(set + "/01_relu.py", nlohmann::json::object());
    CandidateRecord seed;
    seed.run_id = id;
    seed.policy = "seed";
    seed.source = "seed\n";
    const int64_t sid = db.add_candidate(seed);
    db.complete_iteration(id, 0);
    const std::string prompt = dump_json(nlohmann::json::array({{{"role", "user"}, {"content", "the run's prompt"}}}));
    db.begin_iteration(id, 1, sid, prompt);
    CandidateRecord answer;
    answer.run_id = id;
    answer.iteration = 1;
    answer.policy = "llm:m";
    answer.prompt = prompt;
    answer.source = "answer\n";
    db.add_candidate(answer);
    db.complete_iteration(id, 1);
  }
  r = test::run_kforge("data export --tasks " + set + " --hgemm-shapes 256x256x256,64x64x64:tn --db " + run + " --out " +
                       out + "/q.jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto q = rows_of(out + "/q.jsonl");
  ASSERT_EQ(q.size(), n_tasks + 2);
  EXPECT_EQ(q[0]["task_id"], "hgemm:256x256x256");
  EXPECT_NE(q[0]["prompt"][1]["content"].get<std::string>().find("M=256, N=256, K=256"), std::string::npos);
  EXPECT_NE(q[0]["prompt"][1]["content"].get<std::string>().find("kforge_hgemm"), std::string::npos);
  EXPECT_EQ(q[1]["task_id"], "hgemm:64x64x64:tn");
  bool saw_run = false;
  for (const auto& row : q)
    if (row["task_id"] == "01_relu") {
      saw_run = true;
      EXPECT_EQ(row["prompt"], nlohmann::json::array({{{"role", "user"}, {"content", "the run's prompt"}}})) << row.dump();
      EXPECT_EQ(row["extra_info"]["run"], 1);
    } else if (row["task_id"] != "hgemm:256x256x256" && row["task_id"] != "hgemm:64x64x64:tn") {
      EXPECT_NE(row["prompt"][1]["content"].get<std::string>().find("on cuda against"), std::string::npos);
    }
  EXPECT_TRUE(saw_run);

  // What datasets.load_dataset("json") makes of it, where datasets is installed.
  if (std::system("python3 -c 'import datasets' >/dev/null 2>&1") == 0) {
    const std::string py = "python3 -c \"import datasets; d = datasets.load_dataset('json', data_files='" + out +
                           "/p.jsonl', split='train'); assert d[0]['prompt'][0]['role'] == 'system'; "
                           "assert d[0]['task_id'] == d[0]['reward_model']['ground_truth']; print('LOADED', len(d))\" 2>&1";
    FILE* p = ::popen(py.c_str(), "r");
    std::string text;
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) text.append(buf, n);
    EXPECT_EQ(WEXITSTATUS(::pclose(p)), 0) << text;
    EXPECT_NE(text.find("LOADED " + std::to_string(n_tasks)), std::string::npos) << text;
  }
}

TEST(DataExport, TaskSetOptionsCheckedBeforeAnything) {
  const std::string out = test::temp_dir();
  const std::string set = kSource + "/tasks/kforge";
  std::ofstream(out + "/empty.json") << "{\"tasks\": []}\n";
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--kind sft --tasks " + set, "go with --kind prompts"},
      {"--kind prompts", "nothing to export"},
      {"--tasks " + out + "/nothing-here", "no such folder"},
      {"--tasks /dev/null", "not a regular file"},
      {"--tasks " + set + " --device gpu", "--device"},
      {"--tasks " + set + " --baseline fast", "--baseline"},
      {"--tasks " + set + " --prompts " + out + "/none", "--prompts"},
      {"--tasks " + set + " --tasks " + set, "two tasks have the id"},
      {"--hgemm-shapes 0x1x1", "shape"},
      {"--hgemm-shapes 64x64x64 --hgemm-layouts xy", "--hgemm-layouts"},
  };
  for (const Case& c : cases) {
    auto r = test::run_kforge("data export " + c.args + " --out " + out + "/x.jsonl");
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(test::count_lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(out + "/x.jsonl")) << c.args;
  }
}

}  // namespace
}  // namespace kforge
