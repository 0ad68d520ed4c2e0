// The heart of kforge serve, without HTTP: items (task id, completion, request id) in, one result
// per item out, through the store (serve/store.hpp) and the evaluation service.
//
// For each item: the task id must be one the server was started with (404 otherwise); the
// completion becomes a candidate as optimize turns an answer into one (service/completion.hpp);
// the item is stored as pending before anything is answered; then
//   - a request id already stored and done is answered from the store ("from_store": true);
//   - a request id pending (being judged) waits for that verdict;
//   - a completion without code is a rejection (invalid_completion) at once;
//   - with reuse_verdicts, code already judged for the task is answered from that verdict, and code
//     being judged right now waits for it ("origin": "reused");
//   - anything else is judged by the service (attempts + 1) and stored when its verdict comes.
// An item with `profile` (or every item, with profile_all: kforge serve --profile) is profiled when
// correct; it reuses only a verdict stored with a profile and waits only for code being profiled.
// Admission is all or nothing per batch: more new candidates than the queue can hold is a 429.
#pragma once
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "serve/store.hpp"
#include "service/eval_service.hpp"

namespace kforge {

struct ScoreItem {
  std::string task_id, completion, request_id;  // an empty request id gets a random one
  bool profile = false;  // a correct candidate's result also carries its Nsight Compute profile
};

// A request refused as a whole: the HTTP status and why.
class ScoreError : public std::runtime_error {
 public:
  ScoreError(int status, const std::string& why, double retry_after_s = 0)
      : std::runtime_error(why), status_(status), retry_after_s_(retry_after_s) {}
  int status() const { return status_; }
  double retry_after_s() const { return retry_after_s_; }

 private:
  int status_;
  double retry_after_s_;
};

struct ScorerOptions {
  bool reuse_verdicts = false;
  size_t max_batch = 256;                   // items per request
  size_t max_completion_bytes = 256 * 1024;
  size_t max_pending = 256;                 // candidates accepted and not yet judged (the queue bound)
  bool profile_all = false;                 // every item as if it asked for a profile (the service profiles all)
};

class Scorer {
 public:
  Scorer(EvalService& service, ServeStore& store, ScorerOptions opts);
  ~Scorer();

  // Validates, stores and queues a batch; one future per item (in order), each ready with the
  // item's result. Throws ScoreError (404 unknown task, 413 too large, 400 malformed, 409 a request
  // id reused for another completion, 429 queue full) before anything is stored.
  std::vector<std::shared_future<nlohmann::json>> submit(const std::vector<ScoreItem>& items,
                                                        const std::string& job_id = "");
  // Judges every row left pending by an earlier server on this store. Returns how many.
  size_t recover();
  // The stored state of one request id: its result when done, {"request_id", "status":"pending"} when
  // not, null when unknown.
  nlohmann::json lookup(const std::string& request_id) const;

  struct Metrics {
    std::map<std::string, uint64_t> verdicts_by_reason;  // "accepted" or the first reason
    std::map<std::string, uint64_t> items_by_origin;     // judged, reused, invalid, stored
    std::vector<double> latency_buckets = {0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600};
    std::vector<uint64_t> latency_counts;                // cumulative per bucket, then +Inf
    double latency_sum_s = 0;
    uint64_t latency_n = 0;
    uint64_t rejected_429 = 0;
  };
  Metrics metrics() const;
  const ScorerOptions& options() const { return opts_; }

  // The result JSON of a verdict (the reply per item); exposed for tests.
  static nlohmann::json result_of(const Verdict& v, const std::string& request_id, const std::string& task_id,
                                  const std::string& code_sha, const std::string& how);

 private:
  struct InFlight;
  std::shared_future<nlohmann::json> start(const ServeRecord& r, const std::string& how);
  bool profiled(const ServeRecord& r) const { return r.profile || opts_.profile_all; }
  // by_code_'s key: the task, the code, and whether its verdict is profiled.
  std::string code_key(const ServeRecord& r) const {
    return r.task_id + "/" + r.code_sha + (profiled(r) ? "/profile" : "");
  }
  void on_verdict(const std::string& request_id, const Verdict& v);
  std::shared_future<nlohmann::json> ready(nlohmann::json j) const;
  void count(const nlohmann::json& result, const std::string& origin);

  EvalService& service_;
  ServeStore& store_;
  ScorerOptions opts_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<InFlight>> by_request_;  // pending request ids
  std::map<std::string, std::shared_ptr<InFlight>> by_code_;     // task id + code sha -> the one being judged
  Metrics metrics_;
};

// 16 bytes of OS entropy, hex.
std::string random_hex_id();

}  // namespace kforge
