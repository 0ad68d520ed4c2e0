// LlmClient over real loopback HTTP against ScriptedLlmServer: the request it sends, parsing,
// accounting, endpoint weights, retries and backoff, error kinds, the API key's secrecy, the
// concurrency limit, the budget, and record/replay cassettes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../support/scripted_llm_server.hpp"
#include "core/error.hpp"
#include "llm/client.hpp"

namespace kforge {
namespace {

using test::ScriptedLlmServer;
using test::ScriptStep;
using json = nlohmann::json;
using Kind = LlmError::Kind;

constexpr const char* kKeyVar = "KF_TEST_LLM_KEY";
constexpr const char* kSecret = "sk-kforge-test-SECRET-0123456789";

// Loopback must not go through a proxy that the environment may configure.
void no_proxy_for_loopback() {
  static const bool done = [] {
    ::setenv("no_proxy", "127.0.0.1,localhost", 1);
    ::setenv("NO_PROXY", "127.0.0.1,localhost", 1);
    return true;
  }();
  (void)done;
}

Endpoint endpoint_for(const std::string& url, const std::string& model = "test-model") {
  Endpoint ep;
  ep.url = url;
  ep.model = model;
  ep.api_key_env = kKeyVar;
  return ep;
}

// Options for one endpoint, with fast retries and short time-outs so failures stay quick.
LlmOptions options_for(const std::string& url) {
  no_proxy_for_loopback();
  ::unsetenv(kKeyVar);
  LlmOptions o;
  o.endpoints = {endpoint_for(url)};
  o.timeout_s = 10;
  o.connect_timeout_s = 2;
  o.max_retries = 2;
  o.backoff_s = 0.01;
  return o;
}

ChatRequest request(const std::string& user_text, int n = 1) {
  ChatRequest r;
  r.messages = {{"system", "You write CUDA kernels."}, {"user", user_text}};
  r.temperature = 0.7;
  r.max_tokens = 512;
  r.n = n;
  return r;
}

// Runs f, expecting an LlmError; returns it (the test fails when none or another type is thrown).
LlmError expect_llm_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const LlmError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected LlmError, got: " << e.what();
    return LlmError(Kind::kHttp, "wrong exception type");
  }
  ADD_FAILURE() << "expected LlmError, nothing was thrown";
  return LlmError(Kind::kHttp, "nothing thrown");
}

void expect_usage_error(const LlmOptions& o, const char* what) {
  try {
    LlmClient c(o);
    ADD_FAILURE() << "no usage error for " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage) << what << ": " << e.what();
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A fresh folder under /tmp, removed when the test ends (also when an assertion stops it).
struct TempFolder {
  std::string path;
  TempFolder() {
    char tmpl[] = "/tmp/kforge-llm-test-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (!d) throw std::runtime_error("mkdtemp failed");
    path = d;
  }
  ~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

TEST(LlmClient, NormalCallParsesChoicesUsageAndCost) {
  ScriptedLlmServer server;
  server.push(ScriptedLlmServer::ok({"Use shared memory tiles."}, 1200, 300));
  LlmOptions o = options_for(server.url());
  o.endpoints[0].usd_per_1k_prompt = 0.5;
  o.endpoints[0].usd_per_1k_completion = 2.0;
  LlmClient client(o);

  ChatResponse r = client.chat(request("make it fast"));
  ASSERT_EQ(r.choices.size(), 1u);
  EXPECT_EQ(r.choices[0], "Use shared memory tiles.");
  EXPECT_EQ(r.prompt_tokens, 1200);
  EXPECT_EQ(r.completion_tokens, 300);
  EXPECT_DOUBLE_EQ(r.cost_usd, 1.2 * 0.5 + 0.3 * 2.0);
  EXPECT_DOUBLE_EQ(client.spent_usd(), r.cost_usd);
  EXPECT_EQ(r.endpoint, server.url());
  EXPECT_EQ(r.model, "test-model");
  EXPECT_FALSE(r.replayed);
  EXPECT_GT(r.latency_s, 0.0);
  EXPECT_LT(r.latency_s, 5.0);
  EXPECT_EQ(server.request_count(), 1u);
}

TEST(LlmClient, SendsTheExpectedRequestBody) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({"ok"}));
  // A URL that already ends with the chat path is used as is.
  LlmClient client(options_for(server.url() + "/v1/chat/completions"));
  ChatRequest req = request("line one\nline \"two\"", 2);
  client.chat(req);

  const auto got = server.requests();
  ASSERT_EQ(got.size(), 1u);
  const json& b = got[0].body;
  ASSERT_TRUE(b.is_object()) << got[0].raw_body;
  EXPECT_EQ(b.at("model"), "test-model");
  EXPECT_DOUBLE_EQ(b.at("temperature").get<double>(), 0.7);
  EXPECT_EQ(b.at("max_tokens"), 512);
  EXPECT_EQ(b.at("n"), 2);
  ASSERT_EQ(b.at("messages").size(), 2u);
  EXPECT_EQ(b["messages"][0], json({{"role", "system"}, {"content", "You write CUDA kernels."}}));
  EXPECT_EQ(b["messages"][1], json({{"role", "user"}, {"content", "line one\nline \"two\""}}));
  EXPECT_FALSE(got[0].authorization.has_value()) << "key variable unset: no Authorization header";
}

