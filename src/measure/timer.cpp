#include "measure/timer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "core/error.hpp"
#include "core/text.hpp"

namespace kforge {

std::string_view to_string(Mode m) {
  switch (m) {
    case Mode::kOffline: return "offline";
    case Mode::kGraph: return "graph";
    case Mode::kServer: return "server";
  }
  return "?";
}

Mode parse_mode(std::string_view s) {
  if (s == "offline") return Mode::kOffline;
  if (s == "graph") return Mode::kGraph;
  if (s == "server") return Mode::kServer;
  KF_USAGE_ERROR("unknown mode '%.*s' (expected offline, graph or server)", int(s.size()), s.data());
}

std::vector<Mode> parse_modes(std::string_view csv) {
  std::vector<Mode> out;
  for (const std::string& m : split(csv, ',')) {
    const Mode mode = parse_mode(m);
    if (std::find(out.begin(), out.end(), mode) == out.end()) out.push_back(mode);
  }
  if (out.empty()) KF_USAGE_ERROR("no mode given (expected offline, graph, server or a comma list)");
  return out;
}

Timer::Timer(cudaStream_t stream, size_t l2_bytes, uint64_t seed) : s_(stream), l2_bytes_(l2_bytes), rng_(seed) {}

void Timer::validate(const TimingConfig& cfg) const {
  if (cfg.mode == Mode::kGraph && cfg.flush_l2)
    KF_USAGE_ERROR("an L2 flush applies to offline and server modes; graph mode times back-to-back replays "
                   "(rotate inputs for a cold cache there)");
  if (cfg.samples < 1) KF_USAGE_ERROR("the number of samples must be at least 1 (got %d)", cfg.samples);
  if (cfg.warmup_calls < 0) KF_USAGE_ERROR("warm-up calls cannot be negative (got %d)", cfg.warmup_calls);
  if (!(cfg.batch_target_us > 0)) KF_USAGE_ERROR("the batch target must be positive (got %g us)", cfg.batch_target_us);
  if (cfg.max_calls_per_batch < 1) KF_USAGE_ERROR("max calls per batch must be at least 1");
  if (cfg.mode == Mode::kServer && !(cfg.server_rate_hz > 0 && std::isfinite(cfg.server_rate_hz)))
    KF_USAGE_ERROR("the server call rate must be a positive number of calls per second (got %g)", cfg.server_rate_hz);
}

void Timer::flush() {
  if (!flush_buf_.get()) flush_buf_ = DeviceBuffer(std::max<size_t>(2 * l2_bytes_, size_t(64) << 20), "L2 flush buffer");
  launch_l2_flush(flush_buf_.get(), flush_buf_.bytes(), s_);
}

void Timer::warm_up(const Launch& f, const TimingConfig& cfg) {
  for (int i = 0; i < cfg.warmup_calls; ++i) f(s_, call_index_++);
  KF_CUDA(cudaStreamSynchronize(s_));
}

double Timer::estimate_us(const Launch& f, const TimingConfig& cfg) {
  if (cfg.mode == Mode::kServer) return 0;
  constexpr int kProbe = 2;
  double est_us;
  if (cfg.mode == Mode::kGraph) {
    GraphExec probe;
    probe.capture(s_, [&] {
      for (int i = 0; i < kProbe; ++i) f(s_, call_index_++);
    });
    probe.launch(s_);  // first replay uploads the graph
    start_.record(s_);
    probe.launch(s_);
    stop_.record(s_);
    est_us = elapsed_ms(start_, stop_) * 1000.0 / kProbe;
  } else {
    start_.record(s_);
    for (int i = 0; i < kProbe; ++i) f(s_, call_index_++);
    stop_.record(s_);
    est_us = elapsed_ms(start_, stop_) * 1000.0 / kProbe;
  }
  return est_us;
}

std::vector<int> Timer::batch_calls(const std::vector<double>& est_us, const TimingConfig& cfg) {
  std::vector<int> out(est_us.size(), 1);
  if (est_us.empty() || cfg.mode == Mode::kServer) return out;
  const double longest = *std::max_element(est_us.begin(), est_us.end());
  // Every launch's batch lasts about as long as the longest single call (twice over), not only
  // batch_target_us: a short call sampled right after a long one otherwise runs in the power and
  // clock state the long one left behind (measured: a 185 us cuBLASLt call timed at up to 263 us
  // after a 10.7 ms candidate), which biases the ratio. Capped at 50 ms per batch.
  double target = cfg.batch_target_us;
  const bool equal = cfg.equal_batches && est_us.size() > 1;
  if (equal) target = std::max(target, std::min(2.0 * longest, 50000.0));
  const bool long_calls = equal && target > cfg.batch_target_us;
  for (size_t i = 0; i < est_us.size(); ++i) {
    if (cfg.flush_l2) {
      out[i] = std::clamp(int(std::ceil(target / std::max(est_us[i], 1.0))), 1, 32);
      continue;
    }
    const double ratio = target / std::max(est_us[i], 0.05);
    // Long calls: the nearest count (batches within about 25% of one another for two calls or
    // more); short ones: the next count up, so that a batch never falls short of the target.
    const double calls = long_calls ? std::max(1.0, std::round(ratio)) : std::ceil(ratio);
    out[i] = int(std::clamp(calls, 1.0, double(cfg.max_calls_per_batch)));
  }
  return out;
}

void Timer::prepare(const Launch& f, const TimingConfig& cfg, int calls, Prepared& prep) {
  prep.calls = calls;
  if (cfg.mode == Mode::kGraph) {
    prep.graph.capture(s_, [&] {
      for (int i = 0; i < prep.calls; ++i) f(s_, call_index_++);
    });
    prep.graph.launch(s_);
    KF_CUDA(cudaStreamSynchronize(s_));
  }
}

double Timer::sample(const Launch& f, const TimingConfig& cfg, Prepared& prep) {
  switch (cfg.mode) {
    case Mode::kGraph:
      if (cfg.preroll) prep.graph.launch(s_);
      start_.record(s_);
      prep.graph.launch(s_);
      stop_.record(s_);
      return elapsed_ms(start_, stop_) * 1000.0 / prep.calls;
    case Mode::kOffline:
      if (!cfg.flush_l2) {
        if (cfg.preroll)
          for (int i = 0; i < prep.calls; ++i) f(s_, call_index_++);
        start_.record(s_);
        for (int i = 0; i < prep.calls; ++i) f(s_, call_index_++);
        stop_.record(s_);
        return elapsed_ms(start_, stop_) * 1000.0 / prep.calls;
      } else {
        double total_ms = 0;
        for (int i = 0; i < prep.calls; ++i) {
          flush();
          start_.record(s_);
          f(s_, call_index_++);
          stop_.record(s_);
          total_ms += elapsed_ms(start_, stop_);
        }
        return total_ms * 1000.0 / prep.calls;
      }
    case Mode::kServer: {
      if (cfg.flush_l2) {
        flush();
        KF_CUDA(cudaStreamSynchronize(s_));
      }
      std::exponential_distribution<double> gap_s(cfg.server_rate_hz);
      using clock = std::chrono::steady_clock;
      const auto until = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(gap_s(rng_)));
      // Sleep through most of a long gap, then spin: sleeps alone overshoot by tens of microseconds.
      if (until - clock::now() > std::chrono::milliseconds(2)) std::this_thread::sleep_until(until - std::chrono::milliseconds(1));
      while (clock::now() < until) {
      }
      start_.record(s_);
      f(s_, call_index_++);
      stop_.record(s_);
      return elapsed_ms(start_, stop_) * 1000.0;
    }
  }
  KF_CHECK(false, "unknown timing mode");
}

