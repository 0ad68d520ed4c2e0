#include "search/program_db.hpp"

#include <utility>

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/text.hpp"
#include "db/sqlite.hpp"

namespace kforge {

namespace {

// Migration i (1-based) takes the schema from version i-1 to version i. Append, never edit.
const char* const kMigrations[] = {
    // 1: runs, candidates, llm_calls.
    R"sql(
      CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        task TEXT NOT NULL,
        state TEXT NOT NULL,
        config_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE candidates (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        iteration INTEGER NOT NULL,
        grp INTEGER NOT NULL,
        sample INTEGER NOT NULL,
        policy TEXT NOT NULL,
        parents_json TEXT NOT NULL,
        source TEXT NOT NULL,
        prompt TEXT NOT NULL,
        analysis TEXT NOT NULL,
        status TEXT NOT NULL,
        error TEXT NOT NULL,
        verdict_json TEXT,
        correct INTEGER NOT NULL,
        score REAL,
        reward REAL,
        advantage REAL,
        created_at TEXT NOT NULL
      );
      CREATE INDEX candidates_run_status ON candidates(run_id, status);
      CREATE INDEX candidates_run_iteration ON candidates(run_id, iteration);
      CREATE TABLE llm_calls (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        iteration INTEGER NOT NULL,
        grp INTEGER NOT NULL,
        endpoint TEXT NOT NULL,
        model TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        latency_s REAL,
        cost_usd REAL,
        status TEXT NOT NULL,
        error TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
      CREATE INDEX llm_calls_run ON llm_calls(run_id);
    )sql",
    // 2: the language of a candidate's source ("cuda" for HGEMM kernels, "python" for ModelNew files).
    R"sql(
      ALTER TABLE candidates ADD COLUMN language TEXT NOT NULL DEFAULT 'cuda';
    )sql",
    // 3: iterations, so that one whose answers arrived in part is finished with its own prompt on
    // --resume. Iterations of older runs that hold candidates were finished.
    R"sql(
      CREATE TABLE iterations (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        iteration INTEGER NOT NULL,
        parent INTEGER NOT NULL,
        prompt TEXT NOT NULL,
        state TEXT NOT NULL,
        PRIMARY KEY (run_id, iteration)
      );
      INSERT INTO iterations(run_id, iteration, parent, prompt, state)
        SELECT run_id, iteration, 0, '', 'complete' FROM candidates GROUP BY run_id, iteration;
    )sql",
};
constexpr int kLatestVersion = int(sizeof kMigrations / sizeof kMigrations[0]);

constexpr const char* kWhat = "program database";
constexpr const char* kNewerAdvice = "use a newer kforge or another run directory";

// The columns every candidate query selects, in the order read_candidate() reads them.
constexpr const char* kCandidateColumns =
    "id, run_id, iteration, grp, sample, policy, parents_json, source, prompt, analysis, status, error, "
    "verdict_json, correct, score, reward, advantage, created_at, language";
constexpr const char* kLlmCallColumns =
    "id, run_id, iteration, grp, endpoint, model, prompt_tokens, completion_tokens, latency_s, cost_usd, status, "
    "error, created_at";

bool valid_run_state(const std::string& s) {
  return s == "running" || s == "stopped" || s == "complete" || s == "failed";
}
bool valid_candidate_status(const std::string& s) { return s == "pending" || s == "evaluated" || s == "invalid"; }

// Parses a JSON column; a damaged value is a runtime error that says where it is.
nlohmann::json parse_json(const SqliteDb& db, const std::string& text, const char* column, int64_t row) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    KF_RUNTIME_ERROR("%s '%s': %s of row %lld is not JSON: %s", db.what().c_str(), db.path().c_str(), column,
                     (long long)row, e.what());
  }
}

