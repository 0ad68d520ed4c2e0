// Parsing an LLM answer into analysis, whole code and SEARCH/REPLACE edits, and applying the edits.
//
// The parser works line by line on text whose line endings were normalised to "\n". It knows two
// kinds of block:
//   - fenced blocks: an opening line of three or more '`' or '~' (optionally followed by a language
//     tag), closed by a line of the same character at least as long and with nothing else on it.
//     A block with no closing fence runs to the end of the text (models get cut off mid-answer).
//   - edit blocks: "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE" marker lines, either in the
//     running text or inside a fenced block (which then counts as edits, whatever its tag).
// Everything else is the analysis.
#include "llm/response.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "core/error.hpp"
#include "core/text.hpp"

namespace kforge {
namespace {

// ---------------------------------------------------------------------------------------------
// Lines

// Splits into lines after turning "\r\n" (and a lone "\r") into "\n". A final line break does not
// start an empty last line.
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string cur;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\r') {
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
      lines.push_back(std::move(cur));
      cur.clear();
    } else if (c == '\n') {
      lines.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) lines.push_back(std::move(cur));
  return lines;
}

bool is_blank(std::string_view line) { return trim(line).empty(); }

// Lines [begin, end) joined with "\n", each followed by "\n"; empty when the range is empty.
std::string join_lines(const std::vector<std::string>& lines, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    out += lines[i];
    out += '\n';
  }
  return out;
}

// Same, but without the blank lines at either end of the range.
std::string join_lines_trimmed(const std::vector<std::string>& lines, size_t begin, size_t end) {
  while (begin < end && is_blank(lines[begin])) ++begin;
  while (end > begin && is_blank(lines[end - 1])) --end;
  return join_lines(lines, begin, end);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Fences

struct Fence {
  char ch = 0;      // '`' or '~'
  size_t len = 0;   // number of fence characters (>= 3)
  std::string tag;  // the language tag, lower case, first word of the info string; may be empty
};

// An opening fence: optional indentation, then three or more '`' or '~', then an optional info
// string whose first word is the language tag. Like CommonMark, a backtick fence's info string may
// not contain a backtick (so "```x```" is inline code, not a fence).
std::optional<Fence> opening_fence(std::string_view line) {
  std::string_view s = trim(line);
  if (s.size() < 3 || (s[0] != '`' && s[0] != '~')) return std::nullopt;
  Fence f;
  f.ch = s[0];
  while (f.len < s.size() && s[f.len] == f.ch) ++f.len;
  if (f.len < 3) return std::nullopt;
  std::string_view info = trim(s.substr(f.len));
  if (f.ch == '`' && info.find('`') != std::string_view::npos) return std::nullopt;
  size_t word_end = info.find_first_of(" \t{");
  f.tag = lower(info.substr(0, word_end));
  return f;
}

// A closing fence for `open`: the same character, at least as many, nothing else but white space.
bool closes(std::string_view line, const Fence& open) {
  std::string_view s = trim(line);
  if (s.size() < open.len) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return c == open.ch; });
}

// Language tags whose blocks hold the program (an untagged block counts too).
bool is_code_tag(const std::string& tag, const std::string& language) {
  static const char* const kTags[] = {"", "cuda", "cu", "c++", "cpp", "cxx", "c"};
  static const char* const kPythonTags[] = {"", "python", "py", "python3"};
  if (language == "python")
    return std::any_of(std::begin(kPythonTags), std::end(kPythonTags), [&](const char* t) { return tag == t; });
  return std::any_of(std::begin(kTags), std::end(kTags), [&](const char* t) { return tag == t; });
}

// ---------------------------------------------------------------------------------------------
// Edit markers: at least five '<', '=' or '>' respectively; the SEARCH and REPLACE words may be
// separated from the arrows by spaces. Surrounding white space is ignored.

bool marker_line(std::string_view line, char arrow, std::string_view word) {
  std::string_view s = trim(line);
  size_t n = 0;
  while (n < s.size() && s[n] == arrow) ++n;
  if (n < 5) return false;
  return trim(s.substr(n)) == word;
}
bool is_search_marker(std::string_view line) { return marker_line(line, '<', "SEARCH"); }
bool is_divider_marker(std::string_view line) { return marker_line(line, '=', ""); }
bool is_replace_marker(std::string_view line) { return marker_line(line, '>', "REPLACE"); }

