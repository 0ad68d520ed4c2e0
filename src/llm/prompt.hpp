// Prompts for the contrastive loop, built from template files a user can override. Sections: the
// task, the reference code, the exemplars with their measured scores (and compiler errors or
// rejection reasons when present), the protocol (Performance Analysis, Algorithm Design, Code
// Implementation) and the restrictions.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "llm/client.hpp"

namespace kforge {

struct Exemplar {
  int64_t id = 0;
  std::string source;
  bool correct = false;
  double speedup = 0;   // median speed-up over the baseline when correct
  std::string notes;    // compiler errors, rejection reasons
  std::string profile;  // the profiler's table (render_profile_table, eval/profile.hpp); empty: none
};

struct PromptInputs {
  std::string task;         // what to compute, the ABI, the shape
  std::string reference;    // the reference implementation
  std::vector<Exemplar> exemplars;
  std::string feedback;     // e.g. why the previous edit could not be applied
  std::string language = "cuda";  // "python": a PyTorch task (the *_torch.md templates)
};

// Templates are Markdown files with {{placeholders}}: system.md, task.md, exemplar.md,
// protocol.md, restrictions.md, profile.md (an exemplar's profile: its {{profile}}), and for PyTorch tasks task_torch.md, exemplar_torch.md,
// protocol_torch.md, restrictions_torch.md (used instead of the four without _torch). Missing
// files fall back to the built-in text of the same name.
struct PromptTemplates {
  std::map<std::string, std::string> files;  // file name -> text
  static PromptTemplates builtin();
  static PromptTemplates load(const std::string& dir);  // builtin() overridden by files in dir
};

// [system, user]: the user message holds the task, the reference, each exemplar (best last), the
// feedback when present, the protocol and the restrictions, in that order.
std::vector<ChatMessage> build_prompt(const PromptInputs& in, const PromptTemplates& t);

}  // namespace kforge