TEST(LlmClient, SendsBearerKeyOnlyWhenTheVariableIsSet) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({"ok"}));
  LlmOptions o = options_for(server.url());
  ::setenv(kKeyVar, kSecret, 1);
  { LlmClient(o).chat(request("a")); }
  ::setenv(kKeyVar, "", 1);
  { LlmClient(o).chat(request("b")); }
  ::unsetenv(kKeyVar);

  const auto got = server.requests();
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[0].authorization.has_value());
  EXPECT_EQ(*got[0].authorization, std::string("Bearer ") + kSecret);
  EXPECT_FALSE(got[1].authorization.has_value()) << "empty variable: no Authorization header";
}

TEST(LlmClient, SeveralChoicesInIndexOrder) {
  ScriptedLlmServer server;
  server.push(ScriptedLlmServer::ok({"one", "two", "three"}, 5, 7));
  // Choices listed out of order are placed by their "index".
  json body = {{"choices",
                {{{"index", 1}, {"message", {{"role", "assistant"}, {"content", "second"}}}},
                 {{"index", 0}, {"message", {{"role", "assistant"}, {"content", "first"}}}}}}};
  server.push(ScriptStep{200, body.dump(), 0, {}});
  LlmClient client(options_for(server.url()));

  ChatResponse r = client.chat(request("x", 3));
  EXPECT_EQ(r.choices, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(r.prompt_tokens, 5);
  EXPECT_EQ(r.completion_tokens, 7);

  ChatResponse r2 = client.chat(request("y", 2));
  EXPECT_EQ(r2.choices, (std::vector<std::string>{"first", "second"}));
  // No "usage" in that body: zero tokens, zero cost.
  EXPECT_EQ(r2.prompt_tokens, 0);
  EXPECT_EQ(r2.completion_tokens, 0);
  EXPECT_EQ(r2.cost_usd, 0.0);
}

TEST(LlmClient, WeightsChooseBetweenEndpoints) {
  ScriptedLlmServer a(ScriptedLlmServer::ok({"A"}));
  ScriptedLlmServer b(ScriptedLlmServer::ok({"B"}));
  LlmOptions o = options_for(a.url());
  o.endpoints = {endpoint_for(a.url(), "model-a"), endpoint_for(b.url(), "model-b")};
  o.endpoints[0].weight = 3;
  o.endpoints[1].weight = 1;
  o.seed = 42;
  LlmClient client(o);

  constexpr int kCalls = 200;
  int from_a = 0;
  for (int i = 0; i < kCalls; ++i) {
    ChatResponse r = client.chat(request("q" + std::to_string(i)));
    ASSERT_EQ(r.choices.size(), 1u);
    // The answer, the endpoint and the model agree on which server served the call.
    if (r.choices[0] == "A") {
      ++from_a;
      EXPECT_EQ(r.model, "model-a");
      EXPECT_EQ(r.endpoint, a.url());
    } else {
      EXPECT_EQ(r.model, "model-b");
      EXPECT_EQ(r.endpoint, b.url());
    }
  }
  EXPECT_EQ(a.request_count(), static_cast<size_t>(from_a));
  EXPECT_EQ(b.request_count(), static_cast<size_t>(kCalls - from_a));
  // Expected 150 of 200 (sd ~6): a wide band that an unweighted or one-sided choice misses.
  EXPECT_GE(from_a, 125);
  EXPECT_LE(from_a, 175);
}

TEST(LlmClient, RetriesA429AndHonoursRetryAfter) {
  ScriptedLlmServer server;
  server.push(ScriptStep{429, R"({"error":"rate limited"})", 0, "1"});
  server.push(ScriptedLlmServer::ok({"after the wait"}));
  LlmClient client(options_for(server.url()));  // backoff 0.01 s: only Retry-After explains 1 s

  const auto t0 = std::chrono::steady_clock::now();
  ChatResponse r = client.chat(request("x"));
  const double took = seconds_since(t0);
  EXPECT_EQ(r.choices.at(0), "after the wait");
  EXPECT_EQ(server.request_count(), 2u);
  EXPECT_GE(took, 0.9) << "Retry-After: 1 was not honoured";
  EXPECT_LT(took, 4.0);
}

TEST(LlmClient, RetryAfterZeroOverridesALongBackoff) {
  ScriptedLlmServer server;
  server.push(ScriptStep{503, "busy", 0, "0"});
  server.push(ScriptedLlmServer::ok({"fine"}));
  LlmOptions o = options_for(server.url());
  o.backoff_s = 5;  // would be waited if Retry-After were ignored
  LlmClient client(o);

  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(client.chat(request("x")).choices.at(0), "fine");
  EXPECT_LT(seconds_since(t0), 2.0);
  EXPECT_EQ(server.request_count(), 2u);
}

TEST(LlmClient, ServerErrorsAreRetriedThenReported) {
  ScriptedLlmServer server(ScriptStep{500, R"({"error":"overloaded"})", 0, {}});
  LlmClient client(options_for(server.url()));  // max_retries 2: three attempts

  LlmError e = expect_llm_error([&] { client.chat(request("x")); });
  EXPECT_EQ(e.kind(), Kind::kHttp);
  EXPECT_NE(std::string(e.what()).find("500"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("overloaded"), std::string::npos) << e.what();
  EXPECT_EQ(server.request_count(), 3u);
  EXPECT_EQ(client.spent_usd(), 0.0);
}

TEST(LlmClient, TransientServerErrorsThenSuccess) {
  ScriptedLlmServer server;
  server.push(ScriptStep{502, "bad gateway", 0, {}});
  server.push(ScriptStep{503, "unavailable", 0, {}});
  server.push(ScriptedLlmServer::ok({"third time"}));
  LlmClient client(options_for(server.url()));
  EXPECT_EQ(client.chat(request("x")).choices.at(0), "third time");
  EXPECT_EQ(server.request_count(), 3u);
}

TEST(LlmClient, OtherClientErrorsAreNotRetried) {
  ScriptedLlmServer server(ScriptStep{400, R"({"error":"max_tokens too large"})", 0, {}});
  LlmClient client(options_for(server.url()));
  LlmError e = expect_llm_error([&] { client.chat(request("x")); });
  EXPECT_EQ(e.kind(), Kind::kHttp);
  EXPECT_NE(std::string(e.what()).find("400"), std::string::npos) << e.what();
  EXPECT_EQ(server.request_count(), 1u);
}

TEST(LlmClient, AuthFailureNamesTheVariableNeverTheKey) {
  // The server echoes the key in its error body, as some real APIs do.
  ScriptedLlmServer server(
      ScriptStep{401, std::string(R"({"error":"Incorrect API key provided: )") + kSecret + "\"}", 0, {}});
  LlmOptions o = options_for(server.url());
  o.max_retries = 3;
  ::setenv(kKeyVar, kSecret, 1);
  LlmClient client(o);
  ::unsetenv(kKeyVar);

  LlmError e = expect_llm_error([&] { client.chat(request("x")); });
  const std::string msg = e.what();
  EXPECT_EQ(e.kind(), Kind::kAuth);
  EXPECT_NE(msg.find(kKeyVar), std::string::npos) << msg;
  EXPECT_NE(msg.find("401"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(kSecret), std::string::npos) << "the key leaked: " << msg;
  EXPECT_EQ(msg.find("SECRET"), std::string::npos) << "part of the key leaked: " << msg;
  EXPECT_EQ(server.request_count(), 1u) << "401 must not be retried";
  ASSERT_TRUE(server.requests()[0].authorization.has_value());
  EXPECT_EQ(*server.requests()[0].authorization, std::string("Bearer ") + kSecret);
}

TEST(LlmClient, ForbiddenWithoutKeySaysTheVariableIsUnset) {
  ScriptedLlmServer server(ScriptStep{403, "forbidden", 0, {}});
  LlmClient client(options_for(server.url()));  // the variable is unset
  LlmError e = expect_llm_error([&] { client.chat(request("x")); });
  EXPECT_EQ(e.kind(), Kind::kAuth);
  EXPECT_NE(std::string(e.what()).find(kKeyVar), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("not set"), std::string::npos) << e.what();
  EXPECT_EQ(server.request_count(), 1u);
}

TEST(LlmClient, UnreachablePortNamesTheUrl) {
  std::string url;
  {
    ScriptedLlmServer gone;  // a port that was just free, now closed: connection refused
    url = gone.url();
  }
  LlmOptions o = options_for(url);
  o.max_retries = 1;
  LlmClient client(o);
  LlmError e = expect_llm_error([&] { client.chat(request("x")); });
  EXPECT_EQ(e.kind(), Kind::kUnreachable) << e.what();
  EXPECT_NE(std::string(e.what()).find(url), std::string::npos) << e.what();
}

TEST(LlmClient, MalformedOrEmptyBodiesAreBadResponses) {
  ScriptedLlmServer server;
  server.push(ScriptStep{200, "this is not json {", 0, {}});
  server.push(ScriptStep{200, R"({"id":"x","choices":[]})", 0, {}});
  server.push(ScriptStep{200, R"({"id":"x","object":"chat.completion"})", 0, {}});
  server.push(ScriptStep{200, R"({"choices":[{"index":0,"text":"legacy shape"}]})", 0, {}});
  server.push(ScriptStep{200, std::string(5000, 'z'), 0, {}});
  LlmClient client(options_for(server.url()));

  const std::vector<std::string> needles = {"this is not json", "\"choices\" is empty",
                                            "chat.completion", "legacy shape", "zzzz"};
  for (const std::string& needle : needles) {
    LlmError e = expect_llm_error([&] { client.chat(request("x")); });
    EXPECT_EQ(e.kind(), Kind::kBadResponse) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_LT(std::string(e.what()).size(), 600u) << "the excerpt must stay short";
  }
  EXPECT_EQ(server.request_count(), needles.size()) << "bad bodies are not retried";
}

// A reply slower than the time-out is reported as kTimeout (curl's operation time-out), not
// kUnreachable: the server was reached, it did not answer in time.
TEST(LlmClient, SlowReplyTimesOut) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({"too late"}, 1, 1, /*delay_ms=*/3000));
  LlmOptions o = options_for(server.url());
  o.timeout_s = 0.3;
  o.max_retries = 0;
  LlmClient client(o);

  const auto t0 = std::chrono::steady_clock::now();
  LlmError e = expect_llm_error([&] { client.chat(request("x")); });
  EXPECT_EQ(e.kind(), Kind::kTimeout) << e.what();
  EXPECT_NE(std::string(e.what()).find(server.url()), std::string::npos) << e.what();
  EXPECT_LT(seconds_since(t0), 2.0);
}

TEST(LlmClient, BudgetStopsCallsOnceSpent) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({"paid"}, 1000, 500));
  LlmOptions o = options_for(server.url());
  o.endpoints[0].usd_per_1k_prompt = 1.0;
  o.endpoints[0].usd_per_1k_completion = 2.0;  // 1 + 1 = 2 USD per call
  o.budget_usd = 1.5;
  LlmClient client(o);

  EXPECT_DOUBLE_EQ(client.chat(request("x")).cost_usd, 2.0);  // 0 spent < 1.5: allowed
  EXPECT_DOUBLE_EQ(client.spent_usd(), 2.0);
  LlmError e = expect_llm_error([&] { client.chat(request("y")); });
  EXPECT_EQ(e.kind(), Kind::kBudget) << e.what();
  EXPECT_EQ(server.request_count(), 1u) << "nothing is sent once the budget is spent";

  o.budget_usd = 0;
  LlmClient broke(o);
  EXPECT_EQ(expect_llm_error([&] { broke.chat(request("z")); }).kind(), Kind::kBudget);
  EXPECT_EQ(server.request_count(), 1u);
}

