// The OpenAI-compatible chat client: see client.hpp.
//
// One call of chat() goes:
//   budget check -> cassette replay (kReplay: answer from the file, never the network)
//   -> endpoint by weight -> [acquire a concurrency slot -> one HTTP POST -> release] with retries
//   -> parse -> account tokens and cost -> cassette record (kRecord).
//
// Notes on behaviour that callers may rely on:
//  * One endpoint serves a whole call, retries included; errors name that endpoint's URL.
//  * The concurrency slot is held only while an HTTP exchange is in flight, not while backing off.
//  * The budget is checked before a call starts; calls already in flight when the cap is crossed
//    still finish, so the spending can overshoot the cap by at most the calls in flight.
//  * Replayed calls are accounted (cost, budget) exactly as when they were recorded, so a replayed
//    run makes the same budget decisions as the recorded one.
//  * The API key is read from the environment once, at construction. It is sent only in the
//    Authorization header and is scrubbed from every error text (server bodies may echo it).
#include "llm/client.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/hash.hpp"
#include "core/json.hpp"
#include "core/text.hpp"

namespace kforge {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kChatPath = "/v1/chat/completions";
constexpr size_t kExcerptChars = 200;  // how much of a body an error message quotes

// libcurl's process-wide initialisation must happen once, before any handle exists.
void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      KF_RUNTIME_ERROR("libcurl could not be initialised (curl_global_init failed)");
  });
}

// A counting semaphore (std::counting_semaphore needs its maximum at compile time; ours is an
// option), with an RAII guard for one slot.
class Semaphore {
 public:
  explicit Semaphore(int count) : count_(count) {}
  void acquire() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return count_ > 0; });
    --count_;
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      ++count_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_;
};

class SlotGuard {
 public:
  explicit SlotGuard(Semaphore& s) : s_(s) { s_.acquire(); }
  ~SlotGuard() { s_.release(); }
  SlotGuard(const SlotGuard&) = delete;
  SlotGuard& operator=(const SlotGuard&) = delete;

 private:
  Semaphore& s_;
};

// Replaces every occurrence of `secret` in `text` (no-op for an empty secret).
std::string redact(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (size_t pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos))
    text.replace(pos, secret.size(), "[redacted]");
  return text;
}

// The start of a body for an error message: one line, printable, bounded, with its total size.
std::string excerpt(const std::string& body) {
  if (body.empty()) return "(empty body)";
  std::string out;
  for (size_t i = 0; i < body.size() && i < kExcerptChars; ++i) {
    const unsigned char c = static_cast<unsigned char>(body[i]);
    out += (c < 0x20 || c == 0x7f) ? ' ' : static_cast<char>(c);
  }
  if (body.size() > kExcerptChars) out += strf("... (%zu bytes)", body.size());
  return "'" + out + "'";
}


