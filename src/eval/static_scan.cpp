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
//   4. match:    the rules of data/scan-rules.json, applied to each identifier with its neighbours.
#include "eval/static_scan.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/text.hpp"

namespace kforge {

struct EmbeddedFile {
  const char* path;
  const unsigned char* data;
  size_t size;
};
// data/scan-rules.json, embedded by cmake/embed_files.cmake (build/generated/scan_rules_file.cpp).
const EmbeddedFile* scan_rule_files(size_t* count);

std::string ScanFinding::describe() const {
  return strf("line %d: %s (%s): %s", line, symbol.c_str(), rule.c_str(), text.c_str());
}

namespace {

// ---------------------------------------------------------------------------------------------
// Rule tables: data/scan-rules.json, embedded at build time (cmake/embed_files.cmake), the same
// file python/kforge_worker/scan.py reads for the C++ inside PyTorch candidates.

constexpr const char* kLibraryCall = "library_call";
constexpr const char* kStreamCreation = "stream_creation";

struct Rule {
  std::string pattern;
  std::string rule;
  std::vector<std::string> parts;  // qualified: the pattern split at "::"
};

// One scanner's rules ("cuda" or "torch"), by how they match.
struct RuleSet {
  std::unordered_map<std::string, std::vector<const Rule*>> words, calls, free_calls;
  std::vector<Rule> all;  // owns every rule; the maps point into it
  std::vector<const Rule*> std_names, namespaces, qualified, prefixes, include_names, include_dirs;
};

std::string rules_text() {
  size_t count = 0;
  const EmbeddedFile* files = scan_rule_files(&count);
  KF_CHECK(count == 1, "static_scan: %zu embedded rule files, expected 1", count);
  return std::string(reinterpret_cast<const char*>(files[0].data), files[0].size);
}

RuleSet load_rules(const std::string& scanner) {
  const nlohmann::json doc = nlohmann::json::parse(rules_text());
  const nlohmann::json& known = doc.at("rules");
  RuleSet rs;
  std::vector<std::string> matches;
  for (const nlohmann::json& e : doc.at("cpp")) {
    const std::vector<std::string> scanners = e.at("scanners").get<std::vector<std::string>>();
    if (std::find(scanners.begin(), scanners.end(), scanner) == scanners.end()) continue;
    Rule r{e.at("pattern").get<std::string>(), e.at("rule").get<std::string>(), {}};
    KF_CHECK(known.contains(r.rule), "scan-rules.json: rule '%s' of '%s' is not in 'rules'", r.rule.c_str(),
             r.pattern.c_str());
    matches.push_back(e.at("match").get<std::string>());
    if (matches.back() == "qualified") {
      for (size_t from = 0;;) {
        const size_t at = r.pattern.find("::", from);
        r.parts.push_back(r.pattern.substr(from, at == std::string::npos ? std::string::npos : at - from));
        if (at == std::string::npos) break;
        from = at + 2;
      }
    }
    rs.all.push_back(std::move(r));
  }
  for (size_t i = 0; i < rs.all.size(); ++i) {
    const Rule* r = &rs.all[i];
    const std::string& m = matches[i];
    if (m == "word") rs.words[r->pattern].push_back(r);
    else if (m == "call") rs.calls[r->pattern].push_back(r);
    else if (m == "free_call") rs.free_calls[r->pattern].push_back(r);
    else if (m == "std") rs.std_names.push_back(r);
    else if (m == "namespace") rs.namespaces.push_back(r);
    else if (m == "qualified") rs.qualified.push_back(r);
    else if (m == "prefix") rs.prefixes.push_back(r);
    else if (m == "include_name") rs.include_names.push_back(r);
    else if (m == "include_dir") rs.include_dirs.push_back(r);
    else KF_RUNTIME_ERROR("scan-rules.json: unknown match '%s' for '%s'", m.c_str(), r->pattern.c_str());
  }
  return rs;
}

const RuleSet& rules_for(const std::string& scanner) {
  static const RuleSet cuda = load_rules("cuda");
  static const RuleSet torch = load_rules("torch");
  if (scanner == "cuda") return cuda;
  if (scanner == "torch") return torch;
  KF_USAGE_ERROR("unknown scanner '%s' (expected cuda or torch)", scanner.c_str());
}

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
  std::string rule;
  std::string symbol;
};

// The rule an #include of `written` (<a/b.h> or "a/b.h") breaks, or null.
const Rule* include_rule(const RuleSet& rs, const std::string& written) {
  const std::string path = written.substr(1, written.size() - 2);
  const size_t slash = path.rfind('/');
  const std::string file = (slash == std::string::npos) ? path : path.substr(slash + 1);
  for (const Rule* r : rs.include_names)
    if (starts_with(file, r->pattern)) return r;
  for (const Rule* r : rs.include_dirs)
    if (starts_with(path, r->pattern)) return r;
  return nullptr;
}

void match_tokens(const RuleSet& rs, const std::vector<Token>& toks, std::vector<Hit>& hits) {
  auto tok_is = [&](size_t k, std::string_view text) { return k < toks.size() && toks[k].text == text; };

  for (size_t t = 0; t < toks.size(); ++t) {
    const Token& tok = toks[t];
    if (!tok.ident) continue;
    const std::string& w = tok.text;

    // std::X (reported at the "std" token; "std :: X" with spaces counts too).
    if (t >= 2 && toks[t - 1].text == "::" && toks[t - 2].text == "std") {
      bool matched = false;
      for (const Rule* r : rs.std_names) {
        if (w == r->pattern) {
          hits.push_back({toks[t - 2].pos, r->rule, "std::" + w});
          matched = true;
        }
      }
      if (matched) continue;  // std::ifstream is not reported a second time as ifstream
    }
    // X:: (at::, torch::)
    if (tok_is(t + 1, "::")) {
      for (const Rule* r : rs.namespaces)
        if (w == r->pattern) hits.push_back({tok.pos, r->rule, w + "::"});
    }
    // a::b::c..., the last part a prefix.
    for (const Rule* r : rs.qualified) {
      const size_t n = r->parts.size();
      bool ok = true;
      for (size_t k = 0; ok && k < n; ++k) {
        const size_t at = t + 2 * k;
        ok = at < toks.size() && toks[at].ident &&
             (k + 1 < n ? toks[at].text == r->parts[k] : starts_with(toks[at].text, r->parts[k])) &&
             (k + 1 == n || tok_is(at + 1, "::"));
      }
      if (!ok) continue;
      std::string sym;
      for (size_t k = 0; k < n; ++k) sym += (k ? "::" : "") + toks[t + 2 * k].text;
      hits.push_back({tok.pos, r->rule, sym});
    }
    // Whole words, calls, calls not through '.' or '->'.
    if (auto it = rs.words.find(w); it != rs.words.end())
      for (const Rule* r : it->second) hits.push_back({tok.pos, r->rule, w});
    if (tok_is(t + 1, "(")) {
      if (auto it = rs.calls.find(w); it != rs.calls.end())
        for (const Rule* r : it->second) hits.push_back({tok.pos, r->rule, w});
      const bool member = (t >= 1 && toks[t - 1].text == ".") || (t >= 2 && toks[t - 1].text == ">" && toks[t - 2].text == "-");
      if (!member)
        if (auto it = rs.free_calls.find(w); it != rs.free_calls.end())
          for (const Rule* r : it->second) hits.push_back({tok.pos, r->rule, w});
    }
    // Prefixes.
    for (const Rule* r : rs.prefixes)
      if (starts_with(w, r->pattern)) hits.push_back({tok.pos, r->rule, w});
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
    lines.push_back(valid_utf8(line));  // quoted in verdicts: a stray byte must not break their JSON
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::vector<ScanFinding> static_scan(const std::string& source, const ScanPolicy& policy) {
  const Spliced sp = splice(source);
  Blanker blanker(sp.text);
  blanker.run();

  const RuleSet& rs = rules_for(policy.scanner);
  std::vector<Hit> hits;
  for (const Include& inc : blanker.includes())
    if (const Rule* r = include_rule(rs, inc.header)) hits.push_back({inc.pos, r->rule, "#include " + inc.header});
  match_tokens(rs, tokenize(blanker.blanked()), hits);

  std::stable_sort(hits.begin(), hits.end(), [](const Hit& a, const Hit& b) { return a.pos < b.pos; });

  const std::vector<std::string> lines = original_lines(source);
  std::set<std::tuple<int, std::string, std::string>> seen;  // (line, rule, symbol)
  std::vector<ScanFinding> findings;
  for (const Hit& h : hits) {
    const std::string& rule = h.rule;
    if (policy.allow_libraries && rule == kLibraryCall) continue;
    if (policy.allow_streams && rule == kStreamCreation) continue;
    const int line = sp.line[h.pos];
    if (!seen.insert({line, rule, h.symbol}).second) continue;
    KF_CHECK(line >= 1 && size_t(line) <= lines.size(), "static_scan: line %d out of range", line);
    findings.push_back({rule, valid_utf8(h.symbol), line, lines[size_t(line) - 1]});
  }
  return findings;
}

}  // namespace kforge
