// kforge tasks import --kernelbench DIR / kforge tasks list SET: task-set listings.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "torch/tasks.hpp"

namespace kforge {
namespace {

struct TasksCliOptions {
  std::string kernelbench;
  std::string levels;
  std::string out;
  std::string set;
  bool json = false;
};

void print_listing(const std::vector<TorchTask>& tasks) {
  for (const TorchTask& t : tasks) std::printf("%-16s %-48s %s\n", t.id.c_str(), t.name.c_str(), t.file.c_str());
}

// A task set, every fault in it a usage error in plain words (a listing's fields of the wrong type
// would otherwise surface as the JSON library's own exception).
std::vector<TorchTask> checked_task_set(const std::string& set) {
  std::error_code ec;
  if (!std::filesystem::exists(set, ec)) KF_USAGE_ERROR("task set %s: no such folder or listing", set.c_str());
  if (!std::filesystem::is_directory(set, ec)) check_input_file("task set", set);
  try {
    return load_task_set(set);
  } catch (const nlohmann::json::exception& e) {
    KF_USAGE_ERROR("task set %s is not a valid listing: %s", set.c_str(), plain_message(e.what()).c_str());
  }
}

void run_import(const TasksCliOptions& o) {
  std::error_code ec;
  if (!std::filesystem::is_directory(o.kernelbench, ec))
    KF_USAGE_ERROR("--kernelbench %s: no such folder (give a KernelBench checkout)", o.kernelbench.c_str());
  std::vector<int> levels;
  for (const std::string& l : split(o.levels, ',')) {
    const std::string t(trim(l));
    if (t.empty()) continue;
    char* end = nullptr;
    const long v = std::strtol(t.c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > 99) KF_USAGE_ERROR("--levels: '%s' is not a level number", t.c_str());
    levels.push_back(int(v));
  }
  if (!o.out.empty()) {
    if (!ends_with(o.out, ".json")) KF_USAGE_ERROR("--out must name a .json file (got '%s')", o.out.c_str());
    check_output_file("--out", o.out);
  }
  const std::vector<TorchTask> tasks = import_kernelbench(o.kernelbench, levels);
  const nlohmann::json j = task_set_to_json(std::filesystem::absolute(o.kernelbench).string(), tasks);
  if (o.json) std::printf("%s\n", dump_json(j, 2).c_str());
  else print_listing(tasks);
  std::map<int, int> per_level;
  for (const TorchTask& t : tasks) ++per_level[t.level];
  std::string counts;
  for (const auto& [l, n] : per_level) counts += strf("%slevel%d: %d", counts.empty() ? "" : ", ", l, n);
  std::fprintf(stderr, "kforge tasks: %zu task(s) (%s)\n", tasks.size(), counts.c_str());
  if (!o.out.empty()) write_file_atomic(o.out, dump_json(j, 2) + "\n");
}

}  // namespace

void register_tasks(CLI::App& app) {
  CLI::App* tasks = app.add_subcommand("tasks", "KernelBench-format PyTorch task sets");
  tasks->require_subcommand(1);
  auto o = std::make_shared<TasksCliOptions>();
  CLI::App* imp = tasks->add_subcommand(
      "import", "List a KernelBench checkout's tasks (level folders holding N_Name.py files) as a task set");
  imp->add_option("--kernelbench", o->kernelbench, "the KernelBench checkout (or its KernelBench/ folder)")->required();
  imp->add_option("--levels", o->levels, "only these levels (comma list, e.g. 1,2; default all)");
  imp->add_option("--out", o->out, "write the listing to FILE.json (a task set for kforge eval --tasks)");
  imp->add_flag("--json", o->json, "print the listing as JSON");
  imp->callback([o] { run_import(*o); });

  CLI::App* list = tasks->add_subcommand("list", "List the tasks of a task set (folder, KernelBench checkout or listing)");
  list->add_option("set", o->set, "the task set")->required();
  list->add_flag("--json", o->json, "print the listing as JSON");
  list->callback([o] {
    const std::vector<TorchTask> t = checked_task_set(o->set);
    if (o->json) std::printf("%s\n", dump_json(task_set_to_json(o->set, t), 2).c_str());
    else print_listing(t);
  });
}

}  // namespace kforge