// The canonical request: every model-visible field, objects with sorted keys (nlohmann::json
// keeps them sorted), compact. Used both as the cassette's "request" and for its key.
json canonical_request(const ChatRequest& req, const std::string& model) {
  json messages = json::array();
  for (const auto& m : req.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  return {{"model", model},
          {"messages", messages},
          {"temperature", req.temperature},
          {"max_tokens", req.max_tokens},
          {"n", req.n}};
}

json response_to_json(const ChatResponse& r) {
  return {{"choices", r.choices},         {"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens}, {"latency_s", r.latency_s},
          {"cost_usd", r.cost_usd},       {"endpoint", r.endpoint},
          {"model", r.model}};
}

ChatResponse response_from_json(const json& j) {
  ChatResponse r;
  r.choices = j.at("choices").get<std::vector<std::string>>();
  r.prompt_tokens = j.value("prompt_tokens", 0);
  r.completion_tokens = j.value("completion_tokens", 0);
  r.latency_s = j.value("latency_s", 0.0);
  r.cost_usd = j.value("cost_usd", 0.0);
  r.endpoint = j.value("endpoint", std::string());
  r.model = j.value("model", std::string());
  return r;
}

// A token count from "usage": 0 when absent, null or not a number.
int usage_count(const json& body, const char* field) {
  auto u = body.find("usage");
  if (u == body.end() || !u->is_object()) return 0;
  auto f = u->find(field);
  return (f != u->end() && f->is_number()) ? f->get<int>() : 0;
}

// What one HTTP exchange produced.
struct HttpResult {
  CURLcode curl_code = CURLE_OK;
  std::string curl_error;  // libcurl's message when curl_code != CURLE_OK
  long status = 0;
  std::string body;
  std::string retry_after;    // the Retry-After header's value, when the server sent one
  double retry_after_s = -1;  // its wait in seconds (429 and 5xx only); -1 when none or unreadable
  double elapsed_s = 0;
};

size_t on_body(char* data, size_t size, size_t nmemb, void* user) {
  static_cast<std::string*>(user)->append(data, size * nmemb);
  return size * nmemb;
}

// Keeps the value of a Retry-After header. libcurl's CURLINFO_RETRY_AFTER cannot tell an absent
// header from "Retry-After: 0" (both read 0), so the header is read here.
size_t on_header(char* data, size_t size, size_t nmemb, void* user) {
  const std::string_view line(data, size * nmemb);
  constexpr std::string_view kName = "retry-after:";
  if (line.size() > kName.size()) {
    bool match = true;
    for (size_t i = 0; i < kName.size() && match; ++i)
      match = char(std::tolower(static_cast<unsigned char>(line[i]))) == kName[i];
    if (match) *static_cast<std::string*>(user) = std::string(trim(line.substr(kName.size())));
  }
  if (line.rfind("HTTP/", 0) == 0) static_cast<std::string*>(user)->clear();  // a new response (after 100 Continue)
  return size * nmemb;
}

// Seconds to wait for a Retry-After value: delta-seconds or an HTTP date; -1 when unreadable.
double retry_after_seconds(const std::string& value) {
  if (value.empty()) return -1;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return value.size() > 9 ? 1e9 : std::stod(value);
  const time_t when = curl_getdate(value.c_str(), nullptr);
  if (when < 0) return -1;
  return std::max(0.0, std::difftime(when, std::time(nullptr)));
}

// Transport failures that mean "could not reach the server at all".
bool is_unreachable(CURLcode c) {
  return c == CURLE_COULDNT_CONNECT || c == CURLE_COULDNT_RESOLVE_HOST ||
         c == CURLE_COULDNT_RESOLVE_PROXY;
}

}  // namespace

std::string chat_completions_url(const std::string& base_in) {
  std::string base = base_in;
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (ends_with(base, "/chat/completions")) return base;
  if (ends_with(base, "/v1")) return base + "/chat/completions";  // the usual way to write a base URL
  return base + kChatPath;
}

namespace {

// The entries of a cassette file, in file order: {"key", "request", "response"} objects. Usage
// errors for a missing, unreadable or empty file, a folder and a malformed line.
std::vector<json> read_cassette(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    KF_USAGE_ERROR("LLM cassette '%s' is a folder; give the .jsonl file that --record wrote", path.c_str());
  if (!std::filesystem::exists(path, ec))
    KF_USAGE_ERROR("no LLM cassette '%s' to replay; record one first with --record --cassette %s", path.c_str(),
                   path.c_str());
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error&) {
    KF_USAGE_ERROR("cannot read LLM cassette '%s' for replay", path.c_str());
  }
  std::vector<json> entries;
  int line_no = 0;
  for (const std::string& raw : split(text, '\n')) {
    ++line_no;
    const std::string_view line = trim(raw);
    if (line.empty()) continue;
    try {
      json entry = json::parse(line);
      response_from_json(entry.at("response"));
      entry.at("key").get<std::string>();
      entries.push_back(std::move(entry));
    } catch (const json::exception& e) {
      KF_USAGE_ERROR("LLM cassette '%s' line %d is not a recorded exchange: %s", path.c_str(), line_no,
                     valid_utf8(e.what()).c_str());
    }
  }
  if (entries.empty())
    KF_USAGE_ERROR("LLM cassette '%s' holds no recorded exchange; record one with --record --cassette %s",
                   path.c_str(), path.c_str());
  return entries;
}

}  // namespace

void check_replay_cassette(const std::string& path) { read_cassette(path); }

struct LlmClient::Impl {
  LlmOptions opts;
  std::vector<std::string> urls;  // per endpoint, with the chat path
  std::vector<std::string> keys;  // per endpoint, the API key ("" = no Authorization header)

  std::mutex rng_mu;
  std::mt19937_64 rng;
  std::discrete_distribution<size_t> pick;

  Semaphore slots;
  std::atomic<double> spent{0.0};

