#include "db/sqlite.hpp"

#include <cmath>
#include <utility>

#include "core/error.hpp"
#include "kforge/version.hpp"

namespace kforge {

SqliteDb::SqliteDb(const std::string& path, std::string what) : what_(std::move(what)), path_(path) {
  const int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    KF_USAGE_ERROR("cannot open %s '%s': %s", what_.c_str(), path.c_str(), why.c_str());
  }
  // The destructor does not run when a constructor throws: close the handle here.
  try {
    if (sqlite3_db_readonly(db_, "main") == 1)
      KF_USAGE_ERROR("cannot open %s '%s' for writing (read-only)", what_.c_str(), path.c_str());
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, 5000);
    // The first statement that reads the file tells a database from anything else (SQLite opens
    // files lazily), and a folder or an unwritable file from a usable one.
    const int header_rc = sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    if ((header_rc & 0xff) == SQLITE_NOTADB)
      KF_USAGE_ERROR("'%s' is not a %s (not an SQLite file)", path.c_str(), what_.c_str());
    if ((header_rc & 0xff) == SQLITE_CANTOPEN || (header_rc & 0xff) == SQLITE_READONLY)
      KF_USAGE_ERROR("cannot open %s '%s': %s", what_.c_str(), path.c_str(), sqlite3_errmsg(db_));
    if (header_rc != SQLITE_OK) fail("setting WAL mode");
    exec("PRAGMA foreign_keys=ON");
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

SqliteDb::~SqliteDb() { sqlite3_close(db_); }  // a no-op on the null handle of a moved-from object

SqliteDb::SqliteDb(SqliteDb&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      what_(std::move(other.what_)),
      path_(std::move(other.path_)) {}

void SqliteDb::exec(const char* sql, const char* action) const {
  if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(action);
}

void SqliteDb::fail(const char* action) const {
  const char* file = sqlite3_db_filename(db_, "main");
  KF_RUNTIME_ERROR("%s '%s': %s: %s", what_.c_str(), file ? file : "?", action, sqlite3_errmsg(db_));
}

int SqliteDb::schema_version() const {
  Statement has_table(*this, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
  if (!has_table.step()) return 0;
  Statement version(*this, "SELECT MAX(version) FROM schema_version");
  return version.step() && !version.is_null(0) ? int(version.integer(0)) : 0;
}

void SqliteDb::migrate(std::span<const char* const> migrations, const char* advice) const {
  const int latest = int(migrations.size());
  const int found = schema_version();
  if (found > latest)
    KF_USAGE_ERROR("%s '%s' has schema version %d, newer than this kforge %s supports (%d); %s", what_.c_str(),
                   path_.c_str(), found, kVersion, latest, advice);
  if (found == 0) {
    // A fresh file has no tables; one with tables but no version belongs to another program.
    Statement q(*this, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
    if (q.step()) KF_USAGE_ERROR("'%s' is an SQLite database but not a kforge %s", path_.c_str(), what_.c_str());
  }

  while (true) {
    Transaction tx(*this);
    const int version = schema_version();
    if (version >= latest) {
      tx.commit();
      return;
    }
    exec("CREATE TABLE IF NOT EXISTS schema_version(version INTEGER)");
    exec(migrations[size_t(version)]);
    Statement bump(*this, "INSERT INTO schema_version(version) VALUES (?)");
    bump.bind(0, version + 1).step();
    tx.commit();
  }
}

Statement::Statement(const SqliteDb& db, const char* sql) : db_(db) {
  if (sqlite3_prepare_v2(db.handle(), sql, -1, &stmt_, nullptr) != SQLITE_OK) db.fail("preparing a statement");
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail("executing a statement");
}

double Statement::real(int col) const { return is_null(col) ? NAN : sqlite3_column_double(stmt_, col); }

std::string Statement::text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  return p ? std::string(p, size_t(sqlite3_column_bytes(stmt_, col))) : std::string();
}

}  // namespace kforge