TEST(LlmClient, SpendingIsAccumulatedAcrossThreads) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({"t"}, 100, 0));
  LlmOptions o = options_for(server.url());
  o.endpoints[0].usd_per_1k_prompt = 0.01;  // 0.001 USD per call
  o.concurrency = 4;
  LlmClient client(o);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) client.chat(request("x"));
    });
  for (auto& t : threads) t.join();
  EXPECT_NEAR(client.spent_usd(), 40 * 0.001, 1e-12);
}

// Runs 4 threads x 2 calls against a server that holds each request 150 ms; returns the most
// requests the server saw at once.
int max_seen_in_flight(int concurrency) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({"slow"}, 1, 1, /*delay_ms=*/150));
  LlmOptions o = options_for(server.url());
  o.concurrency = concurrency;
  LlmClient client(o);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 2; ++i) client.chat(request("x"));
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(server.request_count(), 8u);
  return server.max_in_flight();
}

TEST(LlmClient, ConcurrencyLimitIsRespected) {
  EXPECT_EQ(max_seen_in_flight(2), 2);
  // Control: without the limit the same load does overlap more, so the check above can fail.
  EXPECT_GT(max_seen_in_flight(4), 2);
}

TEST(LlmClient, RecordThenReplayWithoutAServer) {
  const TempFolder dir;
  const std::string cassette = dir.path + "/llm.jsonl";
  std::vector<ChatResponse> recorded;
  std::string url;
  {
    ScriptedLlmServer server;
    url = server.url();
    server.push(ScriptedLlmServer::ok({"first"}, 11, 12));
    server.push(ScriptedLlmServer::ok({"second", "second b"}, 21, 22));
    server.push(ScriptedLlmServer::ok({"again"}, 31, 32));
    server.push(ScriptStep{500, "fails", 0, {}});
    LlmOptions o = options_for(url);
    o.endpoints[0].usd_per_1k_prompt = 1;
    o.cassette_mode = CassetteMode::kRecord;
    o.cassette_path = cassette;
    o.max_retries = 0;
    ::setenv(kKeyVar, kSecret, 1);
    LlmClient client(o);
    ::unsetenv(kKeyVar);
    recorded.push_back(client.chat(request("A")));
    recorded.push_back(client.chat(request("B", 2)));
    recorded.push_back(client.chat(request("A")));  // identical to the first: a second entry
    EXPECT_THROW(client.chat(request("C")), LlmError);  // failures are not recorded
  }

  const auto lines = lines_of(cassette);
  ASSERT_EQ(lines.size(), 3u);
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find(kSecret), std::string::npos) << "the key must not be recorded";
    const json entry = json::parse(line);
    EXPECT_TRUE(entry.contains("key") && entry.contains("request") && entry.contains("response"));
  }
  EXPECT_EQ(json::parse(lines[0])["key"], LlmClient::request_key(request("A"), "test-model"));
  EXPECT_EQ(json::parse(lines[0])["request"]["messages"][1]["content"], "A");

  // Replay: the server is gone, so any network use would fail with kUnreachable.
  LlmOptions o = options_for(url);
  o.endpoints[0].usd_per_1k_prompt = 1;
  o.cassette_mode = CassetteMode::kReplay;
  o.cassette_path = cassette;
  LlmClient replay(o);
  const std::vector<ChatResponse> got = {replay.chat(request("A")), replay.chat(request("B", 2)),
                                         replay.chat(request("A"))};
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(got[i].replayed);
    EXPECT_EQ(got[i].choices, recorded[i].choices) << i;
    EXPECT_EQ(got[i].prompt_tokens, recorded[i].prompt_tokens) << i;
    EXPECT_EQ(got[i].completion_tokens, recorded[i].completion_tokens) << i;
    EXPECT_DOUBLE_EQ(got[i].cost_usd, recorded[i].cost_usd) << i;
    EXPECT_EQ(got[i].endpoint, recorded[i].endpoint) << i;
    EXPECT_EQ(got[i].model, recorded[i].model) << i;
  }
  EXPECT_EQ(got[2].choices.at(0), "again") << "the second identical request gets the second entry";
  EXPECT_DOUBLE_EQ(replay.spent_usd(), (11 + 21 + 31) / 1000.0);

  // The third "A" has no entry left; "B" with another n, or another text, never had one.
  EXPECT_EQ(expect_llm_error([&] { replay.chat(request("A")); }).kind(), Kind::kReplayMiss);
  EXPECT_EQ(expect_llm_error([&] { replay.chat(request("B", 1)); }).kind(), Kind::kReplayMiss);
  EXPECT_EQ(expect_llm_error([&] { replay.chat(request("D")); }).kind(), Kind::kReplayMiss);
}

