#include "core/files.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "core/error.hpp"

namespace kforge {
namespace fs = std::filesystem;

static fs::path folder_of(const std::string& path) {
  fs::path p(path);
  fs::path dir = p.parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

void check_writable(const std::string& path) {
  if (path.empty()) KF_USAGE_ERROR("empty output path");
  fs::path dir = folder_of(path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    KF_USAGE_ERROR("cannot write '%s': folder '%s' does not exist", path.c_str(), dir.c_str());
  if (fs::is_directory(path, ec)) KF_USAGE_ERROR("cannot write '%s': it is a folder", path.c_str());
  // The file is written as NAME.tmp.PID first: leave room for that within the system's limit.
  if (fs::path(path).filename().string().size() > 230)
    KF_USAGE_ERROR("cannot write '%s...': the file name has %zu characters; 230 at most", path.substr(0, 40).c_str(),
                   fs::path(path).filename().string().size());
  if (::access(dir.c_str(), W_OK) != 0)
    KF_USAGE_ERROR("cannot write '%s': folder '%s' is not writable (%s)", path.c_str(), dir.c_str(),
                   std::strerror(errno));
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
    KF_USAGE_ERROR("cannot write '%s': it exists and is not a regular file", path.c_str());
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0)
    KF_USAGE_ERROR("cannot write '%s': %s", path.c_str(), std::strerror(errno));
  // access() says yes to root everywhere, even where nothing can be created (/proc, a read-only
  // mount): create and remove a file beside the target to know.
  std::string probe = (dir / ".kforge-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    const int err = errno;
    const fs::path real = fs::weakly_canonical(fs::absolute(dir, ec), ec);
    KF_USAGE_ERROR("cannot write '%s': no file can be created in folder '%s' (%s)", path.c_str(),
                   real.empty() ? dir.c_str() : real.c_str(), std::strerror(err));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

void write_file_atomic(const std::string& path, const std::string& content) {
  check_writable(path);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) KF_USAGE_ERROR("cannot write '%s': %s", tmp.c_str(), std::strerror(errno));
    out << content;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      KF_RUNTIME_ERROR("writing '%s' failed: %s", tmp.c_str(), std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    KF_RUNTIME_ERROR("cannot move '%s' to '%s': %s", tmp.c_str(), path.c_str(), std::strerror(err));
  }
  note_own_write(path);
}

namespace {

// One spelling per file: absolute and lexically normal (a cache folder given as "dir/" or
// relative lists its files as the same strings the writers used).
std::string own_key(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  return (ec ? fs::path(path) : p).lexically_normal().string();
}

struct OwnWrites {
  std::mutex mutex;
  std::unordered_map<std::string, FileStamp> stamps;
};

OwnWrites& own_writes() {
  static OwnWrites* w = new OwnWrites;  // never destroyed: writers may run during exit
  return *w;
}

}  // namespace

bool stamp_of(const std::string& path, FileStamp& out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  out.ino = uintmax_t(st.st_ino);
  out.size = uintmax_t(st.st_size);
  out.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  out.ctime_ns = int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return true;
}

void note_own_write(const std::string& path) {
  FileStamp s;
  if (!stamp_of(path, s)) return;
  OwnWrites& w = own_writes();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.stamps[own_key(path)] = s;
}

bool is_own_write(const std::string& path, const FileStamp& now) {
  OwnWrites& w = own_writes();
  const std::string key = own_key(path);
  std::lock_guard<std::mutex> lock(w.mutex);
  auto it = w.stamps.find(key);
  return it != w.stamps.end() && it->second == now;
}

bool is_transient_name(const std::string& filename) {
  return filename.find(".tmp.") != std::string::npos || filename.rfind(".kforge-probe-", 0) == 0;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) KF_USAGE_ERROR("cannot read '%s'", path.c_str());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::map<std::string, FileStamp> list_files(const std::string& dir,
                                            const std::function<bool(const std::string&, int)>& skip_dir) {
  std::map<std::string, FileStamp> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string path = it->path().string();
    if (it->is_symlink(ec)) continue;
    if (it->is_directory(ec)) {
      if (skip_dir && skip_dir(path, it.depth())) it.disable_recursion_pending();
      continue;
    }
    if (is_transient_name(it->path().filename().string())) continue;
    FileStamp st;
    if (stamp_of(path, st)) out[path] = st;
  }
  return out;
}

std::pair<std::string, std::string> foreign_change(const std::map<std::string, FileStamp>& before,
                                                   const std::map<std::string, FileStamp>& after,
                                                   const std::function<bool(const std::string&)>& defer,
                                                   std::vector<std::pair<std::string, FileStamp>>* deferred) {
  const auto deferring = [&](const std::string& path, const FileStamp& st) {
    if (!defer || !deferred || !defer(path)) return false;
    deferred->push_back({path, st});
    return true;
  };
  for (const auto& [path, st] : before) {
    auto it = after.find(path);
    if (it == after.end()) return {path, "removed"};
    if (it->second != st && !is_own_write(path, it->second) && !deferring(path, it->second)) return {path, "changed"};
  }
  for (const auto& [path, st] : after)
    if (!before.count(path) && !is_own_write(path, st) && !deferring(path, st)) return {path, "created"};
  return {};
}

}  // namespace kforge
