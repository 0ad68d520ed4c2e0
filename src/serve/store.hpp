// kforge serve's store (SQLite): every request it accepts, before it answers, and its result when
// scored. A request id that is already stored is never scored again: its stored result is the
// answer. Rows still 'pending' when the server starts again (it was killed) are judged again; a
// 'done' row never is. `attempts` counts how often a row was handed to the evaluator.
#pragma once
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "db/sqlite.hpp"

namespace kforge {

struct ServeRecord {
  std::string request_id, task_id;
  std::string completion;       // as received
  std::string completion_sha;   // sha256 of task id and completion (a request id reused for other content differs)
  std::string code, code_sha;   // the extracted candidate (empty when none could be taken)
  std::string state;            // "pending" or "done"
  std::string origin;           // "judged", "reused" (--reuse-verdicts), "invalid" (no code)
  bool profile = false;         // the item asked for a profile ("profile": true)
  nlohmann::json result;        // the item's reply, when done
  int attempts = 0;
  double accepted_at = 0, done_at = 0;  // Unix seconds
};

class ServeStore {
 public:
  explicit ServeStore(const std::string& path);

  // Inserts each record whose request id is new, as 'pending', in one transaction; returns, per
  // record, the stored row when its id was already there (nothing changed for it), else nothing.
  std::vector<std::optional<ServeRecord>> admit(const std::vector<ServeRecord>& records, const std::string& job_id);
  void add_attempt(const std::string& request_id);
  // Marks a row done with its result (and the code taken from the completion). Only a pending row
  // changes: false when it was done already.
  bool complete(const std::string& request_id, const nlohmann::json& result, const std::string& origin);
  std::optional<ServeRecord> get(const std::string& request_id) const;
  // The result of a judged (not reused, not invalid) row of this task and code, judged under
  // `judge_key` (the result's "judge_key": the task's settings, reward included), if any; with
  // `with_profile`, only a result that has a "profile" (the metrics, or why there are none).
  std::optional<nlohmann::json> judged_result(const std::string& task_id, const std::string& code_sha,
                                              const std::string& judge_key, bool with_profile = false) const;
  std::vector<ServeRecord> pending() const;

  void create_job(const std::string& job_id, const std::vector<std::string>& request_ids);
  std::optional<std::vector<std::string>> job(const std::string& job_id) const;

  struct Counts {
    int64_t pending = 0, done = 0, judged = 0, reused = 0, invalid = 0, attempts = 0;
  };
  Counts counts() const;
  const std::string& path() const { return db_.path(); }

 private:
  ServeRecord row(const Statement& s) const;
  mutable std::mutex mutex_;
  SqliteDb db_;
};

}  // namespace kforge
