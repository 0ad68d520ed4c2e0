// Several GPUs: the --devices list, the worker's pinning environment, and the parallel slots that
// judge a batch (tests/unit/test_torch_tasks.cpp runs a whole batch on two pinned stand-in workers).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/subprocess.hpp"
#include "eval/devices.hpp"
#include "gpu/device.hpp"
#include "gpu/device_lock.hpp"
#include "gpu/sensors.hpp"

namespace kforge {
namespace {

// Runs f and says whether it threw a usage error (a bad flag value), not some other error.
template <class F>
bool usage_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind() == ErrorKind::kUsage;
  }
  return false;
}

TEST(Devices, ListsAreParsedAndBadOnesAreUsageErrors) {
  EXPECT_TRUE(parse_devices("").empty());
  EXPECT_TRUE(parse_devices("  ").empty());
  for (const char* bad : {"a", "0,,1", "-1", "1.5", "0,0", "0, 0", "2000", "0;1"})
    EXPECT_TRUE(usage_error([&] { parse_devices(bad); })) << bad;
  if (gpu_unavailable_reason()) {
    // No GPU here: indices cannot be checked against a count, "all" has nothing to name.
    EXPECT_EQ(parse_devices("0,1"), (std::vector<int>{0, 1}));
    EXPECT_EQ(parse_devices(" 3 , 1 "), (std::vector<int>{3, 1}));
    EXPECT_TRUE(usage_error([] { parse_devices("all"); }));
  } else {
    EXPECT_EQ(parse_devices("0"), (std::vector<int>{0}));
    EXPECT_FALSE(parse_devices("all").empty());
    EXPECT_TRUE(usage_error([] { parse_devices("1000"); }));
  }
}

TEST(Devices, WorkersArePinnedThroughKforgesOwnVisibleDevices) {
  const char* saved = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string keep = saved ? saved : "";
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(device_env(2), "CUDA_VISIBLE_DEVICES=2");
  ::setenv("CUDA_VISIBLE_DEVICES", "4, 6,GPU-abc", 1);
  EXPECT_EQ(device_env(0), "CUDA_VISIBLE_DEVICES=4");
  EXPECT_EQ(device_env(1), "CUDA_VISIBLE_DEVICES=6");
  EXPECT_EQ(device_env(2), "CUDA_VISIBLE_DEVICES=GPU-abc");
  if (saved)
    ::setenv("CUDA_VISIBLE_DEVICES", keep.c_str(), 1);
  else
    ::unsetenv("CUDA_VISIBLE_DEVICES");
}