  // kRecord: the cassette, opened for appending; writes serialised by record_mu.
  std::mutex record_mu;
  int record_fd = -1;
  // kReplay: recorded responses per key, in file order; each answers one call.
  std::mutex replay_mu;
  std::map<std::string, std::deque<ChatResponse>> replay;
  std::deque<ChatResponse> replay_in_order;  // every entry in file order (LlmOptions::replay_in_order)
  std::vector<std::string> replay_models;    // the models the cassette recorded (replay without endpoints)

  explicit Impl(LlmOptions o)
      : opts(std::move(o)), rng(opts.seed), slots(std::max(1, opts.concurrency)), spent(opts.spent_usd) {}
  ~Impl() {
    if (record_fd >= 0) ::close(record_fd);
  }

  void validate();
  void load_cassette();
  void open_cassette_for_record();

  size_t choose_endpoint() {
    if (urls.size() <= 1) return 0;
    std::lock_guard lock(rng_mu);
    return pick(rng);
  }
  void add_spent(double usd) { spent.fetch_add(usd); }
  // The wait before retry `attempt` (0-based) when the server gave no Retry-After: exponential
  // backoff with jitter, a random time in [0.5, 1] x backoff_s x 2^attempt, capped.
  double backoff_wait(int attempt) {
    std::lock_guard lock(rng_mu);
    const double jitter = std::uniform_real_distribution<double>(0.5, 1.0)(rng);
    return std::min(kMaxRetryWaitS, opts.backoff_s * std::ldexp(1.0, std::min(attempt, 30)) * jitter);
  }
  // Reports the retry (LlmOptions::on_retry), then waits; false when asked to stop meanwhile (no retry then).
  bool wait_before_retry(size_t e, int attempt, const std::string& why, double wait_s, bool from_header) {
    if (opts.on_retry)
      opts.on_retry(scrub(strf("LLM endpoint %s %s: retry %d of %d in %.1f s%s", urls[e].c_str(), why.c_str(),
                               attempt + 1, opts.max_retries, wait_s, from_header ? " (its Retry-After)" : ""),
                          e));
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
    while (Clock::now() < until && !stopping())
      std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(50)));
    return !stopping();
  }
  bool stopping() const { return opts.stop && opts.stop->load(); }

  std::string scrub(const std::string& text, size_t e) const { return redact(text, keys[e]); }
  HttpResult post(size_t e, const std::string& body);
  ChatResponse call_endpoint(size_t e, const ChatRequest& req);
  ChatResponse parse(size_t e, const HttpResult& r);
  std::optional<ChatResponse> replay_next(const ChatRequest& req, size_t first);
  void record(const ChatRequest& req, const ChatResponse& resp);
};

void LlmClient::Impl::validate() {
  if (opts.endpoints.empty() && opts.cassette_mode != CassetteMode::kReplay)
    KF_USAGE_ERROR("LLM client: no endpoint configured");
  for (size_t i = 0; i < opts.endpoints.size(); ++i) {
    const Endpoint& ep = opts.endpoints[i];
    if (ep.url.empty()) KF_USAGE_ERROR("LLM endpoint %zu: empty URL", i);
    if (ep.url.rfind("http://", 0) != 0 && ep.url.rfind("https://", 0) != 0)
      KF_USAGE_ERROR("LLM endpoint %zu: URL '%s' must start with http:// or https://", i,
                     ep.url.c_str());
    if (ep.model.empty()) KF_USAGE_ERROR("LLM endpoint %zu (%s): empty model name", i, ep.url.c_str());
    if (!(ep.weight > 0) || !std::isfinite(ep.weight))
      KF_USAGE_ERROR("LLM endpoint %zu (%s): weight must be > 0 (got %g)", i, ep.url.c_str(), ep.weight);
    if (ep.usd_per_1k_prompt < 0 || ep.usd_per_1k_completion < 0)
      KF_USAGE_ERROR("LLM endpoint %zu (%s): prices must be >= 0", i, ep.url.c_str());
  }
  if (opts.concurrency < 1) KF_USAGE_ERROR("LLM client: concurrency must be >= 1 (got %d)", opts.concurrency);
  if (!(opts.timeout_s > 0)) KF_USAGE_ERROR("LLM client: timeout must be > 0 s (got %g)", opts.timeout_s);
  if (!(opts.connect_timeout_s > 0))
    KF_USAGE_ERROR("LLM client: connect timeout must be > 0 s (got %g)", opts.connect_timeout_s);
  if (opts.max_retries < 0) KF_USAGE_ERROR("LLM client: max_retries must be >= 0 (got %d)", opts.max_retries);
  if (!(opts.backoff_s >= 0)) KF_USAGE_ERROR("LLM client: backoff must be >= 0 s (got %g)", opts.backoff_s);
  if (std::isnan(opts.budget_usd) || opts.budget_usd < 0)
    KF_USAGE_ERROR("LLM client: budget must be >= 0 USD (got %g)", opts.budget_usd);
  if (!std::isfinite(opts.spent_usd) || opts.spent_usd < 0)
    KF_USAGE_ERROR("LLM client: the amount already spent must be >= 0 USD (got %g)", opts.spent_usd);
  if (opts.cassette_mode != CassetteMode::kOff && opts.cassette_path.empty())
    KF_USAGE_ERROR("LLM client: cassette mode needs a cassette path");
}

