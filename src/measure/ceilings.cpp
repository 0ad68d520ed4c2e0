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
constexpr int kCeilingsFormat = 5;  // 5: fastest samples; read and copy kernels; multi-pass L2 reads

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
  for (Shape shape : {Shape{4096, 4096, 4096}, Shape{2048, 4096, 8192}, Shape{4096, 4096, 8192}, Shape{8192, 8192, 8192}}) {
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

// Fastest sample of `launch`, in GB/s for `bytes` moved per call.
double fastest_gbs(const DeviceInfo& dev, cudaStream_t s, double bytes, const Launch& launch) {
  Timer timer(s, dev.l2_bytes);
  TimingConfig cfg;
  cfg.mode = Mode::kGraph;
  cfg.batch_target_us = 2000;
  cfg.samples = 9;
  Timing t = timer.time(launch, cfg);
  return bytes / (t.per_call_us.min * 1e-6) / 1e9;
}

void measure_bandwidths(const DeviceInfo& dev, cudaStream_t s, Ceilings& c) {
  const size_t bytes = std::min<size_t>(size_t(2) << 30, dev.mem_free / 4) / 16 * 16;
  DeviceBuffer src(bytes, "calibration source"), dst(bytes, "calibration target"), sink(sizeof(unsigned), "sink");
  fill_random(src.as<__half>(), bytes / 2, Dist::kUniform, 5, s);
  unsigned* sk = sink.as<unsigned>();
  const double copy = fastest_gbs(dev, s, 2.0 * double(bytes), [&](cudaStream_t st, int64_t) {
    launch_copy(src.get(), dst.get(), bytes, dev.sm_count, st);
  });
  const double read = fastest_gbs(dev, s, double(bytes), [&](cudaStream_t st, int64_t) {
    launch_read(src.get(), bytes, 1, sk, dev.sm_count, st);
  });
  c.bandwidth_gbs = std::max(copy, read);
  const size_t l2_bytes = std::max<size_t>(dev.l2_bytes / 4, 1 << 20) / 16 * 16;
  // Many passes per launch: one pass over a quarter of the L2 is too short to outlast the launch.
  constexpr int kPasses = 64;
  c.l2_bandwidth_gbs = fastest_gbs(dev, s, double(l2_bytes) * kPasses, [&](cudaStream_t st, int64_t) {
    launch_read(src.get(), l2_bytes, kPasses, sk, dev.sm_count, st);
  });
}
}  // namespace

Ceilings calibrate_ceilings(const DeviceInfo& dev, cudaStream_t s) {
  Ceilings c;
  std::string how;
  c.tensor_tflops = measure_tensor_tflops(dev, s, how);
  measure_bandwidths(dev, s, c);
  c.device_uuid = dev.uuid;
  c.device_name = dev.name;
  c.driver_version = dev.driver_version;
  c.measured_at = utc_now_iso8601();
  c.method = how + "; bandwidth: fastest of a 2 GiB copy kernel (bytes read + written) and a 2 GiB read "
                   "kernel; L2: 64 passes over a quarter-L2 buffer per launch";
  return c;
}

