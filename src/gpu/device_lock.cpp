#include "gpu/device_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace kforge {

std::string DeviceLock::path_for(const std::string& device_uuid) {
  const char* dir = std::getenv("KFORGE_LOCK_DIR");
  std::string name;
  for (char c : device_uuid) name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  if (name.empty()) name = "unknown";
  return std::string(dir && *dir ? dir : "/tmp") + "/kforge-gpu-" + name + ".lock";
}

bool DeviceLock::acquire(const std::string& device_uuid, double wait_s, std::string& why) {
  release();
  const std::string path = path_for(device_uuid);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    why = "cannot open the GPU lock " + path + ": " + std::strerror(errno);
    return false;
  }
  ::fchmod(fd, 0666);  // other users' kforge take turns on the same GPU (fails harmlessly if not ours)
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      why = "cannot lock " + path + ": " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (elapsed() >= wait_s) {
      char buf[32] = {0};
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      std::string holder = n > 0 ? std::string(buf, size_t(n)) : "unknown";
      while (!holder.empty() && std::isspace(static_cast<unsigned char>(holder.back()))) holder.pop_back();
      why = "the GPU was held by another kforge process (pid " + holder + ", lock " + path + ") for " +
            std::to_string(int(wait_s)) + " s";
      ::close(fd);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  waited_s_ = elapsed();
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
  fd_ = fd;
  return true;
}

void DeviceLock::release() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace kforge
