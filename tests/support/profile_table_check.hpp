// Reads a profile table back out of a rendered prompt and compares it, row by row and cell by
// cell, with the profile it was made from (eval/profile.hpp's render_profile_table): the rows
// are the longest kernels first, at most `max_rows` of them, then one line for the rest; each
// cell holds its kernel's stored value (rounded as the table rounds it) or "-" where the profile
// has none. Used by the CPU tests (fixture metrics) and the GPU tests (ncu's metrics). The
// parsing here is independent of the renderer, so a renderer that drops, reorders or misprints a
// value fails it.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kforge::test {

struct ProfileTableRow {
  std::vector<std::string> cells;  // kernel, time, SM, DRAM, tensor, occupancy, regs, smem, L1, L2, stalls
};

// The table's rows from the header at `at` (the line "| kernel | time | ..."), and the line after
// them (the "(N more kernels, ...)" note, or "" when the table ends the text or a blank follows).
inline std::vector<ProfileTableRow> read_profile_table(const std::string& text, size_t at, std::string* after = nullptr) {
  std::vector<ProfileTableRow> rows;
  size_t pos = at;
  int line_no = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("| ", 0) != 0) {
      if (after) {
        // The note comes after one blank line.
        std::string note = line;
        if (note.empty() && pos < text.size()) {
          const size_t e2 = std::min(text.find('\n', pos), text.size());
          note = text.substr(pos, e2 - pos);
        }
        *after = note.rfind("(", 0) == 0 ? note : "";
      }
      break;
    }
    if (line_no++ < 2) continue;  // the header and the alignment row
    ProfileTableRow r;
    std::string body = line.substr(2);                        // after "| "
    if (body.size() >= 2 && body.compare(body.size() - 2, 2, " |") == 0) body.resize(body.size() - 2);
    size_t s = 0;
    while (true) {
      const size_t bar = body.find(" | ", s);
      r.cells.push_back(body.substr(s, bar == std::string::npos ? std::string::npos : bar - s));
      if (bar == std::string::npos) break;
      s = bar + 3;
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

// "1.235 ms", "38.91 us", "1.500 s" -> microseconds (NaN when it is none of them).
inline double table_time_us(const std::string& cell) {
  double v = 0;
  char unit[8] = {0};
  if (std::sscanf(cell.c_str(), "%lf %7s", &v, unit) != 2) return std::nan("");
  const std::string u = unit;
  if (u == "us") return v;
  if (u == "ms") return v * 1e3;
  if (u == "s") return v * 1e6;
  return std::nan("");
}

// "" when the table at `at` shows `profile` as documented, else what differs (the first mismatch).
inline std::string check_profile_table(const std::string& text, size_t at, const nlohmann::json& profile,
                                       size_t max_rows = 4) {
  if (at == std::string::npos) return "no table";
  if (!profile.contains("kernels") || !profile["kernels"].is_array() || profile["kernels"].empty())
    return "the profile has no kernels";
  std::vector<nlohmann::json> ks(profile["kernels"].begin(), profile["kernels"].end());
  std::stable_sort(ks.begin(), ks.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a.value("duration_us", 0.0) > b.value("duration_us", 0.0);
  });
  std::string after;
  const std::vector<ProfileTableRow> rows = read_profile_table(text, at, &after);
  const size_t want = std::min(ks.size(), max_rows);
  if (rows.size() != want) return "rows: " + std::to_string(rows.size()) + ", expected " + std::to_string(want);
  auto fixed0 = [](const nlohmann::json& k, const char* f) -> std::string {
    if (!k.contains(f) || !k[f].is_number()) return "-";
    char b[64];
    std::snprintf(b, sizeof b, "%.0f", k[f].get<double>());
    return b;
  };
  static const char* const kPct[] = {"sm_throughput_pct", "dram_throughput_pct", "tensor_pipe_pct",
                                     "achieved_occupancy_pct", "registers_per_thread"};
  for (size_t i = 0; i < want; ++i) {
    const nlohmann::json& k = ks[i];
    const std::vector<std::string>& c = rows[i].cells;
    const std::string where = "row " + std::to_string(i + 1) + " (" + k.value("name", std::string("?")) + "): ";
    if (c.size() != 11) return where + std::to_string(c.size()) + " cells, expected 11";
    // The kernel: its stored name, shortened (no "void ", no parameter list, at most 48 characters).
    std::string name = c[0];
    if (name.size() > 3 && name.compare(name.size() - 3, 3, "...") == 0) name.resize(name.size() - 3);
    if (name.empty() || k.value("name", std::string()).find(name) == std::string::npos)
      return where + "kernel cell '" + c[0] + "' is not part of the stored name";
    // The time, to the table's four significant digits.
    const double us = k.value("duration_us", std::nan(""));
    const double shown = table_time_us(c[1]);
    if (!(std::fabs(shown - us) <= 0.0006 * us + 0.006)) return where + "time '" + c[1] + "' for " + std::to_string(us) + " us";
    for (int j = 0; j < 5; ++j)
      if (c[2 + j] != fixed0(k, kPct[j])) return where + kPct[j] + " cell '" + c[2 + j] + "', expected '" + fixed0(k, kPct[j]) + "'";
    // Shared memory per block in KiB, one decimal.
    if (k.contains("shared_mem_per_block_bytes")) {
      double kib = 0;
      if (std::sscanf(c[7].c_str(), "%lf KiB", &kib) != 1 ||
          std::fabs(kib - k["shared_mem_per_block_bytes"].get<double>() / 1024.0) > 0.051)
        return where + "smem cell '" + c[7] + "'";
    } else if (c[7] != "-") {
      return where + "smem cell '" + c[7] + "' for a kernel without the metric";
    }
    if (c[8] != fixed0(k, "l1_hit_rate_pct")) return where + "L1 cell '" + c[8] + "'";
    if (c[9] != fixed0(k, "l2_hit_rate_pct")) return where + "L2 cell '" + c[9] + "'";
    // The stalls: each stored reason with its share, in the stored order.
    if (!k.contains("stalls") || k["stalls"].empty()) {
      if (c[10] != "-") return where + "stalls cell '" + c[10] + "' for a kernel without stalls";
    } else {
      size_t from = 0;
      for (const auto& s : k["stalls"]) {
        char b[128];
        std::snprintf(b, sizeof b, "%s %.0f%%", s.value("reason", std::string("?")).c_str(), s.value("share_pct", 0.0));
        const size_t f = c[10].find(b, from);
        if (f == std::string::npos) return where + "stalls cell '" + c[10] + "' lacks '" + b + "' in order";
        from = f + 1;
      }
    }
  }
  if (ks.size() > want) {
    const std::string n = "(" + std::to_string(ks.size() - want) + " more kernel";
    if (after.rfind(n, 0) != 0) return "the note after the rows is '" + after + "', expected it to start '" + n + "'";
  } else if (!after.empty()) {
    return "a note '" + after + "' after a table that shows every kernel";
  }
  // Longest first.
  for (size_t i = 1; i < rows.size(); ++i)
    if (table_time_us(rows[i].cells[1]) > table_time_us(rows[i - 1].cells[1]) * 1.0006)
      return "row " + std::to_string(i + 1) + " is longer than the row above it";
  return "";
}

}  // namespace kforge::test
