// Verdicts, their JSON form, and the reward made of them (see verdict.hpp).
#include "eval/verdict.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/text.hpp"

namespace kforge {

// ---------------------------------------------------------------------------------------------
// Verdict

void Verdict::reject(const std::string& code, const std::string& why) {
  // A rejected candidate is never correct, whatever an earlier check said: the reward depends on
  // `correct`, so a verdict with a reason must not be able to keep it.
  correct = false;
  if (!has_reason(code)) reasons.push_back(code);
  if (message.empty()) message = why;
}

bool Verdict::has_reason(const std::string& code) const {
  return std::find(reasons.begin(), reasons.end(), code) != reasons.end();
}

// ---------------------------------------------------------------------------------------------
// JSON

namespace {

// Non-finite doubles are written by nlohmann::json as null; they read back as NaN.
double number_from(const nlohmann::json& j, const char* what) {
  if (j.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!j.is_number()) KF_USAGE_ERROR("verdict JSON: '%s' must be a number, got %s", what, j.dump().c_str());
  return j.get<double>();
}

nlohmann::json summary_to_json(const Summary& s) {
  return {{"n", s.n},     {"median", s.median}, {"mean", s.mean}, {"min", s.min},
          {"max", s.max}, {"p10", s.p10},       {"p90", s.p90}};
}

Summary summary_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) KF_USAGE_ERROR("verdict JSON: '%s' must be an object", where.c_str());
  Summary s;
  if (j.contains("n")) {
    if (!j["n"].is_number_integer())
      KF_USAGE_ERROR("verdict JSON: '%s.n' must be an integer", where.c_str());
    s.n = j["n"].get<int>();
  }
  const std::pair<const char*, double*> fields[] = {{"median", &s.median}, {"mean", &s.mean}, {"min", &s.min},
                                                    {"max", &s.max},       {"p10", &s.p10},   {"p90", &s.p90}};
  for (const auto& [name, dst] : fields) {
    if (j.contains(name)) *dst = number_from(j[name], (where + "." + name).c_str());
  }
  return s;
}

nlohmann::json summaries_to_json(const std::map<std::string, Summary>& m) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [mode, s] : m) out[mode] = summary_to_json(s);
  return out;
}

std::map<std::string, Summary> summaries_from_json(const nlohmann::json& j, const char* what) {
  if (!j.is_object()) KF_USAGE_ERROR("verdict JSON: '%s' must be an object of summaries", what);
  std::map<std::string, Summary> out;
  for (const auto& [mode, s] : j.items()) out[mode] = summary_from_json(s, std::string(what) + "." + mode);
  return out;
}

