#include "data/reward_export.hpp"

#include "core/error.hpp"

namespace kforge {

ExportRewards parse_export_rewards(const std::string& deviation_penalty, const std::string& length_penalty) {
  RewardConfig check;
  set_reward_penalties(check, deviation_penalty, length_penalty);  // usage errors naming the flag
  ExportRewards r;
  r.reshape = !deviation_penalty.empty() || !length_penalty.empty();
  r.deviation_penalty = deviation_penalty;
  r.length_penalty = length_penalty;
  return r;
}

RewardConfig run_reward_config(const nlohmann::json& config) {
  RewardConfig cfg;
  if (!config.is_object()) return cfg;
  if (config.contains("torch") && config["torch"].is_object()) {
    const nlohmann::json& t = config["torch"];
    cfg.kind = t.value("reward", cfg.kind);
    cfg.clip = t.value("reward_clip_kind", cfg.clip);
    cfg.mode = t.value("baseline", std::string("eager"));
    penalties_from_json(t.value("reward_penalties", nlohmann::json::object()), cfg);
    return cfg;
  }
  cfg.kind = config.value("reward", cfg.kind);
  cfg.clip = config.value("reward_clip_kind", cfg.clip);
  const nlohmann::json modes = config.value("modes", nlohmann::json::array());
  if (modes.is_array() && !modes.empty() && modes[0].is_string()) cfg.mode = modes[0].get<std::string>();
  penalties_from_json(config.value("reward_penalties", nlohmann::json::object()), cfg);
  return cfg;
}

double run_group_clip(const nlohmann::json& config) {
  return config.is_object() ? config.value("reward_clip", 10.0) : 10.0;
}

nlohmann::json export_reward(const CandidateRecord& c, const RewardConfig& run_cfg, const ExportRewards& r) {
  const nlohmann::json details = c.verdict.is_object() ? c.verdict.value("details", nlohmann::json::object())
                                                       : nlohmann::json::object();
  if (!r.reshape)
    return {{"reward", c.reward},
            {"reward_parts", details.is_object() && details.contains("reward") ? details["reward"] : nlohmann::json()}};
  RewardConfig cfg = run_cfg;
  cfg.deviation_weight = 0, cfg.length_weight = 0, cfg.length_budget = 0;
  set_reward_penalties(cfg, r.deviation_penalty, r.length_penalty);
  if (!c.correct || !c.verdict.is_object()) {
    // Rejected (or never judged, or an answer without code): the floor, nothing else applies.
    Verdict rejected;
    rejected.reject(reason::kInternalError, "rejected");
    return {{"reward", rejected_reward(cfg)}, {"reward_parts", to_json(reward_parts(rejected, cfg, &c.source))}};
  }
  Verdict v = verdict_from_json(c.verdict);
  // A re-measured candidate is rewarded by the lower of its two measurements (search/loop.cpp).
  if (c.verdict.contains("remeasured") && c.verdict["remeasured"].is_object()) {
    const Verdict again = verdict_from_json(c.verdict["remeasured"]);
    auto median = [&](const Verdict& x) {
      auto it = x.speedup.find(cfg.mode);
      return it == x.speedup.end() ? 0.0 : it->second.median;
    };
    if (again.correct && median(again) < median(v)) v = again;
  }
  const RewardParts p = reward_parts(v, cfg, &c.source);
  return {{"reward", p.total}, {"reward_parts", to_json(p)}};
}

nlohmann::json export_profile(const CandidateRecord& c) {
  if (!c.verdict.is_object() || !c.verdict.contains("details") || !c.verdict["details"].is_object()) return nullptr;
  const nlohmann::json& d = c.verdict["details"];
  return d.contains("profile") ? d["profile"] : nlohmann::json();
}

}  // namespace kforge