SearchRun read_run(const SqliteDb& db, const Statement& q) {
  SearchRun r;
  r.id = q.integer(0);
  r.task = q.text(1);
  r.state = q.text(2);
  r.config = parse_json(db, q.text(3), "runs.config_json", r.id);
  r.created_at = q.text(4);
  r.updated_at = q.text(5);
  return r;
}

// One row of a "SELECT <kCandidateColumns> ..." query.
CandidateRecord read_candidate(const SqliteDb& db, const Statement& q) {
  CandidateRecord c;
  c.id = q.integer(0);
  c.run_id = q.integer(1);
  c.iteration = int(q.integer(2));
  c.group = int(q.integer(3));
  c.sample = int(q.integer(4));
  c.policy = q.text(5);
  const nlohmann::json parents = parse_json(db, q.text(6), "candidates.parents_json", c.id);
  if (!parents.is_array())
    KF_RUNTIME_ERROR("%s '%s': candidates.parents_json of row %lld is not a list", db.what().c_str(),
                     db.path().c_str(), (long long)c.id);
  for (const nlohmann::json& p : parents) {
    if (!p.is_number_integer())
      KF_RUNTIME_ERROR("%s '%s': candidates.parents_json of row %lld holds a non-integer", db.what().c_str(),
                       db.path().c_str(), (long long)c.id);
    c.parents.push_back(p.get<int64_t>());
  }
  c.source = q.text(7);
  c.prompt = q.text(8);
  c.analysis = q.text(9);
  c.status = q.text(10);
  c.error = q.text(11);
  // NULL until evaluated: a null JSON value.
  if (!q.is_null(12)) c.verdict = parse_json(db, q.text(12), "candidates.verdict_json", c.id);
  c.correct = q.integer(13) != 0;
  c.score = q.real(14);
  c.reward = q.real(15);
  if (!q.is_null(16)) c.advantage = q.real(16);
  c.created_at = q.text(17);
  c.language = q.text(18);
  return c;
}

LlmCallRecord read_llm_call(const Statement& q) {
  LlmCallRecord c;
  c.id = q.integer(0);
  c.run_id = q.integer(1);
  c.iteration = int(q.integer(2));
  c.group = int(q.integer(3));
  c.endpoint = q.text(4);
  c.model = q.text(5);
  c.prompt_tokens = int(q.integer(6));
  c.completion_tokens = int(q.integer(7));
  c.latency_s = q.real(8);
  c.cost_usd = q.real(9);
  c.status = q.text(10);
  c.error = q.text(11);
  c.created_at = q.text(12);
  return c;
}

// Binds one candidate to the INSERT of add_candidates() (everything but id and created_at comes
// from the record).
void bind_candidate(Statement& insert, const CandidateRecord& c, const std::string& now) {
  KF_CHECK(valid_candidate_status(c.status), "bad candidate status '%s'", c.status.c_str());
  nlohmann::json parents = nlohmann::json::array();
  for (int64_t p : c.parents) parents.push_back(p);
  insert.reset();
  insert.bind(0, c.run_id).bind(1, c.iteration).bind(2, c.group).bind(3, c.sample).bind(4, c.policy);
  insert.bind(5, dump_json(parents)).bind(6, c.source).bind(7, c.prompt).bind(8, c.analysis).bind(9, c.status);
  insert.bind(10, c.error);
  if (c.verdict.is_null())
    insert.bind_null(11);
  else
    insert.bind(11, dump_json(c.verdict));
  insert.bind(12, c.correct ? 1 : 0).bind(13, c.score).bind(14, c.reward);
  if (c.advantage)
    insert.bind(15, *c.advantage);
  else
    insert.bind_null(15);
  insert.bind(16, now).bind(17, c.language);
}

}  // namespace

struct ProgramDb::Impl {
  // Opens (or creates) and migrates; when migrate() throws, `db` is destroyed and closes the file.
  explicit Impl(const std::string& path) : db(path, kWhat) { db.migrate(kMigrations, kNewerAdvice); }
  SqliteDb db;
};

