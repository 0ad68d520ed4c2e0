#include "db/rundb.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/text.hpp"
#include "kforge/version.hpp"

namespace kforge {

namespace {

// Migration i (1-based) takes the schema from version i-1 to version i. Append, never edit.
const char* const kMigrations[] = {
    // 1: runs, shapes, measurements.
    R"sql(
      CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        command TEXT,
        kforge_version TEXT,
        started_at TEXT,
        finished_at TEXT,
        status TEXT NOT NULL,
        device_json TEXT,
        options_json TEXT,
        summary_json TEXT
      );
      CREATE TABLE shapes (
        id INTEGER PRIMARY KEY,
        op TEXT NOT NULL,
        m INTEGER, n INTEGER, k INTEGER,
        layout TEXT,
        acc TEXT,
        UNIQUE(op, m, n, k, layout, acc)
      );
      CREATE TABLE measurements (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        shape_id INTEGER NOT NULL REFERENCES shapes(id),
        impl TEXT NOT NULL,
        mode TEXT NOT NULL,
        median_us REAL, p10_us REAL, p90_us REAL, min_us REAL, max_us REAL, mean_us REAL,
        samples INTEGER,
        calls_per_sample INTEGER,
        tflops REAL,
        floor_us REAL,
        floor_pct REAL,
        ratio_to_best REAL,
        verified INTEGER,
        err_ratio REAL,
        algo TEXT,
        created_at TEXT
      );
      CREATE INDEX measurements_run ON measurements(run_id);
      CREATE INDEX measurements_shape ON measurements(shape_id);
    )sql",
};
constexpr int kLatestVersion = int(sizeof kMigrations / sizeof kMigrations[0]);

// The op name of HGEMM shapes in the shapes table.
constexpr const char* kHgemmOp = "hgemm";

[[noreturn]] void fail(sqlite3* db, const char* what) {
  const char* file = sqlite3_db_filename(db, "main");
  KF_RUNTIME_ERROR("run database '%s': %s: %s", file ? file : "?", what, sqlite3_errmsg(db));
}

