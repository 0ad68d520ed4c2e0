// kforge corpus build|search|describe: the continued-pretraining corpus (src/corpus/). Flags and
// printing only.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <signal.h>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "corpus/build.hpp"
#include "corpus/describe.hpp"
#include "corpus/index.hpp"

namespace kforge {
namespace {

std::atomic<bool> g_corpus_stop{false};
extern "C" void on_corpus_stop(int) {
  if (g_corpus_stop.exchange(true)) ::_exit(130);
  constexpr char line[] =
      "\nkforge corpus describe: stopping after the calls in flight (press Ctrl-C again to abort; run again to "
      "continue)\n";
  (void)!::write(2, line, sizeof line - 1);
}

void print_line(const std::string& s) {
  std::fprintf(stderr, "%s\n", s.c_str());
  std::fflush(stderr);
}

struct BuildCli {
  CorpusBuildOptions o;
  std::string installed = "all";
};

struct SearchCli {
  std::string query, corpus;
  int limit = 5;
  bool json = false;
  bool any = false;
};

struct DescribeCli {
  DescribeOptions o;
  std::vector<std::string> urls;
  std::string model, api_key_env = "OPENAI_API_KEY", cassette;
  double price_prompt = 0, price_completion = 0, budget = -1;
  CLI::Option* budget_opt = nullptr;
  bool record = false, replay = false;
};

void run_build(BuildCli& c) {
  c.o.installed.clear();
  if (c.installed != "none") {
    if (c.installed == "all") c.o.installed = kInstalledSources;
    else
      for (const std::string& s : split(c.installed, ',')) c.o.installed.push_back(std::string(trim(s)));
  }
  check_corpus_build_options(c.o);
  c.o.progress = print_line;
  const CorpusBuildSummary s = build_corpus(c.o);
  std::printf("kforge corpus build: %lld files (%lld kept, %lld exact duplicates, %lld near duplicates, %lld too "
              "large), %lld chunks (%lld duplicate chunks dropped), %s of text -> %s\n",
              (long long)s.files, (long long)s.kept, (long long)s.duplicates, (long long)s.near_duplicates,
              (long long)s.skipped, (long long)s.chunks, (long long)s.duplicate_chunks,
              human_bytes(double(s.bytes_out)).c_str(), c.o.out_dir.c_str());
  std::string pk, lic;
  for (const auto& [k, v] : s.chunks_by_package) pk += strf("%s%s %lld", pk.empty() ? "" : ", ", k.c_str(), (long long)v);
  for (const auto& [k, v] : s.chunks_by_licence)
    lic += strf("%s%s %lld", lic.empty() ? "" : ", ", k.c_str(), (long long)v);
  std::printf("  chunks by package: %s\n  chunks by licence: %s\n", pk.empty() ? "none" : pk.c_str(),
              lic.empty() ? "none" : lic.c_str());
}

void run_search(const SearchCli& c) {
  if (c.limit < 1 || c.limit > 1000) KF_USAGE_ERROR("--limit must lie in 1..1000 (got %d)", c.limit);
  const std::string q = fts_query(c.query, !c.any);
  if (q.empty()) KF_USAGE_ERROR("query '%s' has no words to search for; give identifiers or words", c.query.c_str());
  CorpusIndex index(CorpusIndex::path_in(c.corpus, "--corpus"));
  const std::vector<CorpusChunk> hits = index.search(q, c.limit);
  if (c.json) {
    for (const CorpusChunk& h : hits)
      std::printf("%s\n", nlohmann::json{{"id", h.id}, {"origin", h.origin}, {"package", h.package},
                                         {"licence", h.licence}, {"text", h.text}}
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                              .c_str());
    return;
  }
  if (hits.empty()) std::printf("no chunk matches %s\n", q.c_str());
  int rank = 0;
  for (const CorpusChunk& h : hits) {
    std::printf("%d. %s  %s  [%s, %s]\n", ++rank, h.id.c_str(), h.origin.c_str(), h.package.c_str(), h.licence.c_str());
    int lines = 0;
    for (const std::string& l : split(h.text, '\n')) {
      if (++lines > 4) {
        std::printf("     ...\n");
        break;
      }
      std::printf("     %s\n", l.substr(0, 110).c_str());
    }
  }
}

void run_describe(DescribeCli& c) {
  DescribeOptions& o = c.o;
  if (c.record && c.replay) KF_USAGE_ERROR("--record and --replay exclude each other; give one");
  if ((c.record || c.replay) && c.cassette.empty()) KF_USAGE_ERROR("--record and --replay need --cassette FILE");
  if (!c.cassette.empty() && !c.record && !c.replay)
    KF_USAGE_ERROR("--cassette needs --record (write the LLM exchanges) or --replay (answer from them)");
  if (!c.urls.empty() && c.model.empty()) KF_USAGE_ERROR("--model is required with --llm-url");
  if (c.urls.empty() && !c.model.empty()) KF_USAGE_ERROR("--model needs --llm-url (the endpoint that serves it)");
  for (const std::string& u : c.urls) {
    if (u.rfind("http://", 0) != 0 && u.rfind("https://", 0) != 0)
      KF_USAGE_ERROR("--llm-url '%s' is not an http:// or https:// URL", u.c_str());
    Endpoint e;
    e.url = u;
    e.model = c.model;
    e.api_key_env = c.api_key_env;
    e.usd_per_1k_prompt = c.price_prompt;
    e.usd_per_1k_completion = c.price_completion;
    o.llm.endpoints.push_back(e);
  }
  if (c.budget_opt && c.budget_opt->count() > 0) o.llm.budget_usd = c.budget;
  o.llm.cassette_path = c.cassette;
  o.llm.cassette_mode = c.record ? CassetteMode::kRecord : c.replay ? CassetteMode::kReplay : CassetteMode::kOff;
  o.llm.replay_in_order = false;  // prompts depend only on the corpus: replay by request content
  check_describe_options(o);
  o.progress = print_line;
  o.llm.on_retry = print_line;
  g_corpus_stop = false;
  o.stop = &g_corpus_stop;
  struct sigaction sa {}, previous {};
  sa.sa_handler = on_corpus_stop;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &previous);
  DescribeSummary s;
  try {
    s = describe_corpus(o);
  } catch (...) {
    ::sigaction(SIGINT, &previous, nullptr);
    throw;
  }
  ::sigaction(SIGINT, &previous, nullptr);
  const std::string out = o.out.empty() ? c.o.corpus_dir + "/described.jsonl" : o.out;
  std::printf("kforge corpus describe: %lld of %lld chunks described (%lld now, %lld before), %lld failed, $%.4f "
              "spent in all -> %s (%lld lines)\n",
              (long long)(s.already + s.described), (long long)s.chunks, (long long)s.described,
              (long long)s.already, (long long)s.failed, s.spent_usd, out.c_str(), (long long)s.written);
  std::fflush(stdout);
  if (s.interrupted) throw ExitStatus{130};
  if (s.budget_spent) {
    std::fprintf(stderr, "kforge corpus describe: stopped at the spending cap; raise --budget-usd and run again to "
                         "continue\n");
    throw ExitStatus{1};
  }
  if (s.failed > 0) {
    std::fprintf(stderr, "kforge corpus describe: %lld call(s) failed (last: %s); run again to retry those chunks\n",
                 (long long)s.failed, s.last_error.c_str());
    throw ExitStatus{1};
  }
}

}  // namespace

