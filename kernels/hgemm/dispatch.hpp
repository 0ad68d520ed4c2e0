// Dispatch: from a problem (M, N, K, layout, accumulation, dtype) to the variant that runs it.
// Every step considers only variants whose supports() accepts the problem, and supports() checks
// the dtype: a bf16 problem runs only on a bf16 variant (and table entries match on dtype too).
// A bf16 problem without bf16 entries of its own borrows the fp16 table's configurations: in steps
// 1 and 2 an fp16 (fp32-accumulation) entry proposes its bf16 twin (dtype_twin: the same
// KernelConfig and layout in bf16), where this build has one. The fp16 winner's tile, pipeline and
// split suit the bf16 problem of the same shape (the same wgmma rate, the same bytes moved); a
// bf16 entry of the same shape, once tuned, comes first.
//
// In order:
//  1. the tuned table's entry for exactly this problem, when its variant supports it here;
//  1b. small_k_regime (K <= 256 with K or N % 8 != 0, not FMA-bound): the small-K family
//      (smallk_gemm.cuh), the cost model's best of it;
//  2. nearest neighbours: the tuned entries of the same layout, accumulation and regime (decode,
//     M <= small_m_limit() or N <= small_n_limit(), or not) whose variants support the problem, by distance in
//     (log M, log N, log K) (a TMA winner proposes its padded twin for K or N % 8 != 0); the nearest entry and every entry
//     within kNeighbourRadius of it propose their variants, and the cost model (cost_model.hpp)
//     picks among the proposals (a tie-break between near-equal neighbours, which also sees this
//     shape's own wave count). Calibrated: a proposal whose entry holds its measured time is
//     predicted at this shape as that time x the model's ratio between this shape and the entry's,
//     so that the model only extrapolates each variant from where it was measured and never ranks
//     two families against each other from its own figures alone (its weakest point: decode
//     shapes, the decode family against the Hopper tiles). KFORGE_HGEMM_NN_CALIBRATE=0 ranks by
//     the plain model (read once), for A/B measurements. On decode shapes, a proposal with fewer
//     output tiles (ceil(M / BM) x ceil(N / BN)) than the device's SMs brings its split-K twins
//     (the same sm90 kernel by KernelConfig with a larger splitk; pipeline depth and rasterisation
//     aside) at its own calibration, so that the model weighs a fuller device against the split's
//     reduction. On decode shapes every Hopper variant that serves the problem competes too, and
//     all Hopper proposals take the nearest Hopper proposal's calibration, so that the model's
//     decode terms, fitted per variant, rank them (DeviceModel::decode_siblings, decode_uniform;
//     the skinny family's proposals keep their own). On large aligned problems (>= 1e10 FLOP,
//     M and N >= 128) every unsplit sm90 variant competes as well, at the nearest proposal's
//     calibration (neighbour_siblings);
//  3. no neighbour can serve it (no table, or no tuned entry of its regime): the cost model's best
//     over every variant that supports it on this device (for a decode shape, over the decode
//     family's variants that serve it).
// Nothing depends on variant names: a renamed or added variant is ranked by its KernelConfig.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/hgemm/cost_model.hpp"
#include "kernels/hgemm/kernel_api.hpp"

