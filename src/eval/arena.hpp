// The arena: the one device allocation a judge shares with an executor (CUDA IPC), holding every
// buffer a candidate may touch and nothing else. The judge's references, counters and private
// copies live in allocations of their own, which the executor cannot map.
//
//   [slot 0][slot 1]...[slot S-1][guard][workspace][guard]
//   slot = [guard][A][guard][B][guard][C][guard]        each part 256-byte aligned
//
// Guards hold 0xA5; a batch of calls uses one slot per call (fresh inputs and a poisoned output
// in every one), so no two calls of a batch see the same pointers or the same contents.
#pragma once
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace kforge {

struct ArenaLayout {
  uint64_t slots = 0, slot_bytes = 0;
  uint64_t a_off = 0, b_off = 0, c_off = 0;  // within a slot
  uint64_t a_bytes = 0, b_bytes = 0, c_bytes = 0;
  uint64_t ws_off = 0, ws_bytes = 0;  // from the arena's start; ws_bytes as the candidate asked
  uint64_t total = 0;
  int64_t m = 0, n = 0, k = 0;
  int layout = 0, acc = 0;  // kforge_hgemm_layout, kforge_hgemm_acc
  int dtype = 0;            // kforge_hgemm_dtype: 0 fp16, 1 bf16 (A, B and C are 2-byte elements either way)
};

inline constexpr uint64_t kArenaGuard = 4096;
inline constexpr unsigned char kArenaGuardByte = 0xA5;

#ifdef __CUDACC__
#define KFORGE_HD __host__ __device__
#else
#define KFORGE_HD
#endif
KFORGE_HD inline uint64_t arena_round(uint64_t x, uint64_t to = 256) { return (x + to - 1) / to * to; }

inline ArenaLayout make_arena_layout(int64_t m, int64_t n, int64_t k, int layout, int acc, uint64_t slots,
                                     uint64_t ws_bytes, int dtype = 0) {
  ArenaLayout l;
  l.m = m, l.n = n, l.k = k, l.layout = layout, l.acc = acc, l.slots = slots, l.dtype = dtype;
  l.a_bytes = uint64_t(m) * uint64_t(k) * 2;
  l.b_bytes = uint64_t(k) * uint64_t(n) * 2;
  l.c_bytes = uint64_t(m) * uint64_t(n) * 2;
  l.a_off = kArenaGuard;
  l.b_off = l.a_off + arena_round(l.a_bytes) + kArenaGuard;
  l.c_off = l.b_off + arena_round(l.b_bytes) + kArenaGuard;
  l.slot_bytes = l.c_off + arena_round(l.c_bytes) + kArenaGuard;
  l.ws_bytes = ws_bytes;
  l.ws_off = slots * l.slot_bytes + kArenaGuard;
  l.total = arena_round(l.ws_off + arena_round(ws_bytes) + kArenaGuard, uint64_t(2) << 20);
  return l;
}

inline nlohmann::json to_json(const ArenaLayout& l) {
  return {{"slots", l.slots}, {"slot_bytes", l.slot_bytes}, {"a_off", l.a_off}, {"b_off", l.b_off},
          {"c_off", l.c_off}, {"ws_off", l.ws_off},         {"ws_bytes", l.ws_bytes}, {"total", l.total},
          {"m", l.m},         {"n", l.n},                   {"k", l.k},             {"layout", l.layout},
          {"acc", l.acc},     {"dtype", l.dtype}};
}

inline ArenaLayout arena_layout_from_json(const nlohmann::json& j) {
  ArenaLayout l = make_arena_layout(j.at("m").get<int64_t>(), j.at("n").get<int64_t>(), j.at("k").get<int64_t>(),
                                    j.at("layout").get<int>(), j.at("acc").get<int>(), j.at("slots").get<uint64_t>(),
                                    j.at("ws_bytes").get<uint64_t>(), j.value("dtype", 0));
  return l;
}

}  // namespace kforge
