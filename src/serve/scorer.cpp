#include "serve/scorer.hpp"

#include <cmath>
#include <random>
#include <set>

#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/text.hpp"
#include "service/completion.hpp"

namespace kforge {

std::string random_hex_id() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) id += strf("%08x", unsigned(rd()));
  return id;
}

struct Scorer::InFlight {
  std::string request_id, task_id, code_sha, how;
  std::promise<nlohmann::json> promise;
  std::shared_future<nlohmann::json> future;
  std::vector<std::shared_ptr<InFlight>> followers;  // reuse_verdicts: identical code, answered with this verdict
  std::string code_key;
};

namespace {

std::string completion_sha(const std::string& task_id, const std::string& completion) {
  return sha256_hex(task_id + std::string(1, '\0') + completion);
}

nlohmann::json summary_json(const Summary& s) {
  return {{"median", s.median}, {"p10", s.p10}, {"p90", s.p90}, {"n", s.n}};
}

}  // namespace

Scorer::Scorer(EvalService& service, ServeStore& store, ScorerOptions opts)
    : service_(service), store_(store), opts_(opts) {
  metrics_.latency_counts.assign(metrics_.latency_buckets.size() + 1, 0);
}

Scorer::~Scorer() = default;

nlohmann::json Scorer::result_of(const Verdict& v, const std::string& request_id, const std::string& task_id,
                                 const std::string& code_sha, const std::string& how) {
  nlohmann::json speedup = nlohmann::json::object();
  for (const auto& [mode, s] : v.speedup) speedup[mode] = summary_json(s);
  nlohmann::json timings = nlohmann::json::object();
  if (v.details.contains("service") && v.details["service"].is_object())
    for (const auto& [k, x] : v.details["service"].items())
      if (k != "slot" && k != "device") timings[k] = x;
  if (v.details.contains("compile") && v.details["compile"].is_object())
    timings["compile_s"] = v.details["compile"].value("seconds", 0.0);
  for (const char* k : {"build_s", "load_s"})
    if (v.details.contains(k) && v.details[k].is_number()) timings[k] = v.details[k];
  // The judge's own phases: setup, load, verify, time (seconds; both judges write them).
  if (v.details.contains("phases_s") && v.details["phases_s"].is_object()) timings["phases_s"] = v.details["phases_s"];
  nlohmann::json r = {{"request_id", request_id},
                      {"task_id", task_id},
                      {"status", "done"},
                      {"reward", std::isfinite(v.reward) ? v.reward : 0.0},
                      {"correct", v.correct},
                      {"speedup", speedup},
                      {"reasons", v.reasons},
                      {"flags", v.flags},
                      {"message", v.message},
                      {"timings", timings},
                      {"code_sha256", code_sha},
                      {"extracted", how}};
  if (v.details.contains("service") && v.details["service"].contains("device"))
    r["device"] = v.details["service"]["device"];
  if (v.details.contains("reward")) r["reward_parts"] = v.details["reward"];  // speed-up term, penalties, total
  // kforge serve --profile, or the item's "profile": true (eval/profile.hpp)
  if (v.details.contains("profile")) r["profile"] = v.details["profile"];
  return r;
}

std::shared_future<nlohmann::json> Scorer::ready(nlohmann::json j) const {
  std::promise<nlohmann::json> p;
  p.set_value(std::move(j));
  return p.get_future().share();
}

void Scorer::count(const nlohmann::json& result, const std::string& origin) {
  // Called with mutex_ held.
  ++metrics_.items_by_origin[origin];
  if (origin != "judged") return;
  const auto& reasons = result["reasons"];
  ++metrics_.verdicts_by_reason[reasons.empty() ? "accepted" : reasons[0].get<std::string>()];
  const double t = result["timings"].value("total_s", 0.0);
  metrics_.latency_sum_s += t;
  ++metrics_.latency_n;
  for (size_t i = 0; i < metrics_.latency_buckets.size(); ++i)
    if (t <= metrics_.latency_buckets[i]) ++metrics_.latency_counts[i];
  ++metrics_.latency_counts.back();
}

