#include "core/files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) KF_USAGE_ERROR("cannot read '%s'", path.c_str());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace kforge
