#include "kernels/hgemm/dispatch.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace kforge::kernels {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

uint64_t problem_hash(int64_t m, int64_t n, int64_t k, kforge_hgemm_layout l, kforge_hgemm_acc a, kforge_hgemm_dtype t) {
  uint64_t h = 0;
  for (uint64_t v : {uint64_t(m), uint64_t(n), uint64_t(k), uint64_t(l), uint64_t(a) | uint64_t(t) << 8}) h = mix(h, v);
  return h;
}

bool valid(const kforge_hgemm_problem& p) { return p.m >= 1 && p.n >= 1 && p.k >= 1; }

constexpr size_t kMaxVariants = 512;

// Whether `t` is a split-K twin of `c`: the same sm_90a kernel (family, tile, consumers, schedule,
// multicast, pad) with a larger cluster split-K. The pipeline depth and rasterisation may differ:
// the split rows were declared with their own (64x64 unsplit is s6, its split twins s4 and s8;
// 128x64 and 128x128 unsplit are g8, their split twins g0), neither of which the cost model
// prices, and a decode shape has a single row of tiles.
bool split_twin(const KernelConfig& c, const KernelConfig& t) {
  return c.family == Family::kSm90 && t.family == Family::kSm90 && t.splitk > c.splitk && c.bm == t.bm && c.bn == t.bn &&
         c.bk == t.bk && c.consumers == t.consumers && c.persistent == t.persistent && c.pingpong == t.pingpong &&
         c.multicast == t.multicast && c.pad == t.pad && c.stream_k == t.stream_k && c.swap_ab == t.swap_ab && !c.splitk_auto && !t.splitk_auto &&
         c.max_m == t.max_m &&
         c.max_n == t.max_n && c.warps_n == t.warps_n && c.max_k == t.max_k;
}

std::atomic<uint64_t> g_next_dispatcher_id{1};

// The KFORGE_HGEMM_* switches that resolve() applies to the caller's DeviceModel (for A/B runs;
// README.md and dispatch.hpp name them), read once. A number outside its range counts as unset.
struct ModelSwitches {
  bool split_twins = !env_is("KFORGE_HGEMM_SPLIT_TWINS", "0");  // "0": the flat 5 us split-K charge
  bool decode_tail = !env_is("KFORGE_HGEMM_DECODE_TAIL", "0");
  bool whole_k = !env_is("KFORGE_HGEMM_WHOLEK", "0");
  bool stream_k = env_is("KFORGE_HGEMM_STREAMK", "1");
  bool swap = !env_is("KFORGE_HGEMM_SWAP", "0");
  bool decode_siblings = !env_is("KFORGE_HGEMM_DECODE_SIBLINGS", "0");
  bool decode_uniform = !env_is("KFORGE_HGEMM_DECODE_UNIFORM", "0");
  bool decode_kstep = !env_is("KFORGE_HGEMM_DECODE_KSTEP", "0");  // "0": no K-tile floor
  bool gemv = !env_is("KFORGE_HGEMM_GEMV", "0");
  bool gemv_xregs = !env_is("KFORGE_HGEMM_GEMVX", "0");
  bool gemv_xsmem = env_is("KFORGE_HGEMM_GEMVXS", "1");
  bool short_k_vote = !env_is("KFORGE_HGEMM_SHORTK_VOTE", "0");
  // -1: the DeviceModel's own.
  double decode_overlap = env_number("KFORGE_HGEMM_DECODE_OVERLAP", 0.0, 1.0, -1.0);
  double decode_wave_us = env_number("KFORGE_HGEMM_DECODE_WAVE_US", 0.0, 100.0, -1.0);
  double decode_slice_us = env_number("KFORGE_HGEMM_DECODE_SLICE_US", 0.0, 100.0, -1.0);

  void apply(DeviceModel& d) const {
    if (!split_twins) d.flat_split_charge = true;
    if (!decode_tail) d.decode_tail = false;
    if (!whole_k) d.whole_k = false;
    if (stream_k) d.stream_k = true;
    if (!swap) d.swap_ab = false;
    if (!decode_siblings) d.decode_siblings = false;
    if (!decode_uniform) d.decode_uniform = false;
    if (!decode_kstep) d.decode_kstep_us = d.decode_fill_us = 0;
    if (!gemv) d.gemv = false;
    if (!gemv_xregs) d.gemv_xregs = false;
    if (gemv_xsmem) d.gemv_xsmem = true;
    if (!short_k_vote) d.short_k_vote = false;
    if (decode_overlap >= 0) d.decode_overlap = decode_overlap;
    if (decode_wave_us >= 0) d.decode_wave_us = decode_wave_us;
    if (decode_slice_us >= 0) d.decode_slice_us = decode_slice_us;
  }
};
const ModelSwitches& switches() {
  static const ModelSwitches s;
  return s;
}

}  // namespace

