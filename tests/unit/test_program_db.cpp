// The program database of a search: schema and reopening, runs, candidates and every field of
// them, verdicts and advantages, LLM calls, refusing a newer schema, and surviving kill -9.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "search/program_db.hpp"

namespace kforge {
namespace {

namespace fs = std::filesystem;

class ProgramDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("kforge_programdb_" + std::to_string(::getpid()) + "_" + std::string(info->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// Every row of one SQL query run directly on the file, each row as its columns joined by '|'.
std::vector<std::string> query_rows(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  std::vector<std::string> rows;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      std::string row;
      for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
        row += (c ? "|" : "") + std::string(text ? text : "NULL");
      }
      rows.push_back(row);
    }
    if (rc != SQLITE_DONE) ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  } else {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return rows;
}

// The first row of a query ("" when there is none; a test expecting a row then fails on the value).
std::string query(const std::string& path, const std::string& sql) {
  const std::vector<std::string> rows = query_rows(path, sql);
  return rows.empty() ? std::string() : rows[0];
}

void execute(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

// The kforge::Error that `f` throws; fails the test when it throws none.
template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no kforge::Error thrown";
  return Error(ErrorKind::kInternal, "none", __FILE__, __LINE__);
}

bool looks_like_utc(const std::string& s) {
  // "2026-11-30T05:09:20Z"
  return s.size() == 20 && s[4] == '-' && s[7] == '-' && s[10] == 'T' && s[13] == ':' && s[16] == ':' && s[19] == 'Z';
}

// A candidate with every field set to something other than its default.
CandidateRecord full_candidate(int64_t run_id) {
  CandidateRecord c;
  c.id = 777;  // ignored on insert
  c.run_id = run_id;
  c.iteration = 3;
  c.group = 2;
  c.sample = 5;
  c.policy = "llm:some-model";
  c.parents = {12, 4, 9000000000LL};  // order kept, 64-bit ids
  c.source = "__global__ void k() { /* \"quotes\", 'ticks', unicode: \xc2\xb5s */ }\n";
  c.source += '\0';  // a NUL inside the text
  c.source += "tail";
  c.prompt = R"([{"role":"user","content":"make it faster"}])";
  c.analysis = "Tile 128x128, double buffering.";
  c.status = "evaluated";
  c.error = "nothing, really";
  c.verdict = {{"correct", true}, {"speedup", {{"median", 1.5}}}, {"notes", {"a", "b"}}};
  c.correct = true;
  c.score = 1.75;
  c.reward = -0.5;
  c.advantage = 0.25;
  c.created_at = "ignored";
  c.language = "python";
  return c;
}

void expect_same_candidate(const CandidateRecord& a, const CandidateRecord& b) {
  EXPECT_EQ(a.run_id, b.run_id);
  EXPECT_EQ(a.iteration, b.iteration);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.sample, b.sample);
  EXPECT_EQ(a.policy, b.policy);
  EXPECT_EQ(a.parents, b.parents);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.prompt, b.prompt);
  EXPECT_EQ(a.analysis, b.analysis);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.language, b.language);
  EXPECT_EQ(a.verdict, b.verdict);
  EXPECT_EQ(a.correct, b.correct);
  EXPECT_DOUBLE_EQ(a.score, b.score);
  EXPECT_DOUBLE_EQ(a.reward, b.reward);
  EXPECT_EQ(a.advantage.has_value(), b.advantage.has_value());
  if (a.advantage && b.advantage) {
    EXPECT_DOUBLE_EQ(*a.advantage, *b.advantage);
  }
}

