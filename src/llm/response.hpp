// What an LLM answered: the analysis text and either a whole program (fenced code) or
// SEARCH/REPLACE edits against the parent, applied with tolerant matching.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace kforge {

struct SearchReplace {
  std::string search, replace;
};

struct ParsedResponse {
  std::string analysis;               // everything outside code blocks and edit blocks, trimmed
  std::optional<std::string> code;    // the last fenced block tagged cuda/cu/c++/cpp/c (or untagged);
                                      // for language "python": tagged python/py/python3 (or untagged)
  std::vector<SearchReplace> edits;   // <<<<<<< SEARCH ... ======= ... >>>>>>> REPLACE blocks
  std::string error;                  // non-empty when neither code nor edits were found
};

// `language` is what the program is written in: "cuda" (HGEMM kernels: a .cu file) or "python"
// (PyTorch tasks: a ModelNew file, its CUDA inside strings). Blocks of the other language are
// analysis text.
ParsedResponse parse_response(const std::string& text, const std::string& language = "cuda");

struct EditOutcome {
  bool ok = false;
  std::string source;  // the edited source when ok
  std::string error;   // which edit failed and why (for the next prompt), when !ok
};

// Applies the edits in order. Each SEARCH text must occur in the current source: first exactly,
// else line by line ignoring leading/trailing white space on each line and blank lines; an edit
// whose search text is found nowhere, or more than once, fails with an explanation.
EditOutcome apply_edits(const std::string& parent, const std::vector<SearchReplace>& edits);

}  // namespace kforge
