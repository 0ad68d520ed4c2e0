// kforge hgemm bench: the vendor baselines over a shape set, in the three timing modes.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <regex>

#include "baselines/cublas.hpp"
#include "cli/commands.hpp"
#include "core/files.hpp"
#include "core/text.hpp"
#include "db/rundb.hpp"
#include "gpu/device.hpp"
#include "kforge/version.hpp"
#include "measure/ceilings.hpp"
#include "measure/timer.hpp"
#include "kernels/hgemm/dispatch.hpp"
#include "ops/hgemm_table.hpp"
#include "ops/hgemm_verify.hpp"
#include "tune/tuner.hpp"
#include "report/results.hpp"

namespace kforge {
namespace {

const char* const kBaselineNames[] = {"cublas", "lt_heur", "lt_auto", "ours", "ours_all"};

struct BenchOptions {
  std::string shapes = "grid";
  std::string modes = "offline";
  std::string layouts = "nn,tn";
  std::string acc = "f32";
  std::string dtype = "f16";
  std::string baselines = "cublas,lt_heur,lt_auto";
  std::vector<std::string> outs;
  std::string variants_out;  // every timed variant of ours_all / lt_auto, one row each (CSV)
  std::string db = "kforge.db";
  bool no_db = false;
  std::string cold = "none";
  std::string dist = "uniform";
  std::string stream = "created";
  uint64_t seed = 1;
  int samples = 5;
  int warmup = 3;
  double batch_us = 200;
  double server_rate = 2000;
  int autotune_algos = 100;
  int check_samples = 256;
  // The runoff (see runoff_contenders): alternatives within noise of an implementation's best timed
  // again with this many samples (0: no runoff), within this relative margin, at most this many.
  int runoff_samples = 15;
  double runoff_margin = 0.03;
  int runoff_max = 4;
  int table_limit = 40;
  bool recalibrate = false;
  bool ours = false;          // add "ours" to the baselines
  std::string table;          // dispatch table for "ours" (default: the shipped one, when present)
  int max_variants = 0;       // ours_all: measure only the best N by the cost model (0: every variant)
  std::string speedup;        // "IMPL:BASE": the per-shape speed-up table (both added to the baselines)
  std::vector<std::string> speedup_outs;  // that table as FILE.csv / FILE.json
  // Tuning (kforge hgemm tune): winners verified and written to `tune_out` after every shape.
  std::string tune_out;
  std::string tune_from;      // tune: the table --out starts from when it does not exist yet ("shipped": beside the binary)
  bool retune = false;
  bool retune_stale = false;  // re-measure entries tuned by a build with another set of variants
  double budget_s = 0;        // stop starting new shapes after this many seconds (0: no limit)
};

// Everything the options say, checked before any GPU work starts.
struct BenchPlan {
  std::vector<Shape> shapes;
  std::vector<Mode> modes;
  std::vector<Layout> layouts;
  Acc acc = Acc::kF32;
  Dtype dtype = Dtype::kF16;
  std::vector<std::string> baselines;
  Dist dist = Dist::kUniform;
  bool flush_l2 = false, rotate = false;
};

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

// Whether `path` exists; false (not an exception) for a name the system cannot even look up.
bool exists_quietly(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// A --shapes value that names a file (a folder in it, or an extension) rather than a shape list.
bool names_a_file(const std::string& spec) {
  return spec.find('/') != std::string::npos || std::regex_match(spec, std::regex(R"(.*\.[A-Za-z][A-Za-z0-9]*)"));
}

BenchPlan make_plan(const BenchOptions& o) {
  BenchPlan p;
  if (o.shapes != "grid" && !o.shapes.empty() && o.shapes[0] != '@' && names_a_file(o.shapes))
    check_input_file("--shapes", o.shapes);
  p.shapes = resolve_shapes(o.shapes);
  p.modes = parse_modes(o.modes);
  p.layouts = parse_layouts(o.layouts);
  p.acc = parse_acc(o.acc);
  p.dtype = parse_dtype(o.dtype);
  if (p.dtype == Dtype::kBF16 && p.acc != Acc::kF32)
    KF_USAGE_ERROR("--dtype bf16 accumulates in fp32 only: drop --acc f16 (or use --dtype f16)");
  for (const std::string& b : split(o.baselines, ',')) {
    if (std::find(std::begin(kBaselineNames), std::end(kBaselineNames), b) == std::end(kBaselineNames))
      KF_USAGE_ERROR("unknown baseline '%s' (expected cublas, lt_heur, lt_auto, ours, ours_all)", b.c_str());
    if (std::find(p.baselines.begin(), p.baselines.end(), b) == p.baselines.end()) p.baselines.push_back(b);
  }
  if (o.ours && std::find(p.baselines.begin(), p.baselines.end(), "ours") == p.baselines.end())
    p.baselines.push_back("ours");
  if (!o.speedup.empty()) {
    const std::vector<std::string> sides = split(o.speedup, ':');
    if (sides.size() != 2 || sides[0] == sides[1])
      KF_USAGE_ERROR("bad --speedup '%s': expected IMPL:BASE with two different implementations, e.g. ours:lt_auto",
                     o.speedup.c_str());
    for (const std::string& b : sides) {
      if (std::find(std::begin(kBaselineNames), std::end(kBaselineNames), b) == std::end(kBaselineNames))
        KF_USAGE_ERROR("--speedup: unknown implementation '%s' (expected cublas, lt_heur, lt_auto, ours, ours_all)",
                       b.c_str());
      if (std::find(p.baselines.begin(), p.baselines.end(), b) == p.baselines.end()) p.baselines.push_back(b);
    }
  }
  if (!o.speedup_outs.empty() && o.speedup.empty()) KF_USAGE_ERROR("--speedup-out needs --speedup IMPL:BASE");
  for (const std::string& out : o.speedup_outs) {
    if (!ends_with(out, ".csv") && !ends_with(out, ".json"))
      KF_USAGE_ERROR("--speedup-out '%s' must end in .csv or .json", out.c_str());
    check_writable(out);
  }
  if (p.baselines.empty()) KF_USAGE_ERROR("no baseline given");
  if (o.max_variants < 0) KF_USAGE_ERROR("--max-variants must be 0 (all) or positive");
  if (!o.table.empty() && !exists_quietly(o.table))
    KF_USAGE_ERROR("--table %s: no such dispatch table", o.table.c_str());
  if (!o.table.empty()) check_input_file("--table", o.table);
  if (!o.tune_out.empty()) {
    if (!ends_with(o.tune_out, ".json")) KF_USAGE_ERROR("--out '%s' must end in .json (a dispatch table)", o.tune_out.c_str());
    check_output_file("--out", o.tune_out);
    if (exists_quietly(o.tune_out)) check_input_file("--out", o.tune_out);  // read to resume
  }
  if (!o.tune_from.empty()) {
    if (o.tune_from == "shipped") {
      std::vector<std::string> looked;
      if (shipped_table_path(&looked).empty())
        KF_USAGE_ERROR("--from shipped: no dispatch table beside this kforge binary (looked for %s); give --from FILE",
                       join(looked, " and ").c_str());
    } else {
      if (!exists_quietly(o.tune_from)) KF_USAGE_ERROR("--from %s: no such dispatch table", o.tune_from.c_str());
      check_input_file("--from", o.tune_from);
      (void)DispatchTable::load(o.tune_from);  // malformed: a usage error now, before any GPU work
    }
  }
  if (o.table_limit > 1000000) KF_USAGE_ERROR("--table-limit must be at most 1000000 (got %d)", o.table_limit);
  if (o.max_variants > 10000) KF_USAGE_ERROR("--max-variants must be at most 10000 (got %d)", o.max_variants);
  if (o.budget_s > 365 * 24 * 3600.0)
    KF_USAGE_ERROR("--budget %g: at most a year of seconds (0: no limit)", o.budget_s);
  p.dist = parse_dist(o.dist);
  if (o.cold == "flush") p.flush_l2 = true;
  else if (o.cold == "rotate") p.rotate = true;
  else if (o.cold != "none") KF_USAGE_ERROR("unknown --cold '%s' (expected none, flush or rotate)", o.cold.c_str());
  if (o.stream != "created" && o.stream != "legacy")
    KF_USAGE_ERROR("unknown --stream '%s' (expected created or legacy)", o.stream.c_str());
  if (o.stream == "legacy" && std::find(p.modes.begin(), p.modes.end(), Mode::kGraph) != p.modes.end())
    KF_USAGE_ERROR("--stream legacy cannot be captured into a CUDA graph; graph mode needs --stream created");
  if (p.flush_l2 && std::find(p.modes.begin(), p.modes.end(), Mode::kGraph) != p.modes.end())
    KF_USAGE_ERROR("--cold flush does not apply to graph mode; use --cold rotate there");
  for (const std::string& out : o.outs) {
    if (!ends_with(out, ".csv") && !ends_with(out, ".json"))
      KF_USAGE_ERROR("output '%s' must end in .csv or .json", out.c_str());
    check_writable(out);
  }
  if (!o.variants_out.empty()) {
    if (!ends_with(o.variants_out, ".csv")) KF_USAGE_ERROR("--variants-out '%s' must end in .csv", o.variants_out.c_str());
    check_writable(o.variants_out);
  }
  if (!o.no_db) check_writable(o.db);
  if (o.samples < 1 || o.samples > 1000) KF_USAGE_ERROR("--samples must be between 1 and 1000 (got %d)", o.samples);
  if (o.warmup < 0 || o.warmup > 1000) KF_USAGE_ERROR("--warmup must be between 0 and 1000 (got %d)", o.warmup);
  if (!(o.batch_us > 0) || o.batch_us > 1e6) KF_USAGE_ERROR("--batch-us must be in (0, 1e6] (got %g)", o.batch_us);
  if (!(o.server_rate > 0) || o.server_rate > 1e6) KF_USAGE_ERROR("--server-rate must be in (0, 1e6] calls/s (got %g)", o.server_rate);
  if (o.autotune_algos < 1 || o.autotune_algos > 1000) KF_USAGE_ERROR("--autotune-algos must be between 1 and 1000");
  if (o.check_samples < 2 || o.check_samples > (1 << 24))
    KF_USAGE_ERROR("--check-samples must be between 2 and 16777216 (got %d)", o.check_samples);
  if (o.runoff_samples < 0 || o.runoff_samples > 1000)
    KF_USAGE_ERROR("--runoff-samples must be between 0 (no runoff) and 1000 (got %d)", o.runoff_samples);
  if (!(o.runoff_margin >= 0) || o.runoff_margin > 1)
    KF_USAGE_ERROR("--runoff-margin must be in [0, 1] (a fraction of the best time; got %g)", o.runoff_margin);
  if (o.runoff_max < 2 || o.runoff_max > 64)
    KF_USAGE_ERROR("--runoff-max must be between 2 and 64 (got %d)", o.runoff_max);
  return p;
}

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }
size_t set_bytes(const Shape& s) {
  return align256(elems_a(s) * 2) + align256(elems_b(s) * 2) + align256(elems_c(s) * 2);
}

// Input sets laid out in one pool: set j holds A, B and C of the current shape.
struct Operands {
  DeviceBuffer pool;
  size_t stride = 0;
  int sets = 1;
  GemmOperands at(int64_t call, const Shape& s) const {
    char* base = pool.as<char>() + size_t(call % sets) * stride;
    const size_t a_bytes = align256(elems_a(s) * 2), b_bytes = align256(elems_b(s) * 2);
    return {reinterpret_cast<const __half*>(base), reinterpret_cast<const __half*>(base + a_bytes),
            reinterpret_cast<__half*>(base + a_bytes + b_bytes)};
  }
};

uint64_t shape_seed(uint64_t seed, const Shape& s, Layout l) {
  uint64_t h = seed * 0x9e3779b97f4a7c15ull;
  for (uint64_t v : {uint64_t(s.m), uint64_t(s.n), uint64_t(s.k), uint64_t(l)}) h = (h ^ v) * 0x100000001b3ull;
  return h;
}

class Progress {
 public:
  Progress(const std::vector<Shape>& shapes) : tty_(::isatty(2)), start_(clock::now()) {
    for (const Shape& s : shapes) total_ += weight(s);
  }
  void done(size_t index, size_t count, const Shape& s) {
    done_ += weight(s);
    const double elapsed = seconds();
    const double eta = done_ > 0 ? elapsed * (total_ - done_) / done_ : 0;
    const bool last = index + 1 == count;
    if (!tty_ && !last && elapsed - last_print_ < 15.0) return;
    last_print_ = elapsed;
    std::fprintf(stderr, "%s[%4zu/%zu] %-18s elapsed %-7s ETA %-7s%s", tty_ ? "\r" : "", index + 1, count,
                 s.str().c_str(), human_duration(elapsed).c_str(), human_duration(eta).c_str(),
                 tty_ && !last ? "" : "\n");
    std::fflush(stderr);
  }
  double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }

