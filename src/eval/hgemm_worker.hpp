// The judge (kforge eval-worker): a separate process (one per GPU) that never loads candidate
// code. For each request it starts a sandboxed candidate executor (eval/executor.hpp), shares an
// arena of buffers with it and with a candidate-free baseline executor, verifies and times the
// candidate from outside, and answers with the verdict it formed itself. It speaks line-delimited
// JSON: one request per line on stdin, one verdict per line on a private copy of the original
// stdout. A candidate that crashes or hangs takes only its executor with it; after a fault of the
// judge's own CUDA context the verdict says "fatal": true and the judge exits; the evaluator
// starts a fresh one.
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
  double run_timeout_s = 60;           // any one request to the candidate's executor
};

nlohmann::json to_json(const HgemmEvalRequest& r);
HgemmEvalRequest hgemm_request_from_json(const nlohmann::json& j);

// The judge's main loop; returns the process exit status.
int run_eval_worker();
// The baseline executor's main loop (kforge eval-baseline; eval/baseline_executor.cpp).
int run_baseline_executor();

}  // namespace kforge
