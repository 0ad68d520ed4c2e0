#include "torch/tasks.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/text.hpp"

namespace fs = std::filesystem;

namespace kforge {

std::string TorchTask::stem() const { return fs::path(file).stem().string(); }

std::pair<int, std::string> parse_task_file_name(const std::string& file_name) {
  std::string stem = fs::path(file_name).stem().string();
  size_t i = 0;
  while (i < stem.size() && std::isdigit(static_cast<unsigned char>(stem[i]))) ++i;
  if (i == 0 || i > 6 || i >= stem.size() || stem[i] != '_') return {0, stem};
  return {std::stoi(stem.substr(0, i)), stem.substr(i + 1)};
}

namespace {

bool by_number_then_name(const TorchTask& a, const TorchTask& b) {
  if (a.level != b.level) return a.level < b.level;
  if (a.number != b.number) return a.number < b.number;
  return a.file < b.file;
}

std::vector<fs::path> py_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && e.path().extension() == ".py" && name[0] != '_' && name[0] != '.') out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// level folders: "level1" -> 1
int level_of(const std::string& name) {
  if (name.rfind("level", 0) != 0 || name.size() == 5) return 0;
  for (size_t i = 5; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return 0;
  return std::stoi(name.substr(5));
}

std::vector<std::pair<int, fs::path>> level_dirs(const fs::path& dir) {
  std::vector<std::pair<int, fs::path>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory())
      if (int l = level_of(e.path().filename().string()); l > 0) out.push_back({l, e.path()});
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<TorchTask> import_kernelbench(const std::string& dir, const std::vector<int>& levels) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) KF_USAGE_ERROR("no such folder: %s", dir.c_str());
  fs::path root = fs::absolute(dir);
  auto levs = level_dirs(root);
  if (levs.empty() && fs::is_directory(root / "KernelBench", ec)) {
    root /= "KernelBench";
    levs = level_dirs(root);
  }
  if (levs.empty())
    KF_USAGE_ERROR("%s holds no KernelBench level folders (level1/, level2/, ...; or KernelBench/level1/, ...)",
                   dir.c_str());
  for (int l : levels)
    if (std::none_of(levs.begin(), levs.end(), [&](const auto& p) { return p.first == l; }))
      KF_USAGE_ERROR("%s has no folder level%d", root.c_str(), l);
  std::vector<TorchTask> out;
  for (const auto& [level, path] : levs) {
    if (!levels.empty() && std::find(levels.begin(), levels.end(), level) == levels.end()) continue;
    for (const fs::path& f : py_files(path)) {
      TorchTask t;
      std::tie(t.number, t.name) = parse_task_file_name(f.filename().string());
      t.level = level;
      t.file = f.string();
      t.id = strf("level%d/%d", level, t.number);
      if (t.number == 0) t.id = strf("level%d/%s", level, t.name.c_str());
      out.push_back(t);
    }
  }
  std::sort(out.begin(), out.end(), by_number_then_name);
  return out;
}

std::vector<TorchTask> list_task_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) KF_USAGE_ERROR("no such folder: %s", dir.c_str());
  std::vector<TorchTask> out;
  for (const fs::path& f : py_files(fs::absolute(dir))) {
    TorchTask t;
    std::tie(t.number, t.name) = parse_task_file_name(f.filename().string());
    t.file = f.string();
    t.id = f.stem().string();
    out.push_back(t);
  }
  std::sort(out.begin(), out.end(), by_number_then_name);
  return out;
}

std::vector<TorchTask> load_task_set(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (!level_dirs(path).empty() || fs::is_directory(fs::path(path) / "KernelBench", ec)) return import_kernelbench(path);
    return list_task_dir(path);
  }
  if (!fs::is_regular_file(path, ec)) KF_USAGE_ERROR("no such task set: %s", path.c_str());
  if (!ends_with(path, ".json")) KF_USAGE_ERROR("a task set is a folder or a .json listing (got %s)", path.c_str());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    KF_USAGE_ERROR("task set %s: %s", path.c_str(), e.what());
  }
  return task_set_from_json(j, fs::absolute(path).parent_path().string());
}

namespace {
// A file name that is not UTF-8 (a KernelBench file named in latin-1) cannot be a JSON string as it
// is: "file" shows it with U+FFFD, and "file_bytes" holds its bytes in hex, which the reader uses.
std::string hex_of(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) out += digits[c >> 4], out += digits[c & 15];
  return out;
}
std::string bytes_of_hex(const std::string& h) {
  auto val = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    const int hi = val(h[i]), lo = val(h[i + 1]);
    if (hi < 0 || lo < 0) KF_USAGE_ERROR("a task's 'file_bytes' is not hex (got '%s')", h.substr(0, 40).c_str());
    out += char(hi * 16 + lo);
  }
  return out;
}
}  // namespace

nlohmann::json task_set_to_json(const std::string& source, const std::vector<TorchTask>& tasks) {
  nlohmann::json list = nlohmann::json::array();
  for (const TorchTask& t : tasks) {
    list.push_back({{"id", t.id}, {"name", t.name}, {"level", t.level}, {"number", t.number}, {"file", t.file}});
    if (!is_valid_utf8(t.file)) list.back()["file_bytes"] = hex_of(t.file);
  }
  return {{"format", "kforge-task-set/1"}, {"source", source}, {"count", tasks.size()}, {"tasks", list}};
}

std::vector<TorchTask> task_set_from_json(const nlohmann::json& j, const std::string& base_dir) {
  if (!j.is_object() || !j.contains("tasks") || !j["tasks"].is_array())
    KF_USAGE_ERROR("a task set listing is an object with a 'tasks' array");
  std::vector<TorchTask> out;
  for (const auto& e : j["tasks"]) {
    if (!e.is_object() || !e.contains("file") || !e["file"].is_string())
      KF_USAGE_ERROR("every task in a listing needs a 'file' (got %s)", e.dump().c_str());
    TorchTask t;
    fs::path f = e.contains("file_bytes") && e["file_bytes"].is_string() ? bytes_of_hex(e["file_bytes"].get<std::string>())
                                                                         : e["file"].get<std::string>();
    if (f.is_relative()) f = fs::path(base_dir) / f;
    t.file = f.string();
    auto [num, name] = parse_task_file_name(f.filename().string());
    t.number = e.value("number", num);
    t.name = e.value("name", name);
    t.level = e.value("level", 0);
    t.id = e.value("id", f.stem().string());
    out.push_back(t);
  }
  return out;
}

std::vector<std::string> solutions_for(const TorchTask& task, const std::string& solutions_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  std::vector<fs::path> bases = {fs::path(solutions_dir)};
  if (task.level > 0) bases.push_back(fs::path(solutions_dir) / strf("level%d", task.level));
  for (const fs::path& base : bases) {
    const fs::path single = base / (task.stem() + ".py");
    if (fs::is_regular_file(single, ec)) out.push_back(single.string());
    const fs::path folder = base / task.stem();
    if (fs::is_directory(folder, ec))
      for (const fs::path& f : py_files(folder)) out.push_back(f.string());
  }
  return out;
}

}  // namespace kforge
