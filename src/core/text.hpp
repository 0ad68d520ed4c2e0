// Small text helpers.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kforge {

std::vector<std::string> split(std::string_view s, char sep);
std::string_view trim(std::string_view s);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
bool ends_with(std::string_view s, std::string_view suffix);
// 12.3 -> "12.3 us", 12345 -> "12.35 ms", seconds -> "1m05s".
std::string human_us(double us);
std::string human_duration(double seconds);
std::string human_bytes(double bytes);
// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s);
// `s` with every byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD, so that
// candidate-controlled text (a source line, a compiler log, program output) can go into JSON.
std::string valid_utf8(std::string_view s);
// UTC "2026-11-30T05:09:20Z".
std::string utc_now_iso8601();

}  // namespace kforge
