// A small parallel-for: items handed out in order to a fixed number of threads.
#pragma once
#include <cstddef>
#include <functional>

namespace kforge {

// Runs fn(item, slot) once for every item in [0, n), on `slots` threads (slot 0 .. slots-1, each
// thread one slot, items handed out in order). The first exception thrown by fn is rethrown here
// once every thread has stopped; the other threads finish the item they are on and stop.
void run_on_slots(size_t n, size_t slots, const std::function<void(size_t item, size_t slot)>& fn);

}  // namespace kforge