double neighbour_radius() {
  static const double r = env_number("KFORGE_HGEMM_NN_RADIUS", 0.0, 99.0, 0.35);
  return r;
}

bool neighbour_calibration() {
  static const bool on = !env_is("KFORGE_HGEMM_NN_CALIBRATE", "0");
  return on;
}

bool neighbour_siblings() {
  static const bool on = !env_is("KFORGE_HGEMM_NN_SIBLINGS", "0");
  return on;
}

bool neighbour_split_twins() { return switches().split_twins; }

bool runs_on(const KernelVariant& v, int cc) { return v.config.family != Family::kSm90 || cc == 90; }

// The largest value of a KernelConfig field over every compiled variant (0 without any).
// The largest `field` over the compiled variants (those `keep` accepts, when given).
static int64_t largest_over_variants(int KernelConfig::*field, bool (*keep)(const KernelConfig&) = nullptr) {
  size_t count = 0;
  const KernelVariant* all = variants(&count);
  int64_t l = 0;
  for (size_t i = 0; i < count; ++i)
    if (!keep || keep(all[i].config)) l = std::max<int64_t>(l, all[i].config.*field);
  return l;
}

int64_t small_m_limit() {
  static const int64_t limit = largest_over_variants(&KernelConfig::max_m);
  return limit;
}

int64_t small_n_limit() {
  static const int64_t limit = largest_over_variants(&KernelConfig::max_n);
  return limit;
}

int64_t small_k_limit() {
  static const int64_t limit = largest_over_variants(&KernelConfig::max_k);
  return limit;
}

bool small_m_regime(int64_t m) { return m <= small_m_limit(); }
bool stream_k_enabled() { return switches().stream_k; }

// The largest K the outer-product variants of the small-K family serve (8): up to it, the whole-K
// variants stay out (the outer products were measured there, sixteenth session).
int64_t outer_k_limit() {
  static const int64_t limit =
      largest_over_variants(&KernelConfig::max_k, [](const KernelConfig& c) { return !c.whole_k; });
  return limit;
}

// Whether whole-K variant `c` may take `p` (rows that are not 16-byte multiples) by its
// prediction: at most kWholeKTinyUs anywhere in its K range, K <= 8 included (Hopper: measured
// there only), or at most kWholeKMaxUs past the outer products' K.
static bool whole_k_takes(const KernelConfig& c, const kforge_hgemm_problem& p, const DeviceModel& d) {
  if (!c.whole_k || !d.whole_k || c.max_k < p.k || (p.k % 8 == 0 && p.n % 8 == 0)) return false;
  const double us = smallk_predicted_us(c, p.m, p.n, p.k, d);
  return (d.cc == 90 && us <= kWholeKTinyUs) || (p.k > outer_k_limit() && us <= kWholeKMaxUs);
}

bool small_k_regime(const kforge_hgemm_problem& p, const DeviceModel& d) {
  if (p.k > small_k_limit() || (p.k % 8 == 0 && p.n % 8 == 0)) return false;
  const double bound = std::max(2.0 * smallk_store_us(p.m, p.n, p.k, d), kSmallKTinyFmaUs);
  size_t count = 0;
  const KernelVariant* all = variants(&count);
  for (size_t i = 0; i < count; ++i) {
    const KernelConfig& c = all[i].config;
    if (c.max_k < p.k || !all[i].supports(&p)) continue;  // its layout's prediction (nn gathers B)
    if (c.whole_k ? whole_k_takes(c, p, d) : smallk_fma_us(c, p.m, p.n, p.k, d) <= bound) return true;
  }
  return false;
}
bool small_n_regime(int64_t n) { return n <= small_n_limit(); }

int resident_ctas_cached(const KernelVariant& v, int dev) {
  if (dev < 0 || dev >= kMaxCachedDevices || !v.resident_ctas) return 0;
  size_t count = 0;
  const KernelVariant* all = variants(&count);
  const ptrdiff_t idx = &v - all;
  if (idx < 0 || size_t(idx) >= count || size_t(idx) >= kMaxVariants) return v.resident_ctas();
  // value + 1, so that 0 means "not asked yet"; two threads asking at once store the same answer.
  static std::atomic<int> cache[kMaxCachedDevices][kMaxVariants];
  std::atomic<int>& slot = cache[dev][idx];
  const int known = slot.load(std::memory_order_relaxed);
  if (known > 0) return known - 1;
  const int r = std::max(0, v.resident_ctas());
  if (r > 0) slot.store(r + 1, std::memory_order_relaxed);  // a failed query is asked again
  return r;
}

double predicted_us(const KernelVariant& v, const kforge_hgemm_problem& p, const DeviceModel& d, int dev) {
  const int resident = d.resident_ctas ? d.resident_ctas(v) : dev >= 0 ? resident_ctas_cached(v, dev) : 0;
  return predicted_us(v.config, p.m, p.n, p.k, d, resident);
}