 private:
  using clock = std::chrono::steady_clock;
  static double weight(const Shape& s) { return 3e9 + s.flops(); }  // fixed cost per shape + work
  bool tty_;
  clock::time_point start_;
  double total_ = 0, done_ = 0, last_print_ = -1e9;
};

std::string per_shape_table(const std::vector<Measurement>& rows) {
  std::string out = strf("%-18s %-6s %-7s %-8s %12s %9s %8s %8s %s\n", "shape", "layout", "mode", "impl", "time",
                         "TFLOP/s", "vs best", "% floor", "check");
  for (const Measurement& m : rows)
    out += strf("%-18s %-6s %-7s %-8s %12s %9.1f %8.3f %7.1f%% %s\n", m.shape.str().c_str(),
                std::string(to_string(m.layout)).c_str(), m.mode.c_str(), m.impl.c_str(),
                human_us(m.time_us.median).c_str(), m.tflops, m.ratio_to_best, m.floor_pct,
                m.verified ? "ok" : "FAILED");
  return out;
}

nlohmann::json options_json(const BenchOptions& o) {
  return {{"shapes", o.shapes}, {"modes", o.modes},     {"layouts", o.layouts},     {"acc", o.acc}, {"dtype", o.dtype},
          {"baselines", o.baselines}, {"cold", o.cold}, {"dist", o.dist},           {"stream", o.stream},       {"seed", o.seed},
          {"samples", o.samples}, {"warmup", o.warmup}, {"batch_us", o.batch_us},   {"server_rate", o.server_rate},
          {"autotune_algos", o.autotune_algos}, {"check_samples", o.check_samples},
          {"runoff_samples", o.runoff_samples}, {"runoff_margin", o.runoff_margin}, {"runoff_max", o.runoff_max}};
}

// One call of a variant on one set of operands.
void run_variant(const kernels::KernelVariant* v, const kforge_hgemm_problem& abi, const GemmOperands& o,
                 const DeviceBuffer& ws, cudaStream_t st) {
  kforge_hgemm_args a{};
  a.problem = abi;
  a.a = o.a;
  a.b = o.b;
  a.c = o.c;
  a.workspace = ws.get();
  a.workspace_bytes = ws.bytes();
  if (const int rc = v->run(&a, st)) KF_RUNTIME_ERROR("kforge variant %s returned %d", v->name, rc);
}

// One of kforge's variants as a timed launch on the bench's operands.
Launch variant_launch(const kernels::KernelVariant* v, const HgemmProblem& prob, const Operands& ops,
                      const DeviceBuffer& ws) {
  return [v, abi = prob.abi(), &ops, &ws, sh = prob.shape](cudaStream_t st, int64_t i) {
    run_variant(v, abi, ops.at(i, sh), ws, st);
  };
}

// kforge's dispatched kernels as a user calls them: every call pays what the exported kforge_hgemm
// pays before its kernel (the current device, its cached attributes, the memoised resolution),
// then runs the choice.
Launch dispatched_launch(const kernels::Dispatcher& disp, const HgemmProblem& prob, const Operands& ops,
                         const DeviceBuffer& ws) {
  return [&disp, abi = prob.abi(), &ops, &ws, sh = prob.shape](cudaStream_t st, int64_t i) {
    const int d = kernels::current_device();
    const kernels::DeviceAttrs a = kernels::device_attrs(d);
    const kernels::Choice c = disp.resolve_cached(abi, kernels::nominal_device_model(a.sms, a.cc), d);
    if (!c.variant) KF_RUNTIME_ERROR("no kforge variant serves %s", sh.str().c_str());
    run_variant(c.variant, abi, ops.at(i, sh), ws, st);
  };
}

// The table "ours" dispatches from: the one given, else the one shipped beside the kforge binary
// (shipped_table_path) when present, else none (the cost model alone).
DispatchTable ours_table(const std::string& given) {
  const std::string path = !given.empty() ? given : shipped_table_path();
  return path.empty() ? DispatchTable{} : DispatchTable::load(path);
}

void run_bench(const BenchOptions& o, const std::string& command) {
  const BenchPlan plan = make_plan(o);
  require_gpu();
  const DeviceInfo dev = query_device(0);
  Stream stream;
  const cudaStream_t s = o.stream == "legacy" ? cudaStream_t(nullptr) : stream.get();

  // Memory: one pool large enough for the largest shape's operands (or 3x L2 of rotated sets).
  size_t largest = 0;
  Shape largest_shape;
  for (const Shape& sh : plan.shapes)
    if (set_bytes(sh) > largest) largest = set_bytes(sh), largest_shape = sh;
  const size_t pool_bytes = std::max(largest, plan.rotate ? align256(size_t(3.2 * double(dev.l2_bytes))) : size_t(0));
  const size_t need = pool_bytes + kBaselineWorkspaceBytes + (size_t(256) << 20);
  if (need > dev.mem_free)
    KF_RUNTIME_ERROR("out of GPU memory: shape %s needs %s of device memory, %s free on %s",
                     largest_shape.str().c_str(), human_bytes(double(need)).c_str(),
                     human_bytes(double(dev.mem_free)).c_str(), dev.name.c_str());

  // Calibration captures graphs: always on kforge's own stream, whatever --stream says.
  const Ceilings ceil = load_or_calibrate_ceilings(dev, stream.get(), o.recalibrate);
  std::unique_ptr<RunDb> db;
  int64_t run_id = 0;
  if (!o.no_db) {
    db = std::make_unique<RunDb>(o.db);
    nlohmann::json devj = to_json(dev);
    devj["ceilings"] = to_json(ceil);
    run_id = db->begin_run("hgemm-bench", command, devj, options_json(o));
  }

  std::fprintf(stderr, "kforge hgemm bench: %zu shapes x %zu layouts x %zu modes on %s (%s); baselines %s\n",
               plan.shapes.size(), plan.layouts.size(), plan.modes.size(), dev.name.c_str(), dev.arch().c_str(),
               join(plan.baselines, ",").c_str());
  if (std::find(plan.modes.begin(), plan.modes.end(), Mode::kOffline) != plan.modes.end())
    std::fprintf(stderr, "note: offline mode times back-to-back calls from one host thread: host dispatch is "
                         "included on purpose\n");

  // Warm back-to-back runs may serve up to the L2 size of their traffic from L2; cold ones none.
  const double l2_resident = plan.flush_l2 || plan.rotate ? 0.0 : double(dev.l2_bytes);
  CublasHandles handles;
  const DispatchTable table = ours_table(o.table);
  const kernels::Dispatcher dispatcher(table.data(), table.size());
  DispatchTable tuned;  // kforge hgemm tune: what this run has found (plus what an earlier run left)
  if (!o.tune_out.empty() && std::filesystem::exists(o.tune_out)) tuned = DispatchTable::load(o.tune_out);
  else if (!o.tune_from.empty())  // users' shapes added to a table they start from (e.g. the shipped one)
    tuned = DispatchTable::load(o.tune_from == "shipped" ? shipped_table_path() : o.tune_from);
  tuned.device = dev.name;
  // As much workspace as the neediest variant of any planned problem asks for (decode split-K partials).
  DeviceBuffer ours_ws(workspace_bytes_for(plan.shapes, plan.layouts, plan.acc, dev, size_t(1) << 20, plan.dtype),
                       "kforge workspace");
  Operands ops;
  ops.pool = DeviceBuffer(pool_bytes, "operand pool");
  Timer timer(s, dev.l2_bytes, o.seed);
  std::vector<Measurement> all;
  std::vector<Measurement> each_variant;  // --variants-out
  Progress progress(plan.shapes);
  size_t shapes_done = 0;
  auto previous = std::signal(SIGINT, on_sigint);
  g_interrupted = false;

  try {
    for (size_t si = 0; si < plan.shapes.size() && !g_interrupted; ++si) {
      const Shape& sh = plan.shapes[si];
      if (o.budget_s > 0 && progress.seconds() > o.budget_s) {
        std::fprintf(stderr, "\nbudget of %.0f s reached after %zu of %zu shapes; run the same command again to go on\n",
                     o.budget_s, si, plan.shapes.size());
        break;
      }
      std::vector<Measurement> shape_rows;
      ops.stride = set_bytes(sh);
      ops.sets = plan.rotate ? int(std::max<size_t>(1, pool_bytes / ops.stride)) : 1;
      for (Layout layout : plan.layouts) {
        const HgemmProblem prob{sh, layout, plan.acc, plan.dtype};
        const kforge_hgemm_problem abi = prob.abi();
        if (!o.tune_out.empty() && !needs_tuning(tuned, abi, o.retune, o.retune_stale)) continue;
        fill_random(ops.pool.as<__half>(), ops.sets * ops.stride / 2, plan.dist, shape_seed(o.seed, sh, layout), s,
                    plan.dtype);
        LtPlan lt(handles, prob);
        const auto heur = lt.heuristics(1);
        const auto autos = lt.heuristics(o.autotune_algos);

        // Each candidate implementation: its launch and its description.
        struct Impl {
          std::string name, algo;
          std::vector<std::pair<Launch, std::string>> variants;  // lt_auto: one per algorithm
        };
        std::vector<Impl> impls;
        for (const std::string& b : plan.baselines) {
          Impl im{b, "", {}};
          if (b == "ours") {
            const int cc = dev.cc_major * 10 + dev.cc_minor;
            const kernels::Choice c = dispatcher.resolve(abi, kernels::nominal_device_model(dev.sm_count, cc), 0);
            if (!c.variant) KF_RUNTIME_ERROR("no kforge variant serves %s %s", sh.str().c_str(), std::string(to_string(layout)).c_str());
            im.variants.push_back({dispatched_launch(dispatcher, prob, ops, ours_ws),
                                   std::string(c.variant->name) + " (" + kernels::to_string(c.how) + ")"});
          } else if (b == "ours_all") {
            for (const kernels::KernelVariant* v : runnable_variants(prob, dev, ceil, o.max_variants))
              im.variants.push_back({variant_launch(v, prob, ops, ours_ws), v->name});
            if (im.variants.empty()) {
              std::fprintf(stderr, "\nwarning: no kforge variant supports %s %s; ours_all skipped\n", sh.str().c_str(),
                           std::string(to_string(layout)).c_str());
              continue;
            }
          } else if (b == "cublas") {
            im.variants.push_back({[&](cudaStream_t st, int64_t i) { cublas_gemm_ex(handles, prob, ops.at(i, sh), st); },
                                   "cublasGemmEx CUBLAS_GEMM_DEFAULT"});
          } else {
            const auto& list = b == "lt_heur" ? heur : autos;
            for (const auto& h : list) {
              const cublasLtMatmulAlgo_t* algo = &h.algo;
              im.variants.push_back({[&lt, &ops, &sh, algo](cudaStream_t st, int64_t i) {
                                       if (!lt.run(*algo, ops.at(i, sh), st))
                                         KF_RUNTIME_ERROR("cuBLASLt refused an algorithm it had offered");
                                     },
                                     describe_algo(h.algo, h.workspaceSize)});
            }
            if (im.variants.empty()) {
              std::fprintf(stderr, "\nwarning: cuBLASLt's heuristic offered no algorithm for %s %s; %s skipped\n",
                           sh.str().c_str(), std::string(to_string(layout)).c_str(), b.c_str());
              continue;
            }
          }
          impls.push_back(std::move(im));
        }
        // Verify every variant once before timing it: poisoned output, random inputs, fp64 samples.
        // A variant that fails is never the reported baseline while a correct one of its impl exists.
        struct Candidate {
          size_t impl;
          size_t variant;
          bool ok;
        };
        std::vector<Candidate> timed;
        std::vector<double> worst_ratio(impls.size(), 0.0);
        for (size_t ii = 0; ii < impls.size(); ++ii) {
          const Impl& im = impls[ii];
          std::vector<Candidate> mine;
          for (size_t vi = 0; vi < im.variants.size(); ++vi) {
            const GemmOperands first = ops.at(0, sh);
            poison_nan(first.c, elems_c(sh), s, plan.dtype);
            im.variants[vi].first(s, 0);
            const CheckResult cr = check_sampled_gpu(prob, first.a, first.b, first.c, o.check_samples,
                                                     shape_seed(o.seed + 7, sh, layout), s);
            if (!cr.ok())
              std::fprintf(stderr, "\nwarning: %s %s %s (%s) failed verification: %s\n", im.name.c_str(),
                           sh.str().c_str(), std::string(to_string(layout)).c_str(), im.variants[vi].second.c_str(),
                           cr.describe().c_str());
            worst_ratio[ii] = std::max(worst_ratio[ii], cr.worst_ratio);
            mine.push_back({ii, vi, cr.ok()});
          }
          const bool any_ok = std::any_of(mine.begin(), mine.end(), [](const Candidate& c) { return c.ok; });
          for (const Candidate& c : mine)
            if (c.ok || !any_ok) timed.push_back(c);
        }
        std::vector<Launch> launches;
        for (const Candidate& c : timed) launches.push_back(impls[c.impl].variants[c.variant].first);

        for (Mode mode : plan.modes) {
          TimingConfig cfg;
          cfg.mode = mode;
          cfg.samples = o.samples;
          cfg.warmup_calls = o.warmup;
          cfg.batch_target_us = o.batch_us;
          cfg.flush_l2 = plan.flush_l2;
          cfg.server_rate_hz = o.server_rate;
          // Calls of 100 us and more: each timed batch follows an untimed one of its own (the board
          // at its power limit otherwise times a side by the length of its batch, see Timer).
          cfg.preroll_above_us = 100;
          // Every variant of every impl in one interleaved measurement: a slow spell of the host
          // falls on all of them alike, which keeps the ratios between them honest.
          const std::vector<Timing> times = timer.time_interleaved(launches, cfg);
          // The runoff: where an implementation's fastest alternatives are within noise of each
          // other, the best of a few samples is partly luck (and a lucky baseline is as unfair as a
          // lucky candidate). Those contenders of every implementation, and every implementation's
          // best, are timed again, interleaved, with more samples; each implementation's result is
          // then its best in the runoff, a measurement that did not select itself.
          std::vector<Timing> chosen = times;
          std::vector<bool> eligible(timed.size(), true);
          bool ran_runoff = false;
          if (o.runoff_samples > 0) {
            std::vector<size_t> entrants;
            bool any_close = false;
            for (size_t ii = 0; ii < impls.size(); ++ii) {
              std::vector<size_t> mine;
              std::vector<Summary> sums;
              for (size_t t = 0; t < timed.size(); ++t)
                if (timed[t].impl == ii) mine.push_back(t), sums.push_back(times[t].per_call_us);
              const std::vector<size_t> close = runoff_contenders(sums, o.runoff_margin, size_t(o.runoff_max));
              any_close = any_close || close.size() > 1;
              for (size_t c : close) entrants.push_back(mine[c]);
            }
            if (any_close) {
              std::vector<Launch> again;
              for (size_t t : entrants) again.push_back(launches[t]);
              TimingConfig rcfg = cfg;
              rcfg.samples = o.runoff_samples;
              rcfg.warmup_calls = 0;  // every entrant ran moments ago
              const std::vector<Timing> second = timer.time_interleaved(again, rcfg);
              std::fill(eligible.begin(), eligible.end(), false);
              for (size_t e = 0; e < entrants.size(); ++e) chosen[entrants[e]] = second[e], eligible[entrants[e]] = true;
              ran_runoff = true;
            }
          }
          for (size_t ii = 0; ii < impls.size(); ++ii) {
            Measurement m;
            m.shape = sh;
            m.layout = layout;
            m.acc = plan.acc;
            m.dtype = plan.dtype;
            m.mode = std::string(to_string(mode));
            m.impl = impls[ii].name;
            bool have = false;
            int entered = 0;  // this implementation's alternatives in the runoff
            for (size_t t = 0; t < timed.size(); ++t) {
              if (timed[t].impl != ii || !eligible[t]) continue;
              ++entered;
              if (!have || chosen[t].per_call_us.median < m.time_us.median) {
                have = true;
                m.time_us = chosen[t].per_call_us;
                m.calls_per_sample = chosen[t].calls_per_sample;
                m.algo = impls[ii].variants[timed[t].variant].second;
                m.verified = timed[t].ok;
              }
            }
            if (m.impl == "lt_auto" || m.impl == "ours_all")
              m.algo = (ran_runoff && entered > 1
                            ? strf("best of %zu, runoff of %d: ", impls[ii].variants.size(), entered)
                            : strf("best of %zu: ", impls[ii].variants.size())) +
                       m.algo;
            m.err_ratio = worst_ratio[ii];
            const auto finish = [&](Measurement& r) {
              r.tflops = sh.flops() / r.time_us.median / 1e6;
              r.floor_us = counted_floor_us(sh.flops(), hgemm_bytes(sh), ceil, l2_resident);
              r.floor_pct = 100.0 * r.floor_us / r.time_us.median;
            };
            finish(m);
            shape_rows.push_back(m);
            if (!o.variants_out.empty()) {
              std::vector<Measurement> mine;
              for (size_t t = 0; t < timed.size(); ++t) {
                if (timed[t].impl != ii) continue;
                Measurement r = m;
                r.time_us = times[t].per_call_us;
                r.calls_per_sample = times[t].calls_per_sample;
                r.algo = impls[ii].variants[timed[t].variant].second;
                r.verified = timed[t].ok;
                finish(r);
                mine.push_back(r);
              }
              fill_ratio_to_best(mine);  // against the impl's own best variant
              each_variant.insert(each_variant.end(), mine.begin(), mine.end());
            }
          }
        }
      }
      fill_ratio_to_best(shape_rows);
      if (!o.tune_out.empty()) record_winners(shape_rows, plan.modes.front(), tuned, o.tune_out, o.seed, s);
      if (db) db->add_measurements(run_id, shape_rows);
      all.insert(all.end(), shape_rows.begin(), shape_rows.end());
      ++shapes_done;
      progress.done(si, plan.shapes.size(), sh);
    }
  } catch (...) {
    std::signal(SIGINT, previous);
    if (db) db->finish_run(run_id, "failed", nlohmann::json::object());
    throw;
  }
  std::signal(SIGINT, previous);

  if (g_interrupted) {
    if (db) db->finish_run(run_id, "interrupted", nlohmann::json::object());
    std::fprintf(stderr, "\ninterrupted after %zu of %zu shapes: %s; no output files written\n", shapes_done,
                 plan.shapes.size(), db ? strf("%zu measurements kept in run %lld of %s", all.size(), (long long)run_id, o.db.c_str()).c_str() : "nothing kept (--no-db)");
    throw ExitStatus{130};
  }

  if (plan.shapes.size() * plan.layouts.size() <= size_t(o.table_limit)) std::printf("%s\n", per_shape_table(all).c_str());
  auto rows_of = [&all](Mode mode) {
    std::vector<Measurement> rows;
    for (const Measurement& m : all)
      if (m.mode == to_string(mode)) rows.push_back(m);
    return rows;
  };
  for (Mode mode : plan.modes)
    std::printf("== %s mode (%s%s accumulation)\n%s", std::string(to_string(mode)).c_str(),
                plan.dtype == Dtype::kBF16 ? "bf16 inputs, " : "", std::string(to_string(plan.acc)).c_str(),
                format_summary(rows_of(mode)).c_str());
  std::printf("ceilings: %.1f TFLOP/s fp16 tensor, %.0f GB/s memory, %.0f GB/s L2 (%s)\n", ceil.tensor_tflops,
              ceil.bandwidth_gbs, ceil.l2_bandwidth_gbs, ceil.method.c_str());
  std::printf("took %s\n", human_duration(progress.seconds()).c_str());
  if (!o.speedup.empty()) {
    const std::vector<std::string> sides = split(o.speedup, ':');
    const std::vector<ShapeSpeedup> sp = speedup_per_shape(all, sides[0], sides[1]);
    std::printf("== speed-up of %s over %s, per shape\n%s", sides[0].c_str(), sides[1].c_str(),
                format_speedup_table(sp, sides[0], sides[1]).c_str());
    for (const std::string& out : o.speedup_outs) {
      write_file_atomic(out, ends_with(out, ".csv") ? speedup_csv(sp) : speedup_json(sp, sides[0], sides[1]).dump(1) + "\n");
      std::fprintf(stderr, "wrote %s\n", out.c_str());
    }
  }

  nlohmann::json summary;
  for (Mode mode : plan.modes) {
    for (const KeySummary& k : summarize_keys(rows_of(mode)))
      summary[std::string(to_string(mode))][k.key] = {{"shapes", k.shapes}, {"geomean_vs_best", k.geomean_vs_best}};
  }
  for (const std::string& out : o.outs) {
    if (ends_with(out, ".csv")) {
      write_file_atomic(out, to_csv(all));
    } else {
      nlohmann::json j;
      j["kforge_version"] = kVersion;
      j["command"] = command;
      j["device"] = to_json(dev);
      j["ceilings"] = to_json(ceil);
      j["options"] = options_json(o);
      j["results"] = nlohmann::json::array();
      for (const Measurement& m : all) j["results"].push_back(to_json(m));
      j["summary"] = summary;
      write_file_atomic(out, j.dump(1) + "\n");
    }
    std::fprintf(stderr, "wrote %s\n", out.c_str());
  }
  if (!o.variants_out.empty()) {
    write_file_atomic(o.variants_out, to_csv(each_variant));
    std::fprintf(stderr, "wrote %s (%zu variant rows)\n", o.variants_out.c_str(), each_variant.size());
  }
  if (db) {
    db->finish_run(run_id, "complete", summary);
    std::fprintf(stderr, "run %lld stored in %s\n", (long long)run_id, o.db.c_str());
  }
}

// `kforge hgemm variants`: the compiled kernel variants, their configurations and, on a GPU, how
// many CTAs of each fit at once; with --shape, which serve it, their CTA count, waves and the cost
// model's prediction, in the order the tuner would measure them.
struct VariantsOptions {
  std::string layout = "all";
  std::string acc = "all";
  std::string dtype = "all";
  std::string shape;
  std::string table;
};

void run_variants(const VariantsOptions& o) {
  const bool all_layouts = o.layout == "all", all_accs = o.acc == "all";
  const Layout layout = all_layouts ? Layout::kNN : parse_layout(o.layout);
  const Acc acc = all_accs ? Acc::kF32 : parse_acc(o.acc);
  const bool all_dtypes = o.dtype == "all";
  const Dtype dtype = all_dtypes ? Dtype::kF16 : parse_dtype(o.dtype);
  std::optional<Shape> shape;
  if (!o.shape.empty()) shape = parse_shape(o.shape);
  if (shape && (all_layouts || all_accs))
    KF_USAGE_ERROR("--shape needs one --layout (nn or tn) and one --acc (f32 or f16)");
  if (!o.table.empty() && !shape) KF_USAGE_ERROR("--table needs --shape");
  if (!o.table.empty() && !exists_quietly(o.table))
    KF_USAGE_ERROR("--table %s: no such dispatch table", o.table.c_str());
  if (!o.table.empty()) check_input_file("--table", o.table);

  const std::optional<std::string> no_gpu = gpu_unavailable_reason();
  std::optional<DeviceInfo> dev;
  std::optional<Ceilings> ceil;
  std::unique_ptr<Stream> stream;
  if (!no_gpu) {
    dev = query_device(0);
    if (shape) {
      stream = std::make_unique<Stream>();
      ceil = load_or_calibrate_ceilings(*dev, stream->get(), false);
    }
  }
  const bool hopper = dev && dev->cc_major == 9 && dev->cc_minor == 0;

  size_t count = 0;
  const kernels::KernelVariant* all = kernels::variants(&count);
  struct Row {
    const kernels::KernelVariant* v;
    double predicted = 0;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < count; ++i) {
    const kernels::KernelVariant& v = all[i];
    if (!all_layouts && v.layout != static_cast<kforge_hgemm_layout>(layout)) continue;
    if (!all_accs && v.acc != static_cast<kforge_hgemm_acc>(acc)) continue;
    if (!all_dtypes && v.dtype != (dtype == Dtype::kBF16 ? KFORGE_HGEMM_BF16 : KFORGE_HGEMM_F16)) continue;
    rows.push_back({&v, 0});
  }
  kforge_hgemm_problem abi{};
  if (shape) {
    abi = HgemmProblem{*shape, layout, acc, dtype}.abi();
    std::vector<Row> kept;
    for (Row& r : rows)
      if (r.v->supports(&abi) && !(r.v->config.family == kernels::Family::kSm90 && dev && !hopper)) kept.push_back(r);
    rows = std::move(kept);
    if (ceil) {
      for (Row& r : rows) r.predicted = predicted_us(*r.v, *shape, *dev, *ceil);
      std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) { return x.predicted < y.predicted; });
    }
  }

  if (no_gpu) std::printf("(%s: resident CTAs and predictions need a GPU)\n", no_gpu->c_str());
  else std::printf("device: %s (%d SMs)\n", dev->name.c_str(), dev->sm_count);
  const char* fmt = "%-40s %-5s %-10s %6s %5s %6s %8s %-11s %9s%s";
  std::string extra_head = shape ? strf(" %6s %6s %12s", "CTAs", "waves", "predicted") : "";
  std::printf("%s\n", strf(fmt, "variant", "arch", "tile", "stages", "wg|w", "splitK", "cluster", "schedule", "resident",
                           extra_head.c_str()).c_str());
  for (const Row& r : rows) {
    const kernels::KernelConfig& c = r.v->config;
    const bool sm90 = c.family == kernels::Family::kSm90;
    const std::string schedule = !sm90         ? "one tile"
                                 : c.pingpong  ? "ping-pong"
                                 : c.stream_k  ? "stream-K"
                                 : c.swap_ab   ? "swapped"
                                 : c.persistent ? "persistent"
                                                : "one tile";
    const int cluster = c.splitk_auto ? 1 : std::max(c.splitk, c.multicast);  // decode: separate CTAs
    const int resident = dev && (hopper || !sm90) && r.v->resident_ctas ? r.v->resident_ctas() : 0;
    std::string extra;
    if (shape) {
      // The GEMV family's CTAs follow its row groups and their K split (gemv_launch: by the SM
      // count; without a GPU, an unknown count splits nothing), not a tile grid.
      const kernels::DeviceModel gm =
          kernels::nominal_device_model(dev ? dev->sm_count : 0, dev ? dev->cc_major * 10 + dev->cc_minor : 0);
      const double ctas = c.family == kernels::Family::kGemv ? kernels::gemv_launch(c, shape->m, shape->n, shape->k, gm).ctas
                                                             : kernels::cta_count(c, shape->m, shape->n);
      const std::string waves = resident > 0 ? strf("%.2f", ctas / resident) : "-";
      extra = strf(" %6.0f %6s %12s", ctas, waves.c_str(), ceil ? human_us(r.predicted).c_str() : "-");
    }
    std::printf("%s\n", strf(fmt, r.v->name, sm90 ? "sm90a" : "sm80", strf("%dx%dx%d", c.bm, c.bn, c.bk).c_str(),
                             std::to_string(c.stages).c_str(), std::to_string(c.consumers).c_str(),
                             std::to_string(c.splitk).c_str(), cluster > 1 ? std::to_string(cluster).c_str() : "-",
                             schedule.c_str(), resident > 0 ? std::to_string(resident).c_str() : "-", extra.c_str())
                            .c_str());
  }
  std::printf("%zu variant(s)%s\n", rows.size(), shape ? " serve this problem (ordered by the cost model's prediction "
                                                          "when a GPU is present)" : "");
  if (shape && dev) {
    const DispatchTable table = ours_table(o.table);
    const int cc = dev->cc_major * 10 + dev->cc_minor;
    const kernels::Dispatcher disp(table.data(), table.size());
    const kernels::Choice c = disp.resolve(abi, kernels::nominal_device_model(dev->sm_count, cc), 0);
    std::printf("dispatch: %s (%s)\n", c.variant ? c.variant->name : "none", kernels::to_string(c.how));
  }
}

