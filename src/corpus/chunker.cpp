#include "corpus/chunker.hpp"

#include <algorithm>
#include <cctype>
#include <regex>

namespace kforge {
namespace {

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The raw-string prefix ending at `quote` (R, u8R, uR, UR, LR), when it is one.
bool raw_string_at(std::string_view s, size_t quote) {
  if (quote == 0 || s[quote - 1] != 'R') return false;
  size_t p = quote - 1;  // the R
  size_t start = p;
  if (p >= 2 && s[p - 2] == 'u' && s[p - 1] == '8') start = p - 2;
  else if (p >= 1 && (s[p - 1] == 'u' || s[p - 1] == 'U' || s[p - 1] == 'L')) start = p - 1;
  return start == 0 || !ident_char(s[start - 1]);
}

// A quote at `i` that opens a character literal (not a digit separator as in 1'000).
bool char_literal_at(std::string_view s, size_t i) {
  if (i == 0 || !ident_char(s[i - 1])) return true;
  size_t start = i;
  while (start > 0 && ident_char(s[start - 1])) --start;
  const std::string_view word = s.substr(start, i - start);
  return word == "L" || word == "u" || word == "U" || word == "u8";
}

size_t utf8_boundary(std::string_view s, size_t pos) {
  while (pos > 0 && pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

struct Unit {
  size_t begin, end;
  bool block;
};

}  // namespace

std::string mask_source(std::string_view s) {
  std::string m(s);
  const size_t n = s.size();
  auto blank = [&](size_t a, size_t b) {
    for (size_t k = a; k < b && k < n; ++k)
      if (m[k] != '\n') m[k] = ' ';
  };
  bool line_start = true;  // only whitespace since the last newline
  size_t i = 0;
  while (i < n) {
    const char c = s[i];
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      size_t e = i;
      while (e < n && s[e] != '\n') {
        if (s[e] == '\\' && e + 1 < n && s[e + 1] == '\n') ++e;  // a continued // comment
        ++e;
      }
      blank(i, e);
      i = e;
      continue;
    }
    if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      const size_t close = s.find("*/", i + 2);
      const size_t e = close == std::string_view::npos ? n : close + 2;
      blank(i, e);
      i = e;
      continue;
    }
    if (c == '#' && line_start) {
      size_t e = i;
      while (e < n && s[e] != '\n') {
        if (s[e] == '\\' && e + 1 < n && s[e + 1] == '\n') ++e;
        else if (s[e] == '/' && e + 1 < n && s[e + 1] == '*') {  // a comment may span lines
          const size_t close = s.find("*/", e + 2);
          e = close == std::string_view::npos ? n : close + 1;
        }
        ++e;
      }
      blank(i, e);
      i = e;
      continue;
    }
    if (c == '"') {
      size_t e;
      if (raw_string_at(s, i)) {
        const size_t open = s.find('(', i + 1);
        if (open == std::string_view::npos || open - i > 17) {
          e = i + 1;
        } else {
          const std::string close = ")" + std::string(s.substr(i + 1, open - i - 1)) + "\"";
          const size_t f = s.find(close, open + 1);
          e = f == std::string_view::npos ? n : f + close.size();
        }
      } else {
        e = i + 1;
        while (e < n && s[e] != '"' && s[e] != '\n') e += (s[e] == '\\' && e + 1 < n) ? 2 : 1;
        if (e < n && s[e] == '"') ++e;
      }
      for (size_t k = i + 1; k + 1 < e; ++k)
        if (m[k] != '\n') m[k] = 'x';
      i = std::max(e, i + 1);
      line_start = false;
      continue;
    }
    if (c == '\'' && char_literal_at(s, i)) {
      size_t e = i + 1;
      while (e < n && s[e] != '\'' && s[e] != '\n') e += (s[e] == '\\' && e + 1 < n) ? 2 : 1;
      if (e < n && s[e] == '\'') ++e;
      for (size_t k = i + 1; k + 1 < e; ++k) m[k] = ' ';
      i = std::max(e, i + 1);
      line_start = false;
      continue;
    }
    if (!std::isspace(static_cast<unsigned char>(c))) line_start = false;
    ++i;
  }
  return m;
}

std::vector<SourceChunk> split_chunks(std::string_view s, const ChunkOptions& opts) {
  const size_t max_chars = std::max<size_t>(opts.max_chars, 64);
  const std::string m = mask_source(s);
  const size_t n = s.size();
  static const std::regex transparent_head(R"((^|[^\w])(inline\s+)?(namespace(\s+[A-Za-z_][\w:]*)?|extern\s*"x*")\s*$)");

  // 1. Top-level units.
  std::vector<Unit> units;
  std::vector<bool> stack;  // true: a transparent block (namespace, extern "C")
  int opaque = 0;
  size_t unit_start = 0;
  auto end_of_line_rest = [&](size_t e) {  // extend over trailing blanks and comments up to the newline
    size_t k = e;
    while (k < n && m[k] != '\n' && std::isspace(static_cast<unsigned char>(m[k]))) ++k;
    if (k < n && m[k] == '\n') return k + 1;
    return e;
  };
  for (size_t i = 0; i < n; ++i) {
    const char c = m[i];
    if (c == '{') {
      bool transparent = false;
      if (opaque == 0) {
        const size_t from = i > unit_start + 200 ? i - 200 : unit_start;
        const std::string head = m.substr(from, i - from);
        transparent = std::regex_search(head, transparent_head);
      }
      stack.push_back(transparent);
      if (!transparent) ++opaque;
      if (transparent) {  // the namespace line joins the next unit; no boundary
      }
    } else if (c == '}') {
      if (stack.empty()) continue;  // unbalanced: ignore
      const bool transparent = stack.back();
      stack.pop_back();
      if (!transparent) {
        --opaque;
        if (opaque == 0) {
          size_t e = i + 1;
          size_t k = e;
          while (k < n && std::isspace(static_cast<unsigned char>(m[k]))) ++k;
          if (k < n && m[k] == ';') e = k + 1;
          e = end_of_line_rest(e);
          units.push_back({unit_start, e, true});
          unit_start = e;
          i = e - 1;
        }
      } else if (opaque == 0) {
        const size_t e = end_of_line_rest(i + 1);
        units.push_back({unit_start, e, false});
        unit_start = e;
        i = e - 1;
      }
    } else if (c == ';' && opaque == 0) {
      const size_t e = end_of_line_rest(i + 1);
      units.push_back({unit_start, e, false});
      unit_start = e;
      i = e - 1;
    }
  }
  if (unit_start < n) units.push_back({unit_start, n, false});

  // 2. Pack units into ranges of at most max_chars.
  std::vector<std::pair<size_t, size_t>> ranges;
  auto emit = [&](size_t b, size_t e) {
    // Cut an oversized range at line ends of the shallowest depth.
    while (e - b > max_chars) {
      int depth = 0, best_depth = 1 << 30;
      size_t best = 0;
      for (size_t k = b; k < b + max_chars; ++k) {
        if (m[k] == '{') ++depth;
        else if (m[k] == '}') depth = std::max(0, depth - 1);
        else if (m[k] == '\n' && k + 1 - b >= max_chars / 8 && depth <= best_depth) {
          best_depth = depth;
          best = k + 1;
        }
      }
      if (best == 0) best = utf8_boundary(s, b + max_chars);
      if (best <= b) best = b + max_chars;
      ranges.emplace_back(b, best);
      b = best;
    }
    if (e > b) ranges.emplace_back(b, e);
  };
  size_t cur = 0;
  bool has_block = false;
  for (const Unit& u : units) {
    if (u.end - cur > max_chars && u.begin > cur) {  // the pending text would overflow: close it first
      emit(cur, u.begin);
      cur = u.begin;
      has_block = false;
    }
    if (u.block) has_block = true;
    if (has_block && u.end - cur >= opts.min_chars) {
      emit(cur, u.end);
      cur = u.end;
      has_block = false;
    }
  }
  if (cur < n) {
    // Trailing text (declarations, closing namespaces, a short last function): with the last chunk
    // when it fits, else a chunk of its own.
    if (!ranges.empty() && ranges.back().second == cur && n - ranges.back().first <= max_chars)
      ranges.back().second = n;
    else
      emit(cur, n);
  }

  // 3. Trim whitespace, drop empty ranges, count lines.
  std::vector<SourceChunk> out;
  size_t line = 1, line_pos = 0;
  auto line_at = [&](size_t pos) {
    for (; line_pos < pos; ++line_pos) line += s[line_pos] == '\n';
    return int(line);
  };
  for (auto [b, e] : ranges) {
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    if (b == e) continue;
    SourceChunk c;
    c.begin = b;
    c.end = e;
    c.first_line = line_at(b);
    c.last_line = line_at(e - 1);
    c.text = std::string(s.substr(b, e - b));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace kforge
