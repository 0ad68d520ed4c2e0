// The measurement core. Every timing kforge reports comes out of Timer.
//
// Modes:
//   offline  back-to-back calls from one host thread, CUDA events around a batch: the cost a user
//            sees, host dispatch included (host effects are measured on purpose).
//   graph    the batch captured once in a CUDA graph and replayed: device time only.
//   server   one call at a time after an exponentially distributed random gap (mean 1/rate), events
//            around the single call: the latency of an isolated call on an idle GPU.
// Cold caches: `flush_l2` writes a buffer of twice the L2 size before every timed call (offline and
// server; each call is then timed alone); input rotation is the caller's (the launch gets the call
// index and picks its input set from it, e.g. index % copies).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gpu/cuda.hpp"
#include "measure/stats.hpp"

namespace kforge {

enum class Mode { kOffline, kGraph, kServer };
std::string_view to_string(Mode m);
Mode parse_mode(std::string_view s);
// "offline,graph" -> modes in order, duplicates dropped; a usage error on an unknown or empty list.
std::vector<Mode> parse_modes(std::string_view csv);

struct TimingConfig {
  Mode mode = Mode::kOffline;
  int warmup_calls = 3;         // untimed calls before anything is timed
  double batch_target_us = 200; // a batch holds enough calls to last about this long
  int max_calls_per_batch = 10000;
  int samples = 5;              // batches (offline, graph) or isolated calls (server)
  // Interleaved timing of several launches: every batch lasts at least twice the longest single
  // call, so that each sample of a short call averages over the state a long one leaves behind.
  bool equal_batches = true;
  // Offline and graph: before every timed batch, the same batch run once untimed, so that each
  // sample is taken in the clock and power state its own back-to-back calls produce, not the one
  // the previous launch of an interleaved set left behind (a light kernel timed right after 24 ms
  // of a power-hungry cuBLASLt GEMM ran 13% slower than back to back). Doubles the timing cost;
  // the evaluator uses it, where A and B differ most.
  bool preroll = false;
  // Offline and graph, several launches: a preroll before every timed batch whenever the longest
  // call's estimate is at least this long (0: never). Long GEMMs run near the board's power limit,
  // and a batch that starts from idle is timed in a different clock state than one that follows
  // its own load (3072x28672x4096 on the H200: the same kernel at 972 and at 1809 us per call,
  // by whether its batch held 2 or 3 calls); a preroll costs little next to such calls.
  double preroll_above_us = 0;
  bool flush_l2 = false;
  double server_rate_hz = 2000; // server mode: mean call rate
};

// A launch enqueues one call on the stream; `call_index` counts every call made through the timer
// (warm-up included) so that the caller can rotate inputs.
using Launch = std::function<void(cudaStream_t, int64_t call_index)>;

struct Timing {
  Mode mode = Mode::kOffline;
  Summary per_call_us;       // over the samples: each sample is a batch's time / its calls
  int calls_per_sample = 1;
  std::vector<double> samples_us;
};

struct PairedTiming {
  Timing a, b;
  Summary ratio;  // per round: a's sample / b's sample, taken back to back in random order
};

class Timer {
 public:
  // `l2_bytes` sizes the flush buffer (allocated on first use); `seed` drives the random order
  // of interleaved runs and the server-mode gaps.
  Timer(cudaStream_t stream, size_t l2_bytes, uint64_t seed = 0x6b666f726765ull);
  Timing time(const Launch& f, const TimingConfig& cfg);
  // Several launches compared: `cfg.samples` rounds; in each, every launch is sampled once, in a
  // fresh random order, so that a slow spell of the host or the GPU falls on all of them alike.
  // Sample i of every result comes from round i.
  std::vector<Timing> time_interleaved(const std::vector<Launch>& fs, const TimingConfig& cfg);
  // Paired A/B: time_interleaved over {A, B}, with the per-round ratios A/B.
  PairedTiming time_paired(const Launch& a, const Launch& b, const TimingConfig& cfg);

  // Calls per batch for each launch of an interleaved set, from the per-call estimates (us).
  // A single launch, or short calls: enough to last batch_target_us (rounded up). With
  // `equal_batches` and calls long enough to set the batch length (twice the longest call, up to
  // 50 ms), every launch's batch lasts about as long as every other's: the nearest whole number
  // of calls, not the next one, so that a call 1% faster than the longest gets the same 2 calls,
  // not 3 (a batch 50% longer, timed in a hotter power state). Pure: unit-tested without a GPU.
  static std::vector<int> batch_calls(const std::vector<double>& est_us, const TimingConfig& cfg);

 private:
  struct Prepared {
    int calls = 1;        // calls per sample
    GraphExec graph;      // graph mode: the captured batch
  };
  void warm_up(const Launch& f, const TimingConfig& cfg);
  double estimate_us(const Launch& f, const TimingConfig& cfg);  // per call, from a short probe
  void prepare(const Launch& f, const TimingConfig& cfg, int calls, Prepared& prep);
  double sample(const Launch& f, const TimingConfig& cfg, Prepared& prep);  // microseconds per call
  void flush();
  void validate(const TimingConfig& cfg) const;

  cudaStream_t s_;
  size_t l2_bytes_;
  DeviceBuffer flush_buf_;
  Event start_, stop_;
  std::mt19937_64 rng_;
  int64_t call_index_ = 0;
};

// Device helpers used by the timer and its tests.
void launch_l2_flush(void* buf, size_t bytes, cudaStream_t s);
// Copies `bytes` (a multiple of 16) with 16-byte loads and stores on every SM.
void launch_copy(const void* src, void* dst, size_t bytes, int sm_count, cudaStream_t s);
// Reads `bytes` (a multiple of 16) `passes` times with 16-byte loads on every SM.
void launch_read(const void* src, size_t bytes, int passes, unsigned* sink, int sm_count, cudaStream_t s);
// Spins one thread block for `ns` nanoseconds of GPU time (globaltimer).
void launch_spin(int64_t ns, cudaStream_t s);

}  // namespace kforge