TEST(LlmClient, RecordingFromManyThreadsKeepsWholeLines) {
  const TempFolder dir;
  ScriptedLlmServer server(ScriptedLlmServer::ok({std::string(3000, 'k')}));
  LlmOptions o = options_for(server.url());
  o.concurrency = 4;
  o.cassette_mode = CassetteMode::kRecord;
  o.cassette_path = dir.path + "/c.jsonl";
  LlmClient client(o);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) client.chat(request("t" + std::to_string(t) + "-" + std::to_string(i)));
    });
  for (auto& t : threads) t.join();
  const auto lines = lines_of(o.cassette_path);
  ASSERT_EQ(lines.size(), 20u);
  for (const std::string& line : lines) EXPECT_TRUE(json::accept(line)) << line.substr(0, 80);
}

TEST(LlmClient, RequestKeyCoversEveryModelVisibleField) {
  const ChatRequest base = request("hello");
  const std::string k = LlmClient::request_key(base, "m");
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k, LlmClient::request_key(request("hello"), "m")) << "deterministic";

  std::vector<std::string> keys = {k, LlmClient::request_key(base, "other-model")};
  ChatRequest r = base;
  r.messages[1].content = "hello!";
  keys.push_back(LlmClient::request_key(r, "m"));
  r = base;
  r.messages[1].role = "assistant";
  keys.push_back(LlmClient::request_key(r, "m"));
  r = base;
  r.messages.pop_back();
  keys.push_back(LlmClient::request_key(r, "m"));
  r = base;
  r.temperature = 0.70001;
  keys.push_back(LlmClient::request_key(r, "m"));
  r = base;
  r.max_tokens = 513;
  keys.push_back(LlmClient::request_key(r, "m"));
  r = base;
  r.n = 2;
  keys.push_back(LlmClient::request_key(r, "m"));
  for (size_t i = 0; i < keys.size(); ++i)
    for (size_t j = i + 1; j < keys.size(); ++j) EXPECT_NE(keys[i], keys[j]) << i << " vs " << j;
}