// The runoff's flags, the same for bench and tune.
void add_runoff_flags(CLI::App* cmd, BenchOptions* o) {
  cmd->add_option("--runoff-samples", o->runoff_samples,
                  "the runoff: where an implementation's fastest alternatives (ours_all's kernels, lt_auto's "
                  "algorithms) are within noise of its best, they and every implementation's best are timed again "
                  "together with this many samples, and the runoff decides (0: no runoff)")
      ->capture_default_str();
  cmd->add_option("--runoff-margin", o->runoff_margin,
                  "the runoff: an alternative is within noise when its median is within this fraction of the best's, "
                  "or its p10 at or below the best's p90")
      ->capture_default_str();
  cmd->add_option("--runoff-max", o->runoff_max, "the runoff: at most this many alternatives per implementation")
      ->capture_default_str();
}

}  // namespace

void register_hgemm_bench(CLI::App& hgemm) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = hgemm.add_subcommand(
      "bench", "Time the cuBLAS and cuBLASLt baselines over a shape set (default: CUDA-L2's 1,000-shape grid)");
  cmd->add_option("--shapes", o->shapes,
                  "'grid' (the 1,000 shapes {64..16384}^3), a list 'MxNxK,MxNxK', or a file of shapes "
                  "(one MxNxK or M,N,K per line; '@FILE' forces a file)")
      ->capture_default_str();
  cmd->add_option("--mode", o->modes, "offline (back-to-back calls, host dispatch included), graph (CUDA-graph "
                                      "replay, device time), server (random exponential gaps); a comma list runs several")
      ->capture_default_str();
  cmd->add_option("--layouts", o->layouts, "B layouts: nn (B row-major K x N), tn (B column-major), or nn,tn")
      ->capture_default_str();
  cmd->add_option("--acc", o->acc, "accumulation precision: f32 or f16")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "element type of A, B and C: f16, or bf16 (fp32 accumulation; cuBLAS and "
                                       "cuBLASLt in bf16 too)")
      ->capture_default_str();
  cmd->add_option("--baselines", o->baselines,
                  "comma list of cublas (cublasGemmEx), lt_heur (cuBLASLt heuristic top-1), lt_auto (cuBLASLt: "
                  "every algorithm its heuristic returns, each timed, best kept)")
      ->capture_default_str();
  cmd->add_option("--out", o->outs, "write results to FILE.csv or FILE.json (repeatable); written whole at the end");
  CLI::Option* db = cmd->add_option("--db", o->db, "SQLite run database to append this run to")->capture_default_str();
  cmd->add_flag("--no-db", o->no_db, "do not record the run in a database")->excludes(db);
  cmd->add_option("--cold", o->cold, "cache state: none (warm), flush (write 2x L2 before every timed call; "
                                     "offline/server), rotate (cycle through input sets filling > 3x L2)")
      ->capture_default_str();
  cmd->add_option("--dist", o->dist, "input distribution: uniform [-1,1], normal, int (integers in [-2,2])")
      ->capture_default_str();
  cmd->add_option("--stream", o->stream, "where calls go: created (a non-blocking stream of kforge's own) or legacy "
                                         "(the legacy default stream 0, as many applications call cuBLAS)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed for inputs, random order and server gaps")->capture_default_str();
  cmd->add_option("--samples", o->samples, "timed samples per measurement (batches; isolated calls in server mode)")
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed calls before timing")->capture_default_str();
  cmd->add_option("--batch-us", o->batch_us, "target duration of one timed batch, microseconds")->capture_default_str();
  cmd->add_option("--server-rate", o->server_rate, "server mode: mean call rate, calls per second")->capture_default_str();
  cmd->add_option("--autotune-algos", o->autotune_algos, "lt_auto: algorithms requested from the heuristic")
      ->capture_default_str();
  cmd->add_option("--check-samples", o->check_samples, "output elements checked in fp64 per implementation")
      ->capture_default_str();
  add_runoff_flags(cmd, o.get());
  cmd->add_option("--table-limit", o->table_limit, "print the per-shape table when shapes x layouts is at most this")
      ->capture_default_str();
  cmd->add_flag("--recalibrate", o->recalibrate, "measure the device ceilings again instead of using the cache");
  cmd->add_flag("--ours", o->ours, "also time kforge's own kernels as dispatched (tuned table, heuristic elsewhere); "
                                   "same as adding 'ours' to --baselines ('ours_all' times every variant, best kept)");
  cmd->add_option("--table", o->table, "dispatch table for --ours (default: data/hgemm/dispatch-table.json when present)");
  cmd->add_option("--max-variants", o->max_variants, "ours_all: time only the N variants the cost model ranks best "
                                                     "(0: every variant that supports the shape)")
      ->capture_default_str();
  cmd->add_option("--variants-out", o->variants_out,
                  "also write every timed variant (each of ours_all's kernels, each of lt_auto's algorithms) as its "
                  "own row to FILE.csv, ratio_to_best against the best of its implementation");
  cmd->add_option("--speedup", o->speedup,
                  "IMPL:BASE (e.g. ours:lt_auto): both are timed, and a per-shape table is printed at the end: shape, "
                  "mode, each side's time at its faster layout, BASE/IMPL ratio, then per mode the geometric mean, win "
                  "rate, minimum and the shapes below 0.80");
  cmd->add_option("--speedup-out", o->speedup_outs, "write the --speedup table to FILE.csv or FILE.json (repeatable)");
  cmd->callback([o] { run_bench(*o, command_line()); });
}