const char* to_string(Choice::How h) {
  switch (h) {
    case Choice::How::kTable: return "tuned table";
    case Choice::How::kTableTwin: return "tuned table, the fp16 entry's configuration in bf16";
    case Choice::How::kNeighbour: return "nearest tuned neighbours";
    case Choice::How::kModel: return "cost model";
    case Choice::How::kSmallK: return "small-K family (K <= 256, rows not 16-byte multiples)";
    case Choice::How::kGemv: return "GEMV-like family (one side <= 8, predicted tiny)";
    default: return "none";
  }
}

// The variants that compete on small-M problems beside the decode family and the neighbours'
// proposals (DeviceModel::decode_siblings): every Hopper tile, padded ones included, but stream-K.
static bool decode_sibling(const KernelConfig& c) { return c.family == Family::kSm90 && !c.stream_k; }

const KernelVariant* model_choice(const kforge_hgemm_problem& p, const DeviceModel& d, int dev, int family_cc) {
  if (!valid(p)) return nullptr;
  size_t count = 0;
  const KernelVariant* all = variants(&count);
  // Decode shapes (small_m_regime, or small_n_regime for the swapped roles) are the decode family's when one of its variants serves them;
  // the model ranks within it (the wide-tile families' time on them is what it models worst:
  // measured 0.46-0.62 of cuBLASLt). A tuned entry overrides this, as everywhere.
  // small_k_regime (K <= 256, rows not 16-byte multiples, not FMA-bound) goes to the small-K family
  // first, decode shapes included: with so little K the cost is writing C, and the tensor-core
  // families pad K to a whole K tile and re-pitch or guard such rows.
  bool smallk = false;
  const bool smallk_regime = small_k_regime(p, d);
  for (size_t i = 0; i < count && !smallk && smallk_regime; ++i)
    smallk = all[i].config.max_k > 0 && runs_on(all[i], family_cc) && all[i].supports(&p);
  bool decode = false;
  for (size_t i = 0; i < count && !decode && !smallk; ++i)
    decode = (all[i].config.max_m > 0 || all[i].config.max_n > 0) && runs_on(all[i], family_cc) && all[i].supports(&p);
  // With DeviceModel::decode_siblings, on small-M problems on sm_90 the Hopper tiles (the padded
  // ones included) compete with the decode family here too, as they do among the neighbours'
  // proposals (Dispatcher::neighbour): this is the choice for problems no tuned entry of their
  // regime serves (every fp16-accumulation problem with the shipped table, every problem of an
  // export without one). Replayed against the H100 probes with no table and the GPU's resident
  // counts (thirty-sixth session), the picks ran at 0.926 of the fastest variant against 0.871
  // with the decode family alone: 19 problems faster (7x7x20000 nn 25.1 -> 7.9 us, 1x320x12288 tn
  // 7.4 -> 4.5, 16x1000x255 nn 5.1 -> 3.3), 2 slower (8x8x16 nn 1.5 -> 1.7, 8x40x752 tn 2.9 -> 3.0).
  const bool siblings = d.decode_siblings && family_cc == 90 && d.cc == 90 && small_m_regime(p.m);
  const KernelVariant* best = nullptr;
  double best_us = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < count; ++i) {
    const KernelVariant& v = all[i];
    if (!runs_on(v, family_cc) || !v.supports(&p)) continue;
    if (smallk && v.config.max_k == 0) continue;
    // The whole-K variants only in the small-K regime, where their prediction lets them
    // (whole_k_takes: tiny problems, or past the outer products' K).
    if (v.config.whole_k && (!smallk || !whole_k_takes(v.config, p, d))) continue;
    if (v.config.stream_k && !d.stream_k) continue;  // measured slower (DeviceModel::stream_k)
    if (v.config.swap_ab && !d.swap_ab) continue;    // off under KFORGE_HGEMM_SWAP=0 (DeviceModel::swap_ab)
    // The GEMV-like family only through its own step of resolve() (gemv_choice: tiny problems).
    if (v.config.family == Family::kGemv) continue;
    if (decode && v.config.max_m == 0 && v.config.max_n == 0 && !(siblings && decode_sibling(v.config))) continue;
    const double us = predicted_us(v, p, d, dev);
    if (us < best_us) best_us = us, best = &v;  // ties: the first in table order
  }
  return best;
}

const KernelVariant* model_choice(const kforge_hgemm_problem& p, int sms, int cc) {
  return model_choice(p, nominal_device_model(sms, cc), -1, cc);
}

