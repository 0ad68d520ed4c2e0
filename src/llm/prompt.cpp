// Prompts for the contrastive loop: templates with {{placeholders}}, filled once (single pass).
//
// The built-in templates below are byte-for-byte the files in prompts/ at the top of the source
// tree (a unit test checks it): edit both together.
#include "llm/prompt.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/text.hpp"

namespace kforge {
namespace {

// The template files: the five of a CUDA prompt, in the order their texts appear in it, then the
// four that replace task.md, exemplar.md, protocol.md and restrictions.md for PyTorch tasks.
const char* const kTemplateNames[] = {"system.md",          "task.md",           "exemplar.md",
                                      "protocol.md",        "restrictions.md",   "task_torch.md",
                                      "exemplar_torch.md",  "protocol_torch.md", "restrictions_torch.md"};

// ---- BEGIN BUILT-IN TEMPLATES (identical to prompts/*.md) ----
constexpr const char* kSystemMd = R"md(You are an expert CUDA performance engineer. You make one GPU kernel faster, one variant at a time.

Every answer you give is compiled, checked against a reference implementation on fresh random
inputs, and timed against a baseline on the GPU. The measured speed-ups shown to you are ground
truth: reason from them, not from folklore. A variant that is fast but wrong, or that games the
measurement in any way, is rejected and counts for nothing.

Be precise and concrete. Think about the hardware: memory bandwidth and latency, the memory
hierarchy (global, L2, shared memory, registers), tensor cores, occupancy, instruction-level
parallelism, and how work is split across thread blocks and streaming multiprocessors.
)md";

constexpr const char* kTaskMd = R"md(# Task

{{task}}

# Reference implementation

The reference defines the exact result your code must compute. It is written for clarity, not
speed.

```
{{reference}}
```
)md";

constexpr const char* kExemplarMd = R"md(## Variant {{index}} (id {{id}}): {{status}}

Speed-up over the baseline: {{speedup}}

Notes from the evaluator:

{{notes}}

```cuda
{{source}}
```
)md";

constexpr const char* kProtocolMd = R"md(# How to answer

Answer in three sections, in this order.

## 1. Performance Analysis

Compare the variants above. Explain why the faster ones are faster than the slower ones, using
their measured speed-ups and the evaluator's notes (compiler errors, rejection reasons, profiler
metrics). Then say what limits the best variant now: memory traffic, tensor core use, occupancy,
pipelining of loads and math, bank conflicts, launch shape, tail effects, or host overhead. When
a variant was rejected, say what it did wrong so that you do not repeat it. When there are no
variants yet, analyse the reference instead.

## 2. Algorithm Design

Describe, in a few bullet points, the change you will make and why it should beat the best
variant: tiling, data movement, instructions, launch configuration. Keep what made the best
variant fast. Prefer one well-reasoned change to many speculative ones.

## 3. Code Implementation

Give the new variant in one of two forms.

- A complete program: one self-contained .cu file in a single fenced block tagged `cuda`, with
  its includes, its kernels and the C entry point of the ABI described in the task.
- Edits against the best variant (the last one above), each written as:

```
<<<<<<< SEARCH
lines copied exactly from the best variant
=======
the lines that replace them
>>>>>>> REPLACE
```

Each SEARCH text must match exactly one place; include enough neighbouring lines to make it
unique. Edits are applied in order, each to the result of the ones before it. Use edits for
small, local changes and a complete file for larger rewrites. Give only one of the two forms,
and no other code block after it.
)md";

constexpr const char* kRestrictionsMd = R"md(# Restrictions

An answer that breaks any of these rules is rejected, however fast it is. The evaluator checks
each of them.

- Identical results: compute exactly the function of the reference, for every valid input,
  within the declared precision. Where the task declares fp32 accumulation, accumulate in fp32
  (or better): no fp16 accumulation, no TF32 or FP8 shortcuts, no skipped or approximated work.
- No caching: compute every result from the inputs of the current call. Do not keep outputs, or
  anything derived from the inputs, between calls, whatever the key (pointers, contents, shapes).
- No changed hyper-parameters or shapes: solve the problem as given, with its shapes, layouts,
  data types and declared accumulation precision. Do not change them or rely on values other
  than the ones the task states.
- All work on the given stream: enqueue every kernel launch and copy on the stream passed to the
  entry point, and on no other. Do not synchronise the device.
- No library GEMMs: do not call cuBLAS, cuBLASLt, cuDNN or any other library's matrix multiply.
  Write the kernel yourself.
- No threads, streams, events or timers; no file, network or environment access (no getenv, no
  system calls); no changes to the device or its clocks.
