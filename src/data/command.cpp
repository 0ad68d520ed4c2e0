// kforge data export: training data files from search runs and task sets (data/export.hpp). Flags,
// their checks and printing only.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "data/export.hpp"

namespace kforge {

void register_data(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "Training data for RL and SFT trainers, from search runs and task sets");
  data->require_subcommand(1);
  struct Opts {
    std::string kind = "prompts";
    std::vector<std::string> dbs;
    std::string out;
    PromptExportOptions prompts;
    std::string deviation_penalty, length_penalty;  // shaped again when given (data/reward_export.hpp)
  };
  auto o = std::make_shared<Opts>();
  CLI::App* ex = data->add_subcommand("export", "Write prompts, SFT pairs or GRPO groups as JSON lines");
  ex->add_option("--kind", o->kind,
                 "prompts: one row per task set task (--tasks, --hgemm-shapes) or per run (--db), with task_id (TRL "
                 "GRPO, verl); sft: (prompt, correct answer) pairs (TRL SFT); groups: GRPO groups with rewards and "
                 "advantages")
      ->capture_default_str();
  ex->add_option("--db", o->dbs, "A run folder of kforge optimize (or its kforge-search.db); repeatable");
  ex->add_option("--tasks", o->prompts.task_sets,
                 "--kind prompts: a task set as kforge serve takes it (a folder of task files, a KernelBench "
                 "checkout, a listing of `kforge tasks import`); one row per task, no run needed (a task a --db run "
                 "searched gets that run's latest prompt); repeatable")
      ->type_name("SET");
  ex->add_option("--hgemm-shapes", o->prompts.hgemm_shapes,
                 "--kind prompts: HGEMM problems as kforge serve takes them (MxNxK[:tn],... or grid|subset|FILE with "
                 "--hgemm-layouts); one row per problem")
      ->type_name("SHAPES");
  ex->add_option("--hgemm-layouts", o->prompts.hgemm_layouts, "the layouts of --hgemm-shapes grid|subset|FILE: nn, tn or nn,tn")
      ->capture_default_str();
  ex->add_option("--device", o->prompts.device, "what a PyTorch task's prompt says it is timed on: cuda, cuda:N or cpu")
      ->capture_default_str();
  ex->add_option("--baseline", o->prompts.baseline,
                 "what a PyTorch task's prompt says it is timed against: eager, compile, compile_ro or graph")
      ->capture_default_str();
  ex->add_option("--prompts", o->prompts.prompts_dir, "prompt templates as optimize --prompts takes them (default: the built-in ones)")
      ->type_name("DIR");
  ex->add_option("--out", o->out, "The JSON-lines file to write (datasets.load_dataset(\"json\", data_files=FILE))")
      ->required();
  ex->add_option("--deviation-penalty", o->deviation_penalty,
                 "sft, groups: shape every reward again as kforge serve would, taking W x (the worst error over the "
                 "tolerance's bound, 0 to 1) off a correct candidate's reward (with --length-penalty or alone: exactly "
                 "the penalties given, under the run's reward kind); groups' advantages normalised again")
      ->type_name("W");
  ex->add_option("--length-penalty", o->length_penalty,
                 "sft, groups: shape every reward again, taking W x (tokens beyond TOKENS) / TOKENS off a correct "
                 "candidate's reward (see --deviation-penalty); every row has the parts in reward_parts")
      ->type_name("W:TOKENS");
  ex->callback([o] {
    PromptExportOptions& p = o->prompts;
    const bool sets = !p.task_sets.empty() || !p.hgemm_shapes.empty();
    if (o->kind != "prompts" && o->kind != "sft" && o->kind != "groups")
      KF_USAGE_ERROR("unknown --kind '%s' (expected prompts, sft or groups)", o->kind.c_str());
    if (sets && o->kind != "prompts")
      KF_USAGE_ERROR("--tasks and --hgemm-shapes go with --kind prompts (sft and groups come from runs: --db)");
    if (!sets && o->dbs.empty())
      KF_USAGE_ERROR("nothing to export: give --db RUN_DIR (runs of kforge optimize) or, for --kind prompts, "
                     "--tasks SET or --hgemm-shapes SHAPES");
    const std::string device(trim(p.device));
    if (device != "cpu" && device != "cuda" && !std::regex_match(device, std::regex("cuda:[0-9]{1,2}")))
      KF_USAGE_ERROR("--device '%s': expected cuda, cuda:N or cpu", p.device.c_str());
    if (p.baseline != "eager" && p.baseline != "compile" && p.baseline != "compile_ro" && p.baseline != "graph")
      KF_USAGE_ERROR("--baseline '%s': expected eager, compile, compile_ro or graph", p.baseline.c_str());
    std::error_code ec;
    if (!p.prompts_dir.empty() && !std::filesystem::is_directory(p.prompts_dir, ec))
      KF_USAGE_ERROR("--prompts %s: no such folder (give the folder of the templates, or leave it out)", p.prompts_dir.c_str());
    for (const std::string& set : p.task_sets) {
      if (!std::filesystem::exists(set, ec)) KF_USAGE_ERROR("--tasks %s: no such folder or listing", set.c_str());
      if (!std::filesystem::is_directory(set, ec)) check_input_file("--tasks", set);
    }
    const ExportRewards rewards = parse_export_rewards(o->deviation_penalty, o->length_penalty);
    if (rewards.reshape && o->kind == "prompts")
      KF_USAGE_ERROR("--deviation-penalty and --length-penalty shape the rewards of --kind sft and groups (prompts "
                     "rows carry no reward: kforge serve --deviation-penalty shapes those online)");
    check_output_file("--out", o->out);
    p.device = device;
    p.dbs = o->dbs;
    const auto rows = o->kind == "prompts" ? export_prompt_rows(p) : export_rows(o->kind, o->dbs, rewards);
    write_jsonl(o->out, rows);
    std::printf("kforge data export: %zu %s row(s) -> %s\n", rows.size(), o->kind.c_str(), o->out.c_str());
  });
}

}  // namespace kforge
