#include "corpus/index.hpp"

#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.hpp"
#include "core/text.hpp"

namespace kforge {
namespace fs = std::filesystem;
namespace {

constexpr const char* kMigrations[] = {
    R"sql(
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE chunks (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        text TEXT NOT NULL,
        origin TEXT NOT NULL,
        package TEXT NOT NULL,
        licence TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        first_line INTEGER NOT NULL,
        last_line INTEGER NOT NULL
      );
      CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks', content_rowid='rowid',
                                                 tokenize="unicode61 tokenchars '_'");
      CREATE TABLE descriptions (
        chunk_id TEXT PRIMARY KEY REFERENCES chunks(id),
        description TEXT NOT NULL,
        context_ids TEXT NOT NULL,
        model TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        cost_usd REAL NOT NULL,
        created_at TEXT NOT NULL
      );
    )sql",
};

constexpr const char* kChunkColumns = "rowid, id, text, origin, package, licence, sha256, first_line, last_line";

CorpusChunk read_chunk(const Statement& s, int c0 = 0) {
  CorpusChunk c;
  c.rowid = s.integer(c0);
  c.id = s.text(c0 + 1);
  c.text = s.text(c0 + 2);
  c.origin = s.text(c0 + 3);
  c.package = s.text(c0 + 4);
  c.licence = s.text(c0 + 5);
  c.sha256 = s.text(c0 + 6);
  c.first_line = int(s.integer(c0 + 7));
  c.last_line = int(s.integer(c0 + 8));
  return c;
}

}  // namespace

std::string fts_query(const std::string& words, bool all, size_t max_terms) {
  std::vector<std::string> terms;
  std::set<std::string> seen;
  for (size_t i = 0; i < words.size() && terms.size() < max_terms;) {
    const unsigned char c = static_cast<unsigned char>(words[i]);
    if (!(std::isalnum(c) || c == '_' || c >= 0x80)) {
      ++i;
      continue;
    }
    size_t e = i;
    while (e < words.size() && (std::isalnum(static_cast<unsigned char>(words[e])) || words[e] == '_' ||
                                static_cast<unsigned char>(words[e]) >= 0x80))
      ++e;
    std::string w = words.substr(i, e - i);
    i = e;
    std::string key = w;
    for (char& k : key) k = char(std::tolower(static_cast<unsigned char>(k)));
    if (seen.insert(key).second) terms.push_back("\"" + w + "\"");
  }
  return join(terms, all ? " " : " OR ");
}

CorpusIndex::CorpusIndex(const std::string& path) : db_(path, "corpus database") {
  if (sqlite3_compileoption_used("ENABLE_FTS5") == 0) {
    // Some builds register FTS5 without the compile option: ask for the module itself.
    sqlite3_stmt* st = nullptr;
    const bool has = sqlite3_prepare_v2(db_.handle(), "SELECT * FROM pragma_module_list WHERE name = 'fts5'", -1,
                                        &st, nullptr) == SQLITE_OK &&
                     sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (!has)
      KF_RUNTIME_ERROR("the SQLite library kforge uses (%s) has no FTS5 module, which the corpus index needs; "
                       "install an SQLite built with FTS5 (Debian's and Ubuntu's libsqlite3 are)",
                       sqlite3_libversion());
  }
  db_.migrate(kMigrations, "use a newer kforge or build the corpus again");
}

std::string CorpusIndex::path_in(const std::string& dir, const char* flag) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    KF_USAGE_ERROR("%s %s is not a folder; give the folder `kforge corpus build --out` wrote", flag, dir.c_str());
  const std::string p = (fs::path(dir) / kFileName).string();
  if (!fs::is_regular_file(p, ec))
    KF_USAGE_ERROR("%s %s holds no corpus (no %s); build one with kforge corpus build --out %s", flag, dir.c_str(),
                   kFileName, dir.c_str());
  return p;
}

