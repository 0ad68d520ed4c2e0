// The run database: migrations, writes and read-back, reopening, and refusing what it cannot use.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "db/rundb.hpp"
#include "kforge/version.hpp"

namespace kforge {
namespace {

namespace fs = std::filesystem;

class RunDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("kforge_rundb_" + std::to_string(::getpid()) + "_" + std::string(info->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// Runs one SQL query directly on the file and returns the first column of its first row as text.
std::string query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    out = text ? text : "";
  } else {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

void execute(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

// The kforge::Error that opening `path` throws; fails the test when it throws none.
Error open_error(const std::string& path) {
  try {
    RunDb db(path);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "opening '" << path << "' did not fail";
  return Error(ErrorKind::kInternal, "none", __FILE__, __LINE__);
}

Measurement sample(Shape shape, Layout layout, const std::string& impl, double median_us) {
  Measurement m;
  m.shape = shape;
  m.layout = layout;
  m.acc = Acc::kF32;
  m.mode = "offline";
  m.impl = impl;
  m.time_us = summarize({median_us * 0.9, median_us, median_us * 1.2});
  m.calls_per_sample = 33;
  m.tflops = shape.flops() / (median_us * 1e6);
  m.floor_us = median_us / 4;
  m.floor_pct = 25;
  m.ratio_to_best = 1.125;
  m.verified = true;
  m.err_ratio = 0.0625;
  m.algo = "algo=7, tile \"128x128\"";
  return m;
}

void expect_same(const Measurement& a, const Measurement& b) {
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.layout, b.layout);
  EXPECT_EQ(a.acc, b.acc);
  EXPECT_EQ(a.mode, b.mode);
  EXPECT_EQ(a.impl, b.impl);
  EXPECT_EQ(a.time_us.n, b.time_us.n);
  EXPECT_DOUBLE_EQ(a.time_us.median, b.time_us.median);
  EXPECT_DOUBLE_EQ(a.time_us.p10, b.time_us.p10);
  EXPECT_DOUBLE_EQ(a.time_us.p90, b.time_us.p90);
  EXPECT_DOUBLE_EQ(a.time_us.min, b.time_us.min);
  EXPECT_DOUBLE_EQ(a.time_us.max, b.time_us.max);
  EXPECT_DOUBLE_EQ(a.time_us.mean, b.time_us.mean);
  EXPECT_EQ(a.calls_per_sample, b.calls_per_sample);
  EXPECT_DOUBLE_EQ(a.tflops, b.tflops);
  EXPECT_DOUBLE_EQ(a.floor_us, b.floor_us);
  EXPECT_DOUBLE_EQ(a.floor_pct, b.floor_pct);
  EXPECT_DOUBLE_EQ(a.ratio_to_best, b.ratio_to_best);
  EXPECT_EQ(a.verified, b.verified);
  EXPECT_DOUBLE_EQ(a.err_ratio, b.err_ratio);
  EXPECT_EQ(a.algo, b.algo);
}

TEST_F(RunDbTest, CreatesAndMigratesANewDatabase) {
  const std::string p = path("runs.db");
  {
    RunDb db(p);
    EXPECT_EQ(RunDb::latest_schema_version(), 1);
    EXPECT_EQ(db.schema_version(), RunDb::latest_schema_version());
  }
  EXPECT_TRUE(fs::exists(p));
  EXPECT_EQ(query(p, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(query(p, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                     "('runs', 'shapes', 'measurements', 'schema_version')"),
            "4");
  EXPECT_EQ(query(p, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'measurements' "
                     "AND sql IS NOT NULL"),
            "2");
  EXPECT_EQ(query(p, "SELECT MAX(version) FROM schema_version"), "1");
}

TEST_F(RunDbTest, BeginAddFinishAndReadBack) {
  const std::string p = path("runs.db");
  RunDb db(p);
  const int64_t run = db.begin_run("hgemm-bench", "kforge hgemm bench --shapes 64x64x64",
                                   {{"name", "NVIDIA H200"}, {"sm", 90}}, {{"modes", {"offline"}}});
  EXPECT_GT(run, 0);
  EXPECT_EQ(db.run_status(run), "running");

  Measurement odd = sample({4096, 64, 128}, Layout::kTN, "lt_auto", 55.5);
  odd.acc = Acc::kF16;
  odd.mode = "graph";
  odd.verified = false;
  const std::vector<Measurement> rows = {
      sample({64, 64, 64}, Layout::kNN, "cublas", 10.25),
      sample({64, 64, 64}, Layout::kNN, "lt_heur", 9.5),  // same shape: one shapes row
      odd,
  };
  db.add_measurements(run, rows);
  db.finish_run(run, "complete", {{"rows", 3}});
  EXPECT_EQ(db.run_status(run), "complete");

  const std::vector<Measurement> back = db.measurements(run);
  ASSERT_EQ(back.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) expect_same(back[i], rows[i]);

  // A second run shares the shapes already stored.
  const int64_t run2 = db.begin_run("hgemm-bench", "again", nlohmann::json::object(), nlohmann::json::object());
  EXPECT_NE(run2, run);
  db.add_measurements(run2, rows);
  EXPECT_EQ(db.measurements(run2).size(), 3u);
  EXPECT_EQ(query(p, "SELECT COUNT(*) FROM shapes"), "2");
  EXPECT_EQ(query(p, "SELECT COUNT(*) FROM shapes WHERE op = 'hgemm'"), "2");
  EXPECT_EQ(query(p, "SELECT COUNT(*) FROM measurements"), "6");
  EXPECT_EQ(query(p, "SELECT kforge_version FROM runs WHERE id = " + std::to_string(run)), kVersion);
  EXPECT_EQ(query(p, "SELECT device_json FROM runs WHERE id = " + std::to_string(run)),
            R"({"name":"NVIDIA H200","sm":90})");
  EXPECT_EQ(query(p, "SELECT summary_json FROM runs WHERE id = " + std::to_string(run)), R"({"rows":3})");
  EXPECT_EQ(query(p, "SELECT finished_at IS NOT NULL AND started_at LIKE '20__-__-__T__:__:__Z' FROM runs "
                     "WHERE id = " + std::to_string(run)),
            "1");
  EXPECT_EQ(db.measurements(run + 1000).size(), 0u);
}

TEST_F(RunDbTest, NanIsReadBackAsNan) {
  RunDb db(path("runs.db"));
  const int64_t run = db.begin_run("hgemm-bench", "", {}, {});
  Measurement m = sample({64, 64, 64}, Layout::kNN, "cublas", 10);
  m.err_ratio = NAN;
  db.add_measurements(run, {m});
  const std::vector<Measurement> back = db.measurements(run);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_TRUE(std::isnan(back[0].err_ratio));
  EXPECT_DOUBLE_EQ(back[0].time_us.median, 10);
}

TEST_F(RunDbTest, ReopeningKeepsDataAndSchemaVersion) {
  const std::string p = path("runs.db");
  const Measurement m = sample({128, 256, 512}, Layout::kTN, "lt_auto", 20);
  int64_t run = 0;
  {
    RunDb db(p);
    run = db.begin_run("hgemm-bench", "first", {}, {});
    db.add_measurements(run, {m});
    db.finish_run(run, "interrupted", {});
  }
  RunDb db(p);
  EXPECT_EQ(db.schema_version(), 1);
  EXPECT_EQ(query(p, "SELECT COUNT(*) FROM schema_version"), "1");  // no migration applied twice
  EXPECT_EQ(db.run_status(run), "interrupted");
  const std::vector<Measurement> back = db.measurements(run);
  ASSERT_EQ(back.size(), 1u);
  expect_same(back[0], m);
}

TEST_F(RunDbTest, FailedWriteLeavesNothingBehind) {
  const std::string p = path("runs.db");
  RunDb db(p);
  const std::vector<Measurement> rows = {sample({64, 64, 64}, Layout::kNN, "cublas", 10),
                                         sample({64, 128, 64}, Layout::kNN, "cublas", 12)};
  // No run 4242: the foreign key fails and the transaction is rolled back, shapes included.
  try {
    db.add_measurements(4242, rows);
    ADD_FAILURE() << "measurements of a missing run were stored";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
    EXPECT_NE(std::string(e.what()).find("FOREIGN KEY"), std::string::npos) << e.what();
  }
  EXPECT_EQ(query(p, "SELECT COUNT(*) FROM measurements"), "0");
  EXPECT_EQ(query(p, "SELECT COUNT(*) FROM shapes"), "0");
  // The connection is still usable afterwards.
  const int64_t run = db.begin_run("hgemm-bench", "", {}, {});
  db.add_measurements(run, rows);
  EXPECT_EQ(db.measurements(run).size(), 2u);
}

TEST_F(RunDbTest, UnknownRunStatusIsAUsageError) {
  RunDb db(path("runs.db"));
  try {
    db.run_status(77);
    ADD_FAILURE() << "no error for a missing run";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(std::string(e.what()).find("77"), std::string::npos) << e.what();
  }
}

TEST_F(RunDbTest, NewerSchemaIsRefused) {
  const std::string p = path("future.db");
  { RunDb db(p); }
  execute(p, "INSERT INTO schema_version(version) VALUES (999)");
  const Error e = open_error(p);
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("999"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
}

TEST_F(RunDbTest, NonDatabaseFileIsRefused) {
  const std::string p = path("notes.txt");
  {
    std::ofstream out(p);
    out << "this is not an SQLite database, just some text that is long enough to have a header\n";
    for (int i = 0; i < 100; ++i) out << "line " << i << "\n";
  }
  const Error e = open_error(p);
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("not"), std::string::npos) << e.what();
}

TEST_F(RunDbTest, ForeignSqliteDatabaseIsRefused) {
  const std::string p = path("other.db");
  execute(p, "CREATE TABLE runs(x TEXT)");
  const Error e = open_error(p);
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(std::string(e.what()).find("not a kforge run database"), std::string::npos) << e.what();
}

TEST_F(RunDbTest, UnwritablePathsAreRefused) {
  const std::string missing_folder = path("no/such/folder/runs.db");
  const Error e = open_error(missing_folder);
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(std::string(e.what()).find(missing_folder), std::string::npos) << e.what();

  const Error folder = open_error(dir_.string());
  EXPECT_EQ(folder.kind(), ErrorKind::kUsage);
  EXPECT_NE(std::string(folder.what()).find(dir_.string()), std::string::npos) << folder.what();
}

}  // namespace
}  // namespace kforge
