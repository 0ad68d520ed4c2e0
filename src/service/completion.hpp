// From a policy's completion (its whole answer, or bare code) to the candidate source, the way
// `kforge optimize` turns an answer into a candidate (src/search/loop.cpp, from_response): the
// answer is parsed by parse_response (llm/response.hpp) in the task's language; SEARCH/REPLACE
// edits apply to the task's seed, falling back to a fenced program when the edits fail; otherwise
// the last fenced program. A completion without any fence or edit marker that names the task's
// entry point (ModelNew, kforge_hgemm) is taken as bare code (trainers often strip the fences);
// anything else (prose, fences holding no program of the task's language) is refused.
#pragma once
#include <string>

namespace kforge {

class EvalTask;

// The reason code of a completion from which no candidate could be taken (no code, edits that do
// not apply to the seed, an empty program). Its verdict is a rejection like any other.
inline constexpr const char* kInvalidCompletion = "invalid_completion";

struct ExtractedCandidate {
  bool ok = false;
  std::string source;  // when ok
  std::string how;     // "code", "edits", "bare"
  std::string error;   // why nothing could be taken, when !ok
};

ExtractedCandidate extract_candidate(const std::string& completion, const EvalTask& task);

}  // namespace kforge
