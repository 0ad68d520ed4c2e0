// Task sets of KernelBench-format PyTorch tasks: a folder of task files (kforge's own, tasks/kforge),
// a KernelBench checkout (level1/, level2/, ... holding files like 1_Square_matrix_multiplication_.py),
// or a listing written by `kforge tasks import` (JSON). Solutions pair with tasks by file name.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kforge {

struct TorchTask {
  std::string id;    // "level1/1" for KernelBench, the file's stem for a plain folder ("01_relu")
  std::string name;  // "Square_matrix_multiplication_", "relu"
  int level = 0;     // 0 outside KernelBench
  int number = 0;    // the leading number of the file name (0 when it has none)
  std::string file;  // absolute path of the task file
  std::string stem() const;  // the file name without .py
};

// "12_Matmul_with_transposed_B.py" -> {12, "Matmul_with_transposed_B"}; no leading number -> {0, stem}.
std::pair<int, std::string> parse_task_file_name(const std::string& file_name);

// A KernelBench checkout (or its KernelBench/ subfolder): every level folder's task files, ordered
// by level, then number. `levels` empty: all. Throws a usage error when no level folder is found.
std::vector<TorchTask> import_kernelbench(const std::string& dir, const std::vector<int>& levels = {});
// The *.py files of one folder (not recursive, files starting with '_' skipped), ordered by number, then name.
std::vector<TorchTask> list_task_dir(const std::string& dir);
// A folder (KernelBench layout if it has level folders), or a listing written by `tasks import`.
std::vector<TorchTask> load_task_set(const std::string& path);

nlohmann::json task_set_to_json(const std::string& source, const std::vector<TorchTask>& tasks);
// Relative paths in the listing are relative to `base_dir`.
std::vector<TorchTask> task_set_from_json(const nlohmann::json& j, const std::string& base_dir);

// The solution files of a task in a solutions folder, in this order: DIR/<stem>.py, then every
// *.py in DIR/<stem>/ (sorted); for KernelBench tasks DIR/level<N>/<stem>.py and DIR/level<N>/<stem>/*.py too.
std::vector<std::string> solutions_for(const TorchTask& task, const std::string& solutions_dir);

}  // namespace kforge