const KernelVariant* table_choice(const DispatchEntry* table, size_t n, const kforge_hgemm_problem& p) {
  for (size_t i = 0; i < n; ++i) {
    const DispatchEntry& e = table[i];
    if (e.m == p.m && e.n == p.n && e.k == p.k && e.layout == p.layout && e.acc == p.acc && e.dtype == p.dtype) {
      const KernelVariant* v = find_variant(e.variant);
      if (v && v->supports(&p)) return v;
    }
  }
  return nullptr;
}

const KernelVariant* padded_twin(const KernelVariant& v) {
  if (v.config.pad) return nullptr;
  size_t count = 0;
  const KernelVariant* all = variants(&count);
  for (size_t i = 0; i < count; ++i)
    if (all[i].config.pad && all[i].layout == v.layout && all[i].acc == v.acc && all[i].dtype == v.dtype &&
        same_but_pad(all[i].config, v.config))
      return &all[i];
  return nullptr;
}

const KernelVariant* dtype_twin(const KernelVariant& v, kforge_hgemm_dtype dt) {
  if (v.dtype == dt) return &v;
  size_t count = 0;
  const KernelVariant* all = variants(&count);
  for (size_t i = 0; i < count; ++i)
    if (all[i].dtype == dt && all[i].layout == v.layout && all[i].acc == v.acc && all[i].config.pad == v.config.pad &&
        same_but_pad(all[i].config, v.config))
      return &all[i];
  return nullptr;
}

Dispatcher::Dispatcher(const DispatchEntry* table, size_t n)
    : table_(table), n_(table ? n : 0), id_(g_next_dispatcher_id.fetch_add(1)) {
  for (size_t i = 0; i < n_; ++i) {
    const DispatchEntry& e = table_[i];
    exact_[problem_hash(e.m, e.n, e.k, e.layout, e.acc, e.dtype)].push_back(i);
    const KernelVariant* v = find_variant(e.variant);
    if (!v || e.m < 1 || e.n < 1 || e.k < 1) continue;
    const double us = std::isfinite(e.us) && e.us > 0 ? e.us : 0.0;
    const Coord c{std::log(double(e.m)), std::log(double(e.n)), std::log(double(e.k)), v, e.layout, e.acc, e.dtype,
                  small_m_regime(e.m), small_n_regime(e.n), padded_twin(*v), e.m, e.n, e.k, us};
    coords_.push_back(c);
    // An fp16 entry proposes its bf16 twin to bf16 problems (see the header); the fp16 time does
    // not calibrate the twin.
    if (e.dtype == KFORGE_HGEMM_F16 && e.acc == KFORGE_HGEMM_ACC_F32)
      if (const KernelVariant* b = dtype_twin(*v, KFORGE_HGEMM_BF16))
        coords_.push_back({c.lm, c.ln, c.lk, b, e.layout, e.acc, KFORGE_HGEMM_BF16, c.small_m, c.small_n, padded_twin(*b),
                           e.m, e.n, e.k, 0.0});
  }
}

const KernelVariant* Dispatcher::exact(const kforge_hgemm_problem& p, int cc) const {
  const auto it = exact_.find(problem_hash(p.m, p.n, p.k, p.layout, p.acc, p.dtype));
  if (it == exact_.end()) return nullptr;
  for (size_t i : it->second) {
    const DispatchEntry& e = table_[i];
    if (e.m != p.m || e.n != p.n || e.k != p.k || e.layout != p.layout || e.acc != p.acc || e.dtype != p.dtype) continue;
    const KernelVariant* v = find_variant(e.variant);
    if (v && v->supports(&p) && runs_on(*v, cc)) return v;
  }
  return nullptr;
}

