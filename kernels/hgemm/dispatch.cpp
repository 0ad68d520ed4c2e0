#include "kernels/hgemm/dispatch.hpp"

#include <cstdio>
#include <cstring>

namespace kforge::kernels {
namespace {

const char* layout_name(kforge_hgemm_layout l) { return l == KFORGE_HGEMM_TN ? "tn" : "nn"; }
const char* acc_name(kforge_hgemm_acc a) { return a == KFORGE_HGEMM_ACC_F16 ? "f16" : "f32"; }

const KernelVariant* named(const char* family, const kforge_hgemm_problem& p, const char* rest) {
  char name[128];
  std::snprintf(name, sizeof name, "%s_%s_%s_%s", family, layout_name(p.layout), acc_name(p.acc), rest);
  const KernelVariant* v = find_variant(name);
  return v && v->supports(&p) ? v : nullptr;
}

int64_t tiles(const kforge_hgemm_problem& p, int bm, int bn) { return ((p.m + bm - 1) / bm) * ((p.n + bn - 1) / bn); }

}  // namespace

const KernelVariant* table_choice(const DispatchEntry* table, size_t n, const kforge_hgemm_problem& p) {
  for (size_t i = 0; i < n; ++i) {
    const DispatchEntry& e = table[i];
    if (e.m == p.m && e.n == p.n && e.k == p.k && e.layout == p.layout && e.acc == p.acc) {
      const KernelVariant* v = find_variant(e.variant);
      if (v && v->supports(&p)) return v;
    }
  }
  return nullptr;
}

const KernelVariant* heuristic_choice(const kforge_hgemm_problem& p, int sms, int cc) {
  if (p.m < 1 || p.n < 1 || p.k < 1) return nullptr;
  const KernelVariant* v = nullptr;
  if (cc == 90) {
    const bool f32 = p.acc == KFORGE_HGEMM_ACC_F32;
    if (!f32) {
      if (tiles(p, 128, 256) >= sms) v = named("sm90", p, "128x256_s4_c2_k1_g8_true");
      else if (tiles(p, 128, 128) >= sms / 2) v = named("sm90", p, "128x128_s4_c2_k1_g8_false");
      else if (tiles(p, 64, 64) * 4 <= sms && p.k >= 1024) v = named("sm90", p, "64x64_s4_c1_k4_g0_false");
      else v = named("sm90", p, "64x64_s6_c1_k1_g0_false");
    } else if (tiles(p, 128, 256) >= 2 * sms) {
      v = named("sm90", p, "128x256_s4_c2_k1_g8_true");
    } else if (tiles(p, 128, 128) >= sms) {
      v = named("sm90", p, "128x128_s6_c2_k1_g8_true");
    } else if (tiles(p, 128, 128) * 2 <= sms && p.k >= 2048) {
      // Too few output tiles to fill the SMs and a long K: split K across a cluster.
      const int64_t t = tiles(p, 64, 64);
      v = t * 16 <= sms ? named("sm90", p, "64x64_s8_c1_k16_g0_false")
          : t * 8 <= sms ? named("sm90", p, "64x64_s8_c1_k8_g0_false")
          : t * 4 <= sms ? named("sm90", p, "64x64_s4_c1_k4_g0_false")
                         : named("sm90", p, "64x64_s4_c1_k2_g0_false");
    } else if (tiles(p, 128, 128) >= sms / 2) {
      v = named("sm90", p, "128x128_s4_c2_k1_g8_false");
    } else if (tiles(p, 64, 128) >= sms / 2) {
      v = named("sm90", p, "64x128_s6_c1_k1_g8_false");
    } else {
      v = named("sm90", p, "64x64_s6_c1_k1_g0_false");
    }
  }
  if (v) return v;
  // Other GPUs, and shapes the TMA kernels cannot take (K or N not a multiple of 8): the sm_80 family.
  if (cc >= 80) {
    const char* rest = tiles(p, 128, 128) >= sms ? "128x128x32_w2x2_s4" : tiles(p, 64, 64) >= sms / 2 ? "64x64x32_w2x2_s4" : "32x64x64_w1x2_s4";
    if (p.acc == KFORGE_HGEMM_ACC_F16) rest = "64x64x32_w2x2_s4";
    if ((v = named("sm80", p, rest))) return v;
  }
  // Anything else (another GPU, unaligned sizes): the first variant that supports the problem,
  // in table order (the sm_80 family accepts every shape).
  size_t count = 0;
  const KernelVariant* all = variants(&count);
  for (size_t i = 0; i < count; ++i) {
    if (all[i].config.family == Family::kSm90 && cc != 90) continue;
    if (all[i].supports(&p)) return &all[i];
  }
  return nullptr;
}

const KernelVariant* choose_cached(const DispatchEntry* table, size_t n, const kforge_hgemm_problem& p, int sms,
                                   int cc) {
  struct Slot {
    const DispatchEntry* table = nullptr;
    size_t n = 0;
    int64_t m = 0, nn = 0, k = 0;
    kforge_hgemm_layout layout{};
    kforge_hgemm_acc acc{};
    int sms = 0, cc = 0;
    const KernelVariant* v = nullptr;
  };
  constexpr int kSlots = 16;
  thread_local Slot slots[kSlots];
  thread_local int next = 0;
  for (const Slot& s : slots)
    if (s.v && s.table == table && s.n == n && s.m == p.m && s.nn == p.n && s.k == p.k && s.layout == p.layout &&
        s.acc == p.acc && s.sms == sms && s.cc == cc)
      return s.v;
  const KernelVariant* v = choose(table, n, p, sms, cc);
  if (v) {
    slots[next] = {table, n, p.m, p.n, p.k, p.layout, p.acc, sms, cc, v};
    next = (next + 1) % kSlots;
  }
  return v;
}

const KernelVariant* choose(const DispatchEntry* table, size_t n, const kforge_hgemm_problem& p, int sms, int cc) {
  if (const KernelVariant* v = table_choice(table, n, p)) {
    if (v->config.family != Family::kSm90 || cc == 90) return v;
  }
  return heuristic_choice(p, sms, cc);
}

}  // namespace kforge::kernels
