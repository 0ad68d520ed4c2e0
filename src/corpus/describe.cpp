#include "corpus/describe.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <cctype>
#include <mutex>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/text.hpp"
#include "corpus/chunker.hpp"
#include "corpus/index.hpp"

namespace kforge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kSystem =
    "You write instruction descriptions for a corpus of CUDA and C++ source code. Given one chunk of "
    "code (and related chunks from the same corpus for context), write what a programmer would ask "
    "for to get exactly this code: what it computes, its inputs and outputs, and the GPU techniques it "
    "uses (memory hierarchy, synchronisation, tensor cores, vectorised access) when it uses any. Write "
    "2 to 6 sentences of plain prose. Do not repeat the code.";

std::string cut(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  size_t e = n;
  while (e > 0 && (static_cast<unsigned char>(s[e]) & 0xC0) == 0x80) --e;
  return s.substr(0, e) + "\n// ... (cut)";
}

// The words a chunk is retrieved by: its identifiers outside comments, strings and preprocessor
// lines (licence headers would otherwise make every file's first chunk the nearest of every other),
// without C++ keywords and words shorter than 3 characters, in order of first appearance.
std::string retrieval_words(const std::string& text) {
  static const std::set<std::string> keywords = {
      "alignas", "alignof", "auto", "bool", "break", "case", "catch", "char", "class", "const", "constexpr",
      "const_cast", "continue", "decltype", "default", "delete", "do", "double", "dynamic_cast", "else", "enum",
      "explicit", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable",
      "namespace", "new", "noexcept", "nullptr", "operator", "private", "protected", "public", "register",
      "reinterpret_cast", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast",
      "struct", "switch", "template", "this", "throw", "true", "try", "typedef", "typename", "union", "unsigned",
      "using", "virtual", "void", "volatile", "while", "std", "size_t", "__device__", "__host__", "__global__",
      "__forceinline__", "requires", "concept", "consteval", "constinit"};
  const std::string m = mask_source(text);
  std::string out;
  std::set<std::string> seen;
  for (size_t i = 0; i < m.size();) {
    const unsigned char c = static_cast<unsigned char>(m[i]);
    if (std::isdigit(c)) {  // a number with its suffix (1.0f, 0x10u): not a word
      while (i < m.size() && (std::isalnum(static_cast<unsigned char>(m[i])) || m[i] == '_')) ++i;
      continue;
    }
    if (!(std::isalpha(c) || c == '_')) {
      ++i;
      continue;
    }
    size_t e = i;
    while (e < m.size() && (std::isalnum(static_cast<unsigned char>(m[e])) || m[e] == '_')) ++e;
    std::string w = m.substr(i, e - i);
    i = e;
    if (w.size() < 3 || keywords.count(w) || !seen.insert(w).second) continue;
    out += w + " ";
  }
  return out;
}

}  // namespace

ChatRequest describe_request(const CorpusIndex& index, const CorpusChunk& chunk, const DescribeOptions& o,
                             std::vector<std::string>* context_ids) {
  const std::vector<CorpusChunk> ctx =
      o.context > 0 ? index.search(fts_query(retrieval_words(chunk.text), /*all=*/false), o.context, {chunk.id})
                    : std::vector<CorpusChunk>{};
  std::string user;
  if (!ctx.empty()) {
    user += "Related code from the same corpus (context only; do not describe it):\n\n";
    for (const CorpusChunk& c : ctx) {
      user += "--- " + c.origin + " (" + c.package + ")\n```cpp\n" + cut(c.text, o.context_chars) + "\n```\n\n";
      if (context_ids) context_ids->push_back(c.id);
    }
  }
  user += "Describe this code, from " + chunk.origin + " (" + chunk.package + "):\n```cpp\n" + chunk.text +
          "\n```\nAnswer with the description only.";
  ChatRequest r;
  r.messages = {{"system", kSystem}, {"user", user}};
  r.temperature = o.temperature;
  r.max_tokens = o.max_tokens;
  r.n = 1;
  return r;
}

void check_describe_options(const DescribeOptions& o) {
  CorpusIndex::path_in(o.corpus_dir, "--corpus");
  if (o.context < 0 || o.context > 20) KF_USAGE_ERROR("--context must lie in 0..20 (got %d)", o.context);
  if (o.context_chars < 64) KF_USAGE_ERROR("--context-chars must be at least 64 (got %zu)", o.context_chars);
  if (o.max_tokens < 1) KF_USAGE_ERROR("--max-tokens must be at least 1 (got %d)", o.max_tokens);
  if (!(o.temperature >= 0 && o.temperature <= 2))
    KF_USAGE_ERROR("--temperature must lie in [0, 2] (got %g)", o.temperature);
  if (o.llm.endpoints.empty() && o.llm.cassette_mode != CassetteMode::kReplay)
    KF_USAGE_ERROR("--llm-url and --model are required (or --replay --cassette FILE)");
  if (o.llm.concurrency < 1 || o.llm.concurrency > 256)
    KF_USAGE_ERROR("--concurrency must lie in 1..256 (got %d)", o.llm.concurrency);
  if (o.llm.max_retries < 0 || o.llm.max_retries > 100)
    KF_USAGE_ERROR("--llm-retries must lie in 0..100 (got %d)", o.llm.max_retries);
  if (!(o.llm.timeout_s > 0 && o.llm.timeout_s <= 604800))
    KF_USAGE_ERROR("--llm-timeout must lie in (0, 604800] seconds (got %g)", o.llm.timeout_s);
  if (o.llm.cassette_mode == CassetteMode::kReplay) check_replay_cassette(o.llm.cassette_path);
  if (o.llm.cassette_mode == CassetteMode::kRecord) check_writable(o.llm.cassette_path);
  const std::string out = o.out.empty() ? (fs::path(o.corpus_dir) / "described.jsonl").string() : o.out;
  check_writable(out);
}

