// Verdicts, their JSON form, and the reward made of them (see verdict.hpp).
#include "eval/verdict.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cctype>
#include <limits>
#include <optional>
#include <tuple>

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
  if (spec == "log" || spec == "speedup" || spec == "clipped" || spec == "correctness") {
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
  KF_USAGE_ERROR("unknown reward '%s' (expected 'log', 'speedup', 'clipped', 'clipped:X' or 'correctness')",
                 spec_in.c_str());
}

namespace {
void check_reward_config(const RewardConfig& cfg) {
  if (cfg.kind != "log" && cfg.kind != "speedup" && cfg.kind != "clipped" && cfg.kind != "correctness")
    KF_USAGE_ERROR("unknown reward kind '%s' (expected 'log', 'speedup', 'clipped' or 'correctness')", cfg.kind.c_str());
  if (cfg.kind == "clipped" && !(std::isfinite(cfg.clip) && cfg.clip > 0))
    KF_USAGE_ERROR("reward 'clipped': the clip must be a positive number, got %g", cfg.clip);
}
}  // namespace

double rejected_reward(const RewardConfig& cfg) {
  check_reward_config(cfg);
  if (cfg.kind == "correctness") return 0.0;
  return cfg.kind == "log" ? kRejectedLogReward : kRejectedSpeedupReward;
}

double correct_reward_floor(const RewardConfig& cfg) { return rejected_reward(cfg) + 1.0; }

namespace {

// The speed-up term of a correct verdict, or nullopt when the verdict earns the rejection floor.
std::optional<double> speedup_term(const Verdict& v, const RewardConfig& cfg) {
  // A verdict with a reason is a rejection even if someone left `correct` set.
  if (!v.correct || !v.reasons.empty()) return std::nullopt;
  if (cfg.kind == "correctness") return 1.0;  // timed or not: correctness alone
  const auto it = v.speedup.find(cfg.mode);
  if (it == v.speedup.end()) return std::nullopt;
  const double s = it->second.median;
  if (!std::isfinite(s) || s <= 0) return std::nullopt;
  if (cfg.kind == "log") return std::log(std::max(s, kLogRewardMinSpeedup));
  if (cfg.kind == "speedup") return s;
  return std::min(s, cfg.clip);
}

void check_penalties(const RewardConfig& cfg) {
  if (!(cfg.deviation_weight >= 0) || !std::isfinite(cfg.deviation_weight))
    KF_USAGE_ERROR("the deviation penalty's weight must be a finite number >= 0, got %g", cfg.deviation_weight);
  if (!(cfg.length_weight >= 0) || !std::isfinite(cfg.length_weight))
    KF_USAGE_ERROR("the length penalty's weight must be a finite number >= 0, got %g", cfg.length_weight);
  if (cfg.length_weight > 0 && cfg.length_budget < 1)
    KF_USAGE_ERROR("the length penalty needs a token budget of at least 1, got %lld", cfg.length_budget);
}

// The candidate's worst error over its bound, from the judge's checks; -1 when absent.
double deviation_of(const Verdict& v) {
  const nlohmann::json& d = v.details;
  if (!d.is_object() || !d.contains("checks") || !d["checks"].is_object()) return -1;
  const nlohmann::json& c = d["checks"];
  if (!c.contains("worst_error_over_bound") || !c["worst_error_over_bound"].is_number()) return -1;
  const double x = c["worst_error_over_bound"].get<double>();
  return std::isfinite(x) && x >= 0 ? x : -1;
}

// A finite number >= 0, the whole text (surrounding spaces allowed).
std::optional<double> weight_from(std::string_view text) {
  const std::string t(trim(text));
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double w = std::strtod(t.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(w) || !(w >= 0)) return std::nullopt;
  return w;
}

}  // namespace

double parse_deviation_penalty(const std::string& spec, const char* flag) {
  const auto w = weight_from(spec);
  if (!w)
    KF_USAGE_ERROR("%s '%s': the weight must be a finite number >= 0 (0 is off), e.g. %s 0.1", flag, spec.c_str(),
                   flag);
  return *w;
}