std::vector<std::string> strings_from_json(const nlohmann::json& j, const char* what) {
  if (!j.is_array()) KF_USAGE_ERROR("verdict JSON: '%s' must be an array of strings", what);
  std::vector<std::string> out;
  for (const nlohmann::json& e : j) {
    if (!e.is_string()) KF_USAGE_ERROR("verdict JSON: '%s' must be an array of strings", what);
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::string string_from_json(const nlohmann::json& j, const char* what) {
  if (!j.is_string()) KF_USAGE_ERROR("verdict JSON: '%s' must be a string", what);
  return j.get<std::string>();
}

}  // namespace

// Candidate-controlled text (its file name, messages quoting its source or output, compiler logs in
// the details) is made valid UTF-8 here, so that no writer of a verdict can fail on it.
nlohmann::json to_json(const Verdict& v) {
  return {
      {"candidate", valid_utf8(v.candidate)},
      {"correct", v.correct},
      {"reasons", valid_utf8_json(v.reasons)},
      {"flags", valid_utf8_json(v.flags)},
      {"message", valid_utf8(v.message)},
      {"speedup", summaries_to_json(v.speedup)},
      {"candidate_us", summaries_to_json(v.candidate_us)},
      {"baseline_us", summaries_to_json(v.baseline_us)},
      {"reward", v.reward},
      {"details", valid_utf8_json(v.details)},
  };
}

// Missing fields keep their defaults; present fields of the wrong type are a usage error.
Verdict verdict_from_json(const nlohmann::json& j) {
  if (!j.is_object()) KF_USAGE_ERROR("verdict JSON must be an object, got %s", j.type_name());
  Verdict v;
  if (j.contains("candidate")) v.candidate = string_from_json(j["candidate"], "candidate");
  if (j.contains("correct")) {
    if (!j["correct"].is_boolean()) KF_USAGE_ERROR("verdict JSON: 'correct' must be true or false");
    v.correct = j["correct"].get<bool>();
  }
  if (j.contains("reasons")) v.reasons = strings_from_json(j["reasons"], "reasons");
  if (j.contains("flags")) v.flags = strings_from_json(j["flags"], "flags");
  if (j.contains("message")) v.message = string_from_json(j["message"], "message");
  if (j.contains("speedup")) v.speedup = summaries_from_json(j["speedup"], "speedup");
  if (j.contains("candidate_us")) v.candidate_us = summaries_from_json(j["candidate_us"], "candidate_us");
  if (j.contains("baseline_us")) v.baseline_us = summaries_from_json(j["baseline_us"], "baseline_us");
  if (j.contains("reward")) v.reward = number_from(j["reward"], "reward");
  if (j.contains("details")) v.details = j["details"];
  return v;
}

// ---------------------------------------------------------------------------------------------
// Reward

RewardConfig parse_reward(const std::string& spec_in) {
  const std::string spec(trim(spec_in));
  RewardConfig cfg;
  if (spec == "log" || spec == "speedup" || spec == "clipped") {
    cfg.kind = spec;
    return cfg;
  }
  const std::string prefix = "clipped:";
  if (spec.compare(0, prefix.size(), prefix) == 0) {
    const std::string num = spec.substr(prefix.size());
    char* end = nullptr;
    errno = 0;
    const double clip = num.empty() ? 0.0 : std::strtod(num.c_str(), &end);
    if (num.empty() || errno != 0 || *end != '\0' || !std::isfinite(clip) || clip <= 0)
      KF_USAGE_ERROR("reward '%s': the clip must be a positive number, e.g. 'clipped:5'", spec_in.c_str());
    cfg.kind = "clipped";
    cfg.clip = clip;
    return cfg;
  }
  KF_USAGE_ERROR("unknown reward '%s' (expected 'log', 'speedup', 'clipped' or 'clipped:X')", spec_in.c_str());
}

namespace {
void check_reward_config(const RewardConfig& cfg) {
  if (cfg.kind != "log" && cfg.kind != "speedup" && cfg.kind != "clipped")
    KF_USAGE_ERROR("unknown reward kind '%s' (expected 'log', 'speedup' or 'clipped')", cfg.kind.c_str());
  if (cfg.kind == "clipped" && !(std::isfinite(cfg.clip) && cfg.clip > 0))
    KF_USAGE_ERROR("reward 'clipped': the clip must be a positive number, got %g", cfg.clip);
}
}  // namespace

double rejected_reward(const RewardConfig& cfg) {
  check_reward_config(cfg);
  return cfg.kind == "log" ? kRejectedLogReward : kRejectedSpeedupReward;
}

double compute_reward(const Verdict& v, const RewardConfig& cfg) {
  // The configuration is checked first, so a bad one is reported even for incorrect verdicts.
  check_reward_config(cfg);

  // A verdict with a reason is a rejection even if someone left `correct` set.
  if (!v.correct || !v.reasons.empty()) return rejected_reward(cfg);
  const auto it = v.speedup.find(cfg.mode);
  if (it == v.speedup.end()) return rejected_reward(cfg);
  const double s = it->second.median;
  if (!std::isfinite(s) || s <= 0) return rejected_reward(cfg);

  if (cfg.kind == "log") return std::log(std::max(s, kLogRewardMinSpeedup));
  if (cfg.kind == "speedup") return s;
  return std::min(s, cfg.clip);
}

}  // namespace kforge