std::vector<std::shared_future<nlohmann::json>> Scorer::submit(const std::vector<ScoreItem>& items_in,
                                                              const std::string& job_id) {
  if (items_in.empty()) throw ScoreError(400, "the batch holds no items");
  if (items_in.size() > opts_.max_batch)
    throw ScoreError(413, strf("the batch holds %zu items; the limit is %zu", items_in.size(), opts_.max_batch));
  std::vector<ScoreItem> items = items_in;
  std::vector<std::shared_ptr<const EvalTask>> tasks;
  std::vector<ExtractedCandidate> extracted;
  std::vector<ServeRecord> records;
  for (size_t i = 0; i < items.size(); ++i) {
    ScoreItem& it = items[i];
    auto task = service_.task(it.task_id);
    if (!task) throw ScoreError(404, strf("item %zu: unknown task id '%s' (GET /v1/tasks lists them)", i, it.task_id.c_str()));
    if (it.completion.size() > opts_.max_completion_bytes)
      throw ScoreError(413, strf("item %zu: the completion has %zu bytes; the limit is %zu", i, it.completion.size(),
                                 opts_.max_completion_bytes));
    if (it.request_id.size() > 256) throw ScoreError(400, strf("item %zu: the request id is longer than 256 bytes", i));
    if (it.request_id.empty()) it.request_id = "kf-" + random_hex_id();
    tasks.push_back(task);
    extracted.push_back(extract_candidate(it.completion, *task));
    ServeRecord r;
    r.request_id = it.request_id;
    r.task_id = it.task_id;
    r.completion = it.completion;
    r.completion_sha = completion_sha(it.task_id, it.completion);
    r.profile = it.profile;
    if (extracted.back().ok) {
      r.code = extracted.back().source;
      r.code_sha = sha256_hex(r.code);
    }
    records.push_back(std::move(r));
  }

  std::lock_guard<std::mutex> lock(mutex_);
  // Admission: what is stored or in flight already needs no room; a request id must keep its content.
  size_t new_judging = 0;
  std::set<std::string> seen, seen_code;
  std::map<std::string, std::string> batch_sha;
  for (const ServeRecord& r : records) {
    auto [at, fresh] = batch_sha.emplace(r.request_id, r.completion_sha);
    if (!fresh && at->second != r.completion_sha)
      throw ScoreError(409, "request id '" + r.request_id + "' names two different completions in this batch");
    if (!seen.insert(r.request_id).second) continue;  // repeated within the batch: answered once
    std::optional<ServeRecord> stored = store_.get(r.request_id);
    if (stored) {
      if (stored->completion_sha != r.completion_sha)
        throw ScoreError(409, "request id '" + r.request_id + "' was used before for another task or completion");
      continue;
    }
    if (r.code.empty()) continue;
    const std::string key = code_key(r);
    if (opts_.reuse_verdicts && (by_code_.count(key) || !seen_code.insert(key).second)) continue;
    ++new_judging;
  }
  if (opts_.max_pending > 0 && new_judging > 0) {
    const size_t pending = service_.stats().pending;
    if (pending + new_judging > opts_.max_pending) {
      ++metrics_.rejected_429;
      const EvalService::Stats st = service_.stats();
      const double per = st.mean_judge_s > 0 ? st.mean_judge_s : 5.0;
      const double wait = std::ceil(per * double(pending) / double(std::max<size_t>(1, service_.slot_count())));
      throw ScoreError(429,
                       strf("the queue holds %zu candidates (limit %zu); this batch adds %zu: retry later", pending,
                            opts_.max_pending, new_judging),
                       std::clamp(wait, 1.0, 600.0));
    }
  }
  const std::vector<std::optional<ServeRecord>> admitted = store_.admit(records, job_id);
  if (!job_id.empty()) {
    std::vector<std::string> ids;
    for (const ServeRecord& r : records) ids.push_back(r.request_id);
    store_.create_job(job_id, ids);
  }

  std::vector<std::shared_future<nlohmann::json>> out;
  std::map<std::string, std::shared_future<nlohmann::json>> this_batch;
  for (size_t i = 0; i < records.size(); ++i) {
    const ServeRecord& r = records[i];
    if (auto it = this_batch.find(r.request_id); it != this_batch.end()) {
      out.push_back(it->second);
      continue;
    }
    std::shared_future<nlohmann::json> f;
    if (admitted[i]) {
      const ServeRecord& s = *admitted[i];
      if (s.state == "done") {
        nlohmann::json j = s.result;
        j["from_store"] = true;
        f = ready(j);
        ++metrics_.items_by_origin["stored"];
      } else if (auto p = by_request_.find(r.request_id); p != by_request_.end()) {
        f = p->second->future;
      } else {
        f = start(s, extracted[i].how);  // pending but not in flight (left by a killed server)
      }
    } else if (!extracted[i].ok) {
      Verdict v;
      v.candidate = r.request_id;
      v.reject(kInvalidCompletion, extracted[i].error);
      v.reward = compute_reward(v, tasks[i]->reward());
      nlohmann::json j = result_of(v, r.request_id, r.task_id, "", "");
      store_.complete(r.request_id, j, "invalid");
      count(j, "invalid");
      f = ready(j);
    } else {
      const std::string key = code_key(r);
      std::optional<nlohmann::json> prior;
      // Only a verdict judged under these settings (reward, penalties, modes, time-outs...: the task's
      // judge key) is reused, and for an item that asks for a profile only one stored with a profile.
      if (opts_.reuse_verdicts)
        prior = store_.judged_result(r.task_id, r.code_sha, tasks[i]->judge_key(), profiled(r));
      if (prior) {
        nlohmann::json j = *prior;
        j["reused_from"] = j["request_id"];
        j["request_id"] = r.request_id;
        j["extracted"] = extracted[i].how;
        store_.complete(r.request_id, j, "reused");
        count(j, "reused");
        f = ready(j);
      } else if (auto lead = by_code_.find(key); opts_.reuse_verdicts && lead != by_code_.end()) {
        auto follower = std::make_shared<InFlight>();
        follower->request_id = r.request_id;
        follower->task_id = r.task_id;
        follower->code_sha = r.code_sha;
        follower->how = extracted[i].how;
        follower->future = follower->promise.get_future().share();
        lead->second->followers.push_back(follower);
        by_request_[r.request_id] = follower;
        f = follower->future;
      } else {
        f = start(r, extracted[i].how);
      }
    }
    this_batch[r.request_id] = f;
    out.push_back(f);
  }
  return out;
}

