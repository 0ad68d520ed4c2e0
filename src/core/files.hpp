// Files that are either written whole or not at all.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kforge {

// Throws a usage error unless a file can be created at `path` (its folder exists and is writable).
// Creates nothing that stays behind. Called before long work so that it fails early.
void check_writable(const std::string& path);
// Writes `content` to a temporary file beside `path`, then renames it over `path`.
void write_file_atomic(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);

// What a regular file looks like from outside: its inode, size, modification time and status
// change time. The last cannot be set back (utimensat sets the others), so a rewrite that keeps
// size and mtime still shows.
struct FileStamp {
  uintmax_t ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileStamp& o) const {
    return ino == o.ino && size == o.size && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
  }
  bool operator!=(const FileStamp& o) const { return !(*this == o); }
};
// The stamp of `path` now; false when it is not a regular file.
bool stamp_of(const std::string& path, FileStamp& out);

// kforge's own writes in this process. write_file_atomic and the compile cache's publishing note
// each file as it looks right after the write, so that a check that watches a folder for other
// writers (the HGEMM judge's cache check, while a candidate runs) can tell kforge's concurrent
// work (compiles ahead of the queue in `serve`) from a candidate's. Thread-safe; one entry per
// path, the latest write.
void note_own_write(const std::string& path);
// Whether `path` now looks as kforge's latest write left it.
bool is_own_write(const std::string& path, const FileStamp& now);
// A name kforge only ever uses in passing and never reads back: write_file_atomic's NAME.tmp.PID
// and check_writable's .kforge-probe-XXXXXX.
bool is_transient_name(const std::string& filename);

// The stamp of every regular file under `dir` (recursively; symbolic links not followed), less
// transient names and the folders `skip_dir(path, depth)` says to leave out.
std::map<std::string, FileStamp> list_files(const std::string& dir,
                                            const std::function<bool(const std::string&, int)>& skip_dir = {});
// A file that changed, appeared or went between two listings and not by kforge's own hand
// (note_own_write): {path, "changed" | "created" | "removed"}; empty strings when there is none.
// `defer(path)`: a file created or changed there is not decided here but added to `*deferred`
// (with its stamp now) for a process that knows more to decide (see the HGEMM judge).
std::pair<std::string, std::string> foreign_change(
    const std::map<std::string, FileStamp>& before, const std::map<std::string, FileStamp>& after,
    const std::function<bool(const std::string&)>& defer = {},
    std::vector<std::pair<std::string, FileStamp>>* deferred = nullptr);

}  // namespace kforge