- Write only to the output and to the workspace, if you asked for one. Never modify the inputs,
  and never read or write outside the buffers you were given.
)md";

// PyTorch tasks (language "python"): the same sections for a ModelNew file.
constexpr const char* kTaskTorchMd = R"md(# Task

{{task}}

# Reference implementation

The task file below defines the module `Model` whose results your `ModelNew` must reproduce, and
the functions `get_inputs()` and `get_init_inputs()` that make its inputs and its constructor's
arguments. It is written for clarity, not speed.

```python
{{reference}}
```
)md";

constexpr const char* kExemplarTorchMd = R"md(## Variant {{index}} (id {{id}}): {{status}}

Speed-up over the baseline: {{speedup}}

Notes from the evaluator:

{{notes}}

```python
{{source}}
```
)md";

constexpr const char* kProtocolTorchMd = R"md(# How to answer

Answer in three sections, in this order.

## 1. Performance Analysis

Compare the variants above. Explain why the faster ones are faster than the slower ones, using
their measured speed-ups and the evaluator's notes (build errors, rejection reasons). Then say
what limits the best variant now: memory traffic, kernel launches and intermediate tensors,
tensor core use, occupancy, work that could be fused, or host overhead. When a variant was
rejected, say what it did wrong so that you do not repeat it. When there are no variants yet,
analyse the reference instead.

## 2. Algorithm Design

Describe, in a few bullet points, the change you will make and why it should beat the best
variant: which operations you fuse, how work is split across thread blocks, how data moves.
Keep what made the best variant fast. Prefer one well-reasoned change to many speculative ones.

## 3. Code Implementation

Give the new variant in one of two forms.

- A complete program: one self-contained Python file in a single fenced block tagged `python`.
  It defines `class ModelNew(nn.Module)`, whose constructor takes the same arguments as
  `Model`'s and whose `forward` takes the same inputs and returns the same outputs. Write the
  CUDA kernels as strings and build them with `torch.utils.cpp_extension.load_inline` at import.
- Edits against the best variant (the last one above), each written as:

```
<<<<<<< SEARCH
lines copied exactly from the best variant
=======
the lines that replace them
>>>>>>> REPLACE
```

Each SEARCH text must match exactly one place; include enough neighbouring lines to make it
unique. Edits are applied in order, each to the result of the ones before it. Use edits for
small, local changes and a complete file for larger rewrites. Give only one of the two forms,
and no other code block after it.
)md";

constexpr const char* kRestrictionsTorchMd = R"md(# Restrictions

An answer that breaks any of these rules is rejected, however fast it is. The evaluator checks
each of them.

- Identical results: compute exactly the function of the reference, for every valid input,
  within the task's tolerance, in the task's precision. No TF32, no autocast, no lower-precision
  internals, no changed default dtype, no skipped or approximated work.
- Your own code: do not use, import, subclass or look up the reference `Model`, the task file or
  kforge, and do not fall back to the reference's code in an exception handler (a `try` whose
  handler does not re-raise is rejected).
- No caching: compute every result from the inputs of the current call. Do not keep outputs, or
  anything derived from the inputs, between calls, whatever the key (pointers, contents, shapes).
- Fresh outputs: return plain dense tensors with their own storage; never an input, a view of
  one, an expanded or lazy tensor. Never modify the inputs.
- All work on the current stream: launch every kernel on
  `at::cuda::getCurrentCUDAStream()`; create no streams, events or graphs, and do not
  synchronise the device.
- No threads, processes, timers, file, network or environment access; no replacing functions of
  torch or any other module; no introspection (`gc`, `inspect`, `sys.modules`, `eval`, `exec`);
  no changes to cuBLAS, cuDNN or device settings.
)md";

// ---- END BUILT-IN TEMPLATES ----

using Vars = std::map<std::string, std::string>;

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
std::string render_exemplars(const std::vector<Exemplar>& exemplars, const std::string& tmpl) {
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
    out += "\n\n" + rstrip(fill(tmpl, vars));
  }
  return out;
}

}  // namespace

PromptTemplates PromptTemplates::builtin() {
  PromptTemplates t;
  t.files = {
      {"system.md", kSystemMd},     {"task.md", kTaskMd},
      {"exemplar.md", kExemplarMd}, {"protocol.md", kProtocolMd},
      {"restrictions.md", kRestrictionsMd},
      {"task_torch.md", kTaskTorchMd},
      {"exemplar_torch.md", kExemplarTorchMd},
      {"protocol_torch.md", kProtocolTorchMd},
      {"restrictions_torch.md", kRestrictionsTorchMd},
  };
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

  std::string exemplars = render_exemplars(in.exemplars, text_of(t, "exemplar" + suffix));
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
