// Prompts for the contrastive loop: templates with {{placeholders}}, filled once (single pass).
//
// The built-in templates are the files in prompts/ at the top of the source tree, embedded into
// the binary at build time (CMakeLists.txt, cmake/embed_files.cmake): there is no second copy.
#include "llm/prompt.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <system_error>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/text.hpp"

namespace kforge {

struct EmbeddedFile {
  const char* path;
  const unsigned char* data;
  size_t size;
};
// prompts/*.md, embedded by cmake/embed_files.cmake (build/generated/prompt_files.cpp).
const EmbeddedFile* prompt_template_files(size_t* count);

namespace {

// The template files: the five of a CUDA prompt, in the order their texts appear in it, then the
// four that replace task.md, exemplar.md, protocol.md and restrictions.md for PyTorch tasks.
// profile.md (shared) renders an exemplar's profiler table into its {{profile}}.
const char* const kTemplateNames[] = {"system.md",          "task.md",           "exemplar.md",
                                      "protocol.md",        "restrictions.md",   "task_torch.md",
                                      "exemplar_torch.md",  "protocol_torch.md", "restrictions_torch.md",
                                      "profile.md"};


using Vars = std::map<std::string, std::string>;

// What {{profile}} is while an exemplar has no profile: removed (with the line break after it)
// once the exemplar is filled.
constexpr const char* kNoProfile = "\x02";

// Replaces each {{name}} (white space around the name allowed) whose name is in `vars` by its
// value. Unknown placeholders stay as they are. Single pass: inserted values are not scanned, so a
// source that happens to contain "{{task}}" is inserted verbatim.
std::string fill(const std::string& tmpl, const Vars& vars) {
  std::string out;
  size_t pos = 0;
  while (pos < tmpl.size()) {
    size_t open = tmpl.find("{{", pos);
    if (open == std::string::npos) break;
    size_t close = tmpl.find("}}", open + 2);
    if (close == std::string::npos) break;
    auto it = vars.find(std::string(trim(std::string_view(tmpl).substr(open + 2, close - open - 2))));
    if (it == vars.end()) {
      out.append(tmpl, pos, open + 2 - pos);  // keep "{{" and look for the next placeholder after it
      pos = open + 2;
      continue;
    }
    out.append(tmpl, pos, open - pos);
    out += it->second;
    pos = close + 2;
  }
  out.append(tmpl, pos, std::string::npos);
  return out;
}

// Whether `tmpl` has a {{name}} placeholder (by the same rules as fill()).
bool uses(const std::string& tmpl, const std::string& name) {
  const std::string marker = "\x01";
  return fill(tmpl, {{name, marker}}).find(marker) != std::string::npos;
}

// The text without white space at its end: sections are joined with exactly one blank line.
std::string rstrip(const std::string& s) {
  size_t end = s.find_last_not_of(" \t\r\n");
  return end == std::string::npos ? std::string() : s.substr(0, end + 1);
}

const std::string& text_of(const PromptTemplates& t, const std::string& name) {
  auto it = t.files.find(name);
  if (it != t.files.end()) return it->second;
  // A PromptTemplates built by hand may lack a file: fall back to the built-in one.
  static const PromptTemplates builtin = PromptTemplates::builtin();
  return builtin.files.at(name);
}

// "rejected: <first line of the notes>" for an incorrect exemplar, "correct, 1.23x the baseline"
// for a correct one.
std::string status_of(const Exemplar& x) {
  if (x.correct) return strf("correct, %.2fx the baseline", x.speedup);
  std::string_view notes = trim(x.notes);
  if (notes.empty()) return "rejected";
  std::string first(trim(notes.substr(0, notes.find('\n'))));
  if (first.size() > 200) first = first.substr(0, 197) + "...";
  return "rejected: " + first;
}

// The exemplar section: a short heading, then each exemplar rendered with exemplar.md, ordered
// worst to best (rejected ones first, in the order given; then correct ones by increasing
// speed-up), so that the best variant is the last thing before the instructions.
std::string render_exemplars(const std::vector<Exemplar>& exemplars, const std::string& tmpl,
                             const std::string& profile_tmpl) {
  std::vector<Exemplar> sorted = exemplars;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Exemplar& a, const Exemplar& b) {
    if (a.correct != b.correct) return !a.correct;  // rejected before correct
    return a.correct && a.speedup < b.speedup;      // correct ones: slower first
  });

