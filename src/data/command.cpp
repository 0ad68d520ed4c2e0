// kforge data export: training data files from search runs (data/export.hpp). Flags and printing only.
#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "data/export.hpp"

namespace kforge {

void register_data(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "Training data for RL and SFT trainers, from search runs");
  data->require_subcommand(1);
  struct Opts {
    std::string kind = "prompts";
    std::vector<std::string> dbs;
    std::string out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* ex = data->add_subcommand("export", "Write prompts, SFT pairs or GRPO groups as JSON lines");
  ex->add_option("--kind", o->kind,
                 "prompts: the latest contrastive prompt of each run, with task_id (TRL GRPO, verl); sft: (prompt, "
                 "correct answer) pairs (TRL SFT); groups: GRPO groups with rewards and advantages")
      ->capture_default_str();
  ex->add_option("--db", o->dbs, "A run folder of kforge optimize (or its kforge-search.db); repeatable")->required();
  ex->add_option("--out", o->out, "The JSON-lines file to write (datasets.load_dataset(\"json\", data_files=FILE))")
      ->required();
  ex->callback([o] {
    check_output_file("--out", o->out);
    const auto rows = export_rows(o->kind, o->dbs);
    write_jsonl(o->out, rows);
    std::printf("kforge data export: %zu %s row(s) -> %s\n", rows.size(), o->kind.c_str(), o->out.c_str());
  });
}

}  // namespace kforge
