// The built-in HGEMM policy: no LLM. It proposes kernels from a configuration space of a
// register-tiled shared-memory kernel (tile BM x BN x BK, each thread TM x TN outputs), mutating
// the best configuration found so far. It plugs into the same loop, database and evaluator as
// the LLM policy, so `kforge optimize --policy builtin` works without any endpoint.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>

namespace kforge {

struct TiledConfig {
  int bm = 64, bn = 64, bk = 16, tm = 4, tn = 4;
  // Empty when the configuration is valid; otherwise why not (threads per block, shared memory).
  std::string invalid_reason() const;
  nlohmann::json to_json() const;
  static std::optional<TiledConfig> from_json(const nlohmann::json& j);
  bool operator==(const TiledConfig&) const = default;
};

// The .cu source of a configuration (implements include/kforge/abi/hgemm.h for any shape).
std::string tiled_hgemm_source(const TiledConfig& c);
// A valid neighbour of `parent` (one or two parameters moved one step), or a random valid
// configuration when there is no parent.
TiledConfig propose_config(const std::optional<TiledConfig>& parent, std::mt19937_64& rng);

}  // namespace kforge
