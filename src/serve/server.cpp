#include "serve/server.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <cmath>

#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/json.hpp"
#include "core/text.hpp"

namespace kforge {

bool constant_time_equal(const std::string& a, const std::string& b) {
  // Compare digests: equal length, so the time depends on neither input's contents or length.
  const std::string x = sha256_hex(a), y = sha256_hex(b);
  unsigned char diff = 0;
  for (size_t i = 0; i < x.size(); ++i) diff |= static_cast<unsigned char>(x[i] ^ y[i]);
  return diff == 0;
}

namespace {

using Clock = std::chrono::steady_clock;

void reply(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void error(httplib::Response& res, int status, const std::string& why) { reply(res, status, {{"error", why}}); }

// The body as JSON, or a 400 with the parser's message.
bool parse_body(const httplib::Request& req, httplib::Response& res, nlohmann::json& out) {
  try {
    out = nlohmann::json::parse(req.body);
  } catch (const std::exception& e) {
    error(res, 400, std::string("the body is not JSON: ") + e.what());
    return false;
  }
  if (!out.is_object()) {
    error(res, 400, "the body must be a JSON object");
    return false;
  }
  return true;
}

std::string string_field(const nlohmann::json& j, const char* key, size_t index, bool required) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) throw ScoreError(400, strf("item %zu: '%s' is missing", index, key));
    return "";
  }
  if (!j[key].is_string()) throw ScoreError(400, strf("item %zu: '%s' must be a string", index, key));
  return j[key].get<std::string>();
}

// "profile": true or false (absent or null: `fallback`).
bool profile_field(const nlohmann::json& j, bool fallback, const std::string& where) {
  if (!j.contains("profile") || j["profile"].is_null()) return fallback;
  if (!j["profile"].is_boolean()) throw ScoreError(400, where + "'profile' must be true or false");
  return j["profile"].get<bool>();
}

std::vector<ScoreItem> items_of(const nlohmann::json& body) {
  if (!body.contains("items") || !body["items"].is_array())
    throw ScoreError(400, "the body must hold \"items\": [{\"task_id\", \"completion\", \"request_id\"}, ...]");
  // The body's "profile" is every item's default; an item's own "profile" overrides it.
  const bool all = profile_field(body, false, "");
  std::vector<ScoreItem> items;
  size_t i = 0;
  for (const auto& e : body["items"]) {
    if (!e.is_object()) throw ScoreError(400, strf("item %zu is not an object", i));
    items.push_back({string_field(e, "task_id", i, true), string_field(e, "completion", i, true),
                     string_field(e, "request_id", i, false), profile_field(e, all, strf("item %zu: ", i))});
    ++i;
  }
  return items;
}

// Waits for every future until the deadline; the results, and whether all came.
// Gives up early (false) once `stopping` is set: the server is shutting down.
bool collect(const std::vector<std::shared_future<nlohmann::json>>& fs, const std::vector<ScoreItem>& items,
             double timeout_s, const std::atomic<bool>& stopping, nlohmann::json& results) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  results = nlohmann::json::array();
  bool all = true;
  for (size_t i = 0; i < fs.size(); ++i) {
    while (!stopping && Clock::now() < deadline &&
           fs[i].wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
    }
    if (fs[i].wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      results.push_back(fs[i].get());
    } else {
      all = false;
      results.push_back({{"request_id", items[i].request_id}, {"task_id", items[i].task_id}, {"status", "pending"}});
    }
  }
  return all;
}

void score_error(httplib::Response& res, const ScoreError& e) {
  if (e.status() == 429) res.set_header("Retry-After", std::to_string(int(std::ceil(e.retry_after_s()))));
  error(res, e.status(), e.what());
}

// An OpenRLHF label: a task id, or an object (or the JSON text of one) holding "task_id".
std::string task_of_label(const nlohmann::json& label, size_t i) {
  nlohmann::json j = label;
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (!s.empty() && s[0] == '{') {
      j = nlohmann::json::parse(s, nullptr, false);
      if (j.is_discarded()) throw ScoreError(400, strf("label %zu is neither a task id nor a JSON object", i));
    } else {
      return s;
    }
  }
  if (j.is_object() && j.contains("task_id") && j["task_id"].is_string()) return j["task_id"].get<std::string>();
  throw ScoreError(400, strf("label %zu must be a task id or an object with \"task_id\"", i));
}