void register_corpus(CLI::App& app) {
  CLI::App* corpus = app.add_subcommand("corpus", "The continued-pretraining corpus: CUDA/C++ sources in chunks, "
                                                  "their FTS5 index, LLM instruction descriptions");
  corpus->require_subcommand(1);

  auto b = std::make_shared<BuildCli>();
  CLI::App* build = corpus->add_subcommand(
      "build", "Collect CUDA/C++ sources (installed ones and --source folders), record origin and licence, drop "
               "exact and near duplicates, split along function boundaries, write JSONL and an FTS5 index");
  build->add_option("--out", b->o.out_dir,
                    "folder to write (created; must not hold a corpus yet): corpus.jsonl (one chunk per line: id, "
                    "text, origin, package, licence, sha256, first_line, last_line), files.jsonl, summary.json, "
                    "corpus.sqlite")
      ->required();
  build->add_option("--source", b->o.sources, "a folder of CUDA/C++ sources to add, package = its name (repeatable)")
      ->allow_extra_args(false);
  build->add_option("--installed", b->installed,
                    "installed sources to collect: all, none, or a comma list of kforge (kernels/hgemm), cuda (the "
                    "toolkit's headers and CCCL under $CUDA_HOME or /usr/local/cuda), cutlass (the nvidia-cutlass "
                    "wheel or $KFORGE_CUTLASS_DIR), torch (the torch wheel's ATen headers)")
      ->capture_default_str();
  build->add_option("--run-db", b->o.run_dbs,
                    "a kforge optimize run folder (or its kforge-search.db): its accepted CUDA candidates join the "
                    "corpus (repeatable)")
      ->allow_extra_args(false);
  build->add_option("--max-chunk-chars", b->o.chunk.max_chars,
                    "the largest chunk in characters (at least 256); a longer function is cut at its shallowest "
                    "line ends")
      ->capture_default_str();
  build->add_option("--min-chunk-chars", b->o.chunk.min_chars,
                    "small functions are packed together until a chunk holds this many characters")
      ->capture_default_str();
  build->add_option("--near-threshold", b->o.near_threshold,
                    "a file whose estimated Jaccard similarity (MinHash, 128 hashes over 5-token shingles, "
                    "comments ignored) with a kept file is at least this is dropped as a near duplicate; in (0, 1]")
      ->capture_default_str();
  build->callback([b] { run_build(*b); });

  auto s = std::make_shared<SearchCli>();
  CLI::App* search = corpus->add_subcommand("search", "Full-text search of a corpus (its SQLite FTS5 index, bm25 "
                                                      "ranking)");
  search->add_option("query", s->query, "words or identifiers; a chunk must contain all of them (--any: one)")
      ->required();
  search->add_option("--corpus", s->corpus, "the folder kforge corpus build wrote")->required();
  search->add_option("--limit", s->limit, "the most chunks to show (1 to 1000)")->capture_default_str();
  search->add_flag("--any", s->any, "match chunks holding any of the words, best first");
  search->add_flag("--json", s->json, "print one JSON object per chunk (id, origin, package, licence, text)");
  search->callback([s] { run_search(*s); });

  auto d = std::make_shared<DescribeCli>();
  CLI::App* describe = corpus->add_subcommand(
      "describe", "Add an instruction description to every chunk from an LLM (retrieval context from the FTS5 "
                  "index); resumable: a rerun asks only for the chunks without one");
  describe->add_option("--corpus", d->o.corpus_dir, "the folder kforge corpus build wrote")->required();
  describe->add_option("--out", d->o.out,
                       "the JSON-lines file to write (default CORPUS/described.jsonl): id, instruction, text, "
                       "origin, package, licence, sha256, context_ids, model; datasets.load_dataset(\"json\", "
                       "data_files=FILE) loads it");
  describe->add_option("--llm-url", d->urls,
                       "endpoint base URL, with or without /v1 (repeatable: several endpoints); http:// or https://")
      ->allow_extra_args(false);
  describe->add_option("--model", d->model, "model name");
  describe->add_option("--api-key-env", d->api_key_env, "environment variable holding the API key (never logged)")
      ->capture_default_str();
  describe->add_option("--price-prompt", d->price_prompt, "USD per 1,000 prompt tokens (for the spending cap)");
  describe->add_option("--price-completion", d->price_completion, "USD per 1,000 completion tokens");
  d->budget_opt = describe->add_option("--budget-usd", d->budget,
                                       "cap on LLM spending in USD, counted across reruns (stored in corpus.sqlite)");
  describe->add_option("--concurrency", d->o.llm.concurrency, "LLM requests in flight at once (1 to 256)")
      ->capture_default_str();
  describe->add_option("--llm-retries", d->o.llm.max_retries,
                       "retries of one call on 429, 5xx and transport errors (0 to 100), exponential backoff")
      ->capture_default_str();
  describe->add_option("--llm-timeout", d->o.llm.timeout_s, "seconds one LLM request may take (above 0, at most 604800)")
      ->capture_default_str();
  describe->add_option("--context", d->o.context, "retrieved chunks (FTS5 nearest) in each prompt (0 to 20)")
      ->capture_default_str();
  describe->add_option("--context-chars", d->o.context_chars, "each retrieved chunk is cut to this many characters")
      ->capture_default_str();
  describe->add_option("--max-tokens", d->o.max_tokens, "max_tokens of each request")->capture_default_str();
  describe->add_option("--temperature", d->o.temperature, "sampling temperature, 0 to 2")->capture_default_str();
  describe->add_option("--limit", d->o.limit, "describe at most this many chunks in this run (default: all)");
  describe->add_option("--cassette", d->cassette, "JSONL file of recorded LLM exchanges (with --record or --replay)");
  describe->add_flag("--record", d->record, "record every LLM exchange into --cassette");
  describe->add_flag("--replay", d->replay,
                     "answer every call from --cassette by request content (no network; needs no --llm-url)");
  describe->footer("Exit status: 0 every chunk asked for was described; 1 some calls failed or the spending cap "
                   "was reached (run again to continue); 130 stopped by Ctrl-C (run again to continue).");
  describe->callback([d] { run_describe(*d); });
}

}  // namespace kforge
