#include "db/rundb.hpp"

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "db/sqlite.hpp"
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

// How the run database is named in error messages, and what a newer schema tells the user to do.
constexpr const char* kWhat = "run database";
constexpr const char* kNewerAdvice = "use a newer kforge or another --db";

}  // namespace

RunDb::RunDb(const std::string& path) : db_(path, kWhat) { db_.migrate(kMigrations, kNewerAdvice); }

RunDb::~RunDb() = default;

int RunDb::latest_schema_version() { return kLatestVersion; }

int RunDb::schema_version() const { return db_.schema_version(); }

int64_t RunDb::begin_run(const std::string& kind, const std::string& command, const nlohmann::json& device,
                         const nlohmann::json& options) {
  const SqliteDb& db = db_;
  Transaction tx(db);
  Statement insert(db,
                   "INSERT INTO runs(kind, command, kforge_version, started_at, status, device_json, "
                   "options_json) VALUES (?, ?, ?, ?, 'running', ?, ?)");
  insert.bind(0, kind).bind(1, command).bind(2, std::string(kVersion)).bind(3, utc_now_iso8601());
  insert.bind(4, dump_json(device)).bind(5, dump_json(options)).step();
  const int64_t id = db.last_insert_rowid();
  tx.commit();
  return id;
}

void RunDb::add_measurements(int64_t run_id, const std::vector<Measurement>& rows) {
  const SqliteDb& db = db_;
  Transaction tx(db);
  Statement add_shape(db, "INSERT OR IGNORE INTO shapes(op, m, n, k, layout, acc) VALUES (?, ?, ?, ?, ?, ?)");
  Statement find_shape(db,
                       "SELECT id FROM shapes "
                       "WHERE op = ? AND m = ? AND n = ? AND k = ? AND layout = ? AND acc = ?");
  Statement add_row(db,
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
  const SqliteDb& db = db_;
  Transaction tx(db);
  Statement update(db, "UPDATE runs SET status = ?, finished_at = ?, summary_json = ? WHERE id = ?");
  update.bind(0, status).bind(1, utc_now_iso8601()).bind(2, dump_json(summary)).bind(3, run_id).step();
  KF_CHECK(db.changes() == 1, "no run %lld in '%s'", (long long)run_id, db_.path().c_str());
  tx.commit();
}

std::vector<Measurement> RunDb::measurements(int64_t run_id) const {
  const SqliteDb& db = db_;
  Statement q(db,
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
  const SqliteDb& db = db_;
  Statement q(db, "SELECT status FROM runs WHERE id = ?");
  q.bind(0, run_id);
  if (!q.step()) KF_USAGE_ERROR("no run %lld in run database '%s'", (long long)run_id, db_.path().c_str());
  return q.text(0);
}

}  // namespace kforge
