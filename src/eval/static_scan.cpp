// Static scan of candidate source (see static_scan.hpp).
//
// The scan runs in four steps:
//   1. splice:   remove backslash-newline pairs (translation phase 2), so that an identifier split
//                across lines ("cudaDevice\<newline>Synchronize") is still one identifier; every
//                character of the spliced text remembers its original line.
//   2. blank:    a small lexer replaces comments and the contents of string / character literals
//                with spaces (newlines kept), turns numbers into runs of '0', and records
//                #include directives with the header name as written. Strings inside an asm(...)
//                statement are kept, because "rdtsc" can only be spelled there.
//   3. tokenize: identifiers, "::" and single punctuation characters of the blanked text.
//   4. match:    the rule tables below, applied to each identifier with its neighbours.
#include "eval/static_scan.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "core/error.hpp"
#include "core/text.hpp"

namespace kforge {

std::string ScanFinding::describe() const {
  return strf("line %d: %s (%s): %s", line, symbol.c_str(), rule.c_str(), text.c_str());
}

namespace {

// ---------------------------------------------------------------------------------------------
// Rule tables

constexpr const char* kLibraryCall = "library_call";
constexpr const char* kDynamicLoading = "dynamic_loading";
constexpr const char* kThreadCreation = "thread_creation";
constexpr const char* kProcessCreation = "process_creation";
constexpr const char* kStreamCreation = "stream_creation";
constexpr const char* kTimer = "timer";
constexpr const char* kFileAccess = "file_access";
constexpr const char* kEnvironmentAccess = "environment_access";
constexpr const char* kDeviceSettings = "device_settings";
constexpr const char* kDeviceSync = "device_sync";

struct WordRule {
  const char* word;
  const char* rule;
  bool call_only;  // only when the next token is "(" (e.g. "time(" but not a variable named time)
};

// Whole identifiers. The driver-API twins of the runtime calls are listed as well, since a
// candidate can reach the driver API just as easily.
constexpr WordRule kWordRules[] = {
    // dynamic_loading: a way around the link-time symbol checks
    {"dlopen", kDynamicLoading, false},
    {"dlsym", kDynamicLoading, false},
    {"dlmopen", kDynamicLoading, false},
    {"dlvsym", kDynamicLoading, false},
    {"cuGetProcAddress", kDynamicLoading, false},
    {"cuGetProcAddress_v2", kDynamicLoading, false},
    {"cudaGetDriverEntryPoint", kDynamicLoading, false},
    {"cudaGetDriverEntryPointByVersion", kDynamicLoading, false},
    // thread_creation: work that outlives the call or escapes the timer
    {"pthread_create", kThreadCreation, false},
    {"thrd_create", kThreadCreation, false},
    // process_creation
    {"fork", kProcessCreation, false},
    {"vfork", kProcessCreation, false},
    {"clone", kProcessCreation, false},
    {"system", kProcessCreation, false},
    {"popen", kProcessCreation, false},
    {"posix_spawn", kProcessCreation, false},
    {"posix_spawnp", kProcessCreation, false},
    {"execl", kProcessCreation, false},
    {"execlp", kProcessCreation, false},
    {"execle", kProcessCreation, false},
    {"execv", kProcessCreation, false},
    {"execvp", kProcessCreation, false},
    {"execvpe", kProcessCreation, false},
    {"execve", kProcessCreation, false},
    // stream_creation: work on another stream than the one given escapes stream-event timing
    {"cudaStreamCreate", kStreamCreation, false},
    {"cudaStreamCreateWithFlags", kStreamCreation, false},
    {"cudaStreamCreateWithPriority", kStreamCreation, false},
    {"cuStreamCreate", kStreamCreation, false},
    {"cuStreamCreateWithPriority", kStreamCreation, false},
    {"cudaStreamPerThread", kStreamCreation, false},
    {"cudaStreamLegacy", kStreamCreation, false},
    {"CU_STREAM_PER_THREAD", kStreamCreation, false},
    {"CU_STREAM_LEGACY", kStreamCreation, false},
    {"cudaGraphLaunch", kStreamCreation, false},
    {"cuGraphLaunch", kStreamCreation, false},
    {"cudaLaunchHostFunc", kStreamCreation, false},
    {"cuLaunchHostFunc", kStreamCreation, false},
    {"cudaStreamAddCallback", kStreamCreation, false},
    {"cuStreamAddCallback", kStreamCreation, false},
    // timer: a candidate has no business measuring time (it could behave differently when timed)
    {"cudaEventElapsedTime", kTimer, false},
    {"cuEventElapsedTime", kTimer, false},
    {"clock_gettime", kTimer, false},
    {"gettimeofday", kTimer, false},
    {"time", kTimer, true},
    {"clock", kTimer, true},  // clock64() is another identifier, hence allowed
    {"rdtsc", kTimer, false},
    {"rdtscp", kTimer, false},
    {"__rdtsc", kTimer, false},
    {"__rdtscp", kTimer, false},
    {"__builtin_ia32_rdtsc", kTimer, false},
    // file_access
    {"fopen", kFileAccess, false},
    {"freopen", kFileAccess, false},
    {"open", kFileAccess, true},
    {"openat", kFileAccess, false},
    {"ifstream", kFileAccess, false},
    {"ofstream", kFileAccess, false},
    {"fstream", kFileAccess, false},
    {"mmap", kFileAccess, false},
    {"unlink", kFileAccess, false},
    {"remove", kFileAccess, true},
    {"rename", kFileAccess, true},
    // environment_access
    {"getenv", kEnvironmentAccess, false},
    {"secure_getenv", kEnvironmentAccess, false},
    {"setenv", kEnvironmentAccess, false},
    {"putenv", kEnvironmentAccess, false},
    {"unsetenv", kEnvironmentAccess, false},
    {"environ", kEnvironmentAccess, false},
    // device_settings: state that outlives the call or changes what the baseline sees
    {"cudaDeviceSetLimit", kDeviceSettings, false},
    {"cudaDeviceReset", kDeviceSettings, false},
    {"cudaCtxResetPersistingL2Cache", kDeviceSettings, false},
    {"accessPolicyWindow", kDeviceSettings, false},
    {"cudaStreamSetAttribute", kDeviceSettings, false},
    {"cudaDeviceSetCacheConfig", kDeviceSettings, false},
    {"cudaDeviceSetSharedMemConfig", kDeviceSettings, false},
    {"cudaSetDevice", kDeviceSettings, false},
    {"cudaProfilerStart", kDeviceSettings, false},
    {"cudaProfilerStop", kDeviceSettings, false},
    // device_sync: the ABI forbids synchronising the device
    {"cudaDeviceSynchronize", kDeviceSync, false},
    {"cudaThreadSynchronize", kDeviceSync, false},
    {"cuCtxSynchronize", kDeviceSync, false},
};

struct PrefixRule {
  const char* prefix;
  const char* rule;
};

// Identifiers starting with these ("cublasLt" is covered by "cublas").
constexpr PrefixRule kPrefixRules[] = {
    {"cublas", kLibraryCall},   {"cudnn", kLibraryCall},    {"cusparse", kLibraryCall},
    {"cutensor", kLibraryCall}, {"cusolver", kLibraryCall}, {"nvml", kDeviceSettings},
};

// std::X, reported as "std::X".
constexpr PrefixRule kStdRules[] = {
    {"thread", kThreadCreation}, {"jthread", kThreadCreation}, {"async", kThreadCreation},
    {"chrono", kTimer},          {"ifstream", kFileAccess},    {"ofstream", kFileAccess},
    {"fstream", kFileAccess},
};

// X:: (a namespace that belongs to a library), reported as "X::".
constexpr const char* kLibraryNamespaces[] = {"at", "torch"};

// #include <X>: the header's file name starts with one of these ...
constexpr const char* kLibraryHeaderNames[] = {"cublas", "cudnn", "cusparse", "cutensor", "cusolver"};
// ... or its path starts with one of these.
constexpr const char* kLibraryHeaderDirs[] = {"torch/", "ATen/"};

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hspace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

// ---------------------------------------------------------------------------------------------
// Step 1: splice continued lines

struct Spliced {
  std::string text;
  std::vector<int> line;  // line[i]: 1-based original line of text[i]
};

Spliced splice(const std::string& src) {
  Spliced out;
  out.text.reserve(src.size());
  out.line.reserve(src.size());
  int line = 1;
  for (size_t i = 0; i < src.size(); ++i) {
    // "\\\n" or "\\\r\n" joins two lines.
    if (src[i] == '\\') {
      size_t j = i + 1;
      if (j < src.size() && src[j] == '\r') ++j;
      if (j < src.size() && src[j] == '\n') {
        ++line;
        i = j;
        continue;
      }
    }
    out.text.push_back(src[i]);
    out.line.push_back(line);
    if (src[i] == '\n') ++line;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Step 2: blank comments and literals

struct Include {
  size_t pos;          // offset of the '#' in the spliced text
  std::string header;  // as written: <cublas_v2.h> or "cublas_v2.h"
};

class Blanker {
 public:
  explicit Blanker(const std::string& s) : s_(s), b_(s) {}

  void run() {
    while (i_ < s_.size()) step();
  }
  std::string& blanked() { return b_; }
  std::vector<Include>& includes() { return includes_; }

 private:
  char at(size_t k) const { return k < s_.size() ? s_[k] : '\0'; }
  // Blank s_[from, to) in the output, keeping newlines.
  void blank(size_t from, size_t to) {
    for (size_t k = from; k < to && k < b_.size(); ++k)
      if (b_[k] != '\n') b_[k] = ' ';
  }

  void step() {
    const char c = s_[i_];
    if (c == '\n') {
      line_start_ = true;
      ++i_;
      return;
    }
    if (is_hspace(c)) {
      ++i_;
      return;
    }
    const bool was_line_start = line_start_;
    line_start_ = false;
    if (c == '/' && at(i_ + 1) == '/') return line_comment();
    if (c == '/' && at(i_ + 1) == '*') {
      block_comment();
      line_start_ = was_line_start;  // "/* x */ #include" is still a directive
      return;
    }
    if (c == '#' && was_line_start) return directive();
    if (c == '"') return quoted('"', i_);
    if (c == '\'') return quoted('\'', i_);
    if (is_digit(c) || (c == '.' && is_digit(at(i_ + 1)))) return number();
    if (is_ident_start(c)) return identifier();
    // Punctuation: track the parentheses of an asm(...) statement.
    if (c == '(') {
      if (asm_pending_) asm_depth_ = 1;
      else if (asm_depth_ > 0) ++asm_depth_;
    } else if (c == ')' && asm_depth_ > 0) {
      --asm_depth_;
    }
    asm_pending_ = false;
    ++i_;
  }

  void line_comment() {
    size_t end = s_.find('\n', i_);
    if (end == std::string::npos) end = s_.size();
    blank(i_, end);
    i_ = end;
  }

  void block_comment() {
    size_t end = s_.find("*/", i_ + 2);
    end = (end == std::string::npos) ? s_.size() : end + 2;
    blank(i_, end);
    i_ = end;
  }

  // A string or character literal opened at `open` (the quote). Escapes are skipped; an
  // unterminated literal ends at the end of the line, so a stray quote (e.g. an apostrophe in
  // #error text) cannot blank the rest of the file.
  void quoted(char quote, size_t open) {
    size_t k = open + 1;
    while (k < s_.size() && s_[k] != quote && s_[k] != '\n') k += (s_[k] == '\\') ? 2 : 1;
    k = std::min(k, s_.size());
    if (!(quote == '"' && asm_depth_ > 0)) blank(open + 1, k);
    i_ = (k < s_.size() && s_[k] == quote) ? k + 1 : k;
    asm_pending_ = false;
  }

  // R"delim( ... )delim" with `open` at the quote. Falls back to an ordinary string when the
  // delimiter is malformed.
  void raw_string(size_t open) {
    size_t k = open + 1;
    std::string delim;
    while (k < s_.size() && s_[k] != '(' && delim.size() <= 16) {
      const char d = s_[k];
      if (d == ' ' || d == ')' || d == '\\' || d == '\t' || d == '\n' || d == '"') break;
      delim.push_back(d);
      ++k;
    }
    if (at(k) != '(' || delim.size() > 16) return quoted('"', open);
    const std::string close = ")" + delim + "\"";
    size_t end = s_.find(close, k + 1);
    // Unterminated: blank to the end of the file (that is what the compiler would see).
    const size_t quote_at = (end == std::string::npos) ? s_.size() : end + close.size() - 1;
    if (asm_depth_ == 0) blank(open + 1, quote_at);
    i_ = std::min(quote_at + 1, s_.size());
    asm_pending_ = false;
  }

  // A pp-number (digits, letters, '.', digit separators, exponent signs) becomes "000...", so
  // that neither its letters ("0x1fULL") nor its separators (1'000) are seen as anything else.
  void number() {
    size_t k = i_;
    while (k < s_.size()) {
      const char d = s_[k];
      if ((d == '+' || d == '-') && k > i_ && std::strchr("eEpP", s_[k - 1])) {
        ++k;
      } else if (is_ident_char(d) || d == '.') {
        ++k;
      } else if (d == '\'' && is_ident_char(at(k + 1))) {
        k += 2;
      } else {
        break;
      }
    }
    for (size_t m = i_; m < k; ++m) b_[m] = '0';
    i_ = k;
    asm_pending_ = false;
  }

  void identifier() {
    size_t k = i_;
    while (k < s_.size() && is_ident_char(s_[k])) ++k;
    const std::string_view word(s_.data() + i_, k - i_);
    i_ = k;
    // Encoding prefixes of literals: u8"..", L'x', R"(..)", u8R"(..)".
    if (at(k) == '"') {
      if (word == "R" || word == "u8R" || word == "uR" || word == "UR" || word == "LR") return raw_string(k);
      if (word == "u8" || word == "u" || word == "U" || word == "L") return quoted('"', k);
    }
    if (at(k) == '\'' && (word == "u8" || word == "u" || word == "U" || word == "L")) return quoted('\'', k);
    // asm [volatile|goto|inline] ( ... ): its strings stay visible.
    if (word == "asm" || word == "__asm__" || word == "__asm") {
      asm_pending_ = true;
    } else if (!(asm_pending_ && (word == "volatile" || word == "__volatile__" || word == "goto" ||
                                  word == "inline"))) {
      asm_pending_ = false;
    }
  }

  // '#' at the start of a line. Include-like directives have their header name recorded and
  // blanked (the include rules judge it; the identifier rules must not see "fstream" in
  // <fstream>). Other directives are lexed as ordinary code.
  void directive() {
    const size_t hash = i_;
    size_t k = i_ + 1;
    while (k < s_.size() && is_hspace(s_[k])) ++k;
    size_t name_end = k;
    while (name_end < s_.size() && is_ident_char(s_[name_end])) ++name_end;
    const std::string_view name(s_.data() + k, name_end - k);
    i_ = k;  // the directive name is lexed as an identifier next
    if (name != "include" && name != "include_next" && name != "import") return;
    k = name_end;
    while (k < s_.size() && is_hspace(s_[k])) ++k;
    const char open = at(k);
    if (open != '<' && open != '"') {
      i_ = name_end;  // #include MACRO: the macro name is code
      return;
    }
    const char close = (open == '<') ? '>' : '"';
    size_t end = k + 1;
    while (end < s_.size() && s_[end] != close && s_[end] != '\n') ++end;
    if (at(end) != close) {  // malformed; leave it to the compiler
      i_ = name_end;
      return;
    }
    includes_.push_back({hash, s_.substr(k, end + 1 - k)});
    blank(k + 1, end);
    i_ = end + 1;
  }

  const std::string& s_;
  std::string b_;
  size_t i_ = 0;
  bool line_start_ = true;
  bool asm_pending_ = false;  // saw "asm" (and qualifiers), waiting for "("
  int asm_depth_ = 0;         // > 0 inside the parentheses of an asm statement
  std::vector<Include> includes_;
};

// ---------------------------------------------------------------------------------------------
// Step 3: tokens of the blanked text

struct Token {
  std::string text;  // an identifier, "::" or one punctuation character
  size_t pos;
  bool ident;
};

std::vector<Token> tokenize(const std::string& b) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < b.size()) {
    const char c = b[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (is_ident_start(c)) {
      size_t k = i;
      while (k < b.size() && is_ident_char(b[k])) ++k;
      out.push_back({b.substr(i, k - i), i, true});
      i = k;
    } else if (is_digit(c)) {  // numbers were turned into '0' runs; skip them whole
      while (i < b.size() && is_ident_char(b[i])) ++i;
    } else if (c == ':' && i + 1 < b.size() && b[i + 1] == ':') {
      out.push_back({"::", i, false});
      i += 2;
    } else {
      out.push_back({std::string(1, c), i, false});
      ++i;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Step 4: matching

struct Hit {
  size_t pos;  // offset in the spliced text (orders hits within a line)
  const char* rule;
  std::string symbol;
};

bool library_header(const std::string& written) {
  const std::string path = written.substr(1, written.size() - 2);
  const size_t slash = path.rfind('/');
  const std::string file = (slash == std::string::npos) ? path : path.substr(slash + 1);
  for (const char* p : kLibraryHeaderNames)
    if (starts_with(file, p)) return true;
  for (const char* d : kLibraryHeaderDirs)
    if (starts_with(path, d)) return true;
  return false;
}

void match_tokens(const std::vector<Token>& toks, std::vector<Hit>& hits) {
  static const std::unordered_map<std::string_view, const WordRule*> words = [] {
    std::unordered_map<std::string_view, const WordRule*> m;
    for (const WordRule& r : kWordRules) m.emplace(r.word, &r);
    return m;
  }();
  auto tok_is = [&](size_t k, std::string_view text) { return k < toks.size() && toks[k].text == text; };

  for (size_t t = 0; t < toks.size(); ++t) {
    const Token& tok = toks[t];
    if (!tok.ident) continue;
    const std::string& w = tok.text;

    // std::X (reported at the "std" token; "std :: X" with spaces counts too).
    if (t >= 2 && toks[t - 1].text == "::" && toks[t - 2].text == "std") {
      bool matched = false;
      for (const PrefixRule& r : kStdRules) {
        if (w == r.prefix) {
          hits.push_back({toks[t - 2].pos, r.rule, "std::" + w});
          matched = true;
        }
      }
      if (matched) continue;  // std::ifstream is not reported a second time as ifstream
    }
    // at::, torch::
    if (tok_is(t + 1, "::")) {
      for (const char* ns : kLibraryNamespaces)
        if (w == ns) hits.push_back({tok.pos, kLibraryCall, w + "::"});
    }
    // Whole words.
    if (auto it = words.find(w); it != words.end()) {
      const WordRule& r = *it->second;
      if (!r.call_only || tok_is(t + 1, "(")) hits.push_back({tok.pos, r.rule, w});
    }
    // Prefixes.
    for (const PrefixRule& r : kPrefixRules)
      if (starts_with(w, r.prefix)) hits.push_back({tok.pos, r.rule, w});
  }
}

std::vector<std::string> original_lines(const std::string& src) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= src.size()) {
    size_t end = src.find('\n', start);
    if (end == std::string::npos) end = src.size();
    std::string line(trim(std::string_view(src).substr(start, end - start)));
    if (line.size() > 200) line.resize(200);
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::vector<ScanFinding> static_scan(const std::string& source, const ScanPolicy& policy) {
  const Spliced sp = splice(source);
  Blanker blanker(sp.text);
  blanker.run();

  std::vector<Hit> hits;
  for (const Include& inc : blanker.includes())
    if (library_header(inc.header)) hits.push_back({inc.pos, kLibraryCall, "#include " + inc.header});
  match_tokens(tokenize(blanker.blanked()), hits);

  std::stable_sort(hits.begin(), hits.end(), [](const Hit& a, const Hit& b) { return a.pos < b.pos; });

  const std::vector<std::string> lines = original_lines(source);
  std::set<std::tuple<int, std::string, std::string>> seen;  // (line, rule, symbol)
  std::vector<ScanFinding> findings;
  for (const Hit& h : hits) {
    const std::string rule = h.rule;
    if (policy.allow_libraries && rule == kLibraryCall) continue;
    if (policy.allow_streams && rule == kStreamCreation) continue;
    const int line = sp.line[h.pos];
    if (!seen.insert({line, rule, h.symbol}).second) continue;
    KF_CHECK(line >= 1 && size_t(line) <= lines.size(), "static_scan: line %d out of range", line);
    findings.push_back({rule, h.symbol, line, lines[size_t(line) - 1]});
  }
  return findings;
}

}  // namespace kforge