TEST(LlmClient, BadOptionsAreUsageErrors) {
  const LlmOptions good = options_for("http://127.0.0.1:9");
  LlmOptions o = good;
  o.endpoints.clear();
  expect_usage_error(o, "no endpoints");
  o = good;
  o.endpoints[0].url = "";
  expect_usage_error(o, "empty url");
  o = good;
  o.endpoints[0].url = "127.0.0.1:8000";
  expect_usage_error(o, "url without scheme");
  o = good;
  o.endpoints[0].model = "";
  expect_usage_error(o, "empty model");
  o = good;
  o.endpoints[0].weight = 0;
  expect_usage_error(o, "zero weight");
  o = good;
  o.endpoints[0].weight = -1;
  expect_usage_error(o, "negative weight");
  o = good;
  o.concurrency = 0;
  expect_usage_error(o, "concurrency 0");
  o = good;
  o.cassette_mode = CassetteMode::kReplay;
  o.cassette_path = "/nonexistent-kforge-folder/cassette.jsonl";
  expect_usage_error(o, "unreadable cassette");
  o = good;
  o.cassette_mode = CassetteMode::kRecord;
  o.cassette_path = "/nonexistent-kforge-folder/cassette.jsonl";
  expect_usage_error(o, "unwritable cassette");
  EXPECT_NO_THROW(LlmClient{good});
}

}  // namespace
}  // namespace kforge