// kReplay: reads every line {"key","request","response"} of the cassette.
void LlmClient::Impl::load_cassette() {
  for (const json& entry : read_cassette(opts.cassette_path)) {
    ChatResponse r = response_from_json(entry.at("response"));
    replay_in_order.push_back(r);
    replay[entry.at("key").get<std::string>()].push_back(std::move(r));
    const std::string model = entry.value("request", json::object()).value("model", std::string());
    if (std::find(replay_models.begin(), replay_models.end(), model) == replay_models.end())
      replay_models.push_back(model);
  }
}

void LlmClient::Impl::open_cassette_for_record() {
  check_writable(opts.cassette_path);
  record_fd = ::open(opts.cassette_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (record_fd < 0)
    KF_USAGE_ERROR("cannot open LLM cassette '%s' for recording: %s", opts.cassette_path.c_str(),
                   std::strerror(errno));
}

// One POST with libcurl. Never throws for transport or HTTP failures: the caller classifies.
HttpResult LlmClient::Impl::post(size_t e, const std::string& body) {
  HttpResult r;
  CURL* h = curl_easy_init();
  if (!h) {
    r.curl_code = CURLE_FAILED_INIT;
    r.curl_error = "curl_easy_init failed";
    return r;
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Accept: application/json");
  if (!keys[e].empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + keys[e]).c_str());

  curl_easy_setopt(h, CURLOPT_URL, urls[e].c_str());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &r.retry_after);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for time-outs: we run in many threads
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(std::llround(opts.timeout_s * 1000)));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::max(1LL, std::llround(opts.connect_timeout_s * 1000))));
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  // a redirected POST is an error, not followed

  const auto t0 = Clock::now();
  r.curl_code = curl_easy_perform(h);
  r.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (r.curl_code == CURLE_OK) {
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    if (r.status == 429 || r.status >= 500) r.retry_after_s = retry_after_seconds(r.retry_after);
  } else {
    r.curl_error = errbuf[0] ? errbuf : curl_easy_strerror(r.curl_code);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(h);
  return r;
}

// A 2xx body -> ChatResponse, or kBadResponse.
ChatResponse LlmClient::Impl::parse(size_t e, const HttpResult& r) {
  const Endpoint& ep = opts.endpoints[e];
  auto bad = [&](const std::string& why) {
    return LlmError(LlmError::Kind::kBadResponse,
                    scrub(strf("LLM endpoint %s answered HTTP %ld but %s: %s", urls[e].c_str(), r.status,
                               why.c_str(), excerpt(r.body).c_str()),
                          e));
  };
  json body;
  try {
    body = json::parse(r.body);
  } catch (const json::exception&) {
    throw bad("the body is not JSON");
  }
  if (!body.is_object()) throw bad("the body is not a JSON object");
  auto choices = body.find("choices");
  if (choices == body.end() || !choices->is_array()) throw bad("it has no \"choices\" array");
  if (choices->empty()) throw bad("\"choices\" is empty");

  // Each choice's message content, placed by its "index" when every choice has one.
  std::vector<std::pair<int64_t, std::string>> texts;
  bool all_indexed = true;
  for (size_t i = 0; i < choices->size(); ++i) {
    const json& c = (*choices)[i];
    if (!c.is_object()) throw bad(strf("choice %zu is not an object", i));
    auto msg = c.find("message");
    if (msg == c.end() || !msg->is_object()) throw bad(strf("choice %zu has no \"message\"", i));
    auto content = msg->find("content");
    std::string text;
    if (content != msg->end() && content->is_string()) text = content->get<std::string>();
    else if (content == msg->end() || !content->is_null())
      throw bad(strf("choice %zu has no string \"message.content\"", i));
    auto idx = c.find("index");
    const bool has_index = idx != c.end() && idx->is_number_integer();
    all_indexed = all_indexed && has_index;
    texts.emplace_back(has_index ? idx->get<int64_t>() : static_cast<int64_t>(i), std::move(text));
  }
  if (all_indexed)
    std::stable_sort(texts.begin(), texts.end(), [](auto& a, auto& b) { return a.first < b.first; });

  ChatResponse out;
  for (auto& [_, t] : texts) out.choices.push_back(std::move(t));
  out.prompt_tokens = usage_count(body, "prompt_tokens");
  out.completion_tokens = usage_count(body, "completion_tokens");
  out.cost_usd = out.prompt_tokens / 1000.0 * ep.usd_per_1k_prompt +
                 out.completion_tokens / 1000.0 * ep.usd_per_1k_completion;
  out.latency_s = r.elapsed_s;
  out.endpoint = ep.url;
  out.model = ep.model;
  return out;
}