namespace kforge::kernels {

struct DispatchEntry {
  int64_t m, n, k;
  kforge_hgemm_layout layout;
  kforge_hgemm_acc acc;
  const char* variant;  // a name from variants()
  kforge_hgemm_dtype dtype = KFORGE_HGEMM_F16;  // after variant, so that {m, n, k, layout, acc, variant} is an fp16 entry
  double us = 0;  // the winner's measured time on this shape (0: not known), which calibrates step 2
};

// Neighbours within this distance (natural log units, over the three sizes together) of the
// nearest one propose their variants too: 0.35 is half a factor-of-two step of the tuned grid.
// KFORGE_HGEMM_NN_RADIUS overrides it (read once; 0: the nearest entries only).
double neighbour_radius();
// Whether step 2 calibrates the model on the neighbours' measured times (KFORGE_HGEMM_NN_CALIBRATE,
// default on; "0" turns it off). Read once.
bool neighbour_calibration();

// Whether step 2 lets the unsplit sm90 variants compete with the neighbours' winners outside the
// decode regime, ranked by the model with the nearest proposal's calibration
// (KFORGE_HGEMM_NN_SIBLINGS, default on; "0" turns it off). Read once.
bool neighbour_siblings();
// Whether step 2 lets decode proposals with fewer tiles than SMs bring their split-K twins, with
// the cost model's refitted split-K charge on decode tiles (KFORGE_HGEMM_SPLIT_TWINS, default on;
// "0": neither, as before the nineteenth session). Read once.
bool neighbour_split_twins();
// The cost model charges decode tiles for their waves of resident CTAs (DeviceModel::decode_tail;
// default on since the twenty-fifth session); resolve() clears it under KFORGE_HGEMM_DECODE_TAIL=0
// (the single-wave rule), read once.

// Whether variant `v` may run on a device of compute capability `cc` (the sm_90a family only on 9.0).
bool runs_on(const KernelVariant& v, int cc);

// The largest M a decode-family variant serves (the largest KernelConfig::max_m; 0 without any),
// and whether `m` is in that regime. Tuned entries in one regime are not neighbours of problems in
// the other: the grid's M = 64 winners say nothing about M = 8, which the decode family serves.
int64_t small_m_limit();
// The same for small N (decode variants with swapped roles: A streamed, KernelConfig::max_n).
int64_t small_n_limit();
bool small_n_regime(int64_t n);
// The padded twin of `v` (KernelConfig::pad, otherwise the same configuration, layout and
// accumulation and dtype), or nullptr when it has none or is one.
const KernelVariant* padded_twin(const KernelVariant& v);
// The variant of `v`'s configuration (KernelConfig, pad included), layout and accumulation in dtype
// `dt`, or nullptr when this build has none (bf16 has a subset of the fp16 configurations).
const KernelVariant* dtype_twin(const KernelVariant& v, kforge_hgemm_dtype dt);
bool small_m_regime(int64_t m);
// The largest K a small-K variant serves (KernelConfig::max_k; 0 without any), and whether `p` is
// in that regime: such problems go to the small-K family (after an exact table entry, before the
// neighbours). K <= small_k_limit() with rows that are not 16-byte multiples (K % 8 or N % 8 !=
// 0: the other families re-pitch or guard them), when some small-K variant's FMAs take at most
// twice its stores, or at most kSmallKTinyFmaUs (a problem so small that its time is the launch
// and one fill), by the model (smallk_fma_us, smallk_store_us). Measured on the H200 (sixteenth
// session, graph mode): with aligned rows (K = 8) the Hopper and decode tiles were faster, tiny
// shapes included (168x56x8 1.8 us against 2.6, 48x8x8 1.5 against 2.1); with FMAs well past the
// stores, the tensor cores (8192x8192x8 43 us against 82-85).
inline constexpr double kSmallKTinyFmaUs = 1.25;
// The whole-K variants (KernelConfig::whole_k, K <= 256) take such a problem when one of them is
// predicted to take at most kWholeKMaxUs (smallk_predicted_us): tiny problems, whose time on the
// tensor-core families is one memory latency per K tile of guarded loads, or two extra launches
// re-pitching the operands (814x28x12 5.3 us, 382x387x100 7.8 on the H200, cuBLASLt 2.0 and 3.9),
// decode rows included. The bound was chosen on the H100 (twenty-seventh session, graph mode, the
// variants with the vector fill, 25 shapes x 2 layouts, K 12-255), against what the dispatcher
// takes without them (the shipped table's neighbours): where the model's pick among them is
// predicted at most 4.5 us it was faster on 14 of 16 problems (814x28x12 1.7 us against 5.7,
// 11784x4x26 2.2 against 4.7, 234x110x95 3.3 against 5.6, 2x32x27 1.9 against 2.8; lost
// 512x512x50 and 2000x64x77 nn by ~0.3-1 us); above it, slower on 9 of 14 (130x66x200 6.2 us
// against the padded tile's 3.6, 1000x1001x17 7.2 against sm_80's 4.8, the nn gathers) and faster
// on 5 the model overestimates (382x387x100 5.8 against 7.8, 3x10507x161 tn 6.4 against 12.5:
// the next refinement). The twenty-eighth session refitted the whole-K terms on the nn variants
// without register spills (cost_model.hpp) and kept the bound: on that session's probe (36
// problems, every variant) bounds from 3.5 to 5 us chose alike (the dispatcher's pick at 1.16-1.17x
// the fastest variant's time, 1.20 before the refit); 234x110x95 nn moved to the whole-K 64 x 8
// tile (~4 us, the padded neighbour 6.6). Before the vector fill (twenty-third session, H200) they lost to the
// decode family's 8-row tiles up to M = 8 and were kept off there (kWholeKMaxDecodeM, removed).
// Only where DeviceModel::whole_k is set: on by default since the twenty-fourth session measured
// them (docs/perf-notes.md); resolve() clears it under KFORGE_HGEMM_WHOLEK=0.
inline constexpr double kWholeKMaxUs = 4.5;
// Within the regime (rows not 16-byte multiples), K <= 8 included, the whole-K variants also take
// a problem on Hopper when one of them is predicted at most kWholeKTinyUs: a launch and one fill
// (~1.5-1.7 us), where the outer products took ~1.6-2.3 (H100, twenty-eighth session, graph mode:
// 89x55x1 1.55 us against the outer product's 1.95 and cuBLASLt's 1.29, 197x7x5 1.57 against
// 2.19, 3x26x2 1.49 against 1.59; the model within 0.1 us of each). Aligned rows stay with the
// other families: on the H100 the whole-K tile beat them at 10080x24x8 (2.1 us against 3.7), but
// on the H200 the Hopper tiles ran 48x8x8 in 1.5 us and 168x56x8 in 1.8 (sixteenth session), as
// fast as the whole-K variants run anything; not yet measured there.
inline constexpr double kWholeKTinyUs = 1.9;
// The GEMV-like family (gemv_gemm.cuh: one side of C at most 8, on the CUDA cores) takes a problem
// off the table where it serves it on a fast path (W as 16-byte vectors, the small operand
// contiguous along K: tn, or an nn B of at most kGemvNnMaxN columns), K >= kGemvMinK, its launch
// needs at most one CTA per SM, and its best variant is predicted at most kGemvMaxUs (gemv_predicted_us) and at
// most kGemvMargin of the prediction for the dispatcher's choice without it: tiny outputs that
// each need a long K, where the other families split K over clusters or a second kernel. Measured on an H100 (twenty-ninth
// session, graph mode): 1x1x65536 3.2 us against the decode family's 10.9 (cuBLASLt 3.5), 5x1x3000
// 2.0 against 3.1, 2x8x4096 1.9 against 3.2, 3x200x1000 2.7 against 3.0; but 8x8x16 2.1 against 1.4
// and 8x40x752 3.4 against 2.9 (launch and reductions: hence the minimum K and the margin, the
// other families' predictions being the less certain there). K % 8 != 0 only on one row per warp,
// the shifted path (2x1x1500 2.1 us against cuBLASLt's 2.7; element by element 4.7-4.9). Only where
// DeviceModel::gemv is set: on by default (cost_model.hpp); resolve() clears it under
// KFORGE_HGEMM_GEMV=0.
inline constexpr int64_t kGemvMinK = 512;
// An nn B (K x N, rows of N elements) of at most two columns is one contiguous run of 2K elements
// that the family gathers at full speed: measured on an H100 (thirty-seventh session, graph mode)
// 1x2x16384 nn 4.0 us against the padded 64 x 64 split-K tile's 7.4, 2x2x32768 4.1 against 9.9,
// 32x2x65536 7.1 against 18.2. Wider rows are not: 2x8x4096 nn 18.6 us against 3.7, 7x7x20000 9.7
// against 8.0 (tinyout probe), the gather's strided loads being what the model does not hold.
inline constexpr int64_t kGemvNnMaxN = 2;
inline constexpr double kGemvMaxUs = 5.0;
// At K % 8 != 0 the bound is kGemvMaxUnalignedUs: there the other families read the unaligned
// rows element by element (the decode family's generic path, whose charge fits its probe times
// within 0.14 mean |log error|), so the margin judges against a calibrated prediction; measured
// (H100, thirtieth session) 1x1x65535 5.3 us against the decode family's 31-67, 7x7x20001 7.8-8.8
// against 16.7. (At K % 8 == 0 the bound is 5 us, 4 until the thirty-sixth session: 728x8x2248
// would move at 5.9 predicted from a Hopper tile the model puts at 8.8 that measured 4.0, while
// 7x7x20000 tn, predicted 4.1, ran 4.3 us where the padded 64 x 64 tile the dispatcher otherwise
// takes, predicted 8.2, ran 5.7.)
inline constexpr double kGemvMaxUnalignedUs = 12.0;
inline constexpr double kGemvMargin = 0.8;
// Past those bounds the family still takes a problem where its prediction is at most
// kGemvClearMargin of the other choice's: a K so long that the other families' few CTAs walk it
// for tens of microseconds (8x8x131072 tn: 6.3 us predicted against 32 for the 64 x 64 split-K 16
// tile; it ran 7.45 us on an H100, thirty-seventh session, where cuBLASLt took 9.9; 32x2x65536 nn:
// 7.1 against 20, ran 7.1 against 18.2). Both predictions tracked their measurements at
// long K on an H100 (twenty-ninth and thirtieth sessions, graph mode): the family's 7x7x20001 8.3
// us (ran 8.8) and 1x1x65535 5.4 (5.3), the decode family's 7x7x20001 nn 18.0 (20.6), the split-K
// tile's 1x64x30000 10.4 (7.3: the margin leaves room for that). The counter-example above keeps
// its choice: 728x8x2248 is at 0.67.
inline constexpr double kGemvClearMargin = 0.5;
// The GEMV variants holding X in registers (GemvX, K <= their x_regs_k) take part only where the
// streamed operand has at least kGemvXMinElems elements (rows x K: 1 MB of fp16), the problems they
// were written for: measured on an H100 (thirty-fourth session, graph mode), 3x10507x161 tn 5.4 us
// against the decode family's generic path 8.0 and the whole-K tile's 6.4, 3x4096x255 tn 3.7
// against 5.6 (cuBLASLt 3.8); below it their fixed ~3-4 us loses (4x7684x7: 4.3 against the whole-K
// tile's 1.7; 8x4096x100: 5.0 against cuBLASLt's 2.7).
inline constexpr int64_t kGemvXMinElems = int64_t(1) << 19;
// Step 2 on tiny short-K problems with many outputs: K at most kShortVoteK (two K tiles of 64),
// under kShortVoteFlop, at least kShortVoteOutputs elements of C, rows 16-byte multiples (K and
// N % 8 == 0), neither decode regime, on sm_90. There the cost model prices every Hopper tile
// alike (the launch floor and the bytes: 2.9 us for each at 10568x160x32) while the tiles measured
// 3.4-6.5 us (H100, graph mode): most likely in how they store the output, which the model does not
// price per tile. So the calibrations of whichever entries were near decided: 64 x 256 ping-pong (5.2
// us) over 128 x 64 ping-pong (3.5), which four of the eight nearest entries had won. Instead each
// entry within the neighbour radius of the nearest votes for its own winner with weight 1 /
// distance, and the most voted variant is taken (DeviceModel::short_k_vote;
// KFORGE_HGEMM_SHORTK_VOTE=0 turns it off). Measured on an H100 (thirty-third session, graph mode,
// each side at its faster layout, against cuBLASLt auto-tuned): 10568x160x32 0.66 -> 0.98,
// 2560x2024x16 0.62 -> 0.89, 3960x328x72 0.65 -> 0.71, 3008x1408x64 1.00 -> 0.84; on smaller
// outputs (64x192x64 to 192x4800x128) the vote lost 0.0-0.2 us on six of seven, hence the floor.
inline constexpr int64_t kShortVoteK = 128;
inline constexpr double kShortVoteFlop = 1e9;
inline constexpr double kShortVoteOutputs = 1 << 20;
// The stream-K variants (KernelConfig::stream_k) are chosen off the table (the cost model's choice,
// the large shapes' relatives of a neighbour) only where DeviceModel::stream_k is set: resolve() sets
// it under KFORGE_HGEMM_STREAMK=1, off by default: measured on the H200 (twenty-third session),
// they are correct but ran at 0.74 of the default dispatch where the switch chose them (off-grid
// set, graph mode; ~8-10 us more on small decode shapes). A tuned table entry naming one is used as
// any other: the tuner verified it on the GPU before tabling it.
bool stream_k_enabled();
// The swapped-role decode tiles (KernelConfig::swap_ab: tn, M <= 32, C^T = B^T A^T) are chosen off
// the table (the cost model's choice in the decode regime; the neighbours' competitors, at the
// nearest Hopper proposal's calibration) only where DeviceModel::swap_ab is set (the default;
// resolve() clears it under KFORGE_HGEMM_SWAP=0). Measured on an H100 (twenty-fifth session, off-grid set, graph mode):
// decode shapes 0.914 -> 0.922 of cuBLASLt, the 59 shapes whose choice changed 1.013x (up to 1.5x
// on tiny ones, 0.76 where an unsplit 64x32 tile left 32 CTAs), offline 1.111 -> 1.138. A tuned
// entry naming one is served as any other.
//
// The decode terms' switches, applied in resolve() like the others (for A/B runs, read once; a
// number outside its range counts as unset): KFORGE_HGEMM_DECODE_OVERLAP (in [0, 1]) in place of
// DeviceModel::decode_overlap; KFORGE_HGEMM_DECODE_WAVE_US and KFORGE_HGEMM_DECODE_SLICE_US
// (microseconds in [0, 100]) in place of decode_wave_us and decode_slice_us;
// KFORGE_HGEMM_DECODE_KSTEP=0 clears the K-tile floor (decode_kstep_us, decode_fill_us);
// KFORGE_HGEMM_DECODE_SIBLINGS=0 and KFORGE_HGEMM_DECODE_UNIFORM=0 clear decode_siblings and
// decode_uniform.
int64_t small_k_limit();
bool small_k_regime(const kforge_hgemm_problem& p, const DeviceModel& d);

// CTAs of `v` resident at once on device `dev` (whole clusters), asked once per (device, variant)
// and cached; 0 when unknown (no GPU, dev < 0, or the query failed). Thread-safe.
int resident_ctas_cached(const KernelVariant& v, int dev);

// The cost model's prediction for `v` on `p` on device `dev` of model `d` (resident CTAs from
// d.resident_ctas where set, else resident_ctas_cached; dev < 0: none asked).
double predicted_us(const KernelVariant& v, const kforge_hgemm_problem& p, const DeviceModel& d, int dev);

// What the per-call path needs for one problem, resolved once.
struct Choice {
  const KernelVariant* variant = nullptr;    // for 16-byte aligned pointers
  const KernelVariant* unaligned = nullptr;  // for pointers that are not (a variant of a family without TMA; == variant when it is one)
  size_t workspace = 0;                      // max of both variants' workspace needs
  // kTableTwin: a bf16 problem on the bf16 twin of the fp16 entry of exactly its shape.
  // kSmallK: small_k_regime, the small-K family's best by the model (before step 2).
  // kGemv: the GEMV-like family's best by the model, in place of the choice above (gemv_choice).
  enum class How { kNone, kTable, kTableTwin, kNeighbour, kModel, kSmallK, kGemv } how = How::kNone;
};
const char* to_string(Choice::How h);

// A tuned table with its indices: an exact-match hash and each entry's log sizes. Immutable
// after construction; thread-safe to query. `table` must outlive it.
class Dispatcher {
 public:
  Dispatcher(const DispatchEntry* table, size_t n);
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // The full resolution above for `p` on a device of model `d` (dev: its index, for resident
  // CTA counts; -1 for none). Pure: no memo.
  Choice resolve(const kforge_hgemm_problem& p, const DeviceModel& d, int dev) const;
  // resolve(), memoised per host thread (a hash map per thread, no lock on a hit; up to
  // kMemoEntries problems per thread, then it starts again from empty). Keyed by this
  // dispatcher's identity (never reused), the problem and the device model's SMs and cc.
  Choice resolve_cached(const kforge_hgemm_problem& p, const DeviceModel& d, int dev) const;
  static constexpr size_t kMemoEntries = 4096;