Timing Timer::time(const Launch& f, const TimingConfig& cfg) { return time_interleaved({f}, cfg).front(); }

std::vector<Timing> Timer::time_interleaved(const std::vector<Launch>& fs, const TimingConfig& cfg) {
  validate(cfg);
  KF_CHECK(!fs.empty(), "time_interleaved needs at least one launch");
  for (const Launch& f : fs) warm_up(f, cfg);
  std::vector<double> est(fs.size());
  for (size_t i = 0; i < fs.size(); ++i) est[i] = estimate_us(fs[i], cfg);
  const std::vector<int> calls = batch_calls(est, cfg);
  TimingConfig run = cfg;
  if (cfg.preroll_above_us > 0 && cfg.mode != Mode::kServer && !cfg.flush_l2 &&
      *std::max_element(est.begin(), est.end()) >= cfg.preroll_above_us)
    run.preroll = true;
  std::vector<Prepared> preps(fs.size());
  for (size_t i = 0; i < fs.size(); ++i) prepare(fs[i], run, calls[i], preps[i]);
  std::vector<Timing> out(fs.size());
  std::vector<size_t> order(fs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (int round = 0; round < cfg.samples; ++round) {
    std::shuffle(order.begin(), order.end(), rng_);
    for (size_t i : order) out[i].samples_us.push_back(sample(fs[i], run, preps[i]));
  }
  for (size_t i = 0; i < fs.size(); ++i) {
    out[i].mode = cfg.mode;
    out[i].calls_per_sample = preps[i].calls;
    out[i].per_call_us = summarize(out[i].samples_us);
  }
  return out;
}

PairedTiming Timer::time_paired(const Launch& a, const Launch& b, const TimingConfig& cfg) {
  std::vector<Timing> t = time_interleaved({a, b}, cfg);
  PairedTiming out{std::move(t[0]), std::move(t[1]), {}};
  std::vector<double> ratios;
  for (size_t i = 0; i < out.a.samples_us.size(); ++i) ratios.push_back(out.a.samples_us[i] / out.b.samples_us[i]);
  out.ratio = summarize(ratios);
  return out;
}

}  // namespace kforge
