// Rewards and profiles of exported training data (kforge data export, data/export.hpp).
//
// By default an exported candidate's reward is the one it was judged with (the run's reward kind
// and penalties). With --deviation-penalty and/or --length-penalty (eval/verdict.hpp), every
// candidate's reward is shaped again, as kforge serve shapes it: the run's reward kind, mode and
// clip, exactly the penalties given (a flag left out is that penalty off), on the candidate's
// stored verdict (the lower of a re-measured pair) and its source; a rejected candidate keeps the
// floor. A group's advantages are then normalised again from the new rewards, as optimize does
// (search/sampler.hpp group_input, group_advantages, the run's --reward-clip).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/verdict.hpp"
#include "search/program_db.hpp"

namespace kforge {

struct ExportRewards {
  bool reshape = false;           // a penalty flag was given: rewards are shaped again
  std::string deviation_penalty;  // the flags' texts (empty: that penalty off)
  std::string length_penalty;
};

// A usage error for a bad flag (as optimize and serve report it), else the options.
ExportRewards parse_export_rewards(const std::string& deviation_penalty, const std::string& length_penalty);

// The reward a run judged with, from its stored options (search/loop.hpp to_json): kind, mode and
// clip; its penalties as stored.
RewardConfig run_reward_config(const nlohmann::json& run_config);
// The run's --reward-clip (group normalisation).
double run_group_clip(const nlohmann::json& run_config);

// A candidate's reward and its parts for export: the stored ones (parts from verdict
// details.reward, null when absent), or, when `r.reshape`, shaped again under `cfg` with r's
// penalties. Returns {"reward": number, "reward_parts": object or null}.
nlohmann::json export_reward(const CandidateRecord& c, const RewardConfig& cfg, const ExportRewards& r);

// The candidate's stored profile (verdict details.profile), or null.
nlohmann::json export_profile(const CandidateRecord& c);

}  // namespace kforge