void CorpusIndex::add_chunks(const std::vector<CorpusChunk>& chunks) {
  Transaction t(db_);
  Statement ins(db_, "INSERT INTO chunks(id, text, origin, package, licence, sha256, first_line, last_line) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  Statement fts(db_, "INSERT INTO chunks_fts(rowid, text) VALUES (?, ?)");
  for (const CorpusChunk& c : chunks) {
    ins.bind(0, c.id).bind(1, c.text).bind(2, c.origin).bind(3, c.package).bind(4, c.licence).bind(5, c.sha256);
    ins.bind(6, c.first_line).bind(7, c.last_line);
    ins.step();
    ins.reset();
    fts.bind(0, db_.last_insert_rowid()).bind(1, c.text);
    fts.step();
    fts.reset();
  }
  t.commit();
}

void CorpusIndex::set_meta(const std::string& key, const std::string& value) {
  Statement s(db_, "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  s.bind(0, key).bind(1, value);
  s.step();
}

std::string CorpusIndex::meta(const std::string& key, const std::string& fallback) const {
  Statement s(db_, "SELECT value FROM meta WHERE key = ?");
  s.bind(0, key);
  return s.step() ? s.text(0) : fallback;
}

int64_t CorpusIndex::chunk_count() const {
  Statement s(db_, "SELECT COUNT(*) FROM chunks");
  s.step();
  return s.integer(0);
}

std::vector<CorpusChunk> CorpusIndex::chunks_without_description(int64_t limit) const {
  Statement s(db_, strf("SELECT %s FROM chunks WHERE id NOT IN (SELECT chunk_id FROM descriptions) ORDER BY rowid "
                        "LIMIT ?",
                        kChunkColumns)
                       .c_str());
  s.bind(0, limit < 0 ? int64_t(-1) : limit);
  std::vector<CorpusChunk> out;
  while (s.step()) out.push_back(read_chunk(s));
  return out;
}

std::vector<CorpusChunk> CorpusIndex::search(const std::string& q, int limit,
                                             const std::vector<std::string>& exclude) const {
  std::vector<CorpusChunk> out;
  if (q.empty() || limit <= 0) return out;
  const std::set<std::string> skip(exclude.begin(), exclude.end());
  Statement s(db_, "SELECT c.rowid, c.id, c.text, c.origin, c.package, c.licence, c.sha256, c.first_line, "
                   "c.last_line FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
                   "WHERE chunks_fts MATCH ? ORDER BY rank, c.rowid LIMIT ?");
  s.bind(0, q).bind(1, int64_t(limit + skip.size()));
  while (s.step() && int(out.size()) < limit) {
    CorpusChunk c = read_chunk(s);
    if (!skip.count(c.id)) out.push_back(std::move(c));
  }
  return out;
}

bool CorpusIndex::add_description(const ChunkDescription& d) {
  Transaction t(db_);
  Statement s(db_, "INSERT INTO descriptions(chunk_id, description, context_ids, model, prompt_tokens, "
                   "completion_tokens, cost_usd, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                   "ON CONFLICT(chunk_id) DO NOTHING");
  s.bind(0, d.chunk_id).bind(1, d.description).bind(2, nlohmann::json(d.context_ids).dump()).bind(3, d.model);
  s.bind(4, d.prompt_tokens).bind(5, d.completion_tokens).bind(6, d.cost_usd).bind(7, utc_now_iso8601());
  s.step();
  const bool added = db_.changes() > 0;
  if (added) {
    Statement m(db_, "INSERT INTO meta(key, value) VALUES ('describe_spent_usd', ?) ON CONFLICT(key) DO UPDATE SET "
                     "value = CAST(CAST(value AS REAL) + CAST(excluded.value AS REAL) AS TEXT)");
    m.bind(0, strf("%.17g", d.cost_usd));
    m.step();
  }
  t.commit();
  return added;
}

int64_t CorpusIndex::description_count() const {
  Statement s(db_, "SELECT COUNT(*) FROM descriptions");
  s.step();
  return s.integer(0);
}

double CorpusIndex::described_spent_usd() const {
  const std::string v = meta("describe_spent_usd", "0");
  try {
    return std::stod(v);
  } catch (...) {
    return 0;
  }
}

std::vector<std::pair<CorpusChunk, ChunkDescription>> CorpusIndex::described() const {
  Statement s(db_, "SELECT c.rowid, c.id, c.text, c.origin, c.package, c.licence, c.sha256, c.first_line, "
                   "c.last_line, d.description, d.context_ids, d.model, d.prompt_tokens, d.completion_tokens, "
                   "d.cost_usd FROM descriptions d JOIN chunks c ON c.id = d.chunk_id ORDER BY c.rowid");
  std::vector<std::pair<CorpusChunk, ChunkDescription>> out;
  while (s.step()) {
    CorpusChunk c = read_chunk(s);
    ChunkDescription d;
    d.chunk_id = c.id;
    d.description = s.text(9);
    const auto ctx = nlohmann::json::parse(s.text(10), nullptr, false);
    if (ctx.is_array())
      for (const auto& x : ctx) d.context_ids.push_back(x.get<std::string>());
    d.model = s.text(11);
    d.prompt_tokens = int(s.integer(12));
    d.completion_tokens = int(s.integer(13));
    d.cost_usd = s.real(14);
    out.emplace_back(std::move(c), std::move(d));
  }
  return out;
}

}  // namespace kforge