TEST_F(ProgramDbTest, CreatesMigratesAndReopens) {
  const std::string p = path("search.db");
  int64_t run = 0;
  {
    ProgramDb db(p);
    EXPECT_EQ(ProgramDb::latest_schema_version(), 3);
    EXPECT_EQ(db.schema_version(), 3);
    run = db.create_run("hgemm:64x64x64:nn", {{"iterations", 3}});
  }
  EXPECT_EQ(query(p, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(query(p, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                     "('runs', 'candidates', 'llm_calls', 'schema_version')"),
            "4");
  EXPECT_EQ(query(p, "SELECT group_concat(name, ',') FROM pragma_index_info('candidates_run_status')"),
            "run_id,status");
  EXPECT_EQ(query(p, "SELECT group_concat(name, ',') FROM pragma_index_info('candidates_run_iteration')"),
            "run_id,iteration");
  EXPECT_EQ(query(p, "SELECT \"table\" FROM pragma_foreign_key_list('candidates')"), "runs");
  EXPECT_EQ(query(p, "SELECT \"table\" FROM pragma_foreign_key_list('llm_calls')"), "runs");

  ProgramDb db(p);
  EXPECT_EQ(db.schema_version(), 3);
  EXPECT_EQ(query(p, "SELECT COUNT(*) FROM schema_version"), "3");  // no migration applied twice
  ASSERT_TRUE(db.run(run).has_value());
  EXPECT_EQ(db.run(run)->task, "hgemm:64x64x64:nn");
}

TEST_F(ProgramDbTest, RunsAndLatestRun) {
  ProgramDb db(path("search.db"));
  EXPECT_FALSE(db.latest_run().has_value());
  EXPECT_FALSE(db.run(1).has_value());

  const nlohmann::json config = {{"sampler", "contrastive:5:0.5"}, {"group", 4}, {"models", {"a", "b"}}};
  const int64_t first = db.create_run("hgemm:4096x4096x64:tn", config);
  const int64_t second = db.create_run("hgemm:128x128x128:nn", nlohmann::json::object());
  EXPECT_GT(second, first);

  const std::optional<SearchRun> r = db.run(first);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->id, first);
  EXPECT_EQ(r->task, "hgemm:4096x4096x64:tn");
  EXPECT_EQ(r->state, "running");
  EXPECT_EQ(r->config, config);
  EXPECT_TRUE(looks_like_utc(r->created_at)) << r->created_at;
  EXPECT_EQ(r->updated_at, r->created_at);

  const std::optional<SearchRun> latest = db.latest_run();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->id, second);
  EXPECT_EQ(latest->config, nlohmann::json::object());

  db.set_run_state(first, "stopped");
  EXPECT_EQ(db.run(first)->state, "stopped");
  EXPECT_GE(db.run(first)->updated_at, db.run(first)->created_at);
  EXPECT_EQ(db.run(second)->state, "running");  // only the one run changed
  db.set_run_state(first, "complete");
  EXPECT_EQ(db.run(first)->state, "complete");

  EXPECT_EQ(error_of([&] { db.set_run_state(first, "paused"); }).kind(), ErrorKind::kInternal);
  EXPECT_EQ(db.run(first)->state, "complete");
  EXPECT_EQ(error_of([&] { db.set_run_state(second + 100, "failed"); }).kind(), ErrorKind::kInternal);
}

