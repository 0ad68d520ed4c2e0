// Small helpers around the SQLite C API, shared by kforge's databases (the run database, the
// program database of a search): a connection opened the kforge way (WAL, foreign keys, busy
// timeout), prepared statements and transactions that clean up after themselves, and the runner of
// versioned schema migrations that refuses a file written by a newer kforge.
//
// Errors: what the user can fix (a path that cannot be opened or written, a file that is not an
// SQLite database, a database of another program or of a newer kforge) is a usage error; a failing
// statement is a runtime error naming the database file, the action and SQLite's message.
#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <span>
#include <string>

namespace kforge {

// One connection. Normally it owns the handle and closes it on destruction; borrow() makes a view
// of a handle that something else owns (it never closes that one).
class SqliteDb {
 public:
  // Opens or creates `path` for reading and writing, with extended result codes, a 5 s busy
  // timeout, the WAL journal and foreign keys on. `what` names the database in error messages
  // ("run database"). Applies no migrations (see migrate()).
  SqliteDb(const std::string& path, std::string what);
  ~SqliteDb();
  SqliteDb(SqliteDb&& other) noexcept;
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;
  SqliteDb& operator=(SqliteDb&&) = delete;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  const std::string& what() const { return what_; }

  // Runs one or more SQL statements that return no rows; on failure a runtime error that says
  // `action`.
  void exec(const char* sql, const char* action = "executing SQL") const;
  // Throws the runtime error "<what> '<file>': <action>: <SQLite's last message>".
  [[noreturn]] void fail(const char* action) const;
  int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int changes() const { return sqlite3_changes(db_); }

  // The schema version recorded in the database; 0 when it has none yet.
  int schema_version() const;
  // Brings the schema up to date: migrations[i] takes it from version i to version i + 1 (append
  // to the list, never edit an entry). Each step runs in its own transaction and re-reads the
  // version inside it, so that two processes opening a new file at once apply every step exactly
  // once. A version above migrations.size() is refused with a usage error that names the file and
  // ends with `advice` (e.g. "use a newer kforge or another --db"); so is a file that has tables
  // but no schema version (another program's database).
  void migrate(std::span<const char* const> migrations, const char* advice) const;

 private:
  sqlite3* db_ = nullptr;
  std::string what_;
  std::string path_;
};

// A prepared statement, finalized on scope exit. Parameters and columns are 0-based here.
class Statement {
 public:
  Statement(const SqliteDb& db, const char* sql);
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
  // C strings (literals) bind as text too.
  Statement& bind(int i, const char* v) { return bind(i, std::string(v)); }
  Statement& bind_null(int i) { return check(sqlite3_bind_null(stmt_, i + 1)); }

  // Runs one step: true when a row is ready, false when the statement is done.
  bool step();
  // Makes the statement ready to run again with new bindings.
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  // NULL reads as NaN.
  double real(int col) const;
  // NULL reads as "".
  std::string text(int col) const;

 private:
  Statement& check(int rc) {
    if (rc != SQLITE_OK) db_.fail("binding a parameter");
    return *this;
  }
  const SqliteDb& db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE now (so that the write lock is taken up front, and a busy database waits for the
// busy timeout instead of failing half-way); ROLLBACK on scope exit unless commit() was called.
class Transaction {
 public:
  explicit Transaction(const SqliteDb& db) : db_(db) { db_.exec("BEGIN IMMEDIATE", "BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit() {
    db_.exec("COMMIT", "COMMIT");
    done_ = true;
  }

 private:
  const SqliteDb& db_;
  bool done_ = false;
};

}  // namespace kforge