std::string route_of(const httplib::Request& req) {
  if (req.path.rfind("/v1/jobs/", 0) == 0) return "/v1/jobs/ID";
  static const char* const known[] = {"/v1/score", "/v1/jobs", "/get_reward", "/v1/tasks", "/v1/health", "/metrics"};
  for (const char* k : known)
    if (req.path == k) return k;
  return "other";
}

}  // namespace

ServeHttp::ServeHttp(ServeHttpOptions opts, Scorer& scorer, EvalService& service, ServeStore& store)
    : opts_(std::move(opts)), scorer_(scorer), service_(service), store_(store), server_(std::make_unique<httplib::Server>()) {
  routes();
}

ServeHttp::~ServeHttp() = default;

void ServeHttp::routes() {
  httplib::Server& s = *server_;
  const int threads = std::max(2, opts_.threads);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  s.set_payload_max_length(opts_.max_body_bytes);
  // The listening socket: kept, so that bind() can raise its backlog (cpp-httplib listens with a
  // backlog of 5, and a burst of trainer workers connecting at once overflowed it: connections
  // reset before they were accepted).
  s.set_socket_options([this](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd_ = int(sock);
  });
  s.set_read_timeout(60, 0);
  s.set_write_timeout(60, 0);
  s.set_keep_alive_timeout(30);
  s.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) error(res, 413, strf("the body is larger than %zu bytes", opts_.max_body_bytes));
    else if (res.status == 404) error(res, 404, "no such endpoint");
    else error(res, res.status, "request refused");
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string why = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
    }
    error(res, 500, why);
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++requests_[{route_of(req), res.status}];
  });
  // Authentication before routing: every endpoint but the health check.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opts_.token.empty() || req.path == "/v1/health") return httplib::Server::HandlerResponse::Unhandled;
    std::string given;
    const std::string auth = req.get_header_value("Authorization");
    if (auth.rfind("Bearer ", 0) == 0) given = std::string(trim(auth.substr(7)));
    else if (req.path == "/get_reward" && req.has_param("token")) given = req.get_param_value("token");
    if (given.empty()) {
      res.set_header("WWW-Authenticate", "Bearer");
      error(res, 401, "a bearer token is required (Authorization: Bearer TOKEN)");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!constant_time_equal(given, opts_.token)) {
      error(res, 403, "the token is wrong");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  s.Post("/v1/score", [this](const httplib::Request& req, httplib::Response& res) {
    nlohmann::json body;
    if (!parse_body(req, res, body)) return;
    try {
      std::vector<ScoreItem> items = items_of(body);
      for (ScoreItem& it : items)
        if (it.request_id.empty()) it.request_id = "kf-" + random_hex_id();
      const auto fs = scorer_.submit(items);
      nlohmann::json results;
      const bool all = collect(fs, items, opts_.request_timeout_s, stopping_, results);
      if (!all && stopping_) {
        reply(res, 503, {{"error", "the server is stopping: ask again with the same request ids once it is back"},
                         {"results", results}});
        return;
      }
      if (!all) {
        reply(res, 504, {{"error", strf("not every item was judged within %.0f s; the rest are still being judged: "
                                        "ask again with the same request ids",
                                        opts_.request_timeout_s)},
                         {"results", results}});
        return;
      }
      reply(res, 200, {{"results", results}});
    } catch (const ScoreError& e) {
      score_error(res, e);
    }
  });

  s.Post("/v1/jobs", [this](const httplib::Request& req, httplib::Response& res) {
    nlohmann::json body;
    if (!parse_body(req, res, body)) return;
    try {
      std::vector<ScoreItem> items = items_of(body);
      for (ScoreItem& it : items)
        if (it.request_id.empty()) it.request_id = "kf-" + random_hex_id();  // so that the job can name them
      const std::string job = "job-" + random_hex_id();
      scorer_.submit(items, job);
      reply(res, 202, {{"job_id", job}, {"items", items.size()}, {"poll", "/v1/jobs/" + job}});
    } catch (const ScoreError& e) {
      score_error(res, e);
    }
  });

  s.Get(R"(/v1/jobs/([A-Za-z0-9_.-]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    const auto ids = store_.job(id);
    if (!ids) return error(res, 404, "no such job: " + id);
    nlohmann::json results = nlohmann::json::array();
    size_t done = 0;
    for (const std::string& rid : *ids) {
      nlohmann::json r = scorer_.lookup(rid);
      if (r.is_object() && r.value("status", "") == "done") ++done;
      results.push_back(r);
    }
    reply(res, 200, {{"job_id", id},
                     {"state", done == ids->size() ? "done" : "pending"},
                     {"done", done},
                     {"items", ids->size()},
                     {"results", results}});
  });

  s.Post("/get_reward", [this](const httplib::Request& req, httplib::Response& res) {
    nlohmann::json body;
    if (!parse_body(req, res, body)) return;
    try {
      if (!body.contains("query") || !body["query"].is_array())
        throw ScoreError(400, "the body must hold \"query\": [prompt + response, ...]");
      const nlohmann::json& queries = body["query"];
      const nlohmann::json prompts = body.value("prompts", nlohmann::json::array());
      if (!body.contains("labels") || !body["labels"].is_array())
        throw ScoreError(400, "\"labels\" must list the task id of every query");
      const nlohmann::json& labels = body["labels"];
      if (labels.size() != queries.size() || (!prompts.empty() && prompts.size() != queries.size()))
        throw ScoreError(400, strf("query, prompts and labels differ in length (%zu, %zu, %zu)", queries.size(),
                                   prompts.size(), labels.size()));
      std::vector<ScoreItem> items;
      for (size_t i = 0; i < queries.size(); ++i) {
        if (!queries[i].is_string()) throw ScoreError(400, strf("query %zu is not a string", i));
        std::string response = queries[i].get<std::string>();
        if (!prompts.empty()) {
          if (!prompts[i].is_string()) throw ScoreError(400, strf("prompt %zu is not a string", i));
          const std::string p = prompts[i].get<std::string>();
          if (response.compare(0, p.size(), p) == 0) response = response.substr(p.size());
        }
        const std::string task = task_of_label(labels[i], i);
        // OpenRLHF sends no ids: the same task and text is the same request (scored once).
        const std::string rid = "orlhf-" + sha256_hex(task + std::string(1, '\0') + queries[i].get<std::string>()).substr(0, 32);
        items.push_back({task, response, rid});
      }
      const auto fs = scorer_.submit(items);
      nlohmann::json results;
      if (!collect(fs, items, opts_.request_timeout_s, stopping_, results))
        return error(res, stopping_ ? 503 : 504, strf("not every query was judged within %.0f s; ask again (the same queries are "
                                    "answered from the store once judged)",
                                    opts_.request_timeout_s));
      nlohmann::json rewards = nlohmann::json::array(), scores = nlohmann::json::array();
      nlohmann::json correct = nlohmann::json::array(), speedup = nlohmann::json::array();
      for (const auto& r : results) {
        rewards.push_back(r.value("reward", 0.0));
        scores.push_back(r.value("correct", false) ? 1.0 : 0.0);
        correct.push_back(r.value("correct", false) ? 1.0 : 0.0);
        double s = 0;
        for (const auto& [mode, sum] : r["speedup"].items()) s = std::max(s, sum.value("median", 0.0));
        speedup.push_back(r.value("correct", false) ? s : 0.0);
      }
      reply(res, 200, {{"rewards", rewards}, {"scores", scores},
                       {"extra_logs", {{"kforge_correct", correct}, {"kforge_speedup", speedup}}}});
    } catch (const ScoreError& e) {
      score_error(res, e);
    }
  });

  s.Get("/v1/tasks", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& t : service_.tasks()) list.push_back(t->describe());
    reply(res, 200, {{"tasks", list}});
  });

  s.Get("/v1/health", [this](const httplib::Request&, httplib::Response& res) {
    const EvalService::Stats st = service_.stats();
    reply(res, 200, {{"status", "ok"},
                     {"tasks", service_.tasks().size()},
                     {"slots", service_.slot_count()},
                     {"pending", st.pending},
                     {"queue_limit", scorer_.options().max_pending}});
  });

  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });
}