const KernelVariant* Dispatcher::neighbour(const kforge_hgemm_problem& p, const DeviceModel& d, int dev) const {
  if (!valid(p) || coords_.empty()) return nullptr;
  const double lm = std::log(double(p.m)), ln = std::log(double(p.n)), lk = std::log(double(p.k));
  const bool small_m = small_m_regime(p.m), small_n = small_n_regime(p.n);
  struct Near {
    double dist;
    const KernelVariant* v;
    const Coord* c;
  };
  std::vector<Near> near;
  double nearest = std::numeric_limits<double>::infinity();
  for (const Coord& c : coords_) {
    if (c.layout != p.layout || c.acc != p.acc || c.dtype != p.dtype || !runs_on(*c.v, d.cc)) continue;
    // Decode shapes are their own regime: a tuned M = 64 entry says nothing about M = 8.
    if (c.small_m != small_m || c.small_n != small_n) continue;
    const double dist = std::sqrt((c.lm - lm) * (c.lm - lm) + (c.ln - ln) * (c.ln - ln) + (c.lk - lk) * (c.lk - lk));
    const double radius = neighbour_radius();
    if (dist > nearest + radius) continue;
    // A TMA winner for a shape with K or N % 8 != 0 proposes its padded twin.
    const KernelVariant* v = c.v->supports(&p) ? c.v : c.twin && c.twin->supports(&p) ? c.twin : nullptr;
    if (!v) continue;
    if (dist < nearest) nearest = dist;
    near.push_back({dist, v, &c});
  }
  if (near.empty()) return nullptr;
  std::sort(near.begin(), near.end(), [](const Near& a, const Near& b) { return a.dist < b.dist; });
  // Tiny short-K problems with many outputs (kShortVoteK): the entries near it vote for their own
  // winners.
  const double radius_end = nearest + neighbour_radius() * (1 + 1e-12) + 1e-12;
  if (d.short_k_vote && d.cc == 90 && !small_m && !small_n && p.k <= kShortVoteK && p.k % 8 == 0 && p.n % 8 == 0 &&
      2.0 * double(p.m) * double(p.n) * double(p.k) < kShortVoteFlop && double(p.m) * double(p.n) >= kShortVoteOutputs) {
    std::vector<std::pair<const KernelVariant*, double>> votes;
    for (const Near& x : near) {
      if (x.dist > radius_end) break;
      if (x.v != x.c->v) continue;  // a padded twin: the entry's winner does not serve this problem
      const double w = 1.0 / std::max(x.dist, 0.05);
      const auto it = std::find_if(votes.begin(), votes.end(), [&](const auto& q) { return q.first == x.v; });
      if (it != votes.end()) it->second += w;
      else votes.push_back({x.v, w});
    }
    const KernelVariant* most = nullptr;
    double most_w = 0;
    for (const auto& [v, w] : votes)  // in order of distance: a tie keeps the nearer
      if (w > most_w) most_w = w, most = v;
    if (most) return most;
  }
  // The nearest entry and those within the radius of it, each variant once; at most 16 proposals.
  // Each proposal with the factor that calibrates the model to its nearest entry's measurement
  // (1 where the entry holds none, or calibration is off).
  struct Proposal {
    const KernelVariant* v;
    double scale;
  };
  std::vector<Proposal> proposals;
  bool padded = false;
  const bool calibrate = neighbour_calibration();
  for (const Near& x : near) {
    if (x.dist > radius_end) break;
    if (std::find_if(proposals.begin(), proposals.end(), [&](const Proposal& q) { return q.v == x.v; }) != proposals.end())
      continue;
    double scale = 1.0;
    if (calibrate && x.c->us > 0 && x.v == x.c->v) {  // a padded twin ran nowhere: not calibrated
      kforge_hgemm_problem at = p;
      at.m = x.c->m, at.n = x.c->n, at.k = x.c->k;
      const double model_there = predicted_us(*x.v, at, d, dev);
      if (model_there > 0 && std::isfinite(model_there)) scale = x.c->us / model_there;
    }
    proposals.push_back({x.v, scale});
    padded |= x.v->config.pad;
    if (proposals.size() >= 16) break;
  }
  // Decode shapes with fewer output tiles than SMs: each proposal's split-K twins (split_twin)
  // compete with it, at its calibration. A neighbour tuned where its tiles filled the device says
  // nothing about splitting here: measured on the H200 at 31x5120x3072, the unsplit 64x64 tile of
  // the nearest entries ran 80 CTAs on 132 SMs in 14.5 us, where its split-K 2 twin (160 CTAs)
  // had run 31x4096x4096 in 9.0 (cuBLASLt 11.3 and 11.2). The model weighs the twins' fuller
  // device against their reduction (cost_model.hpp); ties keep the neighbour's own winner.
  if ((small_m || small_n) && d.sms > 0 && neighbour_split_twins()) {
    size_t count = 0;
    const KernelVariant* all = variants(&count);
    const size_t from_neighbours = proposals.size();
    for (size_t j = 0; j < from_neighbours; ++j) {
      const Proposal q = proposals[j];
      const KernelConfig& c = q.v->config;
      if (c.family != Family::kSm90 || c.bm <= 0 || c.bn <= 0) continue;
      const double tiles = std::ceil(double(p.m) / c.bm) * std::ceil(double(p.n) / c.bn);
      if (tiles >= double(d.sms)) continue;
      for (size_t i = 0; i < count; ++i) {
        const KernelVariant& v = all[i];
        if (!split_twin(c, v.config) || v.layout != p.layout || v.acc != p.acc || v.dtype != p.dtype) continue;
        if (!runs_on(v, d.cc) || !v.supports(&p)) continue;
        if (std::find_if(proposals.begin(), proposals.end(), [&](const Proposal& o) { return o.v == &v; }) != proposals.end())
          continue;
        proposals.push_back({&v, q.scale});
      }
    }
  }
  // Every variant of the problem's layout, accumulation and dtype that `keep` takes and that serves
  // it, not yet proposed, at `scale` (the relatives: the nearest proposal's calibration).
  const auto propose_all = [&](auto keep, double scale) {
    size_t count = 0;
    const KernelVariant* all = variants(&count);
    for (size_t i = 0; i < count; ++i) {
      const KernelVariant& v = all[i];
      if (!keep(v.config) || v.layout != p.layout || v.acc != p.acc || v.dtype != p.dtype || !v.supports(&p)) continue;
      if (std::find_if(proposals.begin(), proposals.end(), [&](const Proposal& q) { return q.v == &v; }) != proposals.end())
        continue;
      proposals.push_back({&v, scale});
    }
  };
  // Outside the decode regime the nearest winner's relatives compete too: every unsplit sm90
  // variant of the same layout, accumulation and dtype,
  // predicted by the model at this shape with the nearest proposal's calibration. The neighbours
  // were tuned at shapes whose last round of tiles may fill well where this one's does not
  // (3072^3: the grid's 128x256 winner runs 288 tiles in 3 rounds on 132 SMs, 102 us, where
  // 128x192 runs 384 in 3 full ones, 79 us), and the model ranks such tiles within a few percent
  // (cost_model.hpp, sm90_tile_efficiency). Split-K clusters are left to the table: the model's
  // figures for them are its weakest outside decode shapes. Only on large aligned problems (at
  // least 1e10 FLOP, M and N >= 128): measured on the H200 (fourteenth session, off-grid set),
  // relatives proposed everywhere cost 5% on the unaligned shapes (padded tiles, whose copies the
  // model charges coarsely) and 2% on those under 1e9 FLOP, where launch and prologue costs that
  // the model does not hold decide, while on large shapes they gained up to 21% (1024x10240x8192).
  const bool large = double(p.m) * double(p.n) * double(p.k) * 2.0 >= 1e10 && p.m >= 128 && p.n >= 128;
  const bool aligned_tma = !small_m && !small_n && !proposals.empty() && !proposals.front().v->config.pad && d.cc == 90;
  if (large && aligned_tma && neighbour_siblings())
    propose_all(
        [](const KernelConfig& c) {
          return c.family == Family::kSm90 && c.splitk == 1 && !c.pad && !c.stream_k;  // stream-K: below
        },
        proposals.front().scale);
  // Stream-K (only with DeviceModel::stream_k, KFORGE_HGEMM_STREAMK=1; measured slower): on aligned
  // problems of at least 1e9 FLOP, every stream-K variant competes, M or N under 128 included
  // (122x10240x8192: 80 tiles of 128x128 on 132 SMs, one round 61% full, where stream-K shares the
  // K loops over every SM). In the decode regime the
  // measure is the bytes rather than the FLOP: at least 8 MB of the large operand (16x4096x4096:
  // 32 tiles of 64x128 on 132 SMs; stream-K gives each SM 1/132 of B), and only the tiles whose
  // small side is 64 (64x128 for small M, 128x64 for small N): the model bounds every stream-K tile
  // there by the same bytes, so a 128x256 one, four times the padded wgmma work per byte, would tie
  // and win by its place in the table. They take the calibration of the nearest Hopper proposal
  // (a decode neighbour may be the decode family's, whose model is another), and come after the
  // relatives, as they stand after them in the table: on a tie the relative stays.
  const bool mid = small_m || small_n ? 2.0 * double(p.k) * double(std::max(p.m, p.n)) >= 8e6
                                      : double(p.m) * double(p.n) * double(p.k) * 2.0 >= 1e9;
  const bool tma_ok = !proposals.empty() && !proposals.front().v->config.pad && d.cc == 90;
  const auto hopper = std::find_if(proposals.begin(), proposals.end(),
                                   [](const Proposal& q) { return q.v->config.family == Family::kSm90; });
  const double hopper_scale = hopper != proposals.end() ? hopper->scale : proposals.empty() ? 1.0 : proposals.front().scale;
  if (d.stream_k && mid && tma_ok) {
    propose_all(
        [&](const KernelConfig& c) {
          return c.stream_k && (!small_m || c.bm == 64) && (!small_n || c.bn == 64);
        },
        hopper_scale);
  }
  // The swapped-role decode tiles (DeviceModel::swap_ab) on decode shapes whose operands TMA can
  // load (tn, K % 8 == 0: supports() says which), at the nearest Hopper proposal's calibration, after
  // everything else: on a tie the neighbours' choice stays.
  if (d.swap_ab && small_m && d.cc == 90 && !proposals.empty())
    propose_all([](const KernelConfig& c) { return c.swap_ab; }, hopper_scale);
  // On decode shapes every Hopper variant that serves the problem competes too (decode_siblings),
  // and every Hopper proposal takes the nearest Hopper proposal's calibration (decode_uniform), so
  // that the model alone ranks them: a neighbour's own calibration says how the model erred at its
  // shape with its tile, not how that tile compares with another here (19x9216x3072 on an H100: the
  // split-K 8 twin of a neighbour's 64x128 tile, 576 CTAs, ran 34.8 us where the unsplit 64x64
  // tile ran 24.0). Measured: DeviceModel::decode_siblings. The padded tiles among them (they serve
  // only problems whose rows TMA cannot load) compete too: where every neighbour's winner is of
  // another family none of them was proposed, and the decode family's tiles walked a long K on a few
  // CTAs (H100, graph mode, tinyout probe: 7x7x20000 nn 16.4 us on the decode family against 7.9 on
  // the padded 64 x 64 split-K 16 tile; 8x3x6000 nn 9.4 against 5.4; 16x1000x255 tn 6.0 -> 5.2).
  if (d.decode_siblings && small_m && d.cc == 90 && !proposals.empty())
    propose_all(decode_sibling, hopper_scale);
  // The decode family's own tiles (small M) compete too, at their own model (the decode fit, not a
  // Hopper neighbour's calibration): where every near entry chose a Hopper tile none of them was
  // proposed, and the wide tiles walked a long row of N on few CTAs (H100, thirty-seventh session,
  // graph mode: 4x40000x200 tn 9.8 us on the 64 x 256 ping-pong tile against 7.4 on the decode
  // family's, nn 7.3 against 6.6). No pick over data/shapes/ changes. Part of
  // DeviceModel::decode_siblings.
  if (d.decode_siblings && small_m && d.cc == 90 && !proposals.empty())
    propose_all([](const KernelConfig& c) { return c.family == Family::kSkinny && c.max_m > 0; }, 1.0);
  if (d.decode_uniform && small_m)
    for (Proposal& q : proposals)
      if (q.v->config.family == Family::kSm90) q.scale = hopper_scale;
  // A padded twin pays its copies (two or three launches on a small shape): the best variant without
  // TMA, which needs none, competes with it.
  if (padded)
    if (const KernelVariant* plain = model_choice(p, d, dev, 80)) proposals.push_back({plain, 1.0});
  const KernelVariant* best = nullptr;
  double best_us = std::numeric_limits<double>::infinity();
  for (const Proposal& q : proposals) {  // in order of distance: equal predictions keep the nearest
    const double us = predicted_us(*q.v, p, d, dev) * q.scale;
    if (us < best_us) best_us = us, best = q.v;
  }
  return best;
}

