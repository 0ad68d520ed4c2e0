// An OpenAI-compatible chat client (/v1/chat/completions over HTTP(S), libcurl): several endpoints
// with weights, the API key from an environment variable (never logged), a concurrency limit,
// time-outs, retries with exponential backoff on 429 and 5xx, token and cost accounting with a
// spending cap, and record/replay cassettes (a JSONL file of request/response pairs).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
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
  std::string url;            // base URL, e.g. "http://127.0.0.1:8000", "http://127.0.0.1:8000/v1" or
                              // "https://api.openai.com/v1": "/v1/chat/completions" is appended to a URL
                              // without /v1, "/chat/completions" to one ending in /v1, and a URL that
                              // already ends with /chat/completions is kept
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
  // Without a Retry-After header, retry i (0-based) waits a random time in [0.5, 1] x backoff_s x 2^i
  // (exponential backoff with jitter); a Retry-After header (seconds or an HTTP date) is honoured
  // instead. Every wait is capped at kMaxRetryWaitS.
  double backoff_s = 1.0;
  double budget_usd = std::numeric_limits<double>::infinity();
  double spent_usd = 0;          // already spent before this client (a resumed run's stored total)
  CassetteMode cassette_mode = CassetteMode::kOff;
  std::string cassette_path;
  // Replay the Nth call with the Nth recorded response instead of matching request keys. A search
  // loop needs this: its prompts quote measured speed-ups, which differ slightly between runs.
  bool replay_in_order = false;
  uint64_t seed = 1;             // endpoint choice by weight and the backoff's jitter
  // Called (from the calling thread) before each retry's wait, with one line such as
  // "LLM endpoint URL answered HTTP 500: retry 1 of 4 in 1.3 s". Null: silent.
  std::function<void(const std::string&)> on_retry;
  // When set and true (a Ctrl-C), a failed attempt is not retried and a wait before a retry ends
  // early: the call in flight finishes, nothing more is sent for it. Null: never.
  const std::atomic<bool>* stop = nullptr;
};

inline constexpr double kMaxRetryWaitS = 60;  // cap on any wait between retries, Retry-After included

// The URL a chat request goes to for a base URL (see Endpoint::url).
std::string chat_completions_url(const std::string& base_url);

// Throws a usage error unless `path` is a cassette that replay can use: a readable regular file
// holding at least one recorded exchange, every line a valid entry.
void check_replay_cassette(const std::string& path);

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
  // Throws a usage error on bad options (no endpoint, bad URL, ...). A replaying client needs no
  // endpoint: the cassette answers every call.
  explicit LlmClient(LlmOptions opts);
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