namespace kforge {
namespace {

TEST(LlmClientReplayInOrder, AnswersByPositionWhateverThePrompt) {
  test::ScriptedLlmServer server;
  server.push(test::ScriptedLlmServer::ok({"first"}));
  server.push(test::ScriptedLlmServer::ok({"second"}));
  const std::string cassette = ::testing::TempDir() + "kforge-in-order.jsonl";
  std::remove(cassette.c_str());
  LlmOptions rec;
  rec.endpoints = {Endpoint{server.url(), "m", 1.0, "", 0, 0}};
  rec.cassette_mode = CassetteMode::kRecord;
  rec.cassette_path = cassette;
  {
    LlmClient client(rec);
    ChatRequest a, b;
    a.messages = {{"user", "speed-up 1.23x"}};
    b.messages = {{"user", "speed-up 1.31x"}};
    EXPECT_EQ(client.chat(a).choices.at(0), "first");
    EXPECT_EQ(client.chat(b).choices.at(0), "second");
  }
  LlmOptions rep = rec;
  rep.cassette_mode = CassetteMode::kReplay;
  rep.replay_in_order = true;
  LlmClient client(rep);
  ChatRequest other;
  other.messages = {{"user", "speed-up 1.25x (measured again)"}};
  EXPECT_EQ(client.chat(other).choices.at(0), "first");
  EXPECT_EQ(client.chat(other).choices.at(0), "second");
  EXPECT_THROW(client.chat(other), LlmError);
  EXPECT_EQ(server.request_count(), 2u);
}

}  // namespace
}  // namespace kforge