const KernelVariant* Dispatcher::exact_twin(const kforge_hgemm_problem& p, int cc) const {
  if (p.dtype != KFORGE_HGEMM_BF16 || p.acc != KFORGE_HGEMM_ACC_F32) return nullptr;
  const auto it = exact_.find(problem_hash(p.m, p.n, p.k, p.layout, p.acc, KFORGE_HGEMM_F16));
  if (it == exact_.end()) return nullptr;
  for (size_t i : it->second) {
    const DispatchEntry& e = table_[i];
    if (e.m != p.m || e.n != p.n || e.k != p.k || e.layout != p.layout || e.acc != p.acc || e.dtype != KFORGE_HGEMM_F16)
      continue;
    const KernelVariant* v = find_variant(e.variant);
    const KernelVariant* b = v ? dtype_twin(*v, KFORGE_HGEMM_BF16) : nullptr;
    if (b && b->supports(&p) && runs_on(*b, cc)) return b;
  }
  return nullptr;
}

// The GEMV-like family's best variant for `p` by the model, where the family serves it on a fast
// path: the streaming variants with 16-byte loads of W (K % 8 == 0, or, one row per warp, the
// shifted path), the small operand's elements contiguous along K (tn) or an nn B of at most
// kGemvNnMaxN columns, K at least kGemvMinK and at most one CTA per SM; or
// (DeviceModel::gemv_xregs) the GemvX variants, X in registers, where the streamed side holds at
// least kGemvXMinElems elements (and DeviceModel::gemv set); else nullptr. Its prediction in *us_out, for resolve()'s bounds.
static const KernelVariant* gemv_choice(const kforge_hgemm_problem& p, const DeviceModel& d, int dev, double* us_out) {
  if (!d.gemv) return nullptr;
  size_t count = 0;
  const KernelVariant* all = variants(&count);
  const KernelVariant* best = nullptr;
  double best_us = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < count; ++i) {
    const KernelVariant& v = all[i];
    if (v.config.family != Family::kGemv || !runs_on(v, d.cc) || !v.supports(&p)) continue;
    // X in registers (K <= x_regs_k): loaded once per warp, any alignment, any number of rows (one
    // round of resident CTAs), an nn B gathered once.
    if (v.config.x_regs_k > 0) {
      const int64_t rows = v.config.max_n > 0 ? p.m : p.n;
      if (!d.gemv_xregs || rows * p.k < kGemvXMinElems || (v.config.stages == 1 && !d.gemv_xsmem)) continue;
      const double us = predicted_us(v, p, d, dev);
      if (us < best_us) best_us = us, best = &v;
      continue;
    }
    if (p.k < kGemvMinK || (p.layout == KFORGE_HGEMM_NN && p.n > kGemvNnMaxN)) continue;
    const GemvLaunch l = gemv_launch(v.config, p.m, p.n, p.k, d);
    // K % 8 != 0: only one row per warp (R = 1) reads W as 16-byte vectors (shifted); R = 4 goes
    // element by element, 2-3x slower.
    if (p.k % 8 != 0 && l.rows_per_warp != 1) continue;
    // Rows too few to fill the device (the regime it was measured ahead in; past one CTA per SM its
    // clusters and per-SM loads in flight are not modelled: 1x64x30000 took 6.4 us on 256 CTAs).
    if (l.ctas > std::max(1, d.sms)) continue;
    const double us = predicted_us(v, p, d, dev);
    if (us < best_us) best_us = us, best = &v;
  }
  if (!best) return nullptr;
  *us_out = best_us;
  return best;
}

