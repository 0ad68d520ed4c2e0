// kforge serve's HTTP front (cpp-httplib): the endpoints, authentication, limits and metrics, on
// top of the Scorer (serve/scorer.hpp). Endpoints (every body JSON; every error {"error": why}):
//   POST /v1/score      {"items": [{"task_id", "completion", "request_id", "profile"}], "profile"} ->
//                       {"results": [...]} ("profile": true, per item or for the whole body: a correct
//                       candidate's result also carries its Nsight Compute profile)
//   POST /v1/jobs       the same body -> 202 {"job_id", "items", "poll"}; GET /v1/jobs/ID -> {"state", "results"}
//   POST /get_reward    OpenRLHF's remote reward model: {"query", "prompts", "labels"} ->
//                       {"rewards", "scores", "extra_logs"}; labels are task ids
//   GET  /v1/tasks      the task ids the server was started with
//   GET  /v1/health     {"status": "ok", ...} (no token needed)
//   GET  /metrics       Prometheus text
// Every endpoint but /v1/health needs "Authorization: Bearer TOKEN" (compared in constant time);
// /get_reward also takes ?token=TOKEN, since OpenRLHF's client sends no headers of its own.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "serve/scorer.hpp"

namespace httplib {
class Server;
}

namespace kforge {

struct ServeHttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                       // 0: any free port (bind() says which)
  std::string token;                     // empty: no authentication (kforge serve --no-auth)
  size_t max_body_bytes = 32u << 20;
  int threads = 64;                      // HTTP worker threads (a /v1/score call holds one while it waits)
  double request_timeout_s = 3600;       // a /v1/score or /get_reward call waits this long, then 504
};

class ServeHttp {
 public:
  ServeHttp(ServeHttpOptions opts, Scorer& scorer, EvalService& service, ServeStore& store);
  ~ServeHttp();
  int bind();    // binds host:port; returns the port; a usage error when it cannot
  void run();    // serves until stop()
  void stop();  // waiting calls answer 503 (their items stay stored, pending or done)

 private:
  void routes();
  std::string metrics_text() const;

  ServeHttpOptions opts_;
  Scorer& scorer_;
  EvalService& service_;
  ServeStore& store_;
  std::unique_ptr<httplib::Server> server_;
  std::atomic<bool> stopping_{false};
  int listen_fd_ = -1;
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (route, status) -> count
};

// Constant-time comparison (of equal-length prefixes; the lengths compared too).
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace kforge