// ---------------------------------------------------------------------------------------------
// Issue 14: backoff without Retry-After, base URLs with /v1, replay without endpoints.

namespace kforge {
namespace {

// Item 5: an absent Retry-After was read as "Retry-After: 0", so 5 retries landed within 4 ms.
TEST(LlmClient, WithoutRetryAfterRetriesBackOffExponentiallyWithJitter) {
  ScriptedLlmServer server;
  for (int i = 0; i < 3; ++i) server.push(ScriptStep{500, R"({"error":"overloaded"})", 0, {}});
  server.push(ScriptedLlmServer::ok({"at last"}));
  LlmOptions o = options_for(server.url());
  o.max_retries = 3;
  o.backoff_s = 0.1;  // waits in [0.05, 0.1], [0.1, 0.2], [0.2, 0.4]
  std::vector<std::string> lines;
  o.on_retry = [&](const std::string& line) { lines.push_back(line); };
  LlmClient client(o);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(client.chat(request("x")).choices.at(0), "at last");
  const double took = seconds_since(t0);
  EXPECT_GE(took, 0.35) << "no backoff between retries";
  EXPECT_LT(took, 3.0);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("answered HTTP 500: retry 1 of 3 in "), std::string::npos) << lines[0];
  EXPECT_NE(lines[2].find("retry 3 of 3 in 0."), std::string::npos) << lines[2];
  EXPECT_EQ(lines[0].find("Retry-After"), std::string::npos) << lines[0];
}

TEST(LlmClient, RetryAfterAsAnHttpDateIsHonoured) {
  ScriptedLlmServer server;
  char date[64];
  const std::time_t when = std::time(nullptr) + 3;
  std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", std::gmtime(&when));
  server.push(ScriptStep{429, R"({"error":"later"})", 0, std::string(date)});
  server.push(ScriptedLlmServer::ok({"done"}));
  LlmOptions o = options_for(server.url());
  std::vector<std::string> lines;
  o.on_retry = [&](const std::string& line) { lines.push_back(line); };
  LlmClient client(o);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(client.chat(request("x")).choices.at(0), "done");
  EXPECT_GE(seconds_since(t0), 1.5);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("(its Retry-After)"), std::string::npos) << lines[0];
}