void register_hgemm_tune(CLI::App& hgemm) {
  auto o = std::make_shared<BenchOptions>();
  o->baselines = "ours_all,lt_auto";
  o->max_variants = 6;
  o->tune_out = "kforge-dispatch-table.json";
  o->table_limit = 0;
  CLI::App* cmd = hgemm.add_subcommand(
      "tune", "Search kforge's kernel variants per shape (cost-model pruning, then measurement against cuBLASLt "
              "auto-tuning), verify each winner, and write the dispatch table; resumable");
  cmd->add_option("--shapes", o->shapes, "'grid', a list 'MxNxK,...', or a file of shapes")->capture_default_str();
  cmd->add_option("--layouts", o->layouts, "B layouts to tune: nn, tn or nn,tn")->capture_default_str();
  cmd->add_option("--acc", o->acc, "accumulation precision: f32 or f16")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "element type to tune: f16, or bf16 (fp32 accumulation; entries written with "
                                       "\"dtype\": \"bf16\", beside the fp16 ones of the same table)")
      ->capture_default_str();
  cmd->add_option("--mode", o->modes, "timing mode(s); the first decides the winner")->capture_default_str();
  cmd->add_option("--out", o->tune_out, "the dispatch table (JSON) to write; entries already there are kept and "
                                        "their shapes skipped unless --retune")
      ->capture_default_str();
  cmd->add_option("--from", o->tune_from,
                  "TABLE.json or 'shipped' (the table beside this kforge binary): what --out starts from when it does "
                  "not exist yet, so that the shapes of --shapes (e.g. a file of your own) are added to it; then "
                  "`kforge hgemm export --table OUT` ships the result");
  CLI::Option* retune = cmd->add_flag("--retune", o->retune, "measure shapes the table already has again");
  cmd->add_flag("--retune-stale", o->retune_stale,
                "measure again only the shapes the table has from a build with another set of variants (resumable: "
                "each re-measured entry is stamped with this build's set)")
      ->excludes(retune);
  cmd->add_option("--max-variants", o->max_variants, "variants measured per shape: the N the cost model ranks best "
                                                     "(0: every variant that supports the shape)")
      ->capture_default_str();
  cmd->add_option("--budget", o->budget_s, "seconds: start no new shape after this (0: no limit); run again to resume")
      ->capture_default_str();
  cmd->add_option("--baselines", o->baselines, "what is timed per shape: ours_all (required) and baselines to compare")
      ->capture_default_str();
  CLI::Option* db = cmd->add_option("--db", o->db, "SQLite run database to append this run to")->capture_default_str();
  cmd->add_flag("--no-db", o->no_db, "do not record the run in a database")->excludes(db);
  cmd->add_option("--samples", o->samples, "timed samples per measurement")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed for inputs and random order")->capture_default_str();
  add_runoff_flags(cmd, o.get());
  cmd->add_option("--results", o->outs, "also write every measurement to FILE.csv or FILE.json");
  cmd->add_option("--variants-out", o->variants_out,
                  "also write every timed variant as its own row to FILE.csv (what each candidate measured)");
  cmd->callback([o] {
    const std::vector<std::string> impls = split(o->baselines, ',');
    if (std::find(impls.begin(), impls.end(), "ours_all") == impls.end())
      KF_USAGE_ERROR("--baselines must include ours_all (the variants being tuned)");
    run_bench(*o, command_line());
  });
}

