// Training data from search runs: files that datasets.load_dataset("json", data_files=...) reads and
// that TRL and verl take as they are (JSON lines, one row per line).
//
//   prompts  one row per run: the contrastive prompt of its latest iteration (the messages optimize
//            sent, exemplars with their measured scores), as TRL's conversational "prompt", with
//            "task_id" (the id kforge serve knows the task by), and verl's columns "data_source",
//            "reward_model": {"style": "rule", "ground_truth": task id}, "extra_info".
//   sft      one row per correct LLM candidate: "prompt" (the messages it answered) and "completion"
//            ([{"role": "assistant", "content": analysis + fenced code}]), TRL's prompt-completion
//            format, with task_id, speedup, reward.
//   groups   one row per complete GRPO group: task_id, prompt, completions, rewards, advantages,
//            correct, speedups.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/reward_export.hpp"

namespace kforge {

// The id kforge serve gives a search run's task: "hgemm:..." as it is; a PyTorch task file by its
// stem ("/x/tasks/01_relu.py" -> "01_relu"), as a task set of its folder lists it.
std::string serve_task_id(const std::string& run_task);

// Rows of `kind` ("prompts", "sft", "groups") from the program databases (kforge-search.db files,
// or run folders holding one). A usage error for an unknown kind or a missing database.
// Rows carry each candidate's "reward" and "reward_parts" (the stored ones, or shaped again with
// `rewards`' penalties: data/reward_export.hpp; groups' advantages normalised again then) and its
// profile ("profile" in sft rows, "profiles" in groups rows; null where none was taken).
std::vector<nlohmann::json> export_rows(const std::string& kind, const std::vector<std::string>& dbs,
                                        const ExportRewards& rewards = {});

// Prompts of task sets, with or without runs (kforge data export --kind prompts --tasks SET): one
// row per task of the sets (--tasks, as kforge serve loads them; ids as serve gives them) and per
// --hgemm-shapes problem. A task some run of `dbs` searched gets that run's latest prompt (its
// exemplars with their measured scores); any other the prompt before anything is measured
// (search/loop.hpp first_prompt: the task, its reference, no exemplars). Rows of runs whose task
// is in no set follow, as export_rows gives them.
struct PromptExportOptions {
  std::vector<std::string> task_sets;   // folders or listings (torch/tasks.hpp load_task_set)
  std::string hgemm_shapes;             // "MxNxK[:tn],..." or grid|subset|FILE with hgemm_layouts; empty: none
  std::string hgemm_layouts = "nn";
  std::string device = "cuda";          // what a PyTorch task's prompt says it is timed on
  std::string baseline = "eager";       // ... and against
  std::string prompts_dir;              // optimize's --prompts (empty: the built-in templates)
  std::vector<std::string> dbs;
};
std::vector<nlohmann::json> export_prompt_rows(const PromptExportOptions& o);

// The task ids of `hgemm_shapes` in `layouts`, as kforge serve --hgemm-shapes names them ("hgemm:MxNxK[:tn]").
std::vector<std::string> hgemm_task_ids(const std::string& hgemm_shapes, const std::string& layouts);

// Writes rows as JSON lines (atomically).
void write_jsonl(const std::string& path, const std::vector<nlohmann::json>& rows);

}  // namespace kforge