// Sends the request to endpoint e, retrying 429, 5xx and transport failures with exponential
// backoff (Retry-After wins when the server gives one). Throws LlmError.
ChatResponse LlmClient::Impl::call_endpoint(size_t e, const ChatRequest& req) {
  const Endpoint& ep = opts.endpoints[e];
  json payload = canonical_request(req, ep.model);
  const std::string body = dump_json(payload);
  const std::string& url = urls[e];

  for (int attempt = 0;; ++attempt) {
    HttpResult r;
    {
      SlotGuard slot(slots);  // held only while the exchange is in flight
      r = post(e, body);
    }
    const bool last = attempt >= opts.max_retries || stopping();  // no retry once asked to stop

    if (r.curl_code != CURLE_OK) {
      // Transport failure: retry, then report what kind of failure it was.
      if (!last && wait_before_retry(e, attempt, "failed (" + r.curl_error + ")", backoff_wait(attempt), false))
        continue;
      const std::string tries = strf("after %d attempt%s", attempt + 1, attempt == 0 ? "" : "s");
      if (r.curl_code == CURLE_OPERATION_TIMEDOUT)
        throw LlmError(LlmError::Kind::kTimeout,
                       scrub(strf("LLM endpoint %s timed out %s (time-out %g s, connect time-out %g s): %s",
                                  url.c_str(), tries.c_str(), opts.timeout_s, opts.connect_timeout_s,
                                  r.curl_error.c_str()),
                             e));
      if (is_unreachable(r.curl_code))
        throw LlmError(LlmError::Kind::kUnreachable,
                       scrub(strf("LLM endpoint %s is unreachable %s: %s", url.c_str(), tries.c_str(),
                                  r.curl_error.c_str()),
                             e));
      throw LlmError(LlmError::Kind::kUnreachable,
                     scrub(strf("LLM endpoint %s: transport error %s: %s", url.c_str(), tries.c_str(),
                                r.curl_error.c_str()),
                           e));
    }

    if (r.status >= 200 && r.status < 300) return parse(e, r);

    if (r.status == 401 || r.status == 403) {
      const char* var = ep.api_key_env.c_str();
      const std::string hint =
          ep.api_key_env.empty()
              ? std::string("no API key is configured for this endpoint (api_key_env is empty)")
          : keys[e].empty()
              ? strf("the environment variable %s is not set or empty, so no API key was sent", var)
              : strf("check the API key in the environment variable %s", var);
      throw LlmError(LlmError::Kind::kAuth,
                     scrub(strf("LLM endpoint %s refused the request (HTTP %ld): %s; server said %s",
                                url.c_str(), r.status, hint.c_str(), excerpt(r.body).c_str()),
                           e));
    }

    const bool retryable = r.status == 429 || r.status >= 500;
    if (retryable && !last) {
      const bool from_header = r.retry_after_s >= 0;
      const double wait = from_header ? std::min(kMaxRetryWaitS, r.retry_after_s) : backoff_wait(attempt);
      if (wait_before_retry(e, attempt, strf("answered HTTP %ld", r.status), wait, from_header)) continue;
    }
    throw LlmError(LlmError::Kind::kHttp,
                   scrub(strf("LLM endpoint %s answered HTTP %ld%s: %s", url.c_str(), r.status,
                              retryable ? strf(" after %d attempts", attempt + 1).c_str() : "",
                              excerpt(r.body).c_str()),
                         e));
  }
}