void register_hgemm_variants(CLI::App& hgemm) {
  auto o = std::make_shared<VariantsOptions>();
  CLI::App* cmd = hgemm.add_subcommand(
      "variants", "List kforge's compiled kernel variants: configuration, resident CTAs on this GPU and, for one "
                  "problem, CTAs, waves and the cost model's prediction (the tuner's order)");
  cmd->footer("Columns: tile BMxBNxBK; wg|w: consumer warpgroups (sm90a) or warps (sm80); splitK: CTAs of a cluster "
              "splitting K; cluster: CTAs per cluster (split-K or multicast pair); resident: CTAs that fit at once on "
              "this GPU, whole clusters only; waves: CTAs / resident.");
  cmd->add_option("--layout", o->layout, "nn, tn or all")->capture_default_str();
  cmd->add_option("--acc", o->acc, "f32, f16 or all")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "f16, bf16 or all (with --shape: the problem's dtype, f16 unless given)")
      ->capture_default_str();
  cmd->add_option("--shape", o->shape, "MxNxK: only the variants that serve this problem (needs one --layout and --acc)");
  cmd->add_option("--table", o->table, "with --shape: the dispatch table whose choice to report (default: the shipped one)");
  cmd->callback([o] { run_variants(*o); });
}

}  // namespace kforge