  // The tuned entry for exactly `p` whose variant supports it on cc, or nullptr.
  const KernelVariant* exact(const kforge_hgemm_problem& p, int cc) const;
  // For a bf16 problem: the bf16 twin of the fp16 entry of exactly its shape, if it serves it on cc.
  const KernelVariant* exact_twin(const kforge_hgemm_problem& p, int cc) const;
  // Step 2 alone: the neighbours' proposal the cost model ranks best, or nullptr.
  const KernelVariant* neighbour(const kforge_hgemm_problem& p, const DeviceModel& d, int dev) const;
  size_t size() const { return n_; }

 private:
  struct Coord {
    double lm, ln, lk;
    const KernelVariant* v;
    kforge_hgemm_layout layout;
    kforge_hgemm_acc acc;
    kforge_hgemm_dtype dtype;
    bool small_m;              // small_m_regime(m)
    bool small_n;              // small_n_regime(n)
    const KernelVariant* twin;  // v's padded twin (K or N % 8 != 0), or nullptr
    int64_t m, n, k;            // the entry's shape
    double us;                  // its winner's measured time (0: unknown)
  };
  const DispatchEntry* table_;
  size_t n_;
  uint64_t id_;
  std::unordered_map<uint64_t, std::vector<size_t>> exact_;  // hash of (m, n, k, layout, acc, dtype) -> entries
  std::vector<Coord> coords_;                                // entries whose variant this build has
};

// The tuned variant for exactly this problem, if that variant supports it (a linear scan).
const KernelVariant* table_choice(const DispatchEntry* table, size_t n, const kforge_hgemm_problem& p);
// Step 3 alone: the cost model's best variant for `p` on a device of `sms` SMs and compute
// capability `cc` (nominal throughput; never nullptr for m, n, k >= 1 on cc >= 80).
const KernelVariant* model_choice(const kforge_hgemm_problem& p, int sm_count, int compute_capability);
const KernelVariant* model_choice(const kforge_hgemm_problem& p, const DeviceModel& d, int dev, int family_cc);
// The whole resolution's variant (builds a Dispatcher for the call: for tools and tests; the
// per-call path keeps one Dispatcher and uses resolve_cached).
const KernelVariant* choose(const DispatchEntry* table, size_t n, const kforge_hgemm_problem& p, int sm_count,
                            int compute_capability);

}  // namespace kforge::kernels
