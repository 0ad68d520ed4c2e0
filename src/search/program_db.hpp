// The program database of a search run: one SQLite file per run directory (WAL mode, versioned
// migrations). It keeps runs, candidates (source, parents, policy, prompt, analysis), verdicts,
// measurements and LLM calls. Every write is one transaction, so a kill -9 at any moment loses
// nothing that was reported as done.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kforge {

struct SearchRun {
  int64_t id = 0;
  std::string task;           // e.g. "hgemm:4096x4096x64:tn"
  std::string state;          // "running", "stopped", "complete", "failed"
  nlohmann::json config;      // the options the run was started with (for --resume)
  std::string created_at, updated_at;
};

struct CandidateRecord {
  int64_t id = 0;
  int64_t run_id = 0;
  int iteration = 0;          // which iteration of the loop made it
  int group = 0;              // GRPO group: the samples drawn for one prompt
  int sample = 0;             // index within the group
  std::string policy;         // "llm:<model>", "builtin", "seed"
  std::vector<int64_t> parents;
  std::string source;
  std::string prompt;         // the prompt it answered (JSON of the messages), may be empty
  std::string analysis;       // the text before the code in the response
  std::string status = "pending";  // "pending" (to evaluate), "evaluated", "invalid" (no code)
  std::string error;          // why it is invalid (parse or edit failure), for the next prompt
  nlohmann::json verdict;     // the evaluator's verdict (null until evaluated)
  bool correct = false;
  double score = 0;           // median speed-up when correct, 0 otherwise
  double reward = 0;
  std::optional<double> advantage;  // group-normalised reward, once the group is complete
  std::string created_at;
  std::string language = "cuda";  // of `source`: "cuda" (HGEMM kernels) or "python" (PyTorch ModelNew files)
};

struct LlmCallRecord {
  int64_t id = 0;
  int64_t run_id = 0;
  int iteration = 0;
  int group = 0;
  std::string endpoint, model;
  int prompt_tokens = 0, completion_tokens = 0;
  double latency_s = 0, cost_usd = 0;
  std::string status;         // "ok", "error"
  std::string error;
  std::string created_at;
};

// One iteration of the loop: its prompt (JSON of the messages) and the parent its edits apply to,
// stored before the first LLM call, so that answers that arrived before a kill are kept and the
// rest of the group is asked for with the same prompt on --resume.
struct IterationRecord {
  int iteration = 0;
  int64_t parent = 0;
  std::string prompt;
  bool complete = false;  // the loop moved on from it (a full group, or it gave up on the rest)
};

class ProgramDb {
 public:
  // Opens or creates `path`, applies migrations; a file written by a newer kforge (higher schema
  // version) is refused with a usage error saying so.
  explicit ProgramDb(const std::string& path);
  ~ProgramDb();
  ProgramDb(const ProgramDb&) = delete;
  ProgramDb& operator=(const ProgramDb&) = delete;

  static int latest_schema_version();
  int schema_version() const;

  int64_t create_run(const std::string& task, const nlohmann::json& config);
  std::optional<SearchRun> run(int64_t id) const;
  std::optional<SearchRun> latest_run() const;
  void set_run_state(int64_t id, const std::string& state);
  void set_run_config(int64_t id, const nlohmann::json& config);

  int64_t add_candidate(const CandidateRecord& c);  // returns the new id (c.id ignored)
  // Several candidates in one transaction (a whole group arrives or none of it).
  std::vector<int64_t> add_candidates(const std::vector<CandidateRecord>& cs);
  void record_verdict(int64_t candidate_id, const nlohmann::json& verdict, bool correct, double score, double reward);
  void set_advantages(const std::vector<std::pair<int64_t, double>>& id_and_advantage);
  // Stores a profile (eval/profile.hpp) with a judged candidate's verdict: verdict_json's
  // details.profile (replaced when there is one). Nothing else of the verdict changes.
  void set_profile(int64_t candidate_id, const nlohmann::json& profile);
  std::optional<CandidateRecord> candidate(int64_t id) const;
  std::vector<CandidateRecord> candidates(int64_t run_id) const;            // by id
  std::vector<CandidateRecord> pending_candidates(int64_t run_id) const;    // status "pending", by id
  int last_iteration(int64_t run_id) const;                                 // -1 when none

  void begin_iteration(int64_t run_id, int iteration, int64_t parent, const std::string& prompt);  // kept if begun
  std::optional<IterationRecord> iteration(int64_t run_id, int iteration) const;
  void complete_iteration(int64_t run_id, int iteration);
  int last_complete_iteration(int64_t run_id) const;                        // -1 when none
  // One paid LLM answer: the candidates made of it and the call (tokens, cost), in one transaction.
  std::vector<int64_t> add_answer(const LlmCallRecord& call, const std::vector<CandidateRecord>& cs);

  int64_t add_llm_call(const LlmCallRecord& c);
  std::vector<LlmCallRecord> llm_calls(int64_t run_id) const;
  double total_cost_usd(int64_t run_id) const;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace kforge