TEST_F(ProgramDbTest, CandidatesRoundTripEveryField) {
  const std::string p = path("search.db");
  ProgramDb db(p);
  const int64_t run = db.create_run("t", {});
  const int64_t other_run = db.create_run("u", {});

  const CandidateRecord full = full_candidate(run);
  CandidateRecord plain;  // defaults: no parents, null verdict, no advantage, status pending
  plain.run_id = run;
  plain.policy = "seed";
  plain.source = "int main() {}";
  CandidateRecord elsewhere = plain;
  elsewhere.run_id = other_run;

  const int64_t id_full = db.add_candidate(full);
  const int64_t id_plain = db.add_candidate(plain);
  const int64_t id_else = db.add_candidate(elsewhere);
  EXPECT_NE(id_full, 777);
  EXPECT_GT(id_plain, id_full);

  const std::optional<CandidateRecord> back = db.candidate(id_full);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->id, id_full);
  expect_same_candidate(*back, full);
  EXPECT_EQ(back->source.substr(back->source.size() - 5), std::string("\0tail", 5));  // the NUL survives
  EXPECT_TRUE(looks_like_utc(back->created_at)) << back->created_at;

  const std::optional<CandidateRecord> back_plain = db.candidate(id_plain);
  ASSERT_TRUE(back_plain.has_value());
  expect_same_candidate(*back_plain, plain);
  EXPECT_TRUE(back_plain->parents.empty());
  EXPECT_TRUE(back_plain->verdict.is_null());
  EXPECT_FALSE(back_plain->advantage.has_value());
  // Stored as SQL NULLs, not as the text "null" or 0.
  EXPECT_EQ(query(p, "SELECT verdict_json IS NULL, advantage IS NULL, parents_json FROM candidates WHERE id = " +
                         std::to_string(id_plain)),
            "1|1|[]");

  // An advantage of exactly 0 is a value, not "none".
  CandidateRecord zero = plain;
  zero.advantage = 0.0;
  const std::optional<CandidateRecord> back_zero = db.candidate(db.add_candidate(zero));
  ASSERT_TRUE(back_zero && back_zero->advantage.has_value());
  EXPECT_EQ(*back_zero->advantage, 0.0);

  const std::vector<CandidateRecord> all = db.candidates(run);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, id_full);
  EXPECT_EQ(all[1].id, id_plain);
  ASSERT_EQ(db.candidates(other_run).size(), 1u);
  EXPECT_EQ(db.candidates(other_run)[0].id, id_else);
  EXPECT_TRUE(db.candidates(other_run + 1).empty());
  EXPECT_FALSE(db.candidate(id_else + 100).has_value());
}

TEST_F(ProgramDbTest, AddCandidatesIsAllOrNothing) {
  const std::string p = path("search.db");
  ProgramDb db(p);
  const int64_t run = db.create_run("t", {});
  std::vector<CandidateRecord> group;
  for (int s = 0; s < 4; ++s) {
    CandidateRecord c;
    c.run_id = run;
    c.group = 1;
    c.sample = s;
    c.source = "source " + std::to_string(s);
    group.push_back(c);
  }

  // The last one names a run that does not exist: the foreign key fails, none is stored.
  std::vector<CandidateRecord> bad_run = group;
  bad_run.back().run_id = run + 50;
  const Error fk = error_of([&] { db.add_candidates(bad_run); });
  EXPECT_EQ(fk.kind(), ErrorKind::kRuntime);
  EXPECT_NE(std::string(fk.what()).find("FOREIGN KEY"), std::string::npos) << fk.what();
  EXPECT_EQ(query(p, "SELECT COUNT(*) FROM candidates"), "0");

  // A bad status half-way: none is stored either.
  std::vector<CandidateRecord> bad_status = group;
  bad_status[2].status = "maybe";
  EXPECT_EQ(error_of([&] { db.add_candidates(bad_status); }).kind(), ErrorKind::kInternal);
  EXPECT_EQ(query(p, "SELECT COUNT(*) FROM candidates"), "0");

  // The connection is still usable, and a good group arrives whole, ids in order.
  const std::vector<int64_t> ids = db.add_candidates(group);
  ASSERT_EQ(ids.size(), 4u);
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_GT(ids[i], ids[i - 1]);
  const std::vector<CandidateRecord> back = db.candidates(run);
  ASSERT_EQ(back.size(), 4u);
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].id, ids[i]);
    EXPECT_EQ(back[i].sample, int(i));
    EXPECT_EQ(back[i].source, group[i].source);
  }
  EXPECT_TRUE(db.add_candidates({}).empty());
}