// Reads one edit block whose "<<<<<<< SEARCH" line is lines[start]; stops at `end`. On success
// appends the edit and returns the index just past the ">>>>>>> REPLACE" line. An edit cut short
// (no divider or no REPLACE marker before `end`) is dropped: a truncated replacement would do more
// harm than good. Then `*truncated` is set and `end` is returned.
size_t read_edit(const std::vector<std::string>& lines, size_t start, size_t end,
                 std::vector<SearchReplace>* edits, bool* truncated) {
  size_t divider = start + 1;
  while (divider < end && !is_divider_marker(lines[divider])) ++divider;
  if (divider >= end) {
    *truncated = true;
    return end;
  }
  size_t replace_end = divider + 1;
  while (replace_end < end && !is_replace_marker(lines[replace_end])) ++replace_end;
  if (replace_end >= end) {
    *truncated = true;
    return end;
  }
  edits->push_back({join_lines(lines, start + 1, divider), join_lines(lines, divider + 1, replace_end)});
  return replace_end + 1;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

ParsedResponse parse_response(const std::string& text, const std::string& language) {
  const std::vector<std::string> lines = split_lines(text);
  ParsedResponse out;
  std::vector<std::string> analysis;  // lines outside code and edit blocks
  std::vector<std::string> other_tags;  // tags of fenced blocks that were neither code nor edits
  bool truncated_edit = false;

  size_t i = 0;
  while (i < lines.size()) {
    const std::string& line = lines[i];

    // An edit block in the running text.
    if (is_search_marker(line)) {
      i = read_edit(lines, i, lines.size(), &out.edits, &truncated_edit);
      continue;
    }

    std::optional<Fence> fence = opening_fence(line);
    if (!fence) {
      analysis.push_back(line);
      ++i;
      continue;
    }

    // A fenced block: its body is [body_begin, body_end); `next` is the line after the closing
    // fence, or the end of the text when the block is not closed.
    size_t body_begin = i + 1, body_end = body_begin;
    while (body_end < lines.size() && !closes(lines[body_end], *fence)) ++body_end;
    size_t next = body_end < lines.size() ? body_end + 1 : body_end;

    bool has_edits = std::any_of(lines.begin() + body_begin, lines.begin() + body_end,
                                 [](const std::string& l) { return is_search_marker(l); });
    if (has_edits) {
      // The block is edits, whatever its tag; text between the edits inside it is dropped.
      for (size_t j = body_begin; j < body_end;) {
        if (is_search_marker(lines[j]))
          j = read_edit(lines, j, body_end, &out.edits, &truncated_edit);
        else
          ++j;
      }
    } else if (is_code_tag(fence->tag, language)) {
      out.code = join_lines_trimmed(lines, body_begin, body_end);  // the last one wins
    } else {
      // Not code (text, json, diff, ...): it belongs to the analysis, fences included.
      other_tags.push_back(fence->tag);
      for (size_t j = i; j < next; ++j) analysis.push_back(lines[j]);
    }
    i = next;
  }

  // An empty code block is no code.
  if (out.code && trim(*out.code).empty()) out.code.reset();

  std::string joined = join_lines(analysis, 0, analysis.size());
  out.analysis = std::string(trim(joined));

  if (!out.code && out.edits.empty()) {
    out.error = "no fenced code block and no SEARCH/REPLACE edit in the response";
    if (!other_tags.empty()) {
      std::vector<std::string> quoted;
      for (const std::string& t : other_tags) quoted.push_back("'" + t + "'");
      out.error += strf(" (fenced blocks tagged %s are not code; tag the program `%s`)",
                        join(quoted, ", ").c_str(), language == "python" ? "python" : "cuda");
    }
    if (truncated_edit)
      out.error += " (a SEARCH/REPLACE edit was cut off before its '=======' or "
                   "'>>>>>>> REPLACE' line)";
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// apply_edits

namespace {

// A line of the current source: its text (without "\n") and where it starts and ends in the
// source (`end` is just past its "\n", or the end of the source for a last line without one).
struct SourceLine {
  std::string_view text;
  size_t begin, end;
};

std::vector<SourceLine> index_lines(const std::string& src) {
  std::vector<SourceLine> out;
  size_t pos = 0;
  while (pos < src.size()) {
    size_t nl = src.find('\n', pos);
    size_t stop = nl == std::string::npos ? src.size() : nl;
    std::string_view text(src.data() + pos, stop - pos);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    out.push_back({text, pos, nl == std::string::npos ? src.size() : nl + 1});
    pos = out.back().end;
  }
  return out;
}

// 1-based line number of byte offset `pos` in `src`.
size_t line_number(const std::string& src, size_t pos) {
  return 1 + static_cast<size_t>(std::count(src.begin(), src.begin() + pos, '\n'));
}

// One place where a SEARCH text matched: the byte range to replace and its first line (1-based).
struct Match {
  size_t begin, end, line;
};

// Exact matches that start at the beginning of a line (overlapping ones included, so that a
// repeated line counts as ambiguous).
std::vector<Match> exact_matches(const std::string& src, const std::string& search) {
  std::vector<Match> out;
  for (size_t pos = src.find(search); pos != std::string::npos; pos = src.find(search, pos + 1)) {
    if (pos == 0 || src[pos - 1] == '\n') out.push_back({pos, pos + search.size(), line_number(src, pos)});
  }
  return out;
}

// Tolerant matches: the non-blank SEARCH lines, stripped, equal a run of consecutive non-blank
// source lines, stripped. The match covers whole lines, from the first matched line to the end of
// the last one (blank lines between them included).
std::vector<Match> tolerant_matches(const std::vector<SourceLine>& src,
                                    const std::vector<std::string_view>& want) {
  std::vector<size_t> nonblank;  // indexes into src of the non-blank lines
  for (size_t i = 0; i < src.size(); ++i)
    if (!is_blank(src[i].text)) nonblank.push_back(i);
  std::vector<Match> out;
  if (want.empty() || want.size() > nonblank.size()) return out;
  for (size_t s = 0; s + want.size() <= nonblank.size(); ++s) {
    bool same = true;
    for (size_t k = 0; k < want.size() && same; ++k) same = trim(src[nonblank[s + k]].text) == want[k];
    if (same) {
      const SourceLine& first = src[nonblank[s]];
      const SourceLine& last = src[nonblank[s + want.size() - 1]];
      out.push_back({first.begin, last.end, nonblank[s] + 1});
    }
  }
  return out;
}

// When a SEARCH text matched nowhere: if its first line occurs in the source, says where the
// closest attempt (the one matching the most lines) diverged. Empty when the first line occurs
// nowhere either.
std::string near_miss(const std::vector<SourceLine>& src, const std::vector<std::string_view>& want) {
  std::vector<size_t> nonblank;
  for (size_t i = 0; i < src.size(); ++i)
    if (!is_blank(src[i].text)) nonblank.push_back(i);
  size_t best_start = 0, best_len = 0;
  bool any = false;
  for (size_t s = 0; s < nonblank.size(); ++s) {
    size_t k = 0;
    while (k < want.size() && s + k < nonblank.size() && trim(src[nonblank[s + k]].text) == want[k]) ++k;
    if (k > 0 && (!any || k > best_len)) {
      any = true;
      best_start = s;
      best_len = k;
    }
  }
  if (!any) return {};
  size_t first_line = nonblank[best_start] + 1;
  if (best_start + best_len >= nonblank.size())
    return strf("; its first %zu line(s) match from line %zu on, but the source ends there", best_len,
                first_line);
  size_t diverge = nonblank[best_start + best_len];
  return strf("; its first %zu line(s) match from line %zu on, then it expects '%s' where line %zu is '%s'",
              best_len, first_line, std::string(want[best_len]).c_str(), diverge + 1,
              std::string(trim(src[diverge].text)).c_str());
}

std::string line_list(const std::vector<Match>& ms) {
  std::vector<std::string> parts;
  for (const Match& m : ms) parts.push_back(std::to_string(m.line));
  return join(parts, ", ");
}

}  // namespace

EditOutcome apply_edits(const std::string& parent, const std::vector<SearchReplace>& edits) {
  EditOutcome out;
  std::string src = parent;
  const size_t n = edits.size();

  for (size_t e = 0; e < n; ++e) {
    // Normalise the edit's line endings like the source's lines are read.
    std::string search, replace;
    for (const std::string& l : split_lines(edits[e].search)) search += l + "\n";
    for (const std::string& l : split_lines(edits[e].replace)) replace += l + "\n";

    // Where the search happens, for messages: the parent itself or the parent after edits 1..e.
    std::string where = e == 0   ? "the parent"
                        : e == 1 ? "the parent after edit 1"
                                 : strf("the parent after edits 1-%zu", e);
    std::string prefix = strf("edit %zu of %zu: ", e + 1, n);

    std::vector<std::string> search_lines = split_lines(search);
    std::vector<std::string_view> want;  // non-blank SEARCH lines, stripped
    for (const std::string& l : search_lines)
      if (!is_blank(l)) want.push_back(trim(l));
    if (want.empty()) {
      out.error = prefix + "the SEARCH text is empty; copy the lines to change (or the lines next to "
                           "where new code goes) from the best variant into SEARCH";
      return out;
    }

    std::vector<Match> matches = exact_matches(src, search);
    std::vector<SourceLine> lines = index_lines(src);
    if (matches.empty()) matches = tolerant_matches(lines, want);

    if (matches.empty()) {
      out.error = prefix + "the SEARCH text was not found in " + where + "; its first line was: " +
                  std::string(want.front()) + near_miss(lines, want);
      return out;
    }
    if (matches.size() > 1) {
      out.error = prefix + strf("the SEARCH text matches %zu places in %s (lines %s); add more "
                                "context so that it matches exactly one; its first line was: ",
                                matches.size(), where.c_str(), line_list(matches).c_str()) +
                  std::string(want.front());
      return out;
    }

    const Match& m = matches.front();
    // A tolerant match may end on a last line without "\n"; the replacement keeps that shape.
    std::string repl = replace;
    if (m.end == src.size() && (m.end == m.begin || src[m.end - 1] != '\n') && !repl.empty())
      repl.pop_back();
    src = src.substr(0, m.begin) + repl + src.substr(m.end);
  }

  out.ok = true;
  out.source = std::move(src);
  return out;
}

}  // namespace kforge