std::shared_future<nlohmann::json> Scorer::start(const ServeRecord& r, const std::string& how) {
  // Called with mutex_ held.
  auto fl = std::make_shared<InFlight>();
  fl->request_id = r.request_id;
  fl->task_id = r.task_id;
  fl->code_sha = r.code_sha;
  fl->how = how;
  fl->future = fl->promise.get_future().share();
  fl->code_key = code_key(r);
  by_request_[r.request_id] = fl;
  if (opts_.reuse_verdicts) by_code_[fl->code_key] = fl;
  store_.add_attempt(r.request_id);
  const std::string id = r.request_id;
  service_.submit(r.task_id, r.code, [this, id](const Verdict& v) { on_verdict(id, v); }, r.profile);
  return fl->future;
}

void Scorer::on_verdict(const std::string& request_id, const Verdict& v) {
  std::shared_ptr<InFlight> fl;
  std::vector<std::pair<std::shared_ptr<InFlight>, nlohmann::json>> answers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_request_.find(request_id);
    if (it == by_request_.end()) return;
    fl = it->second;
    by_request_.erase(it);
    if (v.details.value("not_judged", false)) {
      // The service stopped before judging it: the row stays pending, for the next start.
      if (auto c = by_code_.find(fl->code_key); c != by_code_.end() && c->second == fl) by_code_.erase(c);
      const nlohmann::json later = {{"request_id", fl->request_id}, {"task_id", fl->task_id}, {"status", "pending"}};
      answers.push_back({fl, later});
      for (auto& f : fl->followers) {
        by_request_.erase(f->request_id);
        answers.push_back({f, {{"request_id", f->request_id}, {"task_id", f->task_id}, {"status", "pending"}}});
      }
    } else {
      if (auto c = by_code_.find(fl->code_key); c != by_code_.end() && c->second == fl) by_code_.erase(c);
      nlohmann::json j = result_of(v, fl->request_id, fl->task_id, fl->code_sha, fl->how);
      if (auto task = service_.task(fl->task_id)) j["judge_key"] = task->judge_key();  // what --reuse-verdicts matches
      store_.complete(fl->request_id, j, "judged");
      count(j, "judged");
      answers.push_back({fl, j});
      for (auto& f : fl->followers) {
        nlohmann::json k = j;
        k["reused_from"] = fl->request_id;
        k["request_id"] = f->request_id;
        k["extracted"] = f->how;
        store_.complete(f->request_id, k, "reused");
        count(k, "reused");
        by_request_.erase(f->request_id);
        answers.push_back({f, k});
      }
    }
  }
  for (auto& [f, j] : answers) f->promise.set_value(j);
}

size_t Scorer::recover() {
  const std::vector<ServeRecord> left = store_.pending();
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const ServeRecord& r : left) {
    auto task = service_.task(r.task_id);
    if (!task) {
      // Started without that task this time: the row stays pending until a server with it runs.
      std::fprintf(stderr, "kforge serve: pending request '%s' names task '%s', which this server lacks; left pending\n",
                   r.request_id.c_str(), r.task_id.c_str());
      continue;
    }
    const ExtractedCandidate e = extract_candidate(r.completion, *task);
    if (!e.ok) {
      Verdict v;
      v.reject(kInvalidCompletion, e.error);
      v.reward = compute_reward(v, task->reward());
      nlohmann::json j = result_of(v, r.request_id, r.task_id, "", "");
      store_.complete(r.request_id, j, "invalid");
      count(j, "invalid");
      continue;
    }
    ++n;
    const std::string key = code_key(r);
    if (auto lead = by_code_.find(key); opts_.reuse_verdicts && lead != by_code_.end()) {
      // The same code pending twice (reused before the kill): judged once, answered for both.
      auto follower = std::make_shared<InFlight>();
      follower->request_id = r.request_id;
      follower->task_id = r.task_id;
      follower->code_sha = r.code_sha;
      follower->how = e.how;
      follower->future = follower->promise.get_future().share();
      lead->second->followers.push_back(follower);
      by_request_[r.request_id] = follower;
      continue;
    }
    start(r, e.how);
  }
  return n;
}

nlohmann::json Scorer::lookup(const std::string& request_id) const {
  std::optional<ServeRecord> r = store_.get(request_id);
  if (!r) return nullptr;
  if (r->state == "done") return r->result;
  return {{"request_id", request_id}, {"task_id", r->task_id}, {"status", "pending"}};
}

Scorer::Metrics Scorer::metrics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return metrics_;
}

}  // namespace kforge