TEST_F(ProgramDbTest, PendingCandidatesAndVerdicts) {
  ProgramDb db(path("search.db"));
  const int64_t run = db.create_run("t", {});
  const int64_t other = db.create_run("u", {});
  std::vector<CandidateRecord> cs;
  for (int s = 0; s < 4; ++s) {
    CandidateRecord c;
    c.run_id = run;
    c.sample = s;
    c.source = "k" + std::to_string(s);
    cs.push_back(c);
  }
  cs[1].status = "invalid";
  cs[1].error = "no code block in the response";
  const std::vector<int64_t> ids = db.add_candidates(cs);
  CandidateRecord foreign;
  foreign.run_id = other;
  db.add_candidate(foreign);

  std::vector<CandidateRecord> pending = db.pending_candidates(run);
  ASSERT_EQ(pending.size(), 3u);
  EXPECT_EQ(pending[0].id, ids[0]);
  EXPECT_EQ(pending[1].id, ids[2]);
  EXPECT_EQ(pending[2].id, ids[3]);

  const nlohmann::json verdict = {{"status", "correct"}, {"speedup", 2.5}};
  db.record_verdict(ids[2], verdict, true, 2.5, 0.9);
  db.record_verdict(ids[0], {{"status", "wrong"}}, false, 0, -1);
  pending = db.pending_candidates(run);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].id, ids[3]);
  EXPECT_EQ(db.pending_candidates(other).size(), 1u);

  const CandidateRecord good = *db.candidate(ids[2]);
  EXPECT_EQ(good.status, "evaluated");
  EXPECT_EQ(good.verdict, verdict);
  EXPECT_TRUE(good.correct);
  EXPECT_DOUBLE_EQ(good.score, 2.5);
  EXPECT_DOUBLE_EQ(good.reward, 0.9);
  EXPECT_EQ(good.source, "k2");  // the rest untouched
  const CandidateRecord bad = *db.candidate(ids[0]);
  EXPECT_EQ(bad.status, "evaluated");
  EXPECT_FALSE(bad.correct);
  EXPECT_DOUBLE_EQ(bad.reward, -1);
  EXPECT_EQ(db.candidate(ids[1])->error, "no code block in the response");

  EXPECT_EQ(error_of([&] { db.record_verdict(ids[3] + 100, verdict, true, 1, 1); }).kind(), ErrorKind::kInternal);
}

TEST_F(ProgramDbTest, SetAdvantagesAllOrNothing) {
  ProgramDb db(path("search.db"));
  const int64_t run = db.create_run("t", {});
  const std::vector<int64_t> ids = db.add_candidates(std::vector<CandidateRecord>(3, [&] {
    CandidateRecord c;
    c.run_id = run;
    return c;
  }()));
  db.set_advantages({{ids[0], 1.25}, {ids[2], -1.25}});
  EXPECT_EQ(db.candidate(ids[0])->advantage, std::optional<double>(1.25));
  EXPECT_FALSE(db.candidate(ids[1])->advantage.has_value());
  EXPECT_EQ(db.candidate(ids[2])->advantage, std::optional<double>(-1.25));

  // One unknown id: nothing of the batch is applied.
  EXPECT_EQ(error_of([&] { db.set_advantages({{ids[1], 3.0}, {ids[2] + 100, 1.0}}); }).kind(),
            ErrorKind::kInternal);
  EXPECT_FALSE(db.candidate(ids[1])->advantage.has_value());
  db.set_advantages({});
}

