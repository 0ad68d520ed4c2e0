#include "core/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kforge {

void run_on_slots(size_t n, size_t slots, const std::function<void(size_t, size_t)>& fn) {
  slots = std::max<size_t>(1, std::min(slots, n));
  if (n == 0) return;
  if (slots == 1) {
    for (size_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first;
  std::mutex m;
  std::vector<std::thread> threads;
  for (size_t s = 0; s < slots; ++s)
    threads.emplace_back([&, s] {
      for (size_t i = next++; i < n && !failed; i = next++) {
        try {
          fn(i, s);
        } catch (...) {
          std::lock_guard<std::mutex> lock(m);
          if (!first) first = std::current_exception();
          failed = true;
        }
      }
    });
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace kforge
