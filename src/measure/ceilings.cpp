#include "measure/ceilings.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "baselines/cublas.hpp"
#include "core/files.hpp"
#include "core/text.hpp"
#include "measure/timer.hpp"

namespace kforge {
namespace {
constexpr int kCeilingsFormat = 3;  // 3: peak = fastest sample over 4 shapes; bandwidth from a copy kernel

// The peak is an upper bound for the counted floor, so it is the fastest rate seen: the quickest
// sample of cuBLASLt's best algorithms over several large shapes. Mid-sized GEMMs (~0.1-1 ms) run
// above the power-limited rate of sustained huge ones, so both kinds are measured.
double measure_tensor_tflops(const DeviceInfo& dev, cudaStream_t s, std::string& how) {
  CublasHandles handles;
  Timer timer(s, dev.l2_bytes);
  TimingConfig cfg;
  cfg.mode = Mode::kGraph;
  cfg.batch_target_us = 1000;
  cfg.samples = 9;
  double best = 0;
  for (Shape shape : {Shape{4096, 4096, 4096}, Shape{8192, 4096, 4096}, Shape{8192, 8192, 8192}, Shape{16384, 16384, 8192}}) {
    DeviceBuffer a(elems_a(shape) * 2, "calibration A"), b(elems_b(shape) * 2, "calibration B"),
        c(elems_c(shape) * 2, "calibration C");
    fill_random(a.as<__half>(), elems_a(shape), Dist::kNormal, 11, s);
    fill_random(b.as<__half>(), elems_b(shape), Dist::kNormal, 12, s);
    for (Layout layout : {Layout::kNN, Layout::kTN}) {
      HgemmProblem p{shape, layout, Acc::kF32};
      LtPlan plan(handles, p);
      const GemmOperands ops{a.as<__half>(), b.as<__half>(), c.as<__half>()};
      for (const auto& h : plan.heuristics(4)) {
        if (!plan.run(h.algo, ops, s)) continue;
        Timing t = timer.time([&](cudaStream_t st, int64_t) { plan.run(h.algo, ops, st); }, cfg);
        const double tflops = shape.flops() / (t.per_call_us.min * 1e-6) / 1e12;
        if (tflops > best) {
          best = tflops;
          how = strf("cuBLASLt fp16 GEMM %s %s, graph mode, fastest sample of its heuristic's top 4 over 4 shapes",
                     shape.str().c_str(), std::string(to_string(layout)).c_str());
        }
      }
    }
  }
  KF_CHECK(best > 0, "no cuBLASLt algorithm ran during calibration");
  return best;
}

double measure_bandwidth_gbs(const DeviceInfo& dev, cudaStream_t s) {
  const size_t bytes = std::min<size_t>(size_t(2) << 30, dev.mem_free / 4) / 16 * 16;
  DeviceBuffer src(bytes, "calibration copy source"), dst(bytes, "calibration copy target");
  KF_CUDA(cudaMemsetAsync(src.get(), 0x5a, bytes, s));
  Timer timer(s, dev.l2_bytes);
  TimingConfig cfg;
  cfg.mode = Mode::kGraph;
  cfg.batch_target_us = 5000;
  cfg.samples = 7;
  Timing t = timer.time(
      [&](cudaStream_t st, int64_t) { launch_copy(src.get(), dst.get(), bytes, dev.sm_count, st); },
      cfg);
  return 2.0 * double(bytes) / (t.per_call_us.min * 1e-6) / 1e9;
}
}  // namespace

Ceilings calibrate_ceilings(const DeviceInfo& dev, cudaStream_t s) {
  Ceilings c;
  std::string how;
  c.tensor_tflops = measure_tensor_tflops(dev, s, how);
  c.bandwidth_gbs = measure_bandwidth_gbs(dev, s);
  c.device_uuid = dev.uuid;
  c.device_name = dev.name;
  c.driver_version = dev.driver_version;
  c.measured_at = utc_now_iso8601();
  c.method = how + "; bandwidth: 2 GiB device copy kernel (16-byte accesses), bytes read + written";
  return c;
}

std::string cache_dir() {
  if (const char* d = std::getenv("KFORGE_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/kforge";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/kforge";
  return "/tmp/kforge-cache";
}

std::string ceilings_cache_path(const DeviceInfo& dev) { return cache_dir() + "/ceilings-" + dev.uuid + ".json"; }

Ceilings load_or_calibrate_ceilings(const DeviceInfo& dev, cudaStream_t s, bool recalibrate) {
  const std::string path = ceilings_cache_path(dev);
  if (!recalibrate && std::filesystem::exists(path)) {
    try {
      nlohmann::json j = nlohmann::json::parse(read_file(path));
      Ceilings c = ceilings_from_json(j);
      if (j.value("format", 0) == kCeilingsFormat && c.device_uuid == dev.uuid && c.driver_version == dev.driver_version &&
          c.tensor_tflops > 0 && c.bandwidth_gbs > 0)
        return c;
    } catch (const std::exception&) {
      // An unreadable cache is measured again below.
    }
  }
  std::fprintf(stderr, "kforge: calibrating the ceilings of %s (once per device; cached in %s)...\n",
               dev.name.c_str(), path.c_str());
  Ceilings c = calibrate_ceilings(dev, s);
  std::fprintf(stderr, "kforge: tensor peak %.1f TFLOP/s, bandwidth %.0f GB/s\n", c.tensor_tflops, c.bandwidth_gbs);
  try {
    std::filesystem::create_directories(cache_dir());
    nlohmann::json j = to_json(c);
    j["format"] = kCeilingsFormat;
    write_file_atomic(path, j.dump(2) + "\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kforge: warning: could not cache the ceilings: %s\n", e.what());
  }
  return c;
}

double counted_floor_us(double flops, double bytes, const Ceilings& c) {
  return std::max(flops / (c.tensor_tflops * 1e12), bytes / (c.bandwidth_gbs * 1e9)) * 1e6;
}

nlohmann::json to_json(const Ceilings& c) {
  return {{"tensor_tflops", c.tensor_tflops}, {"bandwidth_gbs", c.bandwidth_gbs}, {"device_uuid", c.device_uuid},
          {"device_name", c.device_name},     {"driver_version", c.driver_version}, {"measured_at", c.measured_at},
          {"method", c.method}};
}

Ceilings ceilings_from_json(const nlohmann::json& j) {
  Ceilings c;
  c.tensor_tflops = j.at("tensor_tflops").get<double>();
  c.bandwidth_gbs = j.at("bandwidth_gbs").get<double>();
  c.device_uuid = j.at("device_uuid").get<std::string>();
  c.device_name = j.value("device_name", "");
  c.driver_version = j.value("driver_version", 0);
  c.measured_at = j.value("measured_at", "");
  c.method = j.value("method", "");
  return c;
}

}  // namespace kforge