TEST_F(ProgramDbTest, LlmCallsAndTotalCost) {
  ProgramDb db(path("search.db"));
  const int64_t run = db.create_run("t", {});
  const int64_t other = db.create_run("u", {});
  EXPECT_EQ(db.total_cost_usd(run), 0.0);
  EXPECT_TRUE(db.llm_calls(run).empty());

  LlmCallRecord ok;
  ok.run_id = run;
  ok.iteration = 4;
  ok.group = 7;
  ok.endpoint = "https://api.example.com/v1";
  ok.model = "model-x";
  ok.prompt_tokens = 1234;
  ok.completion_tokens = 567;
  ok.latency_s = 12.5;
  ok.cost_usd = 0.125;
  ok.status = "ok";
  LlmCallRecord failed = ok;
  failed.completion_tokens = 0;
  failed.cost_usd = 0.0625;
  failed.status = "error";
  failed.error = "HTTP 429: rate limited";
  LlmCallRecord foreign = ok;
  foreign.run_id = other;
  foreign.cost_usd = 100;

  const int64_t id_ok = db.add_llm_call(ok);
  const int64_t id_failed = db.add_llm_call(failed);
  db.add_llm_call(foreign);

  const std::vector<LlmCallRecord> calls = db.llm_calls(run);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].id, id_ok);
  EXPECT_EQ(calls[1].id, id_failed);
  for (size_t i = 0; i < 2; ++i) {
    const LlmCallRecord& want = i == 0 ? ok : failed;
    EXPECT_EQ(calls[i].run_id, run);
    EXPECT_EQ(calls[i].iteration, 4);
    EXPECT_EQ(calls[i].group, 7);
    EXPECT_EQ(calls[i].endpoint, want.endpoint);
    EXPECT_EQ(calls[i].model, want.model);
    EXPECT_EQ(calls[i].prompt_tokens, want.prompt_tokens);
    EXPECT_EQ(calls[i].completion_tokens, want.completion_tokens);
    EXPECT_DOUBLE_EQ(calls[i].latency_s, want.latency_s);
    EXPECT_DOUBLE_EQ(calls[i].cost_usd, want.cost_usd);
    EXPECT_EQ(calls[i].status, want.status);
    EXPECT_EQ(calls[i].error, want.error);
    EXPECT_TRUE(looks_like_utc(calls[i].created_at)) << calls[i].created_at;
  }
  EXPECT_DOUBLE_EQ(db.total_cost_usd(run), 0.1875);
  EXPECT_DOUBLE_EQ(db.total_cost_usd(other), 100);
  EXPECT_EQ(db.total_cost_usd(other + 1), 0.0);

  LlmCallRecord orphan = ok;
  orphan.run_id = other + 1;
  EXPECT_EQ(error_of([&] { db.add_llm_call(orphan); }).kind(), ErrorKind::kRuntime);
  EXPECT_EQ(db.llm_calls(other + 1).size(), 0u);
}

TEST_F(ProgramDbTest, LastIteration) {
  ProgramDb db(path("search.db"));
  const int64_t run = db.create_run("t", {});
  const int64_t other = db.create_run("u", {});
  EXPECT_EQ(db.last_iteration(run), -1);
  CandidateRecord c;
  c.run_id = run;
  for (int it : {0, 5, 2}) {
    c.iteration = it;
    db.add_candidate(c);
  }
  EXPECT_EQ(db.last_iteration(run), 5);
  EXPECT_EQ(db.last_iteration(other), -1);
  c.run_id = other;
  c.iteration = 0;
  db.add_candidate(c);
  EXPECT_EQ(db.last_iteration(other), 0);
  EXPECT_EQ(db.last_iteration(run), 5);
}