Choice Dispatcher::resolve(const kforge_hgemm_problem& p, const DeviceModel& device, int dev) const {
  DeviceModel d = device;
  switches().apply(d);
  Choice c;
  if (!valid(p)) return c;
  if ((c.variant = exact(p, d.cc))) c.how = Choice::How::kTable;
  else if ((c.variant = exact_twin(p, d.cc))) c.how = Choice::How::kTableTwin;
  else if (small_k_regime(p, d) && (c.variant = model_choice(p, d, dev, d.cc)) && c.variant->config.max_k > 0)
    c.how = Choice::How::kSmallK;
  else if ((c.variant = neighbour(p, d, dev))) c.how = Choice::How::kNeighbour;
  else if ((c.variant = model_choice(p, d, dev, d.cc))) c.how = Choice::How::kModel;
  if (!c.variant) return c;
  // Off the table, the GEMV-like family takes a tiny problem it serves on its fast path when the
  // model puts it clearly ahead of the choice above (kGemvMargin: that choice's prediction is not
  // calibrated here).
  // Past kGemvMaxUs (kGemvMaxUnalignedUs) only where it is predicted at most kGemvClearMargin of
  // that choice.
  double gemv_us = 0;
  if (c.how != Choice::How::kTable && c.how != Choice::How::kTableTwin)
    if (const KernelVariant* g = gemv_choice(p, d, dev, &gemv_us)) {
      const double other_us = predicted_us(*c.variant, p, d, dev);
      const bool tiny = gemv_us <= (p.k % 8 != 0 ? kGemvMaxUnalignedUs : kGemvMaxUs);
      if (gemv_us <= (tiny ? kGemvMargin : kGemvClearMargin) * other_us) c.variant = g, c.how = Choice::How::kGemv;
    }
  // TMA needs 16-byte aligned bases: an unaligned call goes to the sm_80 family, which takes any.
  c.unaligned = c.variant->config.family != Family::kSm90 ? c.variant : model_choice(p, d, dev, 80);
  c.workspace = c.variant->workspace_size(&p);
  if (c.unaligned) c.workspace = std::max(c.workspace, c.unaligned->workspace_size(&p));
  return c;
}