ProgramDb::ProgramDb(const std::string& path) : impl_(new Impl(path)) {}

ProgramDb::~ProgramDb() { delete impl_; }

int ProgramDb::latest_schema_version() { return kLatestVersion; }

int ProgramDb::schema_version() const { return impl_->db.schema_version(); }

int64_t ProgramDb::create_run(const std::string& task, const nlohmann::json& config) {
  const SqliteDb& db = impl_->db;
  Transaction tx(db);
  Statement insert(db,
                   "INSERT INTO runs(task, state, config_json, created_at, updated_at) "
                   "VALUES (?, 'running', ?, ?, ?)");
  const std::string now = utc_now_iso8601();
  insert.bind(0, task).bind(1, dump_json(config)).bind(2, now).bind(3, now).step();
  const int64_t id = db.last_insert_rowid();
  tx.commit();
  return id;
}

std::optional<SearchRun> ProgramDb::run(int64_t id) const {
  Statement q(impl_->db, "SELECT id, task, state, config_json, created_at, updated_at FROM runs WHERE id = ?");
  q.bind(0, id);
  if (!q.step()) return std::nullopt;
  return read_run(impl_->db, q);
}

std::optional<SearchRun> ProgramDb::latest_run() const {
  // Ids grow with every insert (rows are never deleted), so the highest id is the newest run.
  Statement q(impl_->db,
              "SELECT id, task, state, config_json, created_at, updated_at FROM runs ORDER BY id DESC LIMIT 1");
  if (!q.step()) return std::nullopt;
  return read_run(impl_->db, q);
}

void ProgramDb::set_run_state(int64_t id, const std::string& state) {
  KF_CHECK(valid_run_state(state), "bad search run state '%s'", state.c_str());
  const SqliteDb& db = impl_->db;
  Transaction tx(db);
  Statement update(db, "UPDATE runs SET state = ?, updated_at = ? WHERE id = ?");
  update.bind(0, state).bind(1, utc_now_iso8601()).bind(2, id).step();
  KF_CHECK(db.changes() == 1, "no search run %lld in '%s'", (long long)id, db.path().c_str());
  tx.commit();
}

void ProgramDb::set_run_config(int64_t id, const nlohmann::json& config) {
  const SqliteDb& db = impl_->db;
  Transaction tx(db);
  Statement update(db, "UPDATE runs SET config_json = ?, updated_at = ? WHERE id = ?");
  update.bind(0, dump_json(config)).bind(1, utc_now_iso8601()).bind(2, id).step();
  KF_CHECK(db.changes() == 1, "no search run %lld in '%s'", (long long)id, db.path().c_str());
  tx.commit();
}

int64_t ProgramDb::add_candidate(const CandidateRecord& c) { return add_candidates({c}).front(); }

