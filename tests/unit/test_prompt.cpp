// Prompt building: message structure, section order, exemplar ordering and scores, feedback,
// template overrides, single-pass substitution, and the built-in texts equal to prompts/*.md.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/files.hpp"
#include "llm/prompt.hpp"

namespace kforge {
namespace {

namespace fs = std::filesystem;

const char* const kNames[] = {"system.md",         "task.md",           "exemplar.md",
                              "protocol.md",       "restrictions.md",   "task_torch.md",
                              "exemplar_torch.md", "protocol_torch.md", "restrictions_torch.md",
                              "profile.md"};

Exemplar make(int64_t id, bool correct, double speedup, std::string notes = "") {
  Exemplar x;
  x.id = id;
  x.correct = correct;
  x.speedup = speedup;
  x.notes = std::move(notes);
  x.source = "// source of variant " + std::to_string(id) + "\n__global__ void k" + std::to_string(id) +
             "() {}\n";
  return x;
}

PromptInputs inputs() {
  PromptInputs in;
  in.task = "Compute C = A * B for M=N=K=4096, fp16 inputs, fp32 accumulation.";
  in.reference = "void reference_gemm();  // the reference";
  in.exemplars = {
      make(11, true, 1.5, "ncu: 61% tensor pipe"),
      make(12, false, 0, "compile error: 'wmma' was not declared\nmore detail on line two"),
      make(13, true, 0.8),
      make(14, true, 2.5, "ncu: 85% tensor pipe"),
      make(15, false, 0, "wrong result: max abs error 3.5 at (17, 4)"),
  };
  return in;
}

// Position of `needle` in `hay`; fails the test when absent.
size_t pos_of(const std::string& hay, const std::string& needle) {
  size_t p = hay.find(needle);
  EXPECT_NE(p, std::string::npos) << "missing: " << needle;
  return p;
}

size_t count_of(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

// A fresh folder under the system temp folder, removed when the test ends.
struct TempDir {
  fs::path path;
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = fs::temp_directory_path() /
           ("kforge_prompt_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
  }
};

TEST(BuildPrompt, SystemThenUser) {
  PromptTemplates t = PromptTemplates::builtin();
  std::vector<ChatMessage> msgs = build_prompt(inputs(), t);
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_EQ(msgs[0].role, "system");
  EXPECT_EQ(msgs[1].role, "user");
  EXPECT_EQ(msgs[0].content, t.files.at("system.md"));
  // The user message holds none of the system text.
  EXPECT_EQ(msgs[1].content.find("You are an expert CUDA performance engineer"), std::string::npos);
}

TEST(BuildPrompt, SectionsInOrder) {
  PromptInputs in = inputs();
  in.feedback = "edit 1 of 1: the SEARCH text was not found in the parent";
  const std::string u = build_prompt(in, PromptTemplates::builtin())[1].content;

  std::vector<std::string> order = {
      "# Task",
      in.task,
      "# Reference implementation",
      in.reference,
      "# Earlier variants",
      "## Variant 1 ",
      "## Variant 5 ",
      "# Feedback on your previous answer",
      in.feedback,
      "# How to answer",
      "## 1. Performance Analysis",
      "## 2. Algorithm Design",
      "## 3. Code Implementation",
      "# Restrictions",
  };
  size_t last = 0;
  for (const std::string& s : order) {
    size_t p = pos_of(u, s);
    EXPECT_GE(p, last) << "out of order: " << s;
    last = p;
  }
  // Sections are separated by exactly one blank line and the message ends with one newline.
  EXPECT_EQ(u.find("\n\n\n"), std::string::npos);
  EXPECT_EQ(u.substr(u.size() - 2), ".\n");
}

TEST(BuildPrompt, ExemplarsWorstFirstBestLastWithScoresAndNotes) {
  const std::string u = build_prompt(inputs(), PromptTemplates::builtin())[1].content;

  // Rejected ones first (in the order given), then correct ones by increasing speed-up.
  const std::vector<int> want = {12, 15, 13, 11, 14};
  size_t last = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    std::string heading = "## Variant " + std::to_string(i + 1) + " (id " + std::to_string(want[i]) + "): ";
    size_t p = pos_of(u, heading);
    EXPECT_GE(p, last) << heading;
    last = p;
    // Each variant's source comes after its own heading.
    EXPECT_GT(pos_of(u, "// source of variant " + std::to_string(want[i])), p);
  }

  // The best variant is the last code before the protocol.
  size_t best = pos_of(u, "__global__ void k14() {}");
  size_t protocol = pos_of(u, "# How to answer");
  EXPECT_LT(best, protocol);
  for (int id : {11, 12, 13, 15}) EXPECT_LT(pos_of(u, "__global__ void k" + std::to_string(id)), best);

  // Scores and statuses.
  pos_of(u, "(id 14): correct, 2.50x the baseline");
  pos_of(u, "(id 13): correct, 0.80x the baseline");
  pos_of(u, "Speed-up over the baseline: 1.50x");
  pos_of(u, "(id 12): rejected: compile error: 'wmma' was not declared\n");
  pos_of(u, "(id 15): rejected: wrong result: max abs error 3.5 at (17, 4)");
  EXPECT_EQ(count_of(u, "Speed-up over the baseline: n/a (rejected)"), 2u);

  // Notes in full, "(none)" when there are none.
  pos_of(u, "more detail on line two");
  pos_of(u, "ncu: 85% tensor pipe");
  EXPECT_EQ(count_of(u, "(none)"), 1u);  // variant 13 only

  // Sources sit in a cuda block, without a blank line before the closing fence.
  pos_of(u, "```cuda\n// source of variant 14\n__global__ void k14() {}\n```");
}

TEST(BuildPrompt, EqualSpeedupsKeepTheirOrder) {
  PromptInputs in;
  in.task = "t";
  in.exemplars = {make(3, true, 1.0), make(1, true, 1.0), make(2, true, 1.0)};
  const std::string u = build_prompt(in, PromptTemplates::builtin())[1].content;
  EXPECT_LT(pos_of(u, "(id 3)"), pos_of(u, "(id 1)"));
  EXPECT_LT(pos_of(u, "(id 1)"), pos_of(u, "(id 2)"));
}

TEST(BuildPrompt, NoExemplars) {
  PromptInputs in = inputs();
  in.exemplars.clear();
  const std::string u = build_prompt(in, PromptTemplates::builtin())[1].content;
  EXPECT_LT(pos_of(u, "None yet: this is the first attempt."), pos_of(u, "# How to answer"));
  EXPECT_EQ(u.find("## Variant"), std::string::npos);
}

TEST(BuildPrompt, AllRejectedSaysSo) {
  PromptInputs in = inputs();
  std::string u = build_prompt(in, PromptTemplates::builtin())[1].content;
  pos_of(u, "The last one is the best so far.");
  EXPECT_EQ(u.find("None of them is correct yet."), std::string::npos);

  in.exemplars = {make(1, false, 0, "wrong result"), make(2, false, 0, "timed out")};
  u = build_prompt(in, PromptTemplates::builtin())[1].content;
  pos_of(u, "None of them is correct yet.");
  EXPECT_EQ(u.find("best so far"), std::string::npos);
}

TEST(BuildPrompt, FeedbackOnlyWhenGiven) {
  PromptInputs in = inputs();
  std::string without = build_prompt(in, PromptTemplates::builtin())[1].content;
  EXPECT_EQ(without.find("Feedback"), std::string::npos);

  in.feedback = "   \n";  // white space only counts as none
  EXPECT_EQ(build_prompt(in, PromptTemplates::builtin())[1].content, without);

  in.feedback = "edit 2 of 3: the SEARCH text matches 2 places";
  std::string with = build_prompt(in, PromptTemplates::builtin())[1].content;
  size_t fb = pos_of(with, "# Feedback on your previous answer\n\nedit 2 of 3: the SEARCH text matches 2 places");
  EXPECT_GT(fb, pos_of(with, "## Variant 5"));
  EXPECT_LT(fb, pos_of(with, "# How to answer"));
}

TEST(BuildPrompt, SinglePassSubstitutionAndUnknownPlaceholders) {
  PromptTemplates t = PromptTemplates::builtin();
  t.files["task.md"] = "T[{{task}}] R[{{ reference }}] U[{{unknown}}] B[{{task]\n";
  PromptInputs in;
  in.task = "task mentions {{reference}} and {{exemplars}}";
  in.reference = "ref mentions {{task}}";
  Exemplar x = make(7, true, 1.0);
  x.source = "// {{source}} {{notes}} {{task}}\n";
  in.exemplars = {x};
  const std::string u = build_prompt(in, t)[1].content;
  EXPECT_EQ(u.substr(0, u.find('\n') + 1),
            "T[task mentions {{reference}} and {{exemplars}}] R[ref mentions {{task}}] U[{{unknown}}] "
            "B[{{task]\n");
  pos_of(u, "// {{source}} {{notes}} {{task}}\n");
  EXPECT_EQ(count_of(u, "# Earlier variants"), 1u);
}

TEST(PromptTemplates, LoadOverridesOnlyFilesPresent) {
  TempDir dir;
  dir.write("task.md", "MY TASK: {{task}}\n{{reference}}\n");
  dir.write("restrictions.md", "# My rules\n\nBe nice.\n");
  dir.write("README.md", "ignored\n");
  PromptTemplates t = PromptTemplates::load(dir.path.string());
  PromptTemplates b = PromptTemplates::builtin();
  ASSERT_EQ(t.files.size(), std::size(kNames));
  EXPECT_EQ(t.files.at("task.md"), "MY TASK: {{task}}\n{{reference}}\n");
  EXPECT_EQ(t.files.at("restrictions.md"), "# My rules\n\nBe nice.\n");
  for (const char* kept : {"system.md", "exemplar.md", "protocol.md"})
    EXPECT_EQ(t.files.at(kept), b.files.at(kept)) << kept;

  PromptInputs in = inputs();
  const std::string u = build_prompt(in, t)[1].content;
  EXPECT_EQ(u.rfind("MY TASK: " + in.task + "\n" + in.reference + "\n\n# Earlier variants", 0), 0u);
  const std::string rules = "# My rules\n\nBe nice.\n";
  EXPECT_EQ(u.substr(u.size() - rules.size()), rules);
  EXPECT_EQ(u.find("# Restrictions"), std::string::npos);
}

TEST(PromptTemplates, TemplateMayPlaceTheExemplars) {
  TempDir dir;
  dir.write("protocol.md", "# Protocol\n\nStudy these:\n\n{{exemplars}}\n\nNow answer.\n");
  PromptTemplates t = PromptTemplates::load(dir.path.string());
  const std::string u = build_prompt(inputs(), t)[1].content;
  EXPECT_EQ(count_of(u, "# Earlier variants"), 1u);
  EXPECT_LT(pos_of(u, "Study these:"), pos_of(u, "# Earlier variants"));
  EXPECT_LT(pos_of(u, "## Variant 5"), pos_of(u, "Now answer."));
}

TEST(PromptTemplates, MissingFolderIsAUsageError) {
  try {
    PromptTemplates::load("/nonexistent/kforge/prompts");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/kforge/prompts"), std::string::npos);
  }
  // A file is not a folder either.
  TempDir dir;
  dir.write("file.md", "x");
  EXPECT_THROW(PromptTemplates::load((dir.path / "file.md").string()), Error);
}

TEST(PromptTemplates, BuiltinHasTheTenFilesAndTheirPlaceholders) {
  PromptTemplates b = PromptTemplates::builtin();
  ASSERT_EQ(b.files.size(), 10u);
  for (const char* name : kNames) ASSERT_TRUE(b.files.count(name)) << name;
  for (const char* ph : {"{{task}}", "{{reference}}"}) pos_of(b.files.at("task.md"), ph);
  for (const char* ph : {"{{index}}", "{{id}}", "{{status}}", "{{speedup}}", "{{notes}}", "{{profile}}", "{{source}}"})
    for (const char* name : {"exemplar.md", "exemplar_torch.md"}) pos_of(b.files.at(name), ph);
  pos_of(b.files.at("profile.md"), "{{table}}");
  pos_of(b.files.at("protocol.md"), "<<<<<<< SEARCH");
  pos_of(b.files.at("restrictions.md"), "fp32");
  for (const char* ph : {"{{task}}", "{{reference}}"}) pos_of(b.files.at("task_torch.md"), ph);
  pos_of(b.files.at("exemplar_torch.md"), "```python\n{{source}}");
  pos_of(b.files.at("protocol_torch.md"), "load_inline");
  pos_of(b.files.at("restrictions_torch.md"), "Model");
}

TEST(BuildPrompt, PythonLanguageUsesTheTorchTemplates) {
  PromptInputs in;
  in.task = "Make Model faster.";
  in.reference = "class Model(nn.Module): ...";
  in.language = "python";
  Exemplar x;
  x.id = 3;
  x.correct = true;
  x.speedup = 1.5;
  x.source = "class ModelNew(nn.Module): ...";
  in.exemplars.push_back(x);
  const std::string u = build_prompt(in, PromptTemplates::builtin())[1].content;
  EXPECT_NE(u.find("```python\nclass Model(nn.Module)"), std::string::npos) << u;
  EXPECT_NE(u.find("```python\nclass ModelNew(nn.Module)"), std::string::npos) << u;
  EXPECT_NE(u.find("load_inline"), std::string::npos);
  EXPECT_EQ(u.find("```cuda"), std::string::npos);
  in.language = "cuda";
  EXPECT_NE(build_prompt(in, PromptTemplates::builtin())[1].content.find("```cuda"), std::string::npos);
}

#ifdef KFORGE_SOURCE_DIR
// The files in prompts/ are the built-in texts, byte for byte.
TEST(PromptTemplates, BuiltinEqualsPromptsFolder) {
  const std::string dir = std::string(KFORGE_SOURCE_DIR) + "/prompts";
  PromptTemplates b = PromptTemplates::builtin();
  for (const char* name : kNames) EXPECT_EQ(read_file(dir + "/" + name), b.files.at(name)) << name;
  EXPECT_EQ(PromptTemplates::load(dir).files, b.files);
}

// The built-in texts are prompts/*.md embedded at build time (no hand-made copy can drift): every
// template file of the folder (every .md but README.md) is built in, and nothing else is.
TEST(PromptTemplates, EveryFileOfThePromptsFolderIsEmbedded) {
  const std::string dir = std::string(KFORGE_SOURCE_DIR) + "/prompts";
  std::set<std::string> on_disk, built_in;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".md" && name != "README.md") on_disk.insert(name);
  }
  for (const auto& [name, text] : PromptTemplates::builtin().files) {
    built_in.insert(name);
    EXPECT_FALSE(text.empty()) << name;
  }
  EXPECT_EQ(on_disk, built_in);
  EXPECT_EQ(built_in.size(), std::size(kNames));
  // prompts/README.md tells an editor where the built-in texts come from.
  EXPECT_NE(read_file(dir + "/README.md").find("embedded"), std::string::npos);
}
#endif

}  // namespace
}  // namespace kforge
