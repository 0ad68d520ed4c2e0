// The eval worker: a separate process (one per GPU) that loads candidates, verifies them, times
// them against the baseline and answers with verdicts. It speaks line-delimited JSON: one request
// per line on stdin, one verdict per line on a private copy of the original stdout; the
// candidate's own stdout and stderr go to a capture file, so nothing a candidate prints can
// corrupt the protocol. After a sticky CUDA error the verdict says "fatal": true and the worker
// exits; the evaluator starts a fresh one.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ops/hgemm.hpp"

namespace kforge {

struct HgemmEvalRequest {
  int64_t id = 0;
  std::string so_path;                 // the compiled candidate
  std::string name;                    // for messages
  HgemmProblem problem;
  std::vector<std::string> modes = {"offline"};  // timing modes: offline, graph
  int samples = 7;                     // paired rounds per mode
  uint64_t seed = 1;
  bool skip_timing = false;            // verification only
};

nlohmann::json to_json(const HgemmEvalRequest& r);
HgemmEvalRequest hgemm_request_from_json(const nlohmann::json& j);

// The worker's main loop; returns the process exit status.
int run_eval_worker();

}  // namespace kforge
