#include "core/text.hpp"

#include <cmath>
#include <ctime>

#include "core/error.hpp"

namespace kforge {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  if (trim(s).empty()) return out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.emplace_back(trim(s.substr(start, pos == std::string_view::npos ? s.npos : pos - start)));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string human_us(double us) {
  if (!std::isfinite(us)) return "n/a";
  if (us < 1000.0) return strf("%.2f us", us);
  if (us < 1e6) return strf("%.3f ms", us / 1e3);
  return strf("%.3f s", us / 1e6);
}

std::string human_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  long s = std::lround(seconds);
  if (s < 60) return strf("%lds", s);
  if (s < 3600) return strf("%ldm%02lds", s / 60, s % 60);
  return strf("%ldh%02ldm", s / 3600, (s % 3600) / 60);
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return strf(u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
}

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace kforge