std::string ceilings_beaten(const Ceilings& c, const DeviceInfo& dev, cudaStream_t s) {
  // Memory: a 512 MiB copy, fastest of a few graph-mode samples.
  const size_t bytes = std::min<size_t>(size_t(512) << 20, dev.mem_free / 8) / 16 * 16;
  double copy = 0;
  {
    DeviceBuffer src(bytes, "ceiling check source"), dst(bytes, "ceiling check target");
    copy = fastest_gbs(dev, s, 2.0 * double(bytes), [&](cudaStream_t st, int64_t) {
      launch_copy(src.get(), dst.get(), bytes, dev.sm_count, st);
    });
  }
  if (copy > 1.10 * c.bandwidth_gbs)
    return strf("a copy ran at %.0f GB/s, the cache says at most %.0f", copy, c.bandwidth_gbs);
  // Tensor cores: one large fp16 GEMM, cuBLASLt's heuristic first choice.
  CublasHandles handles;
  const Shape shape{4096, 4096, 4096};
  DeviceBuffer a(elems_a(shape) * 2, "ceiling check A"), b(elems_b(shape) * 2, "ceiling check B"),
      cc(elems_c(shape) * 2, "ceiling check C");
  fill_random(a.as<__half>(), elems_a(shape), Dist::kNormal, 11, s);
  fill_random(b.as<__half>(), elems_b(shape), Dist::kNormal, 12, s);
  HgemmProblem p{shape, Layout::kTN, Acc::kF32};
  LtPlan plan(handles, p);
  const GemmOperands ops{a.as<__half>(), b.as<__half>(), cc.as<__half>()};
  const auto h = plan.heuristics(1);
  if (h.empty() || !plan.run(h[0].algo, ops, s)) return "";
  Timer timer(s, dev.l2_bytes);
  TimingConfig cfg;
  cfg.mode = Mode::kGraph;
  cfg.batch_target_us = 1000;
  cfg.samples = 3;
  const Timing t = timer.time([&](cudaStream_t st, int64_t) { plan.run(h[0].algo, ops, st); }, cfg);
  const double tflops = shape.flops() / (t.per_call_us.min * 1e-6) / 1e12;
  if (tflops > 1.10 * c.tensor_tflops)
    return strf("a GEMM ran at %.0f TFLOP/s, the cache says at most %.0f", tflops, c.tensor_tflops);
  return "";
}

void save_ceilings(const DeviceInfo& dev, const Ceilings& c) {
  std::filesystem::create_directories(cache_dir());
  nlohmann::json j = to_json(c);
  j["format"] = kCeilingsFormat;
  write_file_atomic(ceilings_cache_path(dev), j.dump(2) + "\n");
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
          c.tensor_tflops > 0 && c.bandwidth_gbs > 0 && c.l2_bandwidth_gbs > 0)
        return c;
    } catch (const std::exception&) {
      // An unreadable cache is measured again below.
    }
  }
  std::fprintf(stderr, "kforge: calibrating the ceilings of %s (once per device; cached in %s)...\n",
               dev.name.c_str(), path.c_str());
  Ceilings c = calibrate_ceilings(dev, s);
  std::fprintf(stderr, "kforge: tensor peak %.1f TFLOP/s, memory %.0f GB/s, L2 %.0f GB/s\n", c.tensor_tflops,
               c.bandwidth_gbs, c.l2_bandwidth_gbs);
  try {
    save_ceilings(dev, c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kforge: warning: could not cache the ceilings: %s\n", e.what());
  }
  return c;
}

double counted_floor_us(double flops, double bytes, const Ceilings& c, double l2_resident_bytes) {
  const double from_l2 = std::clamp(l2_resident_bytes, 0.0, bytes);
  const double l2_gbs = std::max(c.l2_bandwidth_gbs, c.bandwidth_gbs);  // never slower than device memory
  const double memory_s = (bytes - from_l2) / (c.bandwidth_gbs * 1e9) + from_l2 / (l2_gbs * 1e9);
  return std::max(flops / (c.tensor_tflops * 1e12), memory_s) * 1e6;
}

nlohmann::json to_json(const Ceilings& c) {
  return {{"tensor_tflops", c.tensor_tflops}, {"bandwidth_gbs", c.bandwidth_gbs},
          {"l2_bandwidth_gbs", c.l2_bandwidth_gbs}, {"device_uuid", c.device_uuid},
          {"device_name", c.device_name},     {"driver_version", c.driver_version}, {"measured_at", c.measured_at},
          {"method", c.method}};
}

Ceilings ceilings_from_json(const nlohmann::json& j) {
  Ceilings c;
  c.tensor_tflops = j.at("tensor_tflops").get<double>();
  c.bandwidth_gbs = j.at("bandwidth_gbs").get<double>();
  c.l2_bandwidth_gbs = j.value("l2_bandwidth_gbs", 0.0);
  c.device_uuid = j.at("device_uuid").get<std::string>();
  c.device_name = j.value("device_name", "");
  c.driver_version = j.value("driver_version", 0);
  c.measured_at = j.value("measured_at", "");
  c.method = j.value("method", "");
  return c;
}

}  // namespace kforge