int64_t write_described_jsonl(const CorpusIndex& index, const std::string& path) {
  std::string text;
  int64_t n = 0;
  for (const auto& [c, d] : index.described()) {
    text += json{{"id", c.id},           {"instruction", d.description}, {"text", c.text},
                 {"origin", c.origin},   {"package", c.package},         {"licence", c.licence},
                 {"sha256", c.sha256},   {"context_ids", d.context_ids}, {"model", d.model}}
                .dump(-1, ' ', false, json::error_handler_t::replace) +
            "\n";
    ++n;
  }
  write_file_atomic(path, text);
  return n;
}

DescribeSummary describe_corpus(const DescribeOptions& opts) {
  check_describe_options(opts);
  DescribeOptions o = opts;
  if (o.out.empty()) o.out = (fs::path(o.corpus_dir) / "described.jsonl").string();
  // One describe per corpus at a time: a second would pay for the same chunks.
  const std::string lock_path = (fs::path(o.corpus_dir) / ".describe.lock").string();
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) KF_USAGE_ERROR("cannot create %s: %s", lock_path.c_str(), std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{lock_fd};
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0)
    KF_USAGE_ERROR("another kforge corpus describe is running on %s; wait for it or stop it (a rerun continues "
                   "where it stopped)",
                   o.corpus_dir.c_str());
  CorpusIndex index(CorpusIndex::path_in(o.corpus_dir, "--corpus"));
  DescribeSummary sum;
  sum.chunks = index.chunk_count();
  sum.already = index.description_count();
  o.llm.spent_usd = index.described_spent_usd();
  o.llm.stop = o.stop;
  LlmClient client(o.llm);
  const std::vector<CorpusChunk> todo = index.chunks_without_description(o.limit);
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  say(strf("kforge corpus describe: %lld chunks, %lld described already, %zu to describe now", (long long)sum.chunks,
           (long long)sum.already, todo.size()));

  std::mutex mu;  // the database connection, the summary and progress
  std::atomic<size_t> next{0};
  std::atomic<bool> halt{false};
  auto last_report = std::chrono::steady_clock::now();
  auto worker = [&] {
    for (;;) {
      if (halt || (o.stop && *o.stop)) return;
      const size_t i = next++;
      if (i >= todo.size()) return;
      const CorpusChunk& chunk = todo[i];
      ChatRequest req;
      std::vector<std::string> ctx;
      {
        std::lock_guard lock(mu);
        req = describe_request(index, chunk, o, &ctx);
      }
      try {
        const ChatResponse r = client.chat(req);
        std::string text = r.choices.empty() ? "" : std::string(trim(r.choices.front()));
        std::lock_guard lock(mu);
        if (text.empty()) {
          ++sum.failed;
          sum.last_error = "the LLM answered an empty description for chunk " + chunk.id;
          continue;
        }
        ChunkDescription d;
        d.chunk_id = chunk.id;
        d.description = valid_utf8(text);
        d.context_ids = ctx;
        d.model = r.model;
        d.prompt_tokens = r.prompt_tokens;
        d.completion_tokens = r.completion_tokens;
        d.cost_usd = r.cost_usd;
        if (index.add_description(d)) ++sum.described;
        const auto now = std::chrono::steady_clock::now();
        if (now - last_report > std::chrono::seconds(2)) {
          last_report = now;
          say(strf("kforge corpus describe: %lld/%zu described, %lld failed, $%.4f spent", (long long)sum.described,
                   todo.size(), (long long)sum.failed, client.spent_usd()));
        }
      } catch (const LlmError& e) {
        std::lock_guard lock(mu);
        if (e.kind() == LlmError::Kind::kBudget) {
          sum.budget_spent = true;
          halt = true;
          return;
        }
        ++sum.failed;
        sum.last_error = e.what();
        if (e.kind() == LlmError::Kind::kAuth || e.kind() == LlmError::Kind::kUnreachable) halt = true;
      }
    }
  };
  std::vector<std::thread> threads;
  const int n = std::max(1, std::min<int>(o.llm.concurrency, int(std::max<size_t>(1, todo.size()))));
  for (int t = 0; t < n; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  sum.interrupted = o.stop && *o.stop;
  sum.spent_usd = index.described_spent_usd();
  sum.written = write_described_jsonl(index, o.out);
  return sum;
}

}  // namespace kforge
