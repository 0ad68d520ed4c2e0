// Test support: a real HTTP server on 127.0.0.1 that plays an OpenAI-compatible chat endpoint from
// a script. Each POST /v1/chat/completions takes the next scripted step (status, body, delay,
// optional Retry-After); when the script is empty it answers the default step. Every request is
// recorded (body and Authorization header), and the number of requests being handled at once is
// tracked, so tests can assert on what the client sent, how often, and how many at a time.
#pragma once
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kforge::test {

struct ScriptStep {
  int status = 200;
  std::string body;
  int delay_ms = 0;                         // wait this long before answering
  std::optional<std::string> retry_after;   // sent as a Retry-After header when set
};

struct ReceivedRequest {
  nlohmann::json body;            // null when the body was not JSON
  std::string raw_body;
  std::optional<std::string> authorization;  // the Authorization header, when sent
};

class ScriptedLlmServer {
 public:
  // By default an unscripted request gets a 500, so a test notices requests it did not expect.
  ScriptedLlmServer() : ScriptedLlmServer(ScriptStep{500, R"({"error":"script exhausted"})", 0, {}}) {}

  explicit ScriptedLlmServer(ScriptStep default_step) : default_(std::move(default_step)) {
    server_.set_keep_alive_timeout(1);
    server_.Post("/v1/chat/completions",
                 [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw std::runtime_error("ScriptedLlmServer: cannot bind a port on 127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() is a no-op until the accept loop runs, so wait for it (bounded).
    for (int i = 0; i < 5000 && !server_.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!server_.is_running()) {
      server_.stop();
      thread_.join();  // after 5 s not running: listen_after_bind has failed and returned
      throw std::runtime_error("ScriptedLlmServer: the server did not start");
    }
  }

  ~ScriptedLlmServer() { stop(); }
  ScriptedLlmServer(const ScriptedLlmServer&) = delete;
  ScriptedLlmServer& operator=(const ScriptedLlmServer&) = delete;

  // Stops accepting, wakes handlers that are sleeping through a delay, joins the thread.
  void stop() {
    {
      std::lock_guard lock(mu_);
      if (stopping_ && !thread_.joinable()) return;
      stopping_ = true;
    }
    wake_.notify_all();
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

  void push(ScriptStep step) {
    std::lock_guard lock(mu_);
    script_.push_back(std::move(step));
  }
  void set_default(ScriptStep step) {
    std::lock_guard lock(mu_);
    default_ = std::move(step);
  }

  std::vector<ReceivedRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  size_t request_count() const {
    std::lock_guard lock(mu_);
    return requests_.size();
  }
  // The most requests that were being handled at the same moment.
  int max_in_flight() const { return max_in_flight_.load(); }

  // An OpenAI-style completion body: one choice per text (index, message, finish_reason) and
  // usage numbers; usage is left out when both counts are negative.
  static std::string completion_body(const std::vector<std::string>& texts, int prompt_tokens = 10,
                                     int completion_tokens = 20, const std::string& model = "scripted") {
    nlohmann::json choices = nlohmann::json::array();
    for (size_t i = 0; i < texts.size(); ++i)
      choices.push_back({{"index", i},
                         {"message", {{"role", "assistant"}, {"content", texts[i]}}},
                         {"finish_reason", "stop"}});
    nlohmann::json body = {{"id", "chatcmpl-scripted"},
                           {"object", "chat.completion"},
                           {"model", model},
                           {"choices", choices}};
    if (prompt_tokens >= 0 || completion_tokens >= 0)
      body["usage"] = {{"prompt_tokens", std::max(0, prompt_tokens)},
                       {"completion_tokens", std::max(0, completion_tokens)},
                       {"total_tokens", std::max(0, prompt_tokens) + std::max(0, completion_tokens)}};
    return body.dump();
  }
  // A 200 step answering with completion_body(texts, ...).
  static ScriptStep ok(const std::vector<std::string>& texts, int prompt_tokens = 10,
                       int completion_tokens = 20, int delay_ms = 0) {
    return ScriptStep{200, completion_body(texts, prompt_tokens, completion_tokens), delay_ms, {}};
  }

 private:
  void handle(const httplib::Request& req, httplib::Response& res) {
    const int now = ++in_flight_;
    for (int seen = max_in_flight_.load(); now > seen && !max_in_flight_.compare_exchange_weak(seen, now);) {
    }
    ScriptStep step;
    {
      std::unique_lock lock(mu_);
      ReceivedRequest r;
      r.raw_body = req.body;
      r.body = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (r.body.is_discarded()) r.body = nullptr;
      if (req.has_header("Authorization")) r.authorization = req.get_header_value("Authorization");
      requests_.push_back(std::move(r));
      if (!script_.empty()) {
        step = std::move(script_.front());
        script_.pop_front();
      } else {
        step = default_;
      }
      if (step.delay_ms > 0)
        wake_.wait_for(lock, std::chrono::milliseconds(step.delay_ms), [&] { return stopping_; });
    }
    res.status = step.status;
    if (step.retry_after) res.set_header("Retry-After", *step.retry_after);
    res.set_content(step.body, "application/json");
    --in_flight_;
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::deque<ScriptStep> script_;
  ScriptStep default_;
  std::vector<ReceivedRequest> requests_;

  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
};

}  // namespace kforge::test