namespace {

// The INSERTs of add_candidates() and add_llm_call(), inside the caller's transaction.
std::vector<int64_t> insert_candidates(const SqliteDb& db, const std::vector<CandidateRecord>& cs) {
  Statement insert(db,
                   "INSERT INTO candidates(run_id, iteration, grp, sample, policy, parents_json, source, prompt, "
                   "analysis, status, error, verdict_json, correct, score, reward, advantage, created_at, language) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  const std::string now = utc_now_iso8601();
  std::vector<int64_t> ids;
  ids.reserve(cs.size());
  for (const CandidateRecord& c : cs) {
    bind_candidate(insert, c, now);
    insert.step();
    ids.push_back(db.last_insert_rowid());
  }
  return ids;
}

int64_t insert_llm_call(const SqliteDb& db, const LlmCallRecord& c) {
  Statement insert(db,
                   "INSERT INTO llm_calls(run_id, iteration, grp, endpoint, model, prompt_tokens, completion_tokens, "
                   "latency_s, cost_usd, status, error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  insert.bind(0, c.run_id).bind(1, c.iteration).bind(2, c.group).bind(3, c.endpoint).bind(4, c.model);
  insert.bind(5, c.prompt_tokens).bind(6, c.completion_tokens).bind(7, c.latency_s).bind(8, c.cost_usd);
  insert.bind(9, c.status).bind(10, c.error).bind(11, utc_now_iso8601()).step();
  return db.last_insert_rowid();
}

}  // namespace

std::vector<int64_t> ProgramDb::add_candidates(const std::vector<CandidateRecord>& cs) {
  const SqliteDb& db = impl_->db;
  Transaction tx(db);
  std::vector<int64_t> ids = insert_candidates(db, cs);
  // Any throw above rolls the whole batch back.
  tx.commit();
  return ids;
}

void ProgramDb::record_verdict(int64_t candidate_id, const nlohmann::json& verdict, bool correct, double score,
                               double reward) {
  const SqliteDb& db = impl_->db;
  Transaction tx(db);
  Statement update(db,
                   "UPDATE candidates SET status = 'evaluated', verdict_json = ?, correct = ?, score = ?, reward = ? "
                   "WHERE id = ?");
  update.bind(0, dump_json(verdict)).bind(1, correct ? 1 : 0).bind(2, score).bind(3, reward).bind(4, candidate_id);
  update.step();
  KF_CHECK(db.changes() == 1, "no candidate %lld in '%s'", (long long)candidate_id, db.path().c_str());
  tx.commit();
}

void ProgramDb::set_profile(int64_t candidate_id, const nlohmann::json& profile) {
  const SqliteDb& db = impl_->db;
  Transaction tx(db);
  nlohmann::json v;
  {
    Statement q(db, "SELECT verdict_json FROM candidates WHERE id = ?");
    q.bind(0, candidate_id);
    KF_CHECK(q.step() && !q.is_null(0), "no judged candidate %lld in '%s'", (long long)candidate_id, db.path().c_str());
    v = parse_json(db, q.text(0), "candidates.verdict_json", candidate_id);
  }
  if (!v.is_object()) v = nlohmann::json::object();
  if (!v.contains("details") || !v["details"].is_object()) v["details"] = nlohmann::json::object();
  v["details"]["profile"] = profile;
  Statement update(db, "UPDATE candidates SET verdict_json = ? WHERE id = ?");
  update.bind(0, dump_json(v)).bind(1, candidate_id).step();
  tx.commit();
}

void ProgramDb::set_advantages(const std::vector<std::pair<int64_t, double>>& id_and_advantage) {
  const SqliteDb& db = impl_->db;
  Transaction tx(db);
  Statement update(db, "UPDATE candidates SET advantage = ? WHERE id = ?");
  for (const auto& [id, advantage] : id_and_advantage) {
    update.reset();
    update.bind(0, advantage).bind(1, id).step();
    KF_CHECK(db.changes() == 1, "no candidate %lld in '%s'", (long long)id, db.path().c_str());
  }
  tx.commit();
}

std::optional<CandidateRecord> ProgramDb::candidate(int64_t id) const {
  Statement q(impl_->db, strf("SELECT %s FROM candidates WHERE id = ?", kCandidateColumns).c_str());
  q.bind(0, id);
  if (!q.step()) return std::nullopt;
  return read_candidate(impl_->db, q);
}

std::vector<CandidateRecord> ProgramDb::candidates(int64_t run_id) const {
  Statement q(impl_->db, strf("SELECT %s FROM candidates WHERE run_id = ? ORDER BY id", kCandidateColumns).c_str());
  q.bind(0, run_id);
  std::vector<CandidateRecord> out;
  while (q.step()) out.push_back(read_candidate(impl_->db, q));
  return out;
}

std::vector<CandidateRecord> ProgramDb::pending_candidates(int64_t run_id) const {
  Statement q(impl_->db,
              strf("SELECT %s FROM candidates WHERE run_id = ? AND status = 'pending' ORDER BY id", kCandidateColumns)
                  .c_str());
  q.bind(0, run_id);
  std::vector<CandidateRecord> out;
  while (q.step()) out.push_back(read_candidate(impl_->db, q));
  return out;
}

int ProgramDb::last_iteration(int64_t run_id) const {
  // The iteration of the newest candidate stored for the run (LLM calls alone do not count).
  Statement q(impl_->db, "SELECT MAX(iteration) FROM candidates WHERE run_id = ?");
  q.bind(0, run_id);
  return q.step() && !q.is_null(0) ? int(q.integer(0)) : -1;
}

void ProgramDb::begin_iteration(int64_t run_id, int iteration, int64_t parent, const std::string& prompt) {
  const SqliteDb& db = impl_->db;
  Transaction tx(db);
  Statement insert(db,
                   "INSERT OR IGNORE INTO iterations(run_id, iteration, parent, prompt, state) "
                   "VALUES (?, ?, ?, ?, 'open')");
  insert.bind(0, run_id).bind(1, iteration).bind(2, parent).bind(3, prompt).step();
  tx.commit();
}

std::optional<IterationRecord> ProgramDb::iteration(int64_t run_id, int iteration) const {
  Statement q(impl_->db, "SELECT iteration, parent, prompt, state FROM iterations WHERE run_id = ? AND iteration = ?");
  q.bind(0, run_id).bind(1, iteration);
  if (!q.step()) return std::nullopt;
  IterationRecord r;
  r.iteration = int(q.integer(0));
  r.parent = q.integer(1);
  r.prompt = q.text(2);
  r.complete = q.text(3) == "complete";
  return r;
}

void ProgramDb::complete_iteration(int64_t run_id, int iteration) {
  const SqliteDb& db = impl_->db;
  Transaction tx(db);
  Statement update(db,
                   "INSERT INTO iterations(run_id, iteration, parent, prompt, state) VALUES (?, ?, 0, '', 'complete') "
                   "ON CONFLICT(run_id, iteration) DO UPDATE SET state = 'complete'");
  update.bind(0, run_id).bind(1, iteration).step();
  tx.commit();
}

int ProgramDb::last_complete_iteration(int64_t run_id) const {
  Statement q(impl_->db, "SELECT MAX(iteration) FROM iterations WHERE run_id = ? AND state = 'complete'");
  q.bind(0, run_id);
  return q.step() && !q.is_null(0) ? int(q.integer(0)) : -1;
}

std::vector<int64_t> ProgramDb::add_answer(const LlmCallRecord& call, const std::vector<CandidateRecord>& cs) {
  const SqliteDb& db = impl_->db;
  Transaction tx(db);
  std::vector<int64_t> ids = insert_candidates(db, cs);
  insert_llm_call(db, call);
  tx.commit();
  return ids;
}

int64_t ProgramDb::add_llm_call(const LlmCallRecord& c) {
  const SqliteDb& db = impl_->db;
  Transaction tx(db);
  const int64_t id = insert_llm_call(db, c);
  tx.commit();
  return id;
}

std::vector<LlmCallRecord> ProgramDb::llm_calls(int64_t run_id) const {
  Statement q(impl_->db, strf("SELECT %s FROM llm_calls WHERE run_id = ? ORDER BY id", kLlmCallColumns).c_str());
  q.bind(0, run_id);
  std::vector<LlmCallRecord> out;
  while (q.step()) out.push_back(read_llm_call(q));
  return out;
}

double ProgramDb::total_cost_usd(int64_t run_id) const {
  // TOTAL() is 0.0 over no rows and skips NULLs (costs stored as NaN).
  Statement q(impl_->db, "SELECT TOTAL(cost_usd) FROM llm_calls WHERE run_id = ?");
  q.bind(0, run_id);
  return q.step() ? q.real(0) : 0.0;
}

}  // namespace kforge