Choice Dispatcher::resolve_cached(const kforge_hgemm_problem& p, const DeviceModel& d, int dev) const {
  // The whole DeviceModel is part of the key: a caller that changes any of its fields gets a
  // choice made with them (DeviceModel's defaulted ==).
  struct Key {
    uint64_t id;
    int64_t m, n, k;
    int layout, acc, dtype, dev;
    DeviceModel model;
    bool operator==(const Key& o) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      uint64_t h = k.id;
      for (uint64_t v : {uint64_t(k.m), uint64_t(k.n), uint64_t(k.k), uint64_t(k.layout) << 16 | uint64_t(k.acc) << 8 | uint64_t(k.dtype),
                         uint64_t(k.model.sms) << 32 | uint32_t(k.model.cc), uint64_t(uint32_t(k.dev))})
        h = mix(h, v);
      return size_t(h);
    }
  };
  thread_local std::unordered_map<Key, Choice, KeyHash> memo;
  const Key key{id_, p.m, p.n, p.k, int(p.layout), int(p.acc), int(p.dtype), dev, d};
  const auto it = memo.find(key);
  if (it != memo.end()) return it->second;
  const Choice c = resolve(p, d, dev);
  if (c.variant) {
    if (memo.size() >= kMemoEntries) memo.clear();
    memo.emplace(key, c);
  }
  return c;
}

const KernelVariant* choose(const DispatchEntry* table, size_t n, const kforge_hgemm_problem& p, int sms, int cc) {
  const Dispatcher d(table, n);
  return d.resolve(p, nominal_device_model(sms, cc), -1).variant;
}

}  // namespace kforge::kernels
