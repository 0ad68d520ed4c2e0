// One GPU, one measurement at a time: an exclusive lock per physical device (by UUID), held by
// whatever times or checks work on that GPU (a judge from verification to its last timed batch).
// Two judges of one kforge on one device (`--devices 0,0`), or two kforge processes on one machine,
// then take turns on the GPU instead of timing each other's kernels; their compiles still overlap.
// The lock is flock(2) on a file under $KFORGE_LOCK_DIR (default /tmp): released when its holder
// exits, however it exits, and never inherited by a child (close-on-exec).
#pragma once

#include <string>

namespace kforge {

class DeviceLock {
 public:
  DeviceLock() = default;
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;
  ~DeviceLock() { release(); }

  // Waits up to `wait_s` seconds. False when another process held it throughout (`why` names the
  // holder's pid as it wrote it) or the lock file cannot be opened (`why` says so; the caller
  // decides whether to go on unlocked).
  bool acquire(const std::string& device_uuid, double wait_s, std::string& why);
  void release();
  bool held() const { return fd_ >= 0; }
  double waited_s() const { return waited_s_; }
  static std::string path_for(const std::string& device_uuid);

 private:
  int fd_ = -1;
  double waited_s_ = 0;
};

}  // namespace kforge