// Issue 14 item 6: an iteration is begun (its prompt stored) before its first LLM call, each paid
// answer is stored with its call in one transaction, and only a finished iteration counts.
TEST_F(ProgramDbTest, IterationsAndAnswersArriveOneByOne) {
  ProgramDb db(path("search.db"));
  const int64_t run = db.create_run("t", {});
  EXPECT_EQ(db.last_complete_iteration(run), -1);
  db.complete_iteration(run, 0);
  EXPECT_EQ(db.last_complete_iteration(run), 0);
  db.begin_iteration(run, 1, 7, R"([{"role":"user","content":"p"}])");
  db.begin_iteration(run, 1, 8, "another prompt");  // kept as first begun
  ASSERT_TRUE(db.iteration(run, 1));
  EXPECT_EQ(db.iteration(run, 1)->parent, 7);
  EXPECT_EQ(db.iteration(run, 1)->prompt, R"([{"role":"user","content":"p"}])");
  EXPECT_FALSE(db.iteration(run, 1)->complete);
  EXPECT_EQ(db.last_complete_iteration(run), 0);
  CandidateRecord c;
  c.run_id = run;
  c.iteration = 1;
  LlmCallRecord call;
  call.run_id = run;
  call.iteration = 1;
  call.status = "ok";
  call.cost_usd = 1.5;
  EXPECT_EQ(db.add_answer(call, {c}).size(), 1u);
  c.sample = 1;
  EXPECT_EQ(db.add_answer(call, {c}).size(), 1u);
  EXPECT_EQ(db.candidates(run).size(), 2u);
  EXPECT_DOUBLE_EQ(db.total_cost_usd(run), 3.0);
  db.complete_iteration(run, 1);
  EXPECT_TRUE(db.iteration(run, 1)->complete);
  EXPECT_EQ(db.last_complete_iteration(run), 1);
  // A bad candidate rolls its call back too: an answer is stored whole or not at all.
  c.status = "bogus";
  EXPECT_ANY_THROW(db.add_answer(call, {c}));
  EXPECT_DOUBLE_EQ(db.total_cost_usd(run), 3.0);
  db.set_run_config(run, {{"budget_usd", 7}});
  EXPECT_EQ(db.run(run)->config["budget_usd"], 7);
}

