// The measurement core against kernels of known duration.
#include <chrono>
#include <thread>

#include "baselines/cublas.hpp"
#include "gpu_test.hpp"
#include "measure/ceilings.hpp"
#include "gpu/sensors.hpp"
#include "measure/timer.hpp"

namespace kforge {
namespace {

using test::GpuTest;

constexpr int64_t kSpinNs = 50'000;  // 50 us

Launch spin(int64_t ns) {
  return [ns](cudaStream_t s, int64_t) { launch_spin(ns, s); };
}

TEST_F(GpuTest, EveryModeTimesAKernelOfKnownDuration) {
  Stream s;
  DeviceInfo d = query_device();
  Timer timer(s.get(), d.l2_bytes, 1);
  for (Mode mode : {Mode::kOffline, Mode::kGraph, Mode::kServer}) {
    TimingConfig cfg;
    cfg.mode = mode;
    cfg.samples = 9;
    Timing t = timer.time(spin(kSpinNs), cfg);
    EXPECT_EQ(t.samples_us.size(), 9u);
    EXPECT_GE(t.per_call_us.median, 49.0) << to_string(mode);
    // Back-to-back and graph: little beyond the spin; server: plus the launch latency of an idle GPU.
    EXPECT_LE(t.per_call_us.median, mode == Mode::kServer ? 90.0 : 60.0) << to_string(mode);
    if (mode == Mode::kServer) EXPECT_EQ(t.calls_per_sample, 1);
    else EXPECT_GE(t.calls_per_sample, 4);  // batches of ~200 us
  }
  TimingConfig flush;
  flush.flush_l2 = true;
  Timing tf = timer.time(spin(kSpinNs), flush);
  EXPECT_NEAR(tf.per_call_us.median, 50.0, 10.0);  // the flush itself stays outside the timed region
  TimingConfig bad;
  bad.mode = Mode::kGraph;
  bad.flush_l2 = true;
  EXPECT_THROW(timer.time(spin(kSpinNs), bad), Error);
}

TEST_F(GpuTest, PairedRatioOfTwoKnownKernels) {
  Stream s;
  DeviceInfo d = query_device();
  Timer timer(s.get(), d.l2_bytes, 2);
  for (Mode mode : {Mode::kOffline, Mode::kGraph}) {
    TimingConfig cfg;
    cfg.mode = mode;
    cfg.samples = 11;
    PairedTiming p = timer.time_paired(spin(2 * kSpinNs), spin(kSpinNs), cfg);
    EXPECT_NEAR(p.ratio.median, 2.0, 0.1) << to_string(mode);
    EXPECT_EQ(p.a.samples_us.size(), 11u);
    EXPECT_LT(p.ratio.rel_spread(), 0.1);
  }
}

TEST_F(GpuTest, InputRotationSeesEveryCallIndex) {
  Stream s;
  DeviceInfo d = query_device();
  Timer timer(s.get(), d.l2_bytes, 3);
  std::vector<int64_t> seen;
  TimingConfig cfg;
  cfg.samples = 3;
  timer.time([&](cudaStream_t st, int64_t i) { seen.push_back(i); launch_spin(1000, st); }, cfg);
  for (size_t i = 1; i < seen.size(); ++i) ASSERT_EQ(seen[i], seen[i - 1] + 1);
}

TEST_F(GpuTest, CeilingsArePlausibleAndCached) {
  Stream s;
  DeviceInfo d = query_device();
  Ceilings c = load_or_calibrate_ceilings(d, s.get(), false);
  EXPECT_GT(c.tensor_tflops, 50);
  EXPECT_LT(c.tensor_tflops, 2500);  // beyond any GPU's dense fp16 rate
  EXPECT_GT(c.bandwidth_gbs, 300);
  EXPECT_LT(c.bandwidth_gbs, 20000);
  EXPECT_GT(c.l2_bandwidth_gbs, c.bandwidth_gbs);  // L2 hits are faster than device memory
  EXPECT_EQ(c.device_uuid, d.uuid);
  Ceilings again = load_or_calibrate_ceilings(d, s.get(), false);  // from the cache: identical
  EXPECT_EQ(again.tensor_tflops, c.tensor_tflops);
  EXPECT_EQ(again.measured_at, c.measured_at);
  // The counted floor of the largest grid shape is compute-bound and under what cuBLASLt reaches.
  const Shape big{16384, 16384, 16384};
  EXPECT_NEAR(counted_floor_us(big.flops(), hgemm_bytes(big), c), big.flops() / (c.tensor_tflops * 1e6), 1e-6);
}

}  // namespace
}  // namespace kforge

namespace kforge {
namespace {

TEST_F(GpuTest, InterleavedTimingKeepsEachLaunchApart) {
  Stream s;
  DeviceInfo d = query_device();
  Timer timer(s.get(), d.l2_bytes, 4);
  for (Mode mode : {Mode::kOffline, Mode::kGraph, Mode::kServer}) {
    TimingConfig cfg;
    cfg.mode = mode;
    cfg.samples = 7;
    std::vector<Timing> t = timer.time_interleaved({spin(25'000), spin(100'000), spin(50'000)}, cfg);
    ASSERT_EQ(t.size(), 3u);
    const double extra = mode == Mode::kServer ? 40.0 : 10.0;
    for (auto [i, us] : {std::pair{0, 25.0}, {1, 100.0}, {2, 50.0}}) {
      EXPECT_EQ(t[i].samples_us.size(), 7u);
      EXPECT_GE(t[i].per_call_us.median, us - 1.0) << to_string(mode) << " launch " << i;
      EXPECT_LE(t[i].per_call_us.median, us + extra) << to_string(mode) << " launch " << i;
    }
  }
}

// The judge reads the GPU's clock, power and temperature through NVML: on a GPU machine with the
// driver's library it must read, and a busy GPU must not read as idle-clocked.
TEST_F(GpuTest, SensorsReadTheClockUnderLoad) {
  GpuSensors sensors(0);
  ASSERT_TRUE(sensors.available()) << sensors.why_not();
  Stream s;
  launch_spin(200'000'000, s.get());  // 200 ms
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const GpuReading busy = sensors.read(true);
  KF_CUDA(cudaStreamSynchronize(s.get()));
  ASSERT_TRUE(busy.ok);
  EXPECT_GT(busy.sm_mhz, 500u) << clock_reasons_text(busy.reasons);
  EXPECT_GT(busy.power_mw, 0u);
  EXPECT_GT(busy.temp_c, 10u);
  EXPECT_LT(busy.temp_c, 110u);
}

}  // namespace
}  // namespace kforge
