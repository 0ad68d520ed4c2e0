// An OpenAI-compatible chat client (/v1/chat/completions over HTTP(S), libcurl): several endpoints
// with weights, the API key from an environment variable (never logged), a concurrency limit,
// time-outs, retries with exponential backoff on 429 and 5xx, token and cost accounting with a
// spending cap, and record/replay cassettes (a JSONL file of request/response pairs).
#pragma once
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace kforge {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  double temperature = 1.0;
  int max_tokens = 8192;
  int n = 1;  // completions wanted (sent as "n"; endpoints that ignore it return one)
};

struct ChatResponse {
  std::vector<std::string> choices;  // message contents
  int prompt_tokens = 0, completion_tokens = 0;
  double latency_s = 0;
  double cost_usd = 0;
  std::string endpoint, model;
  bool replayed = false;  // came from a cassette
};

struct Endpoint {
  std::string url;            // base URL, e.g. "http://127.0.0.1:8000" or "https://api.openai.com"
                              // ("/v1/chat/completions" is appended unless the URL already ends with it)
  std::string model;
  double weight = 1.0;
  std::string api_key_env = "OPENAI_API_KEY";  // empty or unset variable: no Authorization header
  double usd_per_1k_prompt = 0, usd_per_1k_completion = 0;
};

enum class CassetteMode { kOff, kRecord, kReplay };

struct LlmOptions {
  std::vector<Endpoint> endpoints;
  int concurrency = 4;           // requests in flight at once (across threads)
  double timeout_s = 600;        // per HTTP request
  double connect_timeout_s = 10;
  int max_retries = 4;           // on 429, 5xx and transport errors; 4xx other than 429 are not retried
  double backoff_s = 1.0;        // first retry delay; doubles each time; Retry-After honoured when given
  double budget_usd = std::numeric_limits<double>::infinity();
  CassetteMode cassette_mode = CassetteMode::kOff;
  std::string cassette_path;
  // Replay the Nth call with the Nth recorded response instead of matching request keys. A search
  // loop needs this: its prompts quote measured speed-ups, which differ slightly between runs.
  bool replay_in_order = false;
  uint64_t seed = 1;             // endpoint choice by weight
};

// Why a call failed, for clear messages and for the loop to decide what to do.
class LlmError : public std::runtime_error {
 public:
  enum class Kind { kUnreachable, kAuth, kHttp, kBadResponse, kBudget, kReplayMiss, kTimeout };
  LlmError(Kind kind, const std::string& msg) : std::runtime_error(msg), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

class LlmClient {
 public:
  explicit LlmClient(LlmOptions opts);  // throws a usage error on bad options (no endpoint, bad URL, ...)
  ~LlmClient();
  LlmClient(const LlmClient&) = delete;
  LlmClient& operator=(const LlmClient&) = delete;

  // Thread-safe. Throws LlmError.
  ChatResponse chat(const ChatRequest& req);
  double spent_usd() const;
  // The cassette key of a request: a hash of the model-visible content (messages, temperature,
  // max_tokens, n, model), so replay is deterministic.
  static std::string request_key(const ChatRequest& req, const std::string& model);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kforge