std::string ServeHttp::metrics_text() const {
  const EvalService::Stats st = service_.stats();
  const Scorer::Metrics m = scorer_.metrics();
  const ServeStore::Counts c = store_.counts();
  std::string out;
  auto help = [&](const char* name, const char* type, const char* text) {
    out += strf("# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
  };
  help("kforge_serve_queue_depth", "gauge", "Candidates accepted and not yet judged.");
  out += strf("kforge_serve_queue_depth %zu\n", st.pending);
  help("kforge_serve_judging", "gauge", "Candidates in batches being judged.");
  out += strf("kforge_serve_judging %zu\n", st.judging);
  help("kforge_serve_verdicts_total", "counter", "Verdicts judged by this server, by the first reason (or accepted).");
  for (const auto& [r, n] : m.verdicts_by_reason)
    out += strf("kforge_serve_verdicts_total{reason=\"%s\"} %llu\n", r.c_str(), (unsigned long long)n);
  help("kforge_serve_items_total", "counter", "Items answered, by where the answer came from.");
  for (const auto& [o, n] : m.items_by_origin)
    out += strf("kforge_serve_items_total{origin=\"%s\"} %llu\n", o.c_str(), (unsigned long long)n);
  help("kforge_serve_latency_seconds", "histogram", "From acceptance to verdict, per judged candidate.");
  for (size_t i = 0; i < m.latency_buckets.size(); ++i)
    out += strf("kforge_serve_latency_seconds_bucket{le=\"%g\"} %llu\n", m.latency_buckets[i],
                (unsigned long long)m.latency_counts[i]);
  out += strf("kforge_serve_latency_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)m.latency_counts.back());
  out += strf("kforge_serve_latency_seconds_sum %.6f\nkforge_serve_latency_seconds_count %llu\n", m.latency_sum_s,
              (unsigned long long)m.latency_n);
  help("kforge_serve_slot_busy_fraction", "gauge", "Fraction of the uptime each device slot spent judging.");
  for (size_t i = 0; i < st.slot_busy_s.size(); ++i)
    out += strf("kforge_serve_slot_busy_fraction{slot=\"%zu\"} %.6f\n", i,
                st.uptime_s > 0 ? st.slot_busy_s[i] / st.uptime_s : 0.0);
  help("kforge_serve_slot_busy_seconds_total", "counter", "Seconds each device slot spent judging (its judge called).");
  for (size_t i = 0; i < st.slot_busy_s.size(); ++i)
    out += strf("kforge_serve_slot_busy_seconds_total{slot=\"%zu\"} %.6f\n", i, st.slot_busy_s[i]);
  help("kforge_serve_uptime_seconds", "gauge", "Seconds since the evaluation service started.");
  out += strf("kforge_serve_uptime_seconds %.6f\n", st.uptime_s);
  help("kforge_serve_rejected_full_total", "counter", "Batches refused with 429 (queue full).");
  out += strf("kforge_serve_rejected_full_total %llu\n", (unsigned long long)m.rejected_429);
  help("kforge_serve_store_requests", "gauge", "Rows of the store by state.");
  out += strf("kforge_serve_store_requests{state=\"pending\"} %lld\n", (long long)c.pending);
  out += strf("kforge_serve_store_requests{state=\"done\"} %lld\n", (long long)c.done);
  help("kforge_serve_http_requests_total", "counter", "HTTP requests by route and status.");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [k, n] : requests_)
      out += strf("kforge_serve_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n", k.first.c_str(), k.second,
                  (unsigned long long)n);
  }
  return out;
}

int ServeHttp::bind() {
  int port = opts_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(opts_.host);
    if (port < 0) KF_USAGE_ERROR("cannot bind %s to any port", opts_.host.c_str());
  } else if (!server_->bind_to_port(opts_.host, port)) {
    KF_USAGE_ERROR("cannot bind %s:%d (in use, or not an address of this machine)", opts_.host.c_str(), port);
  }
  if (listen_fd_ >= 0) ::listen(listen_fd_, 4096);  // Linux takes a second listen() as a new backlog
  return port;
}

void ServeHttp::run() { server_->listen_after_bind(); }

void ServeHttp::stop() {
  stopping_ = true;
  server_->stop();
}

}  // namespace kforge
