#include "serve/store.hpp"

#include <chrono>

#include "core/error.hpp"
#include "core/json.hpp"

namespace kforge {
namespace {

// Migration i (1-based) takes the schema from version i-1 to version i. Append, never edit.
const char* const kMigrations[] = {
    R"sql(
      CREATE TABLE requests (
        request_id TEXT PRIMARY KEY,
        task_id TEXT NOT NULL,
        completion TEXT NOT NULL,
        completion_sha TEXT NOT NULL,
        code TEXT NOT NULL,
        code_sha TEXT NOT NULL,
        state TEXT NOT NULL,
        origin TEXT,
        result_json TEXT,
        reward REAL,
        correct INTEGER,
        attempts INTEGER NOT NULL DEFAULT 0,
        job_id TEXT,
        accepted_at REAL NOT NULL,
        done_at REAL
      );
      CREATE INDEX requests_state ON requests(state);
      CREATE INDEX requests_code ON requests(task_id, code_sha, origin);
      CREATE TABLE jobs (
        job_id TEXT PRIMARY KEY,
        request_ids_json TEXT NOT NULL,
        created_at REAL NOT NULL
      );
    )sql",
    // 2: an item's "profile": true (kept so that a row judged after a restart is still profiled).
    R"sql(
      ALTER TABLE requests ADD COLUMN profile INTEGER NOT NULL DEFAULT 0;
    )sql",
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

ServeStore::ServeStore(const std::string& path) : db_(path, "serve store") {
  db_.migrate(kMigrations, "use a newer kforge or another --store");
}

ServeRecord ServeStore::row(const Statement& s) const {
  ServeRecord r;
  r.request_id = s.text(0);
  r.task_id = s.text(1);
  r.completion = s.text(2);
  r.completion_sha = s.text(3);
  r.code = s.text(4);
  r.code_sha = s.text(5);
  r.state = s.text(6);
  r.origin = s.text(7);
  const std::string result = s.text(8);
  if (!result.empty()) r.result = nlohmann::json::parse(result, nullptr, false);
  r.attempts = int(s.integer(9));
  r.accepted_at = s.real(10);
  r.done_at = s.is_null(11) ? 0 : s.real(11);
  r.profile = s.integer(12) != 0;
  return r;
}

#define KF_SERVE_COLUMNS \
  "request_id, task_id, completion, completion_sha, code, code_sha, state, origin, result_json, attempts, " \
  "accepted_at, done_at, profile"

std::vector<std::optional<ServeRecord>> ServeStore::admit(const std::vector<ServeRecord>& records,
                                                          const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::optional<ServeRecord>> out;
  Transaction tx(db_);
  Statement find(db_, "SELECT " KF_SERVE_COLUMNS " FROM requests WHERE request_id = ?");
  Statement insert(db_,
                   "INSERT INTO requests (request_id, task_id, completion, completion_sha, code, code_sha, state, "
                   "attempts, job_id, accepted_at, profile) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?)");
  const double t = now_s();
  for (const ServeRecord& r : records) {
    find.reset();
    find.bind(0, r.request_id);
    if (find.step()) {
      out.push_back(row(find));
      continue;
    }
    insert.reset();
    insert.bind(0, r.request_id).bind(1, r.task_id).bind(2, r.completion).bind(3, r.completion_sha);
    insert.bind(4, r.code).bind(5, r.code_sha);
    if (job_id.empty()) insert.bind_null(6);
    else insert.bind(6, job_id);
    insert.bind(7, t).bind(8, int64_t(r.profile ? 1 : 0));
    insert.step();
    out.push_back(std::nullopt);
  }
  tx.commit();
  return out;
}

void ServeStore::add_attempt(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement s(db_, "UPDATE requests SET attempts = attempts + 1 WHERE request_id = ?");
  s.bind(0, request_id);
  s.step();
}

bool ServeStore::complete(const std::string& request_id, const nlohmann::json& result, const std::string& origin) {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement s(db_,
              "UPDATE requests SET state = 'done', origin = ?, result_json = ?, reward = ?, correct = ?, done_at = ? "
              "WHERE request_id = ? AND state = 'pending'");
  s.bind(0, origin).bind(1, dump_json(result));
  s.bind(2, result.value("reward", 0.0)).bind(3, int(result.value("correct", false)));
  s.bind(4, now_s()).bind(5, request_id);
  s.step();
  return db_.changes() == 1;
}

std::optional<ServeRecord> ServeStore::get(const std::string& request_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement s(db_, "SELECT " KF_SERVE_COLUMNS " FROM requests WHERE request_id = ?");
  s.bind(0, request_id);
  if (!s.step()) return std::nullopt;
  return row(s);
}

std::optional<nlohmann::json> ServeStore::judged_result(const std::string& task_id, const std::string& code_sha,
                                                       const std::string& judge_key, bool with_profile) const {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement s(db_,
              "SELECT result_json FROM requests WHERE task_id = ? AND code_sha = ? AND state = 'done' AND "
              "origin = 'judged' AND json_extract(result_json, '$.judge_key') = ? AND "
              "(? = 0 OR json_type(result_json, '$.profile') = 'object') ORDER BY done_at LIMIT 1");
  s.bind(0, task_id).bind(1, code_sha).bind(2, judge_key).bind(3, int64_t(with_profile ? 1 : 0));
  if (!s.step()) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(s.text(0), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::vector<ServeRecord> ServeStore::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement s(db_, "SELECT " KF_SERVE_COLUMNS " FROM requests WHERE state = 'pending' ORDER BY accepted_at, rowid");
  std::vector<ServeRecord> out;
  while (s.step()) out.push_back(row(s));
  return out;
}

void ServeStore::create_job(const std::string& job_id, const std::vector<std::string>& request_ids) {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement s(db_, "INSERT INTO jobs (job_id, request_ids_json, created_at) VALUES (?, ?, ?)");
  s.bind(0, job_id).bind(1, dump_json(request_ids)).bind(2, now_s());
  s.step();
}

std::optional<std::vector<std::string>> ServeStore::job(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement s(db_, "SELECT request_ids_json FROM jobs WHERE job_id = ?");
  s.bind(0, job_id);
  if (!s.step()) return std::nullopt;
  return nlohmann::json::parse(s.text(0)).get<std::vector<std::string>>();
}

ServeStore::Counts ServeStore::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Counts c;
  Statement s(db_, "SELECT state, IFNULL(origin, ''), COUNT(*), SUM(attempts) FROM requests GROUP BY state, origin");
  while (s.step()) {
    const std::string state = s.text(0), origin = s.text(1);
    const int64_t n = s.integer(2);
    c.attempts += s.integer(3);
    if (state == "pending") c.pending += n;
    else c.done += n;
    if (origin == "judged") c.judged += n;
    if (origin == "reused") c.reused += n;
    if (origin == "invalid") c.invalid += n;
  }
  return c;
}

}  // namespace kforge
