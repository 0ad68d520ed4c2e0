// The LLM reviewer of sudden winners: when a candidate's speed-up jumps, an LLM (if configured)
// compares its code with the most similar candidates the evaluator already rejected as hacks and
// says whether it cheats. A verdict of HACK rejects the candidate with reason "reviewer_flagged".
#pragma once
#include <string>
#include <vector>

#include "llm/client.hpp"
#include "search/program_db.hpp"

namespace kforge {

// Rejected candidates whose reasons name a trick (not a compile failure, crash or time-out), most
// similar to `source` first (Jaccard similarity of their identifier sets), at most `n`.
std::vector<CandidateRecord> similar_hacks(const std::string& source, const std::vector<CandidateRecord>& all, int n);

std::vector<ChatMessage> review_prompt(const CandidateRecord& candidate, double previous_best,
                                       const std::vector<CandidateRecord>& hacks);

struct Review {
  bool hack = false;
  bool understood = false;  // the reply held a VERDICT line
  std::string text;
};
// Reads "VERDICT: HACK" or "VERDICT: OK" (case-insensitive, the last such line wins).
Review parse_review(const std::string& reply);

}  // namespace kforge
