#include "data/export.hpp"

#include <filesystem>
#include <map>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "core/shapes.hpp"
#include "search/loop.hpp"
#include "search/program_db.hpp"
#include "search/sampler.hpp"
#include "torch/tasks.hpp"

namespace fs = std::filesystem;

namespace kforge {

std::string serve_task_id(const std::string& run_task) {
  if (run_task.rfind("hgemm:", 0) == 0) return run_task;
  return fs::path(run_task).stem().string();
}

namespace {

nlohmann::json messages_of(const std::string& prompt_json) {
  if (prompt_json.empty()) return nullptr;
  nlohmann::json j = nlohmann::json::parse(prompt_json, nullptr, false);
  if (!j.is_array() || j.empty()) return nullptr;
  for (const auto& m : j)
    if (!m.is_object() || !m.contains("role") || !m.contains("content")) return nullptr;
  return j;
}

// The answer as the policy would write it: its analysis, then the program in a fenced block.
std::string answer_text(const CandidateRecord& c) {
  std::string out = std::string(trim(c.analysis));
  if (!out.empty()) out += "\n\n";
  out += "```" + std::string(c.language == "python" ? "python" : "cuda") + "\n" + c.source;
  if (!c.source.empty() && c.source.back() != '\n') out += "\n";
  out += "```\n";
  return out;
}

double speedup_of(const CandidateRecord& c) { return c.correct ? c.score : 0.0; }

std::string db_path(const std::string& p) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) return (fs::path(p) / "kforge-search.db").string();
  return p;
}

}  // namespace

std::vector<nlohmann::json> export_rows(const std::string& kind, const std::vector<std::string>& dbs,
                                        const ExportRewards& rewards) {
  if (kind != "prompts" && kind != "sft" && kind != "groups")
    KF_USAGE_ERROR("unknown --kind '%s' (expected prompts, sft or groups)", kind.c_str());
  if (dbs.empty()) KF_USAGE_ERROR("data export needs at least one run database (--db RUN_DIR or FILE)");
  std::vector<nlohmann::json> rows;
  for (const std::string& given : dbs) {
    const std::string path = db_path(given);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) KF_USAGE_ERROR("no run database at '%s'", path.c_str());
    ProgramDb db(path);
    const auto latest = db.latest_run();
    if (!latest) continue;
    for (int64_t run_id = 1; run_id <= latest->id; ++run_id) {
      const auto run = db.run(run_id);
      if (!run) continue;
      const std::string task_id = serve_task_id(run->task);
      const std::vector<CandidateRecord> cands = db.candidates(run_id);
      const RewardConfig reward_cfg = run_reward_config(run->config);
      if (kind == "prompts") {
        nlohmann::json prompt = nullptr;
        for (int it = db.last_iteration(run_id); it >= 0 && prompt.is_null(); --it)
          if (const auto rec = db.iteration(run_id, it)) prompt = messages_of(rec->prompt);
        for (auto c = cands.rbegin(); c != cands.rend() && prompt.is_null(); ++c) prompt = messages_of(c->prompt);
        if (prompt.is_null()) continue;  // a run that never asked an LLM (builtin policy)
        const size_t index = rows.size();
        rows.push_back({{"prompt", prompt},
                        {"task_id", task_id},
                        {"data_source", "kforge"},
                        {"reward_model", {{"style", "rule"}, {"ground_truth", task_id}}},
                        {"extra_info", {{"task_id", task_id}, {"index", index}, {"run", run_id}, {"db", path}}}});
      } else if (kind == "sft") {
        for (const CandidateRecord& c : cands) {
          const nlohmann::json prompt = messages_of(c.prompt);
          if (!c.correct || prompt.is_null() || c.policy.rfind("llm", 0) != 0) continue;
          const nlohmann::json r = export_reward(c, reward_cfg, rewards);
          rows.push_back({{"prompt", prompt},
                          {"completion", nlohmann::json::array({{{"role", "assistant"}, {"content", answer_text(c)}}})},
                          {"task_id", task_id},
                          {"speedup", speedup_of(c)},
                          {"reward", r["reward"]},
                          {"reward_parts", r["reward_parts"]},
                          {"profile", export_profile(c)},
                          {"candidate", c.id},
                          {"run", run_id}});
        }
      } else {
        std::map<std::pair<int, int>, std::vector<const CandidateRecord*>> groups;
        for (const CandidateRecord& c : cands)
          if (c.policy != "seed") groups[{c.iteration, c.group}].push_back(&c);
        for (const auto& [key, members] : groups) {
          bool complete = true;
          for (const CandidateRecord* c : members) complete &= c->advantage.has_value();
          if (!complete) continue;
          nlohmann::json completions = nlohmann::json::array(), rewards_of = nlohmann::json::array(),
                         advantages = nlohmann::json::array(), correct = nlohmann::json::array(),
                         speedups = nlohmann::json::array(), parts = nlohmann::json::array(),
                         profiles = nlohmann::json::array();
          nlohmann::json prompt = nullptr;
          std::vector<double> inputs;  // what each enters the group's normalisation with (reshaped rewards)
          for (const CandidateRecord* c : members) {
            if (prompt.is_null()) prompt = messages_of(c->prompt);
            const nlohmann::json r = export_reward(*c, reward_cfg, rewards);
            completions.push_back(answer_text(*c));
            rewards_of.push_back(r["reward"]);
            parts.push_back(r["reward_parts"]);
            profiles.push_back(export_profile(*c));
            advantages.push_back(*c->advantage);
            correct.push_back(c->correct);
            speedups.push_back(speedup_of(*c));
            inputs.push_back(group_input(c->correct, r["reward"].get<double>(), run_group_clip(run->config), reward_cfg));
          }
          // Shaped again: the advantages are normalised again from the new rewards, as optimize does.
          if (rewards.reshape) advantages = group_advantages(inputs);
          rows.push_back({{"task_id", task_id},
                          {"prompt", prompt},
                          {"completions", completions},
                          {"rewards", rewards_of},
                          {"reward_parts", parts},
                          {"advantages", advantages},
                          {"correct", correct},
                          {"speedups", speedups},
                          {"profiles", profiles},
                          {"iteration", key.first},
                          {"group", key.second},
                          {"run", run_id}});
        }
      }
    }
  }
  return rows;
}