TEST_F(ProgramDbTest, NewerSchemaIsRefused) {
  const std::string p = path("future.db");
  { ProgramDb db(p); }
  execute(p, "INSERT INTO schema_version(version) VALUES (42)");
  const Error e = error_of([&] { ProgramDb db(p); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(std::string(e.what()).find("newer kforge"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("42"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
}

TEST_F(ProgramDbTest, OtherFilesAreRefused) {
  const std::string foreign = path("other.db");
  execute(foreign, "CREATE TABLE candidates(x TEXT)");
  const Error e = error_of([&] { ProgramDb db(foreign); });
  EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  EXPECT_NE(std::string(e.what()).find("not a kforge program database"), std::string::npos) << e.what();

  const Error folder = error_of([&] { ProgramDb db(dir_.string()); });
  EXPECT_EQ(folder.kind(), ErrorKind::kUsage);
}

// ---- crash safety -------------------------------------------------------------------------------

// What the writer below stores, so that the checker can tell a complete row from a damaged one.
int crash_group_size(int iteration) { return 1 + iteration % 5; }
std::string crash_source(int iteration, int sample) {
  // A few KiB per candidate, so that transactions span several pages and take a while.
  std::string s = "// candidate " + std::to_string(iteration) + "/" + std::to_string(sample) + "\n";
  for (int line = 0; line < 100; ++line) s += "  acc += a[" + std::to_string(line) + "] * b[k]; // padding padding\n";
  return s;
}

// The child process: writes forever (until the parent kills it) and reports, through `fd`, the
// first id and the size of each group once add_candidates() has returned.
[[noreturn]] void crash_writer(const std::string& path, int64_t run, int first_iteration, int fd) {
  try {
    ProgramDb db(path);
    std::vector<int64_t> previous;  // the ids of the previous group
    for (int it = first_iteration;; ++it) {
      std::vector<CandidateRecord> group;
      for (int s = 0; s < crash_group_size(it); ++s) {
        CandidateRecord c;
        c.run_id = run;
        c.iteration = it;
        c.group = it;
        c.sample = s;
        c.policy = "crash-test";
        c.parents = {it, s};
        c.source = crash_source(it, s);
        c.prompt = "prompt " + std::to_string(it);
        group.push_back(std::move(c));
      }
      const std::vector<int64_t> ids = db.add_candidates(group);
      const int64_t report[2] = {ids.front(), int64_t(ids.size())};
      if (write(fd, report, sizeof report) != ssize_t(sizeof report)) _exit(4);
      // The previous group: a verdict for its first sample, then advantages for all of it.
      if (!previous.empty()) {
        db.record_verdict(previous[0], {{"iteration", it - 1}}, true, 1.5, 0.5);
        std::vector<std::pair<int64_t, double>> advantages;
        for (size_t i = 0; i < previous.size(); ++i) advantages.emplace_back(previous[i], double(i));
        db.set_advantages(advantages);
      }
      previous = ids;
    }
  } catch (...) {
    _exit(3);
  }
}

TEST_F(ProgramDbTest, SurvivesKillDashNineAtAnyMoment) {
  const std::string p = path("crash.db");
  int64_t run = 0;
  {
    ProgramDb db(p);
    run = db.create_run("crash", {});
  }
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::set<int64_t> reported;  // ids the writer was told are stored

  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      crash_writer(p, run, round * 1000000, fds[1]);
    }
    close(fds[1]);

    // Wait for the first stored group (the writer is past opening the file), then kill it at a
    // random moment of its loop: some time in the next 0-40 ms.
    auto read_report = [&]() -> bool {
      int64_t report[2];
      size_t got = 0;
      while (got < sizeof report) {
        const ssize_t n = read(fds[0], reinterpret_cast<char*>(report) + got, sizeof report - got);
        if (n <= 0) return false;
        got += size_t(n);
      }
      for (int64_t i = 0; i < report[1]; ++i) reported.insert(report[0] + i);
      return true;
    };
    const bool started = read_report();
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 40000));
    kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    while (read_report()) {
    }
    close(fds[0]);
    ASSERT_TRUE(started) << "the writer stored nothing";
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the writer ended by itself (exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ")";

    // The file is sound (this connection also replays the WAL left behind).
    EXPECT_EQ(query(p, "PRAGMA integrity_check"), "ok");
    EXPECT_TRUE(query_rows(p, "PRAGMA foreign_key_check").empty());

    ProgramDb db(p);
    const std::vector<CandidateRecord> all = db.candidates(run);
    std::map<int, std::vector<const CandidateRecord*>> groups;
    std::set<int64_t> stored;
    for (const CandidateRecord& c : all) {
      // Every row complete and as written.
      stored.insert(c.id);
      EXPECT_EQ(c.policy, "crash-test");
      EXPECT_EQ(c.group, c.iteration);
      EXPECT_EQ(c.parents, (std::vector<int64_t>{c.iteration, c.sample}));
      EXPECT_EQ(c.source, crash_source(c.iteration, c.sample));
      EXPECT_EQ(c.prompt, "prompt " + std::to_string(c.iteration));
      EXPECT_TRUE(looks_like_utc(c.created_at));
      // A verdict and its status change together.
      if (c.status == "evaluated") {
        EXPECT_EQ(c.verdict, nlohmann::json({{"iteration", c.iteration}}));
        EXPECT_TRUE(c.correct);
        EXPECT_DOUBLE_EQ(c.reward, 0.5);
      } else {
        EXPECT_EQ(c.status, "pending");
        EXPECT_TRUE(c.verdict.is_null());
      }
      groups[c.iteration].push_back(&c);
    }
    for (const auto& [iteration, members] : groups) {
      // Whole groups only, each sample once; advantages on all of a group or on none of it.
      ASSERT_EQ(int(members.size()), crash_group_size(iteration)) << "group of iteration " << iteration;
      size_t with_advantage = 0;
      for (size_t i = 0; i < members.size(); ++i) {
        EXPECT_EQ(members[i]->sample, int(i));
        if (members[i]->advantage) {
          ++with_advantage;
          EXPECT_DOUBLE_EQ(*members[i]->advantage, double(i));
        }
      }
      EXPECT_TRUE(with_advantage == 0 || with_advantage == members.size()) << "iteration " << iteration;
    }
    // Nothing reported as stored was lost.
    for (int64_t id : reported) EXPECT_TRUE(stored.count(id)) << "candidate " << id << " was reported but is gone";
    if (::testing::Test::HasFailure()) break;
  }
}

}  // namespace
}  // namespace kforge
