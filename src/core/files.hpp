// Files that are either written whole or not at all.
#pragma once
#include <string>

namespace kforge {

// Throws a usage error unless a file can be created at `path` (its folder exists and is writable).
// Creates nothing that stays behind. Called before long work so that it fails early.
void check_writable(const std::string& path);
// Writes `content` to a temporary file beside `path`, then renames it over `path`.
void write_file_atomic(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);

}  // namespace kforge
