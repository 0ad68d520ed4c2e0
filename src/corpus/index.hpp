// The corpus database (DIR/corpus.sqlite): the chunks, an SQLite FTS5 full-text index over their
// text (tokenizer unicode61 with '_' a token character, so identifiers such as
// cudaMemcpyAsync or __syncthreads stay whole), and the instruction descriptions that
// `kforge corpus describe` adds (one row per chunk, written in the same transaction as the money
// spent on it, so a kill -9 loses at most the calls in flight and never writes a chunk twice).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "db/sqlite.hpp"

namespace kforge {

struct CorpusChunk {
  int64_t rowid = 0;
  std::string id;        // the first 16 hex digits of sha256
  std::string text;
  std::string origin;    // file path (or run database candidate), with :first-last lines
  std::string package;   // cuda-toolkit, cccl, cutlass, torch, kforge, kforge-candidates, or a --source name
  std::string licence;   // SPDX expression, LicenseRef-..., or "unknown"
  std::string sha256;    // of text
  int first_line = 0, last_line = 0;
};

struct ChunkDescription {
  std::string chunk_id, description, model;
  std::vector<std::string> context_ids;
  int prompt_tokens = 0, completion_tokens = 0;
  double cost_usd = 0;
};

// An FTS5 query matching `words` (the identifiers and numbers in it, each quoted, so no user text
// is FTS5 syntax): all of them (all = true) or any of them. "" when it has none.
std::string fts_query(const std::string& words, bool all, size_t max_terms = 32);

class CorpusIndex {
 public:
  static constexpr const char* kFileName = "corpus.sqlite";
  // Opens (or creates) the database at `path`; throws a usage error when it is not a corpus
  // database of this kforge.
  explicit CorpusIndex(const std::string& path);
  // The database of a corpus folder, which must exist (usage error naming `flag` otherwise).
  static std::string path_in(const std::string& dir, const char* flag);

  void add_chunks(const std::vector<CorpusChunk>& chunks);  // one transaction; rebuilds nothing else
  void set_meta(const std::string& key, const std::string& value);
  std::string meta(const std::string& key, const std::string& fallback = "") const;
  int64_t chunk_count() const;
  std::vector<CorpusChunk> chunks_without_description(int64_t limit) const;  // by rowid; limit < 0: all
  // Best matches first (bm25); chunks whose id is in `exclude` are skipped.
  std::vector<CorpusChunk> search(const std::string& fts_query, int limit,
                                  const std::vector<std::string>& exclude = {}) const;
  // Stores a description unless the chunk already has one, and adds its cost to the total spent,
  // in one transaction. Returns false when it was there already.
  bool add_description(const ChunkDescription& d);
  int64_t description_count() const;
  double described_spent_usd() const;
  // Every described chunk with its description, by rowid.
  std::vector<std::pair<CorpusChunk, ChunkDescription>> described() const;

  const SqliteDb& db() const { return db_; }

 private:
  SqliteDb db_;
};

}  // namespace kforge