std::vector<std::string> hgemm_task_ids(const std::string& hgemm_shapes, const std::string& layouts) {
  std::vector<std::string> ids;
  if (trim(hgemm_shapes).empty()) return ids;
  if (hgemm_shapes.find(':') != std::string::npos) {
    for (const std::string& spec : split(hgemm_shapes, ','))
      if (!trim(spec).empty()) ids.push_back("hgemm:" + std::string(trim(spec)));
  } else {
    for (const Shape& sh : resolve_shapes(hgemm_shapes))
      for (const std::string& layout : split(layouts, ',')) {
        const std::string l(trim(layout));
        if (l.empty()) continue;
        if (l != "nn" && l != "tn") KF_USAGE_ERROR("--hgemm-layouts: unknown layout '%s' (expected nn, tn or nn,tn)", l.c_str());
        ids.push_back(strf("hgemm:%lldx%lldx%lld", (long long)sh.m, (long long)sh.n, (long long)sh.k) +
                      (l == "nn" ? "" : ":" + l));
      }
  }
  for (const std::string& id : ids) parse_hgemm_task(id);  // a bad spec: a usage error naming it
  return ids;
}

std::vector<nlohmann::json> export_prompt_rows(const PromptExportOptions& o) {
  if (o.task_sets.empty() && trim(o.hgemm_shapes).empty()) return export_rows("prompts", o.dbs);
  // Everything is read and checked before a row is made.
  struct Wanted {
    std::string id, task;  // serve's id; optimize's task (hgemm:... or the absolute task file)
  };
  std::vector<Wanted> wanted;
  for (const std::string& id : hgemm_task_ids(o.hgemm_shapes, o.hgemm_layouts)) wanted.push_back({id, id});
  for (const std::string& set : o.task_sets) {
    std::vector<TorchTask> tasks;
    try {
      tasks = load_task_set(set);
    } catch (const nlohmann::json::exception& e) {
      KF_USAGE_ERROR("--tasks %s is not a valid listing: %s", set.c_str(), plain_message(e.what()).c_str());
    }
    if (tasks.empty()) KF_USAGE_ERROR("the task set %s holds no tasks", set.c_str());
    for (const TorchTask& t : tasks) wanted.push_back({t.id, fs::absolute(t.file).lexically_normal().string()});
  }
  std::map<std::string, size_t> seen;
  for (const Wanted& w : wanted)
    if (!seen.emplace(w.id, 0).second) KF_USAGE_ERROR("two tasks have the id '%s'; give each task set once", w.id.c_str());
  TorchEvalOptions torch;
  torch.device = o.device;
  torch.reward.mode = o.baseline;
  // Runs' latest prompts, by the task they searched (kept in the order export_rows gives them).
  std::map<std::string, nlohmann::json> by_task;
  std::vector<nlohmann::json> other_runs;
  for (nlohmann::json& r : o.dbs.empty() ? std::vector<nlohmann::json>{} : export_rows("prompts", o.dbs)) {
    const std::string db = r["extra_info"].value("db", "");
    const int64_t run_id = r["extra_info"].value("run", int64_t(0));
    std::string task;
    if (const auto run = ProgramDb(db).run(run_id)) task = run->task;
    if (!task.empty() && task.rfind("hgemm:", 0) != 0) task = fs::absolute(task).lexically_normal().string();
    bool matched = false;
    for (const Wanted& w : wanted)
      if (w.task == task) {
        by_task[w.task] = r;  // the last run of a task wins (the newest database given last)
        matched = true;
      }
    if (!matched) other_runs.push_back(std::move(r));
  }
  std::vector<nlohmann::json> rows;
  for (const Wanted& w : wanted) {
    const size_t index = rows.size();
    auto it = by_task.find(w.task);
    if (it != by_task.end()) {
      nlohmann::json r = it->second;
      r["task_id"] = w.id;
      r["reward_model"]["ground_truth"] = w.id;
      r["extra_info"]["task_id"] = w.id;
      r["extra_info"]["index"] = index;
      rows.push_back(std::move(r));
      continue;
    }
    nlohmann::json prompt = nlohmann::json::array();
    for (const ChatMessage& m : first_prompt(w.task, torch, o.prompts_dir))
      prompt.push_back({{"role", m.role}, {"content", m.content}});
    rows.push_back({{"prompt", prompt},
                    {"task_id", w.id},
                    {"data_source", "kforge"},
                    {"reward_model", {{"style", "rule"}, {"ground_truth", w.id}}},
                    {"extra_info", {{"task_id", w.id}, {"index", index}}}});
  }
  for (nlohmann::json& r : other_runs) {
    r["extra_info"]["index"] = rows.size();
    rows.push_back(std::move(r));
  }
  return rows;
}

void write_jsonl(const std::string& path, const std::vector<nlohmann::json>& rows) {
  std::string text;
  for (const nlohmann::json& r : rows) text += dump_json(r) + "\n";
  write_file_atomic(path, text);
}

}  // namespace kforge