std::pair<double, long long> parse_length_penalty(const std::string& spec, const char* flag) {
  const size_t colon = spec.find(':');
  std::optional<double> w;
  std::optional<long long> budget;
  if (colon != std::string::npos) {
    w = weight_from(std::string_view(spec).substr(0, colon));
    const std::string b(trim(std::string_view(spec).substr(colon + 1)));
    char* end = nullptr;
    errno = 0;
    const long long n = b.empty() || !std::isdigit((unsigned char)b[0]) ? 0 : std::strtoll(b.c_str(), &end, 10);
    if (!b.empty() && errno == 0 && end && *end == '\0' && n >= 1) budget = n;
  }
  if (!w || !budget)
    KF_USAGE_ERROR("%s '%s': expected W:TOKENS, a weight W >= 0 and a token budget TOKENS >= 1 (a whole number), "
                   "e.g. %s 0.5:2000",
                   flag, spec.c_str(), flag);
  return {*w, *budget};
}

void set_reward_penalties(RewardConfig& cfg, const std::string& deviation_spec, const std::string& length_spec) {
  if (!deviation_spec.empty()) cfg.deviation_weight = parse_deviation_penalty(deviation_spec);
  if (!length_spec.empty()) std::tie(cfg.length_weight, cfg.length_budget) = parse_length_penalty(length_spec);
}

nlohmann::json penalties_to_json(const RewardConfig& cfg) {
  return {{"deviation_weight", cfg.deviation_weight},
          {"length_weight", cfg.length_weight},
          {"length_budget", cfg.length_budget}};
}

void penalties_from_json(const nlohmann::json& j, RewardConfig& cfg) {
  if (!j.is_object()) return;
  cfg.deviation_weight = j.value("deviation_weight", 0.0);
  cfg.length_weight = j.value("length_weight", 0.0);
  cfg.length_budget = j.value("length_budget", 0LL);
  check_penalties(cfg);
}

long long count_code_tokens(std::string_view code) {
  long long n = 0;
  bool in_word = false;
  for (const char ch : code) {
    const unsigned char c = (unsigned char)ch;
    const bool word = c >= 0x80 || c == '_' || std::isalnum(c);
    if (word) {
      if (!in_word) ++n;
      in_word = true;
      continue;
    }
    in_word = false;
    if (!std::isspace(c)) ++n;
  }
  return n;
}

nlohmann::json to_json(const RewardParts& p) {
  return {{"correct", p.correct},
          {"speedup_term", p.speedup_term},
          {"deviation", p.deviation >= 0 ? nlohmann::json(p.deviation) : nlohmann::json()},
          {"deviation_penalty", p.deviation_penalty},
          {"tokens", p.tokens >= 0 ? nlohmann::json(p.tokens) : nlohmann::json()},
          {"length_penalty", p.length_penalty},
          {"clamped", p.clamped},
          {"total", p.total}};
}

RewardParts reward_parts(const Verdict& v, const RewardConfig& cfg, const std::string* source) {
  // The configuration is checked first, so a bad one is reported even for incorrect verdicts.
  check_reward_config(cfg);
  check_penalties(cfg);
  RewardParts p;
  if (source) p.tokens = count_code_tokens(*source);
  p.deviation = deviation_of(v);
  const std::optional<double> term = speedup_term(v, cfg);
  if (!term) {
    p.speedup_term = p.total = rejected_reward(cfg);
    return p;
  }
  p.correct = true;
  p.speedup_term = *term;
  if (cfg.deviation_weight > 0 && p.deviation >= 0) p.deviation_penalty = cfg.deviation_weight * p.deviation;
  if (cfg.length_weight > 0) {
    KF_CHECK(source, "the length penalty needs the candidate's source (compute_reward without it)");
    const long long over = std::max(0LL, p.tokens - cfg.length_budget);
    p.length_penalty = cfg.length_weight * double(over) / double(cfg.length_budget);
  }
  const double shaped = p.speedup_term - p.deviation_penalty - p.length_penalty;
  // The speed-up term alone is never below the floor (ln 0.001 > -7; s > 0): only penalties clamp.
  const double floor = std::min(correct_reward_floor(cfg), p.speedup_term);
  p.clamped = shaped < floor;
  p.total = p.clamped ? floor : shaped;
  return p;
}

double compute_reward(const Verdict& v, const RewardConfig& cfg, const std::string& source) {
  return reward_parts(v, cfg, &source).total;
}

double compute_reward(const Verdict& v, const RewardConfig& cfg) { return reward_parts(v, cfg, nullptr).total; }

void apply_reward(Verdict& v, const RewardConfig& cfg, const std::string* source) {
  const RewardParts p = reward_parts(v, cfg, source);
  v.reward = p.total;
  if (!v.details.is_object()) v.details = nlohmann::json::object();
  v.details["reward"] = to_json(p);
}

}  // namespace kforge