// Item 23: "http://host:8000/v1" (how OpenAI clients and vLLM write a base URL) was called as
// .../v1/v1/chat/completions.
TEST(LlmClient, BaseUrlWithOrWithoutV1) {
  EXPECT_EQ(chat_completions_url("http://h:8000"), "http://h:8000/v1/chat/completions");
  EXPECT_EQ(chat_completions_url("http://h:8000/"), "http://h:8000/v1/chat/completions");
  EXPECT_EQ(chat_completions_url("http://h:8000/v1"), "http://h:8000/v1/chat/completions");
  EXPECT_EQ(chat_completions_url("http://h:8000/v1/"), "http://h:8000/v1/chat/completions");
  EXPECT_EQ(chat_completions_url("https://api.x.com/v1/chat/completions"), "https://api.x.com/v1/chat/completions");
  ScriptedLlmServer server(ScriptedLlmServer::ok({"hello"}));
  for (const std::string& suffix : {"", "/", "/v1", "/v1/", "/v1/chat/completions"}) {
    LlmClient client(options_for(server.url() + suffix));
    EXPECT_EQ(client.chat(request("x")).choices.at(0), "hello") << suffix;
  }
  EXPECT_EQ(server.request_count(), 5u);
  // The error names the URL that was tried.
  LlmOptions o = options_for("http://127.0.0.1:9/v1");
  o.max_retries = 0;
  LlmClient client(o);
  LlmError e = expect_llm_error([&] { client.chat(request("x")); });
  EXPECT_NE(std::string(e.what()).find("http://127.0.0.1:9/v1/chat/completions"), std::string::npos) << e.what();
  EXPECT_EQ(std::string(e.what()).find("/v1/v1"), std::string::npos) << e.what();
}

// Item 10 (client side): replay needs no endpoint; an empty cassette or a folder is a usage error.
TEST(LlmClient, ReplayNeedsNoEndpointButACassetteWithExchanges) {
  TempFolder dir;
  const std::string cassette = dir.path + "/c.jsonl";
  {
    ScriptedLlmServer server(ScriptedLlmServer::ok({"recorded"}));
    LlmOptions o = options_for(server.url());
    o.cassette_mode = CassetteMode::kRecord;
    o.cassette_path = cassette;
    LlmClient client(o);
    client.chat(request("x"));
  }
  LlmOptions o;
  o.cassette_mode = CassetteMode::kReplay;
  o.cassette_path = cassette;
  {
    LlmClient client(o);  // by content, with the recorded model
    EXPECT_EQ(client.chat(request("x")).choices.at(0), "recorded");
  }
  o.replay_in_order = true;
  {
    LlmClient client(o);
    EXPECT_EQ(client.chat(request("another prompt")).choices.at(0), "recorded");
  }
  std::ofstream(dir.path + "/empty.jsonl") << "\n";
  for (const std::string& bad : {dir.path + "/empty.jsonl", dir.path, dir.path + "/missing.jsonl"}) {
    o.cassette_path = bad;
    expect_usage_error(o, bad.c_str());
    EXPECT_THROW(check_replay_cassette(bad), Error) << bad;
  }
  EXPECT_NO_THROW(check_replay_cassette(cassette));
}

// Item 8 (client side): after a Ctrl-C the call in flight is not retried and a backoff ends early.
TEST(LlmClient, AStopRequestEndsRetries) {
  ScriptedLlmServer server(ScriptStep{500, R"({"error":"down"})", 0, {}});
  LlmOptions o = options_for(server.url());
  o.max_retries = 5;
  o.backoff_s = 4;  // the first wait alone would be 2 to 4 s
  std::atomic<bool> stop{false};
  o.stop = &stop;
  LlmClient client(o);
  std::thread ctrl_c([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  LlmError e = expect_llm_error([&] { client.chat(request("x")); });
  ctrl_c.join();
  EXPECT_LT(seconds_since(t0), 1.5);
  EXPECT_EQ(e.kind(), Kind::kHttp);
  EXPECT_EQ(server.request_count(), 1u);
}

// Item 1 (client side): the amount a resumed run had spent counts against its cap.
TEST(LlmClient, SpentBeforeCountsAgainstTheBudget) {
  ScriptedLlmServer server(ScriptedLlmServer::ok({"x"}));
  LlmOptions o = options_for(server.url());
  o.budget_usd = 7;
  o.spent_usd = 9;
  LlmClient client(o);
  LlmError e = expect_llm_error([&] { client.chat(request("x")); });
  EXPECT_EQ(e.kind(), Kind::kBudget);
  EXPECT_NE(std::string(e.what()).find("spent 9.0000 USD of 7.0000 USD"), std::string::npos) << e.what();
  EXPECT_EQ(server.request_count(), 0u);
}

}  // namespace
}  // namespace kforge