TEST(Devices, SlotsTakeEveryItemOnceAndRunTogether) {
  constexpr size_t kItems = 9;
  std::mutex m;
  std::multiset<size_t> seen;
  std::set<size_t> slots;
  std::atomic<int> running{0}, most{0};
  run_on_slots(kItems, 3, [&](size_t item, size_t slot) {
    const int now = ++running;
    int prev = most.load();
    while (now > prev && !most.compare_exchange_weak(prev, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    --running;
    std::lock_guard<std::mutex> lock(m);
    seen.insert(item);
    slots.insert(slot);
  });
  EXPECT_EQ(seen.size(), kItems);
  for (size_t i = 0; i < kItems; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
  EXPECT_EQ(slots, (std::set<size_t>{0, 1, 2}));
  EXPECT_GE(most.load(), 2);  // slots ran at the same time
  // More slots than items, and no items.
  std::atomic<int> calls{0};
  run_on_slots(2, 8, [&](size_t, size_t slot) {
    EXPECT_LT(slot, 2u);
    ++calls;
  });
  EXPECT_EQ(calls.load(), 2);
  run_on_slots(0, 4, [&](size_t, size_t) { ADD_FAILURE() << "no item to run"; });
}

TEST(Devices, AnExceptionInOneSlotReachesTheCaller) {
  std::atomic<int> calls{0};
  EXPECT_THROW(run_on_slots(100, 2,
                            [&](size_t item, size_t) {
                              ++calls;
                              if (item == 3) throw std::runtime_error("item 3 failed");
                              // Items take a while, so that the other slot cannot finish all of them in
                              // the moment the failure takes to be seen (it did once, on CI's 2 cores).
                              std::this_thread::sleep_for(std::chrono::milliseconds(2));
                            }),
               std::runtime_error);
  EXPECT_LT(calls.load(), 100);  // the others stopped
}

// A lock folder of its own for a test ($KFORGE_LOCK_DIR), removed afterwards.
struct ScopedLockDir {
  std::string path;
  ScopedLockDir() {
    char dir[] = "/tmp/kforge-lock-test-XXXXXX";
    if (::mkdtemp(dir) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = dir;
    ::setenv("KFORGE_LOCK_DIR", dir, 1);
  }
  ~ScopedLockDir() {
    ::unsetenv("KFORGE_LOCK_DIR");
    std::filesystem::remove_all(path);
  }
};

// Two judges of one device take turns: the second waits, then gives up naming the holder, and
// gets the lock once the first lets go (flock: two opens of one file conflict even in one process).
TEST(DeviceLock, OneHolderPerDeviceTheOtherWaitsThenGetsIt) {
  const ScopedLockDir lock_dir;
  const std::string dir = lock_dir.path;
  DeviceLock a, b, other_gpu;
  std::string why;
  ASSERT_TRUE(a.acquire("GPU-1234-abcd", 1, why)) << why;
  EXPECT_FALSE(b.acquire("GPU-1234-abcd", 0.05, why));
  EXPECT_NE(why.find("held by another kforge process (pid " + std::to_string(::getpid())), std::string::npos) << why;
  EXPECT_FALSE(b.held());
  EXPECT_TRUE(other_gpu.acquire("GPU-5678-ef01", 0.05, why)) << why;  // another device is not held
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    a.release();
  });
  EXPECT_TRUE(b.acquire("GPU-1234-abcd", 5, why)) << why;
  EXPECT_GE(b.waited_s(), 0.05);
  t.join();
  EXPECT_EQ(DeviceLock::path_for("GPU-1234-abcd"), dir + "/kforge-gpu-GPU-1234-abcd.lock");
  EXPECT_EQ(DeviceLock::path_for("../x"), dir + "/kforge-gpu-___x.lock");  // no path from a name
  b.release();
  other_gpu.release();
  // An unusable lock folder is said so, not taken for a busy GPU.
  ::setenv("KFORGE_LOCK_DIR", "/nonexistent-kforge-dir", 1);
  DeviceLock c;
  EXPECT_FALSE(c.acquire("GPU-1234-abcd", 0.05, why));
  EXPECT_NE(why.find("cannot open the GPU lock"), std::string::npos) << why;
}

// The PyTorch judge (python/kforge_worker/sandbox.py gpu_lock) and the HGEMM judge take turns on
// one lock file: a GPU held by one kind of judge is waited for by the other.
TEST(DeviceLock, TheHgemmAndPyTorchJudgesShareOneLock) {
  const ScopedLockDir lock_dir;
  const std::string flag = lock_dir.path + "/held";
  const std::string py = "import sys; sys.path.insert(0, '" + std::string(KFORGE_SOURCE_DIR) +
                         "/python'); from kforge_worker import sandbox; fd, w, why = sandbox.gpu_lock('GPU-1234-abcd', 5); "
                         "open('" + flag + "', 'w').write(why or 'ok'); sys.stdin.read()";
  FILE* holder = ::popen(("python3 -c \"" + py + "\"").c_str(), "w");
  ASSERT_NE(holder, nullptr);
  for (int i = 0; i < 1000 && !std::filesystem::exists(flag); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(flag)) << "the Python side never took the lock";
  std::string why;
  DeviceLock c;
  EXPECT_FALSE(c.acquire("GPU-1234-abcd", 0.1, why));
  EXPECT_NE(why.find("held by another kforge process"), std::string::npos) << why;
  ::pclose(holder);  // Python exits: its lock goes with it
  ASSERT_TRUE(c.acquire("GPU-1234-abcd", 5, why)) << why;
  // The other way round: the Python side waits, says so while waiting, and gives up naming the holder.
  const ProcessResult r = run_process(
      {"python3", "-c",
       "import sys; sys.path.insert(0, '" + std::string(KFORGE_SOURCE_DIR) +
           "/python'); from kforge_worker import sandbox; ticks = []; "
           "fd, w, why = sandbox.gpu_lock('GPU-1234-abcd', 0.35, tick=lambda: ticks.append(1), tick_s=0.1); "
           "print(fd is None, len(ticks) >= 2, why)"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("True True the GPU was held by another kforge process (pid " + std::to_string(::getpid()), 0), 0u)
      << r.out << r.err;
  c.release();
}

}  // namespace
}  // namespace kforge

// NVML's reader: never throws, and says why where it cannot read (this machine may have no driver).
TEST(GpuSensors, ReadsOrSaysWhyNot) {
  EXPECT_EQ(kforge::clock_reasons_text(0), "");
  EXPECT_EQ(kforge::clock_reasons_text(0x4 | 0x40), "power cap, hardware thermal");
  kforge::GpuSensors s(0);
  const kforge::GpuReading r = s.read(true);
  if (s.available()) {
    EXPECT_TRUE(r.ok);
    EXPECT_GT(r.sm_mhz, 0u);
    EXPECT_GT(r.temp_c, 0u);
  } else {
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(s.why_not().empty());
  }
}
