#include "service/completion.hpp"

#include "core/text.hpp"
#include "llm/response.hpp"
#include "service/task.hpp"

namespace kforge {

ExtractedCandidate extract_candidate(const std::string& completion, const EvalTask& task) {
  ExtractedCandidate out;
  const ParsedResponse parsed = parse_response(completion, task.language());
  if (!parsed.edits.empty()) {
    const EditOutcome edited = apply_edits(task.seed(), parsed.edits);
    if (edited.ok) {
      out.ok = true;
      out.source = edited.source;
      out.how = "edits";
      return out;
    }
    if (!parsed.code) {
      out.error = "the edits could not be applied to the task's seed: " + edited.error;
      return out;
    }
  }
  if (parsed.code) {
    if (trim(*parsed.code).empty()) {
      out.error = "the code block is empty";
      return out;
    }
    out.ok = true;
    out.source = *parsed.code;
    out.how = "code";
    return out;
  }
  // Bare code: no fence and no edit marker anywhere, and the entry point named (prose is not code).
  const bool fenced = completion.find("```") != std::string::npos || completion.find("~~~") != std::string::npos;
  if (!fenced && completion.find(task.entry_point()) != std::string::npos) {
    out.ok = true;
    out.source = completion;
    out.how = "bare";
    return out;
  }
  out.error = parsed.error.empty() ? "the completion holds no code" : parsed.error;
  return out;
}

}  // namespace kforge