// A prepared statement, finalized on scope exit. Parameters and columns are 0-based here.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail(db, "preparing a statement");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, int64_t v) { return check(sqlite3_bind_int64(stmt_, i + 1, v)); }
  Statement& bind(int i, int v) { return bind(i, int64_t(v)); }
  // SQLite stores NaN as NULL; reading it back gives NaN again (see real()).
  Statement& bind(int i, double v) { return check(sqlite3_bind_double(stmt_, i + 1, v)); }
  Statement& bind(int i, const std::string& v) {
    return check(sqlite3_bind_text(stmt_, i + 1, v.data(), int(v.size()), SQLITE_TRANSIENT));
  }

  // Runs one step: true when a row is ready, false when the statement is done.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, "executing a statement");
  }
  // Makes the statement ready to run again with new bindings.
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return is_null(col) ? NAN : sqlite3_column_double(stmt_, col); }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, size_t(sqlite3_column_bytes(stmt_, col))) : std::string();
  }

 private:
  Statement& check(int rc) {
    if (rc != SQLITE_OK) fail(db_, "binding a parameter");
    return *this;
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE now; ROLLBACK on scope exit unless commit() was called.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { run("BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit() {
    run("COMMIT");
    done_ = true;
  }

 private:
  void run(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(db_, sql);
  }
  sqlite3* db_;
  bool done_ = false;
};

// The schema version recorded in the database; 0 when it has none yet.
int read_schema_version(sqlite3* db) {
  Statement has_table(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
  if (!has_table.step()) return 0;
  Statement version(db, "SELECT MAX(version) FROM schema_version");
  return version.step() && !version.is_null(0) ? int(version.integer(0)) : 0;
}

// Whether the database holds tables of its own (so it is not a fresh, empty file).
bool has_user_tables(sqlite3* db) {
  Statement q(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
  return q.step();
}

}  // namespace

RunDb::RunDb(const std::string& path) : path_(path) {
  const int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    KF_USAGE_ERROR("cannot open run database '%s': %s", path.c_str(), why.c_str());
  }
  try {
    if (sqlite3_db_readonly(db_, "main") == 1)
      KF_USAGE_ERROR("cannot open run database '%s' for writing (read-only)", path.c_str());
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, 5000);
    // The first statement that reads the file tells a database from anything else.
    const int header_rc = sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    if ((header_rc & 0xff) == SQLITE_NOTADB)
      KF_USAGE_ERROR("'%s' is not a run database (not an SQLite file)", path.c_str());
    if ((header_rc & 0xff) == SQLITE_CANTOPEN || (header_rc & 0xff) == SQLITE_READONLY)
      KF_USAGE_ERROR("cannot open run database '%s': %s", path.c_str(), sqlite3_errmsg(db_));
    if (header_rc != SQLITE_OK) fail(db_, "setting WAL mode");
    exec("PRAGMA foreign_keys=ON");
    migrate();
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

RunDb::~RunDb() { sqlite3_close(db_); }

int RunDb::latest_schema_version() { return kLatestVersion; }

int RunDb::schema_version() const { return read_schema_version(db_); }

void RunDb::exec(const char* sql) {
  if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(db_, "executing SQL");
}

void RunDb::migrate() {
  const int found = read_schema_version(db_);
  if (found > kLatestVersion)
    KF_USAGE_ERROR("run database '%s' has schema version %d, newer than this kforge %s supports (%d); "
                   "use a newer kforge or another --db",
                   path_.c_str(), found, kVersion, kLatestVersion);
  if (found == 0 && has_user_tables(db_))
    KF_USAGE_ERROR("'%s' is an SQLite database but not a kforge run database", path_.c_str());

  // Each step re-reads the version inside its transaction, so that two processes opening a new
  // database at once apply every migration exactly once.
  while (true) {
    Transaction tx(db_);
    const int version = read_schema_version(db_);
    if (version >= kLatestVersion) {
      tx.commit();
      return;
    }
    exec("CREATE TABLE IF NOT EXISTS schema_version(version INTEGER)");
    exec(kMigrations[version]);
    Statement bump(db_, "INSERT INTO schema_version(version) VALUES (?)");
    bump.bind(0, version + 1).step();
    tx.commit();
  }
}

int64_t RunDb::begin_run(const std::string& kind, const std::string& command, const nlohmann::json& device,
                         const nlohmann::json& options) {
  Transaction tx(db_);
  Statement insert(db_,
                   "INSERT INTO runs(kind, command, kforge_version, started_at, status, device_json, "
                   "options_json) VALUES (?, ?, ?, ?, 'running', ?, ?)");
  insert.bind(0, kind).bind(1, command).bind(2, std::string(kVersion)).bind(3, utc_now_iso8601());
  insert.bind(4, device.dump()).bind(5, options.dump()).step();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

void RunDb::add_measurements(int64_t run_id, const std::vector<Measurement>& rows) {
  Transaction tx(db_);
  Statement add_shape(db_, "INSERT OR IGNORE INTO shapes(op, m, n, k, layout, acc) VALUES (?, ?, ?, ?, ?, ?)");
  Statement find_shape(db_,
                       "SELECT id FROM shapes "
                       "WHERE op = ? AND m = ? AND n = ? AND k = ? AND layout = ? AND acc = ?");
  Statement add_row(db_,
                    "INSERT INTO measurements(run_id, shape_id, impl, mode, median_us, p10_us, p90_us, min_us, "
                    "max_us, mean_us, samples, calls_per_sample, tflops, floor_us, floor_pct, ratio_to_best, "
                    "verified, err_ratio, algo, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  const std::string now = utc_now_iso8601();
  for (const Measurement& m : rows) {
    for (Statement* s : {&add_shape, &find_shape}) {
      s->reset();
      s->bind(0, std::string(kHgemmOp)).bind(1, m.shape.m).bind(2, m.shape.n).bind(3, m.shape.k);
      s->bind(4, std::string(to_string(m.layout))).bind(5, std::string(to_string(m.acc)));
    }
    add_shape.step();
    KF_CHECK(find_shape.step(), "shape %s missing right after its insertion", m.shape.str().c_str());
    const int64_t shape_id = find_shape.integer(0);

    add_row.reset();
    add_row.bind(0, run_id).bind(1, shape_id).bind(2, m.impl).bind(3, m.mode);
    add_row.bind(4, m.time_us.median).bind(5, m.time_us.p10).bind(6, m.time_us.p90);
    add_row.bind(7, m.time_us.min).bind(8, m.time_us.max).bind(9, m.time_us.mean);
    add_row.bind(10, m.time_us.n).bind(11, m.calls_per_sample).bind(12, m.tflops).bind(13, m.floor_us);
    add_row.bind(14, m.floor_pct).bind(15, m.ratio_to_best).bind(16, m.verified ? 1 : 0);
    add_row.bind(17, m.err_ratio).bind(18, m.algo).bind(19, now);
    add_row.step();
  }
  tx.commit();
}

void RunDb::finish_run(int64_t run_id, const std::string& status, const nlohmann::json& summary) {
  KF_CHECK(status == "complete" || status == "failed" || status == "interrupted", "bad run status '%s'",
           status.c_str());
  Transaction tx(db_);
  Statement update(db_, "UPDATE runs SET status = ?, finished_at = ?, summary_json = ? WHERE id = ?");
  update.bind(0, status).bind(1, utc_now_iso8601()).bind(2, summary.dump()).bind(3, run_id).step();
  KF_CHECK(sqlite3_changes(db_) == 1, "no run %lld in '%s'", (long long)run_id, path_.c_str());
  tx.commit();
}

std::vector<Measurement> RunDb::measurements(int64_t run_id) const {
  Statement q(db_,
              "SELECT s.m, s.n, s.k, s.layout, s.acc, x.mode, x.impl, x.median_us, x.p10_us, x.p90_us, x.min_us, "
              "x.max_us, x.mean_us, x.samples, x.calls_per_sample, x.tflops, x.floor_us, x.floor_pct, "
              "x.ratio_to_best, x.verified, x.err_ratio, x.algo "
              "FROM measurements x JOIN shapes s ON s.id = x.shape_id WHERE x.run_id = ? ORDER BY x.id");
  q.bind(0, run_id);
  std::vector<Measurement> out;
  while (q.step()) {
    Measurement m;
    m.shape = {q.integer(0), q.integer(1), q.integer(2)};
    m.layout = parse_layout(q.text(3));
    m.acc = parse_acc(q.text(4));
    m.mode = q.text(5);
    m.impl = q.text(6);
    m.time_us.median = q.real(7);
    m.time_us.p10 = q.real(8);
    m.time_us.p90 = q.real(9);
    m.time_us.min = q.real(10);
    m.time_us.max = q.real(11);
    m.time_us.mean = q.real(12);
    m.time_us.n = int(q.integer(13));
    m.calls_per_sample = int(q.integer(14));
    m.tflops = q.real(15);
    m.floor_us = q.real(16);
    m.floor_pct = q.real(17);
    m.ratio_to_best = q.real(18);
    m.verified = q.integer(19) != 0;
    m.err_ratio = q.real(20);
    m.algo = q.text(21);
    out.push_back(std::move(m));
  }
  return out;
}

std::string RunDb::run_status(int64_t run_id) const {
  Statement q(db_, "SELECT status FROM runs WHERE id = ?");
  q.bind(0, run_id);
  if (!q.step()) KF_USAGE_ERROR("no run %lld in run database '%s'", (long long)run_id, path_.c_str());
  return q.text(0);
}

}  // namespace kforge
