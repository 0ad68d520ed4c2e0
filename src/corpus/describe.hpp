// `kforge corpus describe`: an instruction description for every chunk of a corpus, from the
// user's LLM through the same client as `kforge optimize` (llm/client.hpp: endpoints, concurrency,
// retries with backoff, the spending cap, record/replay cassettes).
//
// Each prompt carries the chunk and, as retrieval context, the nearest other chunks of the corpus:
// the best FTS5 (bm25) matches for the chunk's first 32 distinct identifiers, any of them.
// Prompts depend only on the corpus, so a cassette replays by request content (in any order, with
// any concurrency). Every answer is stored in corpus.sqlite with its cost in one transaction the
// moment it arrives; a rerun (after Ctrl-C, a crash or kill -9) asks only for the chunks that have
// none, and the spending cap counts what earlier runs spent. The output file is then written
// whole from the database: one JSON object per line with the same keys (id, instruction, text,
// origin, package, licence, sha256, context_ids, model), loadable with
// datasets.load_dataset("json", data_files=FILE).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "llm/client.hpp"

namespace kforge {

struct DescribeOptions {
  std::string corpus_dir;
  std::string out;          // default: <corpus_dir>/described.jsonl
  LlmOptions llm;           // spent_usd is set from the corpus database
  int context = 3;          // retrieved chunks per prompt
  size_t context_chars = 1500;  // each retrieved chunk is cut to this many characters
  int max_tokens = 512;
  double temperature = 0.2;
  int64_t limit = -1;       // describe at most this many chunks this run; -1: all
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const std::string&)> progress;
};

struct DescribeSummary {
  int64_t chunks = 0;           // in the corpus
  int64_t already = 0;          // described before this run
  int64_t described = 0;        // by this run
  int64_t failed = 0;           // calls that failed this run (the chunks stay undescribed)
  int64_t written = 0;          // lines in the output
  double spent_usd = 0;         // in total, across runs
  bool budget_spent = false, interrupted = false;
  std::string last_error;
};

// The prompt for `chunk` with its retrieval context (exposed for tests).
struct CorpusChunk;
class CorpusIndex;
ChatRequest describe_request(const CorpusIndex& index, const CorpusChunk& chunk, const DescribeOptions& o,
                             std::vector<std::string>* context_ids);

void check_describe_options(const DescribeOptions& o);
DescribeSummary describe_corpus(const DescribeOptions& o);
// Writes every described chunk of `index` to `path` (atomically); returns the number of lines.
int64_t write_described_jsonl(const CorpusIndex& index, const std::string& path);

}  // namespace kforge