  std::string out = "# Earlier variants\n\n";
  if (sorted.empty()) return out + "None yet: this is the first attempt.";
  out += "Each variant below was compiled, checked against the reference and timed against the "
         "baseline. They are ordered from worst to best: rejected variants first, then correct "
         "ones by increasing speed-up.";
  out += sorted.back().correct ? " The last one is the best so far." : " None of them is correct yet.";
  for (size_t i = 0; i < sorted.size(); ++i) {
    const Exemplar& x = sorted[i];
    std::string_view notes = trim(x.notes);
    Vars vars = {
        {"index", std::to_string(i + 1)},
        {"id", std::to_string(x.id)},
        {"status", status_of(x)},
        {"speedup", x.correct ? strf("%.2fx", x.speedup) : std::string("n/a (rejected)")},
        {"notes", notes.empty() ? std::string("(none)") : std::string(notes)},
        {"source", rstrip(x.source)},
    };
    // An exemplar without a profile: its placeholder goes from the template, with the line break
    // after it (before filling: the values inserted are never scanned again).
    std::string t = tmpl;
    if (trim(x.profile).empty()) {
      t = fill(tmpl, {{"profile", kNoProfile}});
      for (const char* gap : {"\x02\n\n", "\x02\n", "\x02"})
        for (size_t at; (at = t.find(gap)) != std::string::npos;) t.erase(at, std::strlen(gap));
    } else {
      vars["profile"] = rstrip(fill(profile_tmpl, {{"table", rstrip(x.profile)}}));
    }
    out += "\n\n" + rstrip(fill(t, vars));
  }
  return out;
}

}  // namespace

PromptTemplates PromptTemplates::builtin() {
  size_t count = 0;
  const EmbeddedFile* files = prompt_template_files(&count);
  PromptTemplates t;
  for (size_t i = 0; i < count; ++i) {
    const std::string path = files[i].path;
    const std::string name = path.substr(path.rfind('/') + 1);  // "prompts/system.md" -> "system.md"
    t.files[name] = std::string(reinterpret_cast<const char*>(files[i].data), files[i].size);
  }
  // The list in CMakeLists.txt and kTemplateNames name the same files.
  KF_CHECK(t.files.size() == std::size(kTemplateNames), "%zu prompt templates embedded, expected %zu", t.files.size(),
           std::size(kTemplateNames));
  for (const char* name : kTemplateNames) KF_CHECK(t.files.count(name), "prompt template %s is not embedded", name);
  return t;
}

PromptTemplates PromptTemplates::load(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    KF_USAGE_ERROR("prompt folder '%s' does not exist or is not a folder", dir.c_str());
  // Listing the folder fails early, with a clear message, when it cannot be read.
  fs::directory_iterator probe(dir, ec);
  if (ec) KF_USAGE_ERROR("cannot read prompt folder '%s': %s", dir.c_str(), ec.message().c_str());

  PromptTemplates t = builtin();
  for (const char* name : kTemplateNames) {
    fs::path p = fs::path(dir) / name;
    if (fs::exists(p, ec)) t.files[name] = read_file(p.string());  // unreadable: usage error
  }
  return t;
}

std::vector<ChatMessage> build_prompt(const PromptInputs& in, const PromptTemplates& t) {
  const std::string suffix = in.language == "python" ? "_torch.md" : ".md";
  const std::string& task_t = text_of(t, "task" + suffix);
  const std::string& protocol_t = text_of(t, "protocol" + suffix);
  const std::string& restrictions_t = text_of(t, "restrictions" + suffix);

  std::string exemplars = render_exemplars(in.exemplars, text_of(t, "exemplar" + suffix), text_of(t, "profile.md"));
  std::string feedback_text(trim(in.feedback));
  std::string feedback = feedback_text.empty()
                             ? std::string()
                             : "# Feedback on your previous answer\n\n" + feedback_text;

  // task.md, protocol.md and restrictions.md may place {{exemplars}} or {{feedback}} themselves;
  // a section that none of them places goes to its default position (after the task, before the
  // protocol). system.md sees only {{task}} and {{reference}}.
  Vars vars = {{"task", rstrip(in.task)},
               {"reference", rstrip(in.reference)},
               {"exemplars", exemplars},
               {"feedback", feedback}};
  bool placed_exemplars = uses(task_t, "exemplars") || uses(protocol_t, "exemplars") ||
                          uses(restrictions_t, "exemplars");
  bool placed_feedback = uses(task_t, "feedback") || uses(protocol_t, "feedback") ||
                         uses(restrictions_t, "feedback");

  std::vector<std::string> parts;
  parts.push_back(rstrip(fill(task_t, vars)));
  if (!placed_exemplars) parts.push_back(exemplars);
  if (!placed_feedback && !feedback.empty()) parts.push_back(feedback);
  parts.push_back(rstrip(fill(protocol_t, vars)));
  parts.push_back(rstrip(fill(restrictions_t, vars)));
  parts.erase(std::remove(parts.begin(), parts.end(), std::string()), parts.end());

  Vars system_vars = {{"task", vars["task"]}, {"reference", vars["reference"]}};
  return {{"system", rstrip(fill(text_of(t, "system.md"), system_vars)) + "\n"},
          {"user", join(parts, "\n\n") + "\n"}};
}

}  // namespace kforge
