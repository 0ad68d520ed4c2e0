// The run database: one SQLite file that keeps every run, every shape and every measurement.
// Designed for the later issues too (evaluator verdicts, search candidates): versioned migrations,
// WAL mode, every write in a transaction.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "db/sqlite.hpp"
#include "report/results.hpp"

namespace kforge {

class RunDb {
 public:
  // Opens or creates the database at `path` and applies pending migrations. A database written by
  // a newer kforge (higher schema version) is refused with a clear usage error.
  explicit RunDb(const std::string& path);
  ~RunDb();
  RunDb(const RunDb&) = delete;
  RunDb& operator=(const RunDb&) = delete;

  static int latest_schema_version();
  int schema_version() const;

  // A new run row with status "running". `kind` e.g. "hgemm-bench"; `device` and `options` are
  // stored as JSON text.
  int64_t begin_run(const std::string& kind, const std::string& command, const nlohmann::json& device,
                    const nlohmann::json& options);
  // Stores rows (shapes are inserted once and shared across runs), in one transaction.
  void add_measurements(int64_t run_id, const std::vector<Measurement>& rows);
  // status: "complete" | "failed" | "interrupted".
  void finish_run(int64_t run_id, const std::string& status, const nlohmann::json& summary);

  // Read back (tests, reports).
  std::vector<Measurement> measurements(int64_t run_id) const;
  std::string run_status(int64_t run_id) const;

 private:
  SqliteDb db_;
};

}  // namespace kforge