// kReplay: the next recorded response for this request. The endpoint that the weighted choice
// picked is tried first; the other endpoints' models next (so that replay does not depend on the
// random choice when threads interleave differently from the recording).
std::optional<ChatResponse> LlmClient::Impl::replay_next(const ChatRequest& req, size_t first) {
  std::vector<std::string> models;
  if (!opts.endpoints.empty()) models.push_back(opts.endpoints[first].model);
  for (size_t i = 0; i < opts.endpoints.size(); ++i)
    if (i != first) models.push_back(opts.endpoints[i].model);
  if (opts.endpoints.empty()) models = replay_models;  // no endpoint given: the models recorded
  std::lock_guard lock(replay_mu);
  if (opts.replay_in_order) {
    if (replay_in_order.empty()) return std::nullopt;
    ChatResponse r = std::move(replay_in_order.front());
    replay_in_order.pop_front();
    r.replayed = true;
    return r;
  }
  for (const std::string& model : models) {
    auto it = replay.find(request_key(req, model));
    if (it == replay.end() || it->second.empty()) continue;
    ChatResponse r = std::move(it->second.front());
    it->second.pop_front();
    r.replayed = true;
    return r;
  }
  return std::nullopt;
}

// kRecord: appends {"key","request","response"} as one line, flushed to disk before returning.
void LlmClient::Impl::record(const ChatRequest& req, const ChatResponse& resp) {
  const json entry = {{"key", request_key(req, resp.model)},
                      {"request", canonical_request(req, resp.model)},
                      {"response", response_to_json(resp)}};
  const std::string line = dump_json(entry) + "\n";
  std::lock_guard lock(record_mu);
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(record_fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      KF_RUNTIME_ERROR("writing LLM cassette '%s' failed: %s", opts.cassette_path.c_str(),
                       std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  if (::fsync(record_fd) != 0)
    KF_RUNTIME_ERROR("syncing LLM cassette '%s' failed: %s", opts.cassette_path.c_str(), std::strerror(errno));
}

LlmClient::LlmClient(LlmOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {
  Impl& im = *impl_;
  im.validate();
  std::vector<double> weights;
  for (const Endpoint& ep : im.opts.endpoints) {
    im.urls.push_back(chat_completions_url(ep.url));
    const char* key = ep.api_key_env.empty() ? nullptr : std::getenv(ep.api_key_env.c_str());
    im.keys.push_back(key ? key : "");
    weights.push_back(ep.weight);
  }
  if (!weights.empty()) im.pick = std::discrete_distribution<size_t>(weights.begin(), weights.end());
  if (im.opts.cassette_mode == CassetteMode::kReplay) im.load_cassette();
  else curl_init_once();
  if (im.opts.cassette_mode == CassetteMode::kRecord) im.open_cassette_for_record();
}

LlmClient::~LlmClient() = default;

ChatResponse LlmClient::chat(const ChatRequest& req) {
  Impl& im = *impl_;
  const double spent = im.spent.load();
  if (spent >= im.opts.budget_usd)
    throw LlmError(LlmError::Kind::kBudget,
                   strf("LLM budget exhausted: spent %.4f USD of %.4f USD", spent, im.opts.budget_usd));

  const size_t e = im.choose_endpoint();
  if (im.opts.cassette_mode == CassetteMode::kReplay) {
    std::optional<ChatResponse> r = im.replay_next(req, e);
    if (!r) {
      const std::string model = im.opts.endpoints.empty() ? std::string("as recorded") : im.opts.endpoints[e].model;
      throw LlmError(LlmError::Kind::kReplayMiss,
                     strf("LLM cassette '%s' has no (more) recorded responses for request %s (model %s)",
                          im.opts.cassette_path.c_str(), request_key(req, model).substr(0, 16).c_str(),
                          model.c_str()));
    }
    im.add_spent(r->cost_usd);
    return *r;
  }

  ChatResponse r = im.call_endpoint(e, req);
  im.add_spent(r.cost_usd);
  if (im.opts.cassette_mode == CassetteMode::kRecord) im.record(req, r);
  return r;
}

double LlmClient::spent_usd() const { return impl_->spent.load(); }

std::string LlmClient::request_key(const ChatRequest& req, const std::string& model) {
  return sha256_hex(dump_json(canonical_request(req, model)));
}

}  // namespace kforge
