// The HGEMM cost model: a kernel configuration's predicted time on a problem, from KernelConfig
// fields alone (tile, split-K, schedule, family), the device's SM count and throughput, and how
// many CTAs of the variant fit at once. One model, used by both the tuner (which variants are
// worth measuring on a shape) and the dispatcher (which of the neighbouring tuned winners serves
// a shape off the table, and the choice where no neighbour can serve it). Only the ranking
// matters: predictions are not times to quote.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/hgemm/kernel_api.hpp"

namespace kforge::kernels {

// What the model knows about a device. A measured tensor peak and bandwidth (the tuner's
// calibrated ceilings) or nominal figures for the compute capability (nominal_device_model).
struct DeviceModel {
  int sms = 0;                 // streaming multiprocessors (0: unknown; the model then assumes 1)
  int cc = 0;                  // compute capability, major * 10 + minor
  double tensor_tflops = 0;    // dense fp16 tensor peak of the whole device
  double bandwidth_gbs = 0;    // device memory bandwidth
  // The flat 5 us split-K charge on decode tiles too, as before the nineteenth session's refit
  // (the dispatcher sets it under KFORGE_HGEMM_SPLIT_TWINS=0, for A/B measurements).
  bool flat_split_charge = false;
  // The small-K family's whole-K variants may serve K past the outer products' 8. On by default
  // since they were measured (H100, twenty-fourth session: faster on each of the five off-grid
  // shapes they took, 1.05-1.42x in graph mode, after the whole-K GPU sweep passed); the dispatcher
  // clears it under KFORGE_HGEMM_WHOLEK=0, for A/B runs.
  bool whole_k = true;
  // The stream-K variants may be chosen off the table (the dispatcher sets it under
  // KFORGE_HGEMM_STREAMK=1: off by default until they are measured on a GPU).
  bool stream_k = false;
  // Decode tiles (2M < BM) with more CTAs than fit at once pay for their waves, a split-K
  // cluster's last one as a whole one (see predicted_us). Measured on the off-grid set (H100,
  // graph mode): neutral beside the plain tiles alone (twenty-fourth session: 0.943 on, 0.944 off),
  // ahead once the swapped-role tiles compete (twenty-fifth: decode shapes 0.921 -> 0.931, whole
  // set 0.951 -> 0.955; it fixed 9x4096x4096, 15x4096x4096 and 10x5120x3072, 1.28-1.50x, and cost
  // 0.79-0.87 where it moved shapes to split-K 8 clusters tuned on the H200). On by default; the
  // dispatcher clears it under KFORGE_HGEMM_DECODE_TAIL=0.
  bool decode_tail = true;
  // The swapped-role decode tiles (KernelConfig::swap_ab) may be chosen off the table. On by
  // default since they were measured (dispatch.hpp, swap_enabled); the dispatcher clears it under
  // KFORGE_HGEMM_SWAP=0, for A/B runs.
  bool swap_ab = true;
  // The share of a decode tile's padded wgmma time (or of its loads', whichever is shorter) that
  // does not hide under the other (decode tiles, 2M < BM, and the swapped ones). Fitted on an H100
  // (twenty-fifth session, graph mode, every Hopper variant on 10 decode probe shapes, with their
  // resident counts): the model's own pick ran at 0.918 of the best variant with 0 (ties between
  // tiles that stream the same bytes broken by table order: 128-row tiles, twice the padded rows
  // of 64-row ones), 0.939 with 0.1 to 0.3, 0.918 again from 0.4. The dispatcher takes
  // KFORGE_HGEMM_DECODE_OVERLAP (a number in [0, 1]) in its place.
  double decode_overlap = 0.2;
  // Decode tiles (decode_tile, and the swapped ones), refitted on an H100 (twenty-sixth session,
  // graph mode, tn): every Hopper variant timed on 30 decode shapes, 10 from the twenty-fifth
  // session's probe and 20 more (decode-train shapes, and N from 64 to 768 whose few output tiles
  // leave most SMs idle), 1,310 points. Ranked by the nominal model as the dispatcher ranks them, the
  // model's own pick ran at 0.811 of the best variant before (0.688 on the 20 new shapes, where
  // split-K 8 and 16 clusters won by 1.4-2x while the model charged each extra K slice 0.5 us) and
  // at 0.984 on both sets with these (mean |log error| within a shape 0.17 and 0.28 -> 0.11 and
  // 0.10; the grid searched is in docs/perf-notes.md):
  // - decode_wave_us: each wave of CTAs past the first (more than fit at once) starts with empty
  //   pipelines, and a split-K cluster's waits for its last CTA (decode_spill_us);
  // - decode_kstep_us + decode_fill_us / STAGES: the least time a CTA spends on one K tile of 64,
  //   however narrow its tile (decode_kstep_floor_us), a bound on the whole kernel: with few CTAs
  //   each running a long K, it decides;
  // - decode_cluster_us + decode_slice_us per extra K slice: a split-K cluster's launch and
  //   reduction (decode_split_charge_us).
  // The dispatcher takes KFORGE_HGEMM_DECODE_WAVE_US and KFORGE_HGEMM_DECODE_SLICE_US in place of
  // the first and the last, and clears the floor under KFORGE_HGEMM_DECODE_KSTEP=0, for A/B runs.
  double decode_wave_us = 2.3;
  double decode_kstep_us = 0.135;
  double decode_fill_us = 0.66;
  double decode_slice_us = 0.05;
  double decode_cluster_us = 1.0;
  // Dispatch step 2 on decode shapes (M <= the decode regime's limit): every Hopper variant that
  // serves the problem competes with the neighbours' proposals (decode_siblings), and every Hopper
  // proposal is ranked at the nearest Hopper proposal's calibration (decode_uniform), so that this
  // model alone ranks them. Measured on an H100 (twenty-sixth session, off-grid set, graph mode):
  // decode shapes 0.945 -> 0.947 (siblings) -> 0.953 (both), the whole set 0.961 -> 0.964. Since
  // the thirty-sixth session the padded Hopper tiles are among the siblings, and the siblings
  // compete in the cost model's own choice on small-M problems too (model_choice: problems no
  // tuned entry of their regime serves); since the thirty-seventh session the decode family's own
  // tiles compete among the neighbours' proposals too. On by default; the dispatcher clears them under
  // KFORGE_HGEMM_DECODE_SIBLINGS=0 and KFORGE_HGEMM_DECODE_UNIFORM=0.
  bool decode_siblings = true;
  bool decode_uniform = true;
  // The GEMV-like family (Family::kGemv) may take a problem off the table (dispatch.hpp,
  // gemv_choice). On by default since the thirtieth session (its final source passed the GPU sweep,
  // GemvVariantsPassVerificationOnASweep, and the A/B on 28 tiny-output problems, H100 graph mode,
  // went 0.924 -> 1.129 of cuBLASLt); the dispatcher clears it under KFORGE_HGEMM_GEMV=0. (The tuner
  // measures and verifies the family as any other, and a tuned entry naming it is used.)
  bool gemv = true;
  // Within it, the variants holding the small operand in registers (GemvX, K <= x_regs_k): any K
  // alignment, any number of rows, an nn B. On since the thirty-fourth session (the GEMV sweep
  // passed with them on an H100; 3x10507x161 tn 8.0 -> 5.4 us, the off-grid shape's ratio 0.48 ->
  // 0.73); the dispatcher clears it under KFORGE_HGEMM_GEMVX=0, for A/B runs.
  bool gemv_xregs = true;
  // Among them, the ones with X in shared memory and wider steps (KernelConfig::stages 1,
  // gemv_xsmem_kernel; thirty-fifth session). Off until a GPU run has verified and timed them: the
  // dispatcher sets it under KFORGE_HGEMM_GEMVXS=1, for A/B runs.
  bool gemv_xsmem = false;
  // Dispatch step 2 on tiny short-K problems with many outputs (dispatch.hpp, kShortVoteK): the nearest entries vote
  // for their own winners instead of the model ranking the proposals (it prices them alike there).
  // On by default; the dispatcher clears it under KFORGE_HGEMM_SHORTK_VOTE=0, for A/B runs.
  bool short_k_vote = true;
  // Where set, the CTAs of a variant resident at once on this device, in place of asking the GPU
  // (the dispatcher asks it only for a device index >= 0): the dispatcher's CPU tests replay the
  // counts an H100 reported beside its probe times. Null: ask the GPU.
  int (*resident_ctas)(const KernelVariant& v) = nullptr;
  bool operator==(const DeviceModel&) const = default;  // every field (the dispatcher's memo key)
};

// The device's memory bandwidth in bytes per microsecond (1 TB/s where the model holds none).
inline double bytes_per_us(const DeviceModel& d) { return (d.bandwidth_gbs > 0 ? d.bandwidth_gbs : 1000.0) * 1e3; }

// The share of the device's bandwidth that `streaming` CTAs of a decode tile reach, each streaming B
// through one pipeline: measured on the H200 (twelfth session, 64-row tiles, unsplit) 0.52 with 64
// CTAs (31x4096x4096), 0.55 with 36, 0.69 with 192 and 0.81 with 296 (28x37888x3584).
inline double decode_stream_share(double streaming, double sms) { return 0.45 + 0.35 * std::min(1.0, streaming / sms); }

// Nominal throughput for a compute capability: ~6 TFLOP/s of fp16 tensor work per SM on Hopper
// (measured 788 TFLOP/s on 132 SMs of the H200), ~2.9 on Ampere (312 TFLOP/s on 108 SMs of the
// A100), and the memory of an H200 / A100. The dispatcher uses these when nothing was measured.
inline DeviceModel nominal_device_model(int sms, int cc) {
  DeviceModel d;
  d.sms = sms;
  d.cc = cc;
  const double per_sm = cc >= 90 ? 6.0 : cc >= 80 ? 2.9 : 1.0;
  d.tensor_tflops = per_sm * std::max(1, sms);
  d.bandwidth_gbs = cc >= 90 ? 4500.0 : cc >= 80 ? 1800.0 : 500.0;
  return d;
}

// CTAs a launch of `c` has on an M x N problem: its tiles times its split-K cluster.
// (Decode variants, splitk_auto: the tiles of the streamed side, before the run-time split.)
inline double cta_count(const KernelConfig& c, int64_t m, int64_t n) {
  if (c.splitk_auto) return std::ceil(double(c.max_n > 0 ? m : n) / c.bn);
  if (c.swap_ab) return std::ceil(double(n) / c.bm) * std::ceil(double(m) / c.bn) * c.splitk;  // tiles of C^T
  return std::ceil(double(m) / c.bm) * std::ceil(double(n) / c.bn) * c.splitk;
}

// The decode family's generic path (rows not 16-byte multiples: the streamed operand W's when its
// rows' extent is not a multiple of 8, K for tn B or a swapped A, N for nn B; the small operand X's
// likewise): each K tile's elements are loaded one by one into registers and stored before the
// tile's mma, so the pipeline hides nothing: per K tile of a CTA, a memory latency and each
// thread's guarded loads (elements inside the matrix only: loads past K or past the last row are
// skipped). Fitted on an H100 (twenty-ninth session, graph mode, the decode variants of
// data/hgemm/probes/offgrid-variants-h100.csv on its 13 unaligned problems x 2 layouts, 140 times):
// 0.74 us per K tile and 0.029 us per element per thread; mean |log error| of those variants 0.54
// -> 0.14 (the model without it put 3x10507x161 at 2.9 us on every decode tile, measured 7.2-12.3,
// and kept the problem there while the whole-K 8x64 tile ran it in 6.2).
// K tiles of each CTA of a decode launch, times its waves of resident CTAs: what both the K-tile
// floor and the generic path's per-tile charge are counted in.
inline double skinny_k_tile_rounds(const KernelConfig& c, int64_t streamed, int64_t k, int splits, int resident) {
  const double s = std::max(1, splits);
  return std::ceil(std::ceil(double(k) / c.bk) / s) * std::ceil(std::ceil(double(streamed) / c.bn) * s / std::max(1, resident));
}

inline double skinny_generic_us(const KernelConfig& c, int64_t m, int64_t n, int64_t k, int splits, int resident) {
  const bool swap = c.max_n > 0;
  const int64_t streamed = swap ? m : n, small = swap ? n : m;
  const bool w_k = swap || !c.b_rows_n, x_k = !swap || !c.b_rows_n;  // rows running along K
  const bool gen_w = (w_k ? k : streamed) % 8 != 0, gen_x = (x_k ? k : small) % 8 != 0;
  if (!gen_w && !gen_x) return 0.0;
  const double threads = std::max(32, 32 * c.consumers);
  const double cols = double(std::min<int64_t>(c.bk, k));
  const double elems = ((gen_w ? double(std::min<int64_t>(c.bn, streamed)) : 0.0) +
                        (gen_x ? double(std::min<int64_t>(c.bm, small)) : 0.0)) * cols / threads;
  return skinny_k_tile_rounds(c, streamed, k, splits, resident) * (0.74 + 0.029 * elems);
}

// The decode family (Family::kSkinny): memory-bound by design. Its CTAs ((N / bn) x S, or (M / bn)
// x S with swapped roles, S chosen by auto_splits) each keep (stages - 1) K tiles of loads in
// flight, so that the achieved bandwidth is that of the CTAs' in-flight bytes over a loaded DRAM
// latency (~1.5 us), up to ~90% of the device's; the mma.sync work on MT padded rows runs at about half the wgmma rate; each CTA's K
// tiles take at least ~0.25 us each (a floor); S > 1 adds the reduction kernel (a launch, and the
// partials written and read once); rows that are not 16-byte multiples add skinny_generic_us.
inline double skinny_predicted_us(const KernelConfig& c, int64_t m, int64_t n, int64_t k, const DeviceModel& d,
                                  int resident) {
  const double sms = std::max(1, d.sms);
  const int res = resident > 0 ? resident : 2 * int(sms);
  const int64_t streamed = c.max_n > 0 ? m : n;  // swapped roles (small N): A is the streamed operand
  const int s = c.splitk_auto ? auto_splits(c, streamed, k, res, c.max_n > 0 ? n : m) : std::max(1, c.splitk);
  const double tiles = std::ceil(double(streamed) / c.bn);
  const double ctas = tiles * s;
  const double bw = bytes_per_us(d);
  const double bytes = 2.0 * (double(m) * k + double(k) * n + double(m) * n);
  // In flight per CTA: its streamed operand's tiles (the small operand's rows are few, mostly zero fill).
  const double per_cta_bw = double(std::max(1, c.stages - 1)) * c.bn * c.bk * 2.0 / 1.5;  // bytes per us
  const double in_flight_bw = std::min(ctas, double(res)) * per_cta_bw;
  // Every column tile's CTAs read their slice of the small operand from L2 (its MT rows are few,
  // but re-read once per column tile): narrower tiles re-read it more often. Taken at about twice
  // the device memory's bandwidth.
  const double small_rows = double(c.max_n > 0 ? n : m);
  const double reread_bytes = tiles * double(k) * small_rows * 2.0;
  const double mem_us = bytes / std::min(0.9 * bw, in_flight_bw) + reread_bytes / (2.0 * bw);
  const double tflops = d.tensor_tflops > 0 ? d.tensor_tflops : sms;
  const double busy = std::min(1.0, ctas / sms);
  const double mma_us = 2.0 * c.bm * (tiles * c.bn) * k / (tflops * 1e6 * 0.5 * busy);
  const double reduce_us = s > 1 ? 2.0 + 2.0 * s * double(m) * n * 4.0 / bw : 0.0;
  // Each CTA's K tiles one after another, ~0.25 us each whatever the tile's depth (64 or 128): with
  // few CTAs running a long K this decides (1x1x65536: 32 K tiles per CTA at 16 splits took 10.9
  // us where the bytes alone predicted 5.4; H100, twenty-ninth session, graph mode).
  const double floor_us = skinny_k_tile_rounds(c, streamed, k, s, res) * 0.25;
  return std::max({mem_us, mma_us, floor_us}) + reduce_us + skinny_generic_us(c, m, n, k, s, res) + 2.0;
}

// The small-K family (Family::kSmallK, K <= max_k): an outer product on the CUDA cores, bound by
// the bytes it moves (smallk_store_us) or by its fp32 FMAs (smallk_fma_us), plus each round of
// tiles' fill (one memory latency, ~1 us, at 4 CTAs per SM) and the launch. The store-bound
// figure is the prediction behind the family: 13822x3521x3 writes 97 MB, ~27 us, where cuBLASLt
// took 67 us on the H200 (this family: 49-51 us).
//
// The bytes: C written once, A and B read once, at 80% of the device's bandwidth.
inline double smallk_store_us(int64_t m, int64_t n, int64_t k, const DeviceModel& d) {
  const double bw = bytes_per_us(d);
  return 2.0 * (double(m) * k + double(k) * n + double(m) * n) / (0.8 * bw);
}

// The FMAs: every tile computes BN columns (padding included: a 4-column problem on 128-column
// tiles pays for 128) of its rows (all BM, or M rounded to 4 when M < BM: passes past the last
// row are skipped) over K rounded to 4; one SM's tiles after another, at 22% of 128 FMAs per SM
// per clock at ~1.7 GHz: fitted on the H200 (sixteenth session, graph mode): 8192x8192x8 took
// 82-85 us on 128 x 128 tiles, 31 tiles per SM (its stores alone: ~37 us).
inline double smallk_fma_us(const KernelConfig& c, int64_t m, int64_t n, int64_t k, const DeviceModel& d) {
  const double sms = std::max(1, d.sms);
  const double tiles = cta_count(c, m, n);  // one CTA per tile (no split)
  const double rows = m >= c.bm ? double(c.bm) : 4.0 * std::ceil(double(m) / 4.0);
  const double k4 = 4.0 * std::ceil(double(k) / 4.0);
  return std::ceil(tiles / sms) * rows * c.bn * k4 / (128.0 * 1.7e3 * 0.22);
}

// The whole-K variants (KernelConfig::whole_k). Each CTA fills its tile (A's rows and B's columns,
// the whole K, into shared memory: one memory latency with 16-byte loads; nn gathers B's tile
// element by element, in passes of 16 loads per thread, a latency each plus each thread's loads)
// and each thread then computes 2 x 2 outputs over K, a dependent chain per 4 of K. Rounds of
// CTAs: 2 resident per SM for the 256-thread tiles, 3 for the 128-thread ones. Bound below by
// each SM's throughput over its tiles: the padded FMAs (bm x bn x K per tile) plus the fill's
// unpacking ((rows + columns) x K per tile, 8-way bank conflicts) and, nn, the gathered columns'
// stores (columns x K per tile, strided by the row pitch), and by the bytes. Fitted on the
// H100 (graph mode, data/hgemm/probes/wholek-variants-h100.csv: 110 variant times, 22 problems of
// K 1-255, both layouts; twenty-eighth session, the nn variants without register spills): launch
// 0.58 us; per round, fill 0.89 us + 0.021 us per K element (K rounded to 4), and for nn -0.31 us
// (its B tile is not vector-filled) + 0.36 per gather pass + 0.12 per gathered load per thread;
// throughput: FMAs at 33% of 128 per SM per clock at ~1.7 GHz, 0.17 ns per filled element, 0.35
// ns per gathered one. Mean |log error| 0.083, and the model's pick among the five tiles is the
// fastest on all 22 problems (the twenty-seventh session's terms: 0.181, 0.985 of the fastest).
inline double wholek_rounds(const KernelConfig& c, int64_t m, int64_t n, const DeviceModel& d) {
  const double sms = std::max(1, d.sms);
  const double resident = double(c.bm) * c.bn / 4.0 <= 128.0 ? 3.0 : 2.0;
  return std::ceil(cta_count(c, m, n) / (resident * sms));
}
inline double wholek_throughput_us(const KernelConfig& c, int64_t m, int64_t n, int64_t k, const DeviceModel& d) {
  const double sms = std::max(1, d.sms);
  const double k4 = 4.0 * std::ceil(double(k) / 4.0);
  const double lines = double(std::min<int64_t>(m, c.bm) + std::min<int64_t>(n, c.bn));
  const double per_sm = std::ceil(cta_count(c, m, n) / sms);
  const double gathered = c.gather_b ? double(std::min<int64_t>(n, c.bn)) * k4 * 3.5e-4 : 0.0;
  return per_sm * (double(c.bm) * c.bn * k4 / (128.0 * 1.7e3 * 0.33) + lines * k4 * 1.7e-4 + gathered);
}
inline double wholek_chain_us(const KernelConfig& c, int64_t m, int64_t n, int64_t k, const DeviceModel& d) {
  const double k4 = 4.0 * std::ceil(double(k) / 4.0);
  const double threads = std::max(32.0, double(c.bm) * c.bn / 4.0);
  const double cols = double(std::min<int64_t>(n, c.bn));
  const double loads = c.gather_b ? std::ceil(cols * double(k) / threads) : 0.0;  // per thread
  const double gather = c.gather_b ? -0.31 + 0.36 * std::ceil(loads / 16.0) + 0.12 * loads : 0.0;
  return wholek_rounds(c, m, n, d) * (0.89 + 0.021 * k4 + gather);
}

inline double smallk_predicted_us(const KernelConfig& c, int64_t m, int64_t n, int64_t k, const DeviceModel& d) {
  if (c.whole_k)
    return 0.58 + std::max({smallk_store_us(m, n, k, d), wholek_throughput_us(c, m, n, k, d), wholek_chain_us(c, m, n, k, d)});
  const double sms = std::max(1, d.sms);
  const double tiles = cta_count(c, m, n);  // one CTA per tile (no split)
  const double fill_us = 1.0 * std::ceil(tiles / (4.0 * sms));
  return std::max(smallk_store_us(m, n, k, d), smallk_fma_us(c, m, n, k, d)) + fill_us + 2.0;
}

// A GEMV launch's shape: its row groups (R rows of W each), their split (gemv_split) and its CTAs.
struct GemvLaunch {
  int rows_per_warp = 1;  // R
  int64_t groups = 0;
  GemvSplit split;
  double ctas = 0;
};
inline GemvLaunch gemv_launch(const KernelConfig& c, int64_t m, int64_t n, int64_t k, const DeviceModel& d) {
  const int warps = std::max(1, c.consumers);
  const int r = std::max(1, c.bn / warps);  // rows of W per warp
  const int64_t rows = c.max_n > 0 ? m : n;
  GemvLaunch l;
  l.rows_per_warp = r;
  l.groups = (rows + r - 1) / r;
  l.split = gemv_split(l.groups, k, std::max(1, d.sms), k % 8 == 0, warps, d.cc >= 90);
  l.ctas = std::ceil(double(l.groups) * l.split.groups / warps) * l.split.splits;
  return l;
}

// The GEMV-like family (Family::kGemv, gemv_gemm.cuh): warps streaming R rows of W (the long
// operand) at a time beside the small operand's elements, G warps of a CTA and S CTAs of a cluster
// to a row group (gemv_split). A CTA's time: a fixed part (launch, the warps' and the CTAs'
// reductions: more with R = 4, whose warps sum 4 x 8 values) and a latency per block of loads in
// flight per lane (U blocks of 256 elements of K with 16-byte loads, U = 2 for R = 1 and 1 for R =
// 4; of 32 element by element), longer with more rows of X to load beside W's (xr); a cluster adds
// its reduction; CTAs run in rounds of what fits (the resident count, else 2 per SM); bound below
// by the bytes. Fitted on an H100 (twenty-ninth session, graph mode, every GEMV variant on 31 probe
// problems, data/hgemm/probes/tinyout-variants-h100.csv): R = 1, 1.5 us + 0.2 + 0.1 x xr per
// block; R = 4, 2.0 + 0.35 + 0.12 x xr; a cluster 0.8. Element by element (K % 8 != 0 with R = 4) and a swapped nn B of
// several columns (X gathered element by element along K) measured 2-10x slower: charged, and kept
// off by the dispatcher (gemv_choice) past kGemvNnMaxN columns. The gather's charge per block grows
// with the square of the columns, 0.12 x xr^2 (1.0 x xr until the thirty-seventh session): fitted on
// the 29 nn rows of N >= 2 in the probe tables (H100, graph mode), mean |log error| 0.58 -> 0.50;
// at N = 2 it was 2-3x high (32x2x65536 nn, R = 4: 13.2 us predicted, 7.1 measured, now 7.1), at
// N = 8 it hardly moves (8 -> 7.7 per block). K % 8 != 0 with R = 1 takes the shifted 16-byte path (W's
// rows as the aligned vectors that cover them, X by element, one block of 256 per lane in flight):
// 0.4 + 0.37 x xr per block (H100, thirtieth session: 2x1x1500 2.1 us, 5x1x3001 3.1, 1x1x65535
// 5.3, 7x7x20001 7.8-8.8). (Two blocks per lane and X as vectors where its row starts at W's
// offset measured slower but at the longest K: 2x1x1500 2.8, 1x1x65535 4.6.)
//
// X in registers (c.x_regs_k > 0, GemvX): one round of the resident CTAs (else 2 per SM), whose
// warps step through W's rows RW (= bn / warps) at a time, the next step's loads in flight while
// this one is summed. Each step waits about one memory latency (its loads were issued a step
// earlier, and a step's sums are short), and the fixed part (launch, X's loads, the first step's
// W) and each step grow with the rows of X held (MT: FMAs, the reduce-scatter). Fitted on an H100
// (thirty-fourth session, graph mode, every GemvX variant on 6 problems x both layouts,
// data/hgemm/probes/gemvx-h100.csv): 1.8 + 0.275 MT us fixed, 0.5 + 0.0625 MT per step
// (MT = 4: 2.9 + 0.75 per step; MT = 8: 4.0 + 1.0); bound below by the bytes.
// X in shared memory (stages 1, gemv_xsmem_kernel): RW rows a warp a step (6 or 4 against 2), one
// step's loads at a time, so each step also pays its FMAs (RW x MT x 32 KPL a lane) unhidden:
// charged 0.03 us per row and 4 rows of X. A first guess before any run (thirty-fifth session).
inline double gemv_xregs_predicted_us(const KernelConfig& c, int64_t m, int64_t n, int64_t k, const DeviceModel& d,
                                      int resident) {
  const double sms = std::max(1, d.sms);
  const bool swap = c.max_n > 0;
  const int64_t rows = swap ? m : n, small = swap ? n : m;
  const int warps = std::max(1, c.consumers);
  const int rw = std::max(1, c.bn / warps);
  const double mt = std::max(1, swap ? c.max_n : c.max_m);
  const double groups = std::ceil(double(rows) / rw);
  const double res = resident > 0 ? double(resident) : 2.0 * sms;
  const double steps = std::ceil(groups / std::max(1.0, res * warps));
  const double bytes = 2.0 * (double(rows) * k + double(small) * k + double(m) * n);
  const double per_step = 0.5 + 0.0625 * mt + (c.stages == 1 ? 0.03 * rw * mt / 4.0 : 0.0);
  return std::max(1.8 + 0.275 * mt + steps * per_step, bytes / (0.8 * bytes_per_us(d)));
}

inline double gemv_predicted_us(const KernelConfig& c, int64_t m, int64_t n, int64_t k, const DeviceModel& d,
                                int resident) {
  if (c.x_regs_k > 0) return gemv_xregs_predicted_us(c, m, n, k, d, resident);
  const double sms = std::max(1, d.sms);
  const bool swap = c.max_n > 0;
  const int64_t rows = swap ? m : n, small = swap ? n : m;
  const bool vec = k % 8 == 0;  // W's rows (A, or a tn B) are K-contiguous either way
  const bool x_gathered = swap && c.b_rows_n && small > 1;  // X: K rows of N, read along K
  const GemvLaunch l = gemv_launch(c, m, n, k, d);
  const int r = l.rows_per_warp;
  const GemvSplit sp = l.split;
  const double ctas = l.ctas;
  const double res = resident > 0 ? double(resident) : 2.0 * sms;
  const double rounds = std::ceil(ctas / res);
  const bool shift = !vec && r == 1 && k >= 8;  // W's rows as shifted 16-byte vectors, X by element
  const double block = vec ? 256.0 * (r == 1 ? 2 : 1) : shift ? 256.0 : 32.0 * (r == 1 ? 8 : 4);
  const double batches = std::ceil(double(k) / (double(sp.groups) * sp.splits) / block);
  const double xr = double(small);
  double per_batch = r == 1 ? 0.2 + 0.1 * xr : 0.35 + 0.12 * xr;
  if (shift) per_batch = 0.4 + 0.37 * xr;  // X by element: eight loads per vector of W
  else if (!vec) per_batch = 0.6 + 0.2 * xr;
  if (x_gathered && !shift) per_batch += 0.12 * xr * xr;
  const double fixed = r == 1 ? 1.5 : 2.0;
  const double chain = rounds * (fixed + batches * per_batch) + (sp.splits > 1 ? 0.8 : 0.0);
  const double bytes = 2.0 * (double(rows) * k + double(small) * k + double(m) * n);
  return std::max(chain, bytes / (0.8 * bytes_per_us(d)));
}

// The fraction of the nominal tensor peak one sm90 tile sustains over its K loop, by tile shape and
// schedule (KernelConfig fields only). Fitted on the H200 (fourteenth session, docs/perf-notes.md):
// the all-variant tune of data/shapes/fill-train.txt (166 shapes of >= 5e9 FLOP x 2 layouts,
// offline), each time taken as the FLOP of the whole rounds the tiles run in; medians 1.00
// (128x256 and 256x128, persistent), 0.97 (128x192), 0.94 / 0.96 (128x128 cooperative /
// ping-pong), 0.90 (64x256 ping-pong), 0.71 (128x64 ping-pong), 0.59 (64x128), 0.24 (64x64, one
// consumer warpgroup). The 128x128 tiles are nearly as efficient as the 128x256 ones, so on shapes
// whose 128x256 tiles leave a last round mostly empty (2042x5120x5120: 320 tiles, 3 rounds on 132
// SMs, against 5 full rounds of 128x128) the smaller tile wins; the older rule (0.55 + 0.4 x area
// / 128x256) could not see it. Not persistent: x0.93 (x0.96 from 128x256 up); ping-pong x1.02;
// TMA multicast pairs x0.95 (x0.98 from 128x256 up).
inline double sm90_tile_efficiency(const KernelConfig& c) {
  const double area = double(c.bm) * c.bn;
  // Log-linear between the measured tile areas.
  static constexpr double kArea[] = {4096, 8192, 16384, 24576, 32768};
  static constexpr double kEff[] = {0.26, 0.68, 0.94, 0.97, 1.00};
  double base = kEff[0];
  if (area >= kArea[4]) {
    base = kEff[4];
  } else if (area > kArea[0]) {
    for (int i = 1; i < 5; ++i)
      if (area <= kArea[i]) {
        const double t = std::log(area / kArea[i - 1]) / std::log(kArea[i] / kArea[i - 1]);
        base = kEff[i - 1] + t * (kEff[i] - kEff[i - 1]);
        break;
      }
  }
  if (c.bm < 128 && c.bn >= 256) base *= 0.96;  // 64x256: one warpgroup's rows per tile
  const bool wide = area >= 32768;
  if (!c.persistent) base *= wide ? 0.96 : 0.93;
  else if (c.pingpong) base *= 1.02;
  if (c.multicast > 1) base *= wide ? 0.98 : 0.95;
  return base;
}

// A decode tile: M fills at most half of the tile's rows (2M < BM), or exactly half of a 64-row
// tile (M = 32: fitted with the other decode shapes, twenty-sixth session, H100 probe of 30 decode
// shapes x every Hopper variant: with the refitted terms the model's own pick ran at 0.969 of the
// best variant with 2M < BM alone, 0.984 with M = 32 on 64-row tiles counted too).
inline bool decode_tile(const KernelConfig& c, int64_t m) { return 2 * m < c.bm || (2 * m == c.bm && c.bm <= 64); }

// The least time one K tile (64) takes on a decode tile's CTA (DeviceModel::decode_kstep_us,
// decode_fill_us): the wait for its stage, the wgmmas' latency and the stage's release, with a fill
// latency that the other stages in flight hide. Measured slopes (H100, twenty-sixth session, graph
// mode, time against K tiles per CTA): ~0.30 us with 4 stages (8x56x5712 nn, 64x64 split-K 4 and
// 8), 0.19 with 12 (the swapped 64x8 tile at 8x56x5712 and 1x4096x4096), 0.15-0.22 with 8
// (1x320x12288, 64x64 split-K 8 and 16; 15x4096x4096); the fit: 0.135 + 0.66 / STAGES.
inline double decode_kstep_floor_us(const KernelConfig& c, const DeviceModel& d) {
  return d.decode_kstep_us + d.decode_fill_us / std::max(1, c.stages);
}

// The K-tile floor of a decode launch: its waves (one without the wave rule, decode_tail) of CTAs
// each running k_per / 64 K tiles at decode_kstep_floor_us.
inline double decode_floor_us(const KernelConfig& c, double k_per, double waves, const DeviceModel& d) {
  return (d.decode_tail ? waves : 1.0) * k_per / 64.0 * decode_kstep_floor_us(c, d);
}

// The extra waves of a decode launch (DeviceModel::decode_wave_us): 0 where its CTAs fit at once,
// where the resident count is unknown (0), or without the decode wave rule.
inline double decode_spill_us(double ctas, int resident, const DeviceModel& d) {
  if (!d.decode_tail || resident <= 0 || ctas <= resident) return 0.0;
  return (std::ceil(ctas / resident) - 1.0) * d.decode_wave_us;
}

// A decode launch's main time (decode_tile, and the swapped tiles): the longer of its padded wgmma
// work (compute_us) and its loads (mem_us), plus the share of the shorter that does not hide under
// it (DeviceModel::decode_overlap); at least its K-tile floor on the Hopper tiles (decode_floor_us:
// the pipeline the bytes stream through, not work beside them, so it decides only where few CTAs
// each run a long K); plus its extra waves (decode_spill_us).
inline double decode_main_us(const KernelConfig& c, double compute_us, double mem_us, double k_per, double waves,
                             double ctas, int resident, const DeviceModel& d) {
  double t = std::max(compute_us, mem_us) + d.decode_overlap * std::min(compute_us, mem_us);
  if (c.family == Family::kSm90) t = std::max(t, decode_floor_us(c, k_per, waves, d));
  return t + decode_spill_us(ctas, resident, d);
}

// A decode tile's split-K cluster reduction: DeviceModel::decode_slice_us per extra K slice and 2%
// of the kernel's time (the cluster waits for its slowest slice). The slice charge was 0.5 us,
// fitted on the shipped table's decode entries (nineteenth session: which split the tune chose);
// timed per variant it is far less (1x320x12288: split-K 16 ran 12 K tiles per CTA in 4.5 us, and
// split-K 8 its 24 in 6.3), while a cluster launch costs ~1 us more than a plain one on tiny shapes
// (24x152x288: the unsplit swapped 64x16 tile 2.1 us, the 64x64 split-K 3 cluster 3.4): refitted
// with the K-tile floor to 1.0 + 0.05 per extra slice (DeviceModel).
inline double decode_split_charge_us(int splitk, double main_us, const DeviceModel& d) {
  return splitk > 1 ? d.decode_cluster_us + d.decode_slice_us * (splitk - 1) + 0.02 * main_us : 0.0;
}

// The swapped-role decode tiles (KernelConfig::swap_ab, tn, M <= max_m): tiles of C^T, bm rows of B
// (N) by bn rows of A (M). Like the decode tiles below they stream B, at a share of the device's
// bandwidth that grows with the CTAs streaming at once; a second column tile of M (M > bn) reads B
// again, from L2 (taken at twice the bandwidth). Their wgmma work is bm x bn per k16, M padded to
// bn rather than to 64, at half the nominal rate (narrow wgmmas); CTAs past the resident ones run
// as another wave; a split-K cluster adds its reduction as the decode tiles' (decode_slice_us per extra
// slice and 2%). A prediction from the plain tiles' figures, not yet fitted to the swapped ones.
inline double swapped_predicted_us(const KernelConfig& c, int64_t m, int64_t n, int64_t k, const DeviceModel& d,
                                   int resident) {
  const double sms = std::max(1, d.sms);
  const double res = resident > 0 ? double(resident) : sms;
  const double col_tiles = std::ceil(double(m) / c.bn);
  const double ctas = cta_count(c, m, n);
  const double bw = bytes_per_us(d);
  const double bytes = 2.0 * (double(m) * k + double(k) * n + double(m) * n);
  const double reread = (col_tiles - 1.0) * 2.0 * double(k) * n;
  const double streaming = std::min(ctas, res);
  const double share = decode_stream_share(streaming, sms);
  const double waves = std::ceil(ctas / res);
  const double mem_us = (bytes / (bw * share) + reread / (2.0 * bw)) * (waves > 1 ? waves * res / ctas : 1.0);
  const double tflops = d.tensor_tflops > 0 ? d.tensor_tflops : sms;
  const double k_per = std::ceil(double(k) / c.splitk / 64.0) * 64.0;
  const double tile_us = 2.0 * c.bm * c.bn * k_per / (tflops * 1e6 / sms * 0.5);
  const double main_us = decode_main_us(c, waves * tile_us, mem_us, k_per, waves, ctas, resident, d);
  return main_us + decode_split_charge_us(c.splitk, main_us, d) + 2.0;
}

// Predicted microseconds of configuration `c` on M x N x K. `resident` is how many CTAs of the
// variant fit at once on the device (whole clusters: a split-K cluster must fit in one GPC, so
// fewer may than SMs); 0 when unknown (then one per SM). Waves of resident CTAs times one CTA's
// tile time at a per-tile-shape efficiency (larger wgmma tiles reuse more operand bytes per FLOP),
// bounded below by the bytes the problem must move, plus a split-K reduction charge and a fixed
// launch cost.
inline double predicted_us(const KernelConfig& c, int64_t m, int64_t n, int64_t k, const DeviceModel& d,
                           int resident) {
  if (c.family == Family::kSkinny) return skinny_predicted_us(c, m, n, k, d, resident);
  if (c.family == Family::kSmallK) return smallk_predicted_us(c, m, n, k, d);
  if (c.family == Family::kGemv) return gemv_predicted_us(c, m, n, k, d, resident);
  if (c.swap_ab) return swapped_predicted_us(c, m, n, k, d, resident);
  const double ctas = cta_count(c, m, n);
  const double sms = std::max(1, d.sms);
  const double res = resident > 0 ? double(resident) : sms;
  // Waves of resident CTAs; CTAs sharing an SM in a wave share its tensor cores. A persistent grid
  // runs whole rounds as well (balanced_grid: every CTA the same number of tiles, ceil(tiles /
  // slots) of them), so its last round costs a whole tile time however few tiles it holds.
  const double waves = std::ceil(ctas / res);
  const double sharing = std::max(1.0, std::min(ctas, res) / sms);
  const double area = double(c.bm) * c.bn;
  // Multicast pairs get no credit: measured 25-58% slower than their twins on the H200
  // (docs/perf-notes.md, fourth session), against +2.7% published on an H100.
  // A tile whose rows are mostly padding (decode shapes) keeps the area rule the decode entries
  // were tuned and calibrated with; every other sm90 tile the measured efficiencies.
  const bool decode = decode_tile(c, m);
  const double eff = c.family != Family::kSm90 ? 0.35
                     : decode                  ? std::min(0.95, 0.55 + 0.4 * area / (128.0 * 256.0))
                                               : 0.92 * sm90_tile_efficiency(c);
  const double k_per = std::ceil(double(k) / c.splitk / 64.0) * 64.0;
  const double tflops = d.tensor_tflops > 0 ? d.tensor_tflops : sms;
  double tile_us = 2.0 * area * k_per / (tflops * 1e6 / sms * eff);
  // The sm_80 family on rows that are not 16-byte multiples (A's when K % 8; B's when K % 8 in tn,
  // N % 8 in nn: KernelConfig::b_rows_n) loads those operands into registers before each K tile's
  // shared store, so the loads are neither pipelined nor hidden under the mma: a CTA's time adds its
  // guarded elements at 0.5 per ns per warp, 1.5x that where the rows are 4- or 8-byte multiples
  // (two or four elements per load); and where C's rows are not 16-byte multiples (N % 8)
  // its epilogue stores element pairs, 0.02 us per pair per thread. Fitted on an H100 (thirty-third
  // session, graph mode, every sm_80 variant on 13 unaligned problems under 1e9 FLOP x tn and nn,
  // 104 times, with their resident CTAs): mean |log error| 0.26 -> 0.16 against the layout-blind charge
  // of ~0.6 elements per ns per warp that charged B in tn at N % 8 (130x66x200 tn, K % 8 == 0: 32 x
  // 32 measured 2.7 us, predicted 4.9; now 3.3), fitted on the H200 before (543x351x1099 on 32x64
  // tiles 69 us, 4095x4097x4093 on 128x128, 62 TFLOP/s). Guarded loads past K are skipped. Fully
  // aligned problems (the fit holds none) keep the plain tile time.
  if (c.family == Family::kSm80 && (k % 8 != 0 || n % 8 != 0)) {
    const auto per_load = [](int64_t extent) { return extent % 2 == 0 ? 1.5 : 1.0; };
    const int64_t b_extent = c.b_rows_n ? n : k;
    double guarded = 0;
    if (k % 8 != 0) guarded += double(c.bm) * double(k) / per_load(k);
    if (b_extent % 8 != 0) guarded += double(c.bn) * double(k) / per_load(b_extent);
    const int warps = std::max(1, c.consumers);
    tile_us += guarded / (500.0 * warps);
    if (n % 8 != 0) tile_us += 0.02 * double(c.bm) * double(c.bn) / 2.0 / (32.0 * warps);
    // Without guarded rows the cp.async pipeline keeps STAGES - 1 K tiles in flight, and a CTA on
    // a few SMs waits ~0.4 us of memory latency per STAGES - 1 tiles (255x997x584 tn, K % 8 == 0,
    // only C unaligned: 32 x 32 ran 8.1 us where the charge above put it at 3.4).
    if (guarded == 0)
      tile_us += 0.4 * std::ceil(double(k) / std::max(1, c.bk)) / double(std::max(1, c.stages - 1));
  }
  // fp16: each input read once, the output written once; C rows that are not 16-byte multiples
  // (N % 8) are stored in 2- and 4-byte pieces, charged as twice their bytes.
  const double bytes = 2.0 * (double(m) * k + double(k) * n + double(m) * n * (n % 8 != 0 ? 2.0 : 1.0));
  const double bw = bytes_per_us(d);
  double mem_us = bytes / bw;
  // A tile whose rows are mostly padding (M under half of bm: decode shapes) streams B through one
  // pipeline per column tile, at a fraction of the device's bandwidth that grows with the CTAs
  // streaming at once (decode_stream_share; at 28x37888x3584 this tile beat the decode family's
  // best, 74 against 90 us).
  // (A stream-K grid streams on its plan's CTAs, one per SM, whatever its tile count.)
  const StreamKPlan plan = c.stream_k && c.family == Family::kSm90
                               ? stream_k_plan(int64_t(ctas), int((k + c.bk - 1) / c.bk), int(sms), kStreamKMinIters)
                               : StreamKPlan{};
  const double streaming = plan.grid > 0 ? double(plan.grid) : ctas;
  const auto stream_share = [&](double streaming_ctas) { return decode_stream_share(streaming_ctas, sms); };
  if (decode && (plan.grid > 0 || ctas <= res || resident <= 0 || !d.decode_tail)) {
    mem_us /= stream_share(streaming);
  } else if (decode) {
    // More decode CTAs than fit at once; only where the count is known, from the GPU (one CTA per
    // SM, the fallback, would understate every variant that fits two).
    // - Split-K clusters (resident: the clusters that fit one CTA per SM, sm90_gemm.cuh): the
    //   clusters past them share SMs two CTAs to one, and those SMs finish last, so each wave,
    //   the last included, takes as long as a full one. Measured on an H100 (twenty-fourth
    //   session, graph mode): 64x128 split-K 4 ran 15x4096x4096 (32 clusters of 4 where 31 fit
    //   one per SM) in 13.7-14.2 us against 8.9-9.5 for the 64x64 split-K 2 tiles (all on their
    //   own SMs), and its tuned entry at 16x3584x4096 (28 clusters) took 7.8 on the H200.
    // - Plain tiles: the whole waves stream at the resident CTAs' share, and the last wave's few
    //   CTAs at what their own loads in flight allow (STAGES stages of the A box's rows, M rounded
    //   to 8, and the B tile, over an unloaded latency of ~0.7 us): the scheduler refills SMs as
    //   CTAs end, so a partial wave is not a whole one.
    const double per_cta = bytes / ctas;
    const double wave_us = res * per_cta / (bw * stream_share(res));
    double t;
    if (c.splitk > 1) {
      t = std::ceil(ctas / res) * wave_us;
    } else {
      const double full = std::floor(ctas / res), tail = ctas - full * res;
      t = full * wave_us;
      if (tail > 0) {
        const double rows = 8.0 * std::ceil(double(std::min<int64_t>(m, c.bm)) / 8.0);
        const double cta_bw = double(std::max(1, c.stages)) * (rows + c.bn) * 64.0 * 2.0 / 0.7;
        t += tail * per_cta / std::min(bw * stream_share(tail), tail * cta_bw);
      }
    }
    mem_us = t;
  }
  // Measured on the H200: a split-K cluster launch with its DSMEM reduction costs ~5 us more than
  // a plain launch doing the same per-CTA work (docs/perf-notes.md, first sessions, before v3
  // issued the S remote loads of the reduction together). On decode tiles (decode_tile) that flat
  // charge contradicts the later measurements: 64x64 split-K 2 ran 31x4096x4096 in 9.0 us and
  // 1x4096x4096 in 8.9 (thirteenth session), where the bytes alone at this model's bandwidth take
  // ~9.5 us, and the model then preferred the unsplit tile at 31x5120x3072 (80 CTAs, 14.5 us).
  // There: decode_split_charge_us (a cluster's launch, a small charge per extra K slice and 2% of the
  // kernel's time; 0.5 us per slice from the nineteenth session, refitted per variant in the
  // twenty-sixth to 1.0 + 0.05 per slice).
  // Elsewhere the 5 us still agrees best with the table (1100 of 1136 such entries; unchanged).
  const double compute_us = waves * sharing * tile_us;
  double main_us = decode ? decode_main_us(c, compute_us, mem_us, k_per, waves, ctas, resident, d)
                          : std::max(compute_us, mem_us);
  // Stream-K (stream_k_plan): every CTA (at most one per SM) computes its data-parallel tiles and an
  // equal share of the rest's K loops, so the rounds are fractional; each tile cut in pieces costs
  // its contributors a partial (BM x BN floats) written and its owner the same read back, through L2
  // at ~100 GB/s per SM, and a pipeline refill (~1 us) per piece. Only the rows and columns inside
  // the problem are parked (a decode tile's M of its 64 rows). Not yet measured: a prediction.
  if (plan.grid > 0) {
    const double rounds = double(plan.dp_tiles / plan.grid) + double(plan.sk_iters) / (double(plan.grid) * plan.k_tiles);
    const bool cut = plan.sk_iters % plan.grid != 0 || (plan.sk_iters / plan.grid) % plan.k_tiles != 0;
    // A consumer thread's float4 holds rows r and r + 8 of a 16-row group, so x = min(M, BM) rows
    // park the whole groups below x and 2 x min(8, x % 16) rows of the last (M = 7: 14 rows).
    // Columns park in whole 8-column chunks, and stream-K serves only N % 8 == 0: min(N, BN).
    const int64_t x = std::min<int64_t>(m, c.bm);
    const double parked = double(16 * (x / 16) + 2 * std::min<int64_t>(8, x % 16)) * double(std::min<int64_t>(n, c.bn));
    const double fixup_us = cut ? 2.0 * parked * 4.0 / 1e5 + 1.0 : 0.0;
    main_us = std::max(rounds * tile_us + fixup_us, mem_us);
  }
  const double reduce_us = c.splitk <= 1   ? 0.0
                           : decode && !d.flat_split_charge ? decode_split_charge_us(c.splitk, main_us, d)
                                          : 5.0;
  // A padded variant first copies the operands whose rows are not 16-byte multiples (pad_plan):
  // A when K % 8 != 0; B when its rows' extent is not a multiple of 8 (tn, pad_b_k: K; nn: N),
  // each read and written once at ~70% of the bandwidth, one launch each. (Until the twenty-eighth
  // session B's copy was charged on K % 8 for nn too: 2 us and its bytes too many on an nn problem
  // with N % 8 == 0, where the padded tiles measured 1.4-1.6 us faster than the same tiles tn:
  // 512x512x50 on 64 x 64, 3.2 against 4.6 us, H100, graph mode.)
  double pad_us = 0;
  if (c.pad) {
    if (k % 8 != 0) pad_us += 4.0 * double(m) * k / (0.7 * bw) + 2.0;
    if (c.pad_b_k ? k % 8 != 0 : n % 8 != 0) pad_us += 4.0 * double(k) * n / (0.7 * bw) + 2.0;
  }
  return main_us + reduce_us + pad_us + 2.0;
}

}  // namespace kforge::kernels
