// Profiles under Nsight Compute (see profile.hpp): the metric set, ncu's command line, the CSV
// parser and the prompt's table.
#include "eval/profile.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/subprocess.hpp"
#include "core/text.hpp"
#include "eval/devices.hpp"
#include "eval/evaluator.hpp"
#include "torch/torch_eval.hpp"

namespace fs = std::filesystem;

namespace kforge {
namespace {

// The metrics, by what they mean (names as ncu 2023-2025 knows them on sm_80/sm_90):
//   duration             gpu__time_duration.sum
//   SM throughput        sm__throughput.avg.pct_of_peak_sustained_elapsed   (Speed Of Light "Compute")
//   DRAM throughput      dram__throughput.avg.pct_of_peak_sustained_elapsed (Speed Of Light "DRAM")
//   tensor pipe          sm__pipe_tensor_op_hmma_cycles_active (mma.sync) and, on Hopper,
//                        sm__pipe_tensor_op_gmma_cycles_active (wgmma): the larger of the two
//   achieved occupancy   sm__warps_active.avg.pct_of_peak_sustained_active
//   registers            launch__registers_per_thread
//   shared memory        launch__shared_mem_per_block_static + _dynamic
//   L1 / L2 hit rates    l1tex__t_sector_hit_rate.pct, lts__t_sector_hit_rate.pct
//   warp stalls          smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio: the
//                        cycles a warp spent stalled for that reason per issued instruction (the
//                        Warp State Statistics section), for the reasons below
const char* const kDuration = "gpu__time_duration.sum";
const char* const kSm = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
const char* const kDram = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
const char* const kHmma = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active";
const char* const kGmma = "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active";
const char* const kOccupancy = "sm__warps_active.avg.pct_of_peak_sustained_active";
const char* const kRegisters = "launch__registers_per_thread";
const char* const kSmemStatic = "launch__shared_mem_per_block_static";
const char* const kSmemDynamic = "launch__shared_mem_per_block_dynamic";
const char* const kL1Hit = "l1tex__t_sector_hit_rate.pct";
const char* const kL2Hit = "lts__t_sector_hit_rate.pct";
const char* const kStallPrefix = "smsp__average_warps_issue_stalled_";
const char* const kStallSuffix = "_per_issue_active.ratio";
const char* const kStallReasons[] = {"barrier",        "branch_resolving", "dispatch_stall", "drain",
                                     "imc_miss",       "lg_throttle",      "long_scoreboard", "math_pipe_throttle",
                                     "membar",         "mio_throttle",     "misc",           "no_instruction",
                                     "not_selected",   "short_scoreboard", "sleeping",       "tex_throttle",
                                     "wait"};

// One CSV record (RFC 4180: quoted fields may hold commas, newlines are not expected inside).
std::vector<std::string> csv_fields(std::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, any = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    any = true;
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          cur += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  if (any) out.push_back(cur);
  return out;
}

// "1,234.5" -> 1234.5; "n/a", "", text -> nothing.
std::optional<double> number_of(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  std::string_view t = trim(s);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  const std::string str(t);
  const double v = std::strtod(str.c_str(), &end);
  if (end == str.c_str() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower((unsigned char)c));
  return s;
}

// Time in microseconds from a value in `unit` (ncu's base unit for durations is nanoseconds).
std::optional<double> to_us(double v, const std::string& unit) {
  const std::string u = lower(std::string(trim(unit)));
  if (u.empty() || u == "nsecond" || u == "ns" || u == "nanosecond") return v / 1e3;
  if (u == "usecond" || u == "us" || u == "microsecond") return v;
  if (u == "msecond" || u == "ms" || u == "millisecond") return v * 1e3;
  if (u == "second" || u == "s") return v * 1e6;
  return std::nullopt;
}

// Bytes from a value in `unit` (ncu's byte units are decimal: Kbyte = 1000 bytes).
std::optional<double> to_bytes(double v, const std::string& unit) {
  const std::string u = lower(std::string(trim(unit)));
  if (u.empty() || u == "byte" || u == "bytes" || u == "b" || u == "byte/block") return v;
  if (u == "kbyte" || u == "kb") return v * 1e3;
  if (u == "kibyte" || u == "kib") return v * 1024;
  if (u == "mbyte" || u == "mb") return v * 1e6;
  if (u == "mibyte" || u == "mib") return v * 1024 * 1024;
  return std::nullopt;
}

struct RawKernel {
  std::string id, name, grid, block;
  std::map<std::string, std::pair<std::string, std::string>> metrics;  // name -> (value, unit)
};

// The kernel's profile from its metric values (absent metrics are absent fields).
nlohmann::json kernel_json(const RawKernel& k, size_t index) {
  nlohmann::json j = {{"name", valid_utf8(k.name)}, {"launch", index}};
  if (!k.grid.empty()) j["grid"] = k.grid;
  if (!k.block.empty()) j["block"] = k.block;
  auto value = [&](const char* name) -> std::optional<std::pair<double, std::string>> {
    auto it = k.metrics.find(name);
    if (it == k.metrics.end()) return std::nullopt;
    const auto v = number_of(it->second.first);
    if (!v) return std::nullopt;
    return std::make_pair(*v, it->second.second);
  };
  if (auto v = value(kDuration))
    if (auto us = to_us(v->first, v->second)) j["duration_us"] = *us;
  auto pct = [&](const char* metric, const char* field) {
    if (auto v = value(metric)) j[field] = v->first;
  };
  pct(kSm, "sm_throughput_pct");
  pct(kDram, "dram_throughput_pct");
  {
    std::optional<double> t;
    for (const char* m : {kHmma, kGmma})
      if (auto v = value(m)) t = std::max(t.value_or(0.0), v->first);
    if (t) j["tensor_pipe_pct"] = *t;
  }
  pct(kOccupancy, "achieved_occupancy_pct");
  pct(kRegisters, "registers_per_thread");
  {
    std::optional<double> smem;
    for (const char* m : {kSmemStatic, kSmemDynamic})
      if (auto v = value(m))
        if (auto b = to_bytes(v->first, v->second)) smem = smem.value_or(0.0) + *b;
    if (smem) j["shared_mem_per_block_bytes"] = *smem;
  }
  pct(kL1Hit, "l1_hit_rate_pct");
  pct(kL2Hit, "l2_hit_rate_pct");
  // Stalls: every ..._stalled_<reason>_per_issue_active.ratio present (also reasons this list does
  // not name, should a details page carry them), "selected" excluded (issuing is not a stall).
  std::vector<std::pair<std::string, double>> stalls;
  double total = 0;
  const std::string prefix = kStallPrefix, suffix = kStallSuffix;
  for (const auto& [name, vu] : k.metrics) {
    if (name.rfind(prefix, 0) != 0 || !ends_with(name, suffix) || name.size() <= prefix.size() + suffix.size()) continue;
    const std::string reason = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (reason == "selected" || reason.find("not_issued") != std::string::npos) continue;
    const auto v = number_of(vu.first);
    if (!v || *v < 0) continue;
    stalls.emplace_back(reason, *v);
    total += *v;
  }
  std::stable_sort(stalls.begin(), stalls.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (!stalls.empty()) {
    nlohmann::json top = nlohmann::json::array();
    for (size_t i = 0; i < stalls.size() && i < 3; ++i) {
      if (stalls[i].second <= 0) break;
      top.push_back({{"reason", stalls[i].first},
                     {"cycles_per_issue", stalls[i].second},
                     {"share_pct", total > 0 ? 100.0 * stalls[i].second / total : 0.0}});
    }
    j["stalls"] = top;
  }
  return j;
}

size_t column(const std::vector<std::string>& header, const char* name) {
  for (size_t i = 0; i < header.size(); ++i)
    if (trim(header[i]) == name) return i;
  return std::string::npos;
}

std::string cell(const std::vector<std::string>& row, size_t i) {
  return i < row.size() ? std::string(trim(row[i])) : std::string();
}

// The identity columns of ncu's tables (everything else on a raw page is a metric).
bool is_identity_column(const std::string& h) {
  static const std::set<std::string> names = {"ID",       "Process ID", "Process Name", "Host Name", "Kernel Name",
                                              "Context",  "Stream",     "Block Size",   "Grid Size", "Device",
                                              "CC",       "Section Name", "Metric Name", "Metric Unit", "Metric Value",
                                              "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type",
                                              "Estimated Speedup", "Kernel Time"};
  return names.count(h) > 0;
}

}  // namespace

const std::vector<std::string>& profile_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {kDuration, kSm,     kDram,        kHmma,         kGmma,  kOccupancy,
                                  kRegisters, kSmemStatic, kSmemDynamic, kL1Hit, kL2Hit};
    for (const char* r : kStallReasons) n.push_back(std::string(kStallPrefix) + r + kStallSuffix);
    return n;
  }();
  return names;
}

nlohmann::json parse_ncu_csv(const std::string& text) {
  std::vector<std::string> lines = split(text, '\n');
  size_t h = 0;
  std::vector<std::string> header;
  for (; h < lines.size(); ++h) {
    const std::string_view l = trim(lines[h]);
    if (l.empty() || l[0] != '"') continue;
    std::vector<std::string> f = csv_fields(l);
    if (!f.empty() && trim(f[0]) == "ID" && column(f, "Kernel Name") != std::string::npos) {
      header = f;
      break;
    }
  }
  nlohmann::json out = {{"kernels", nlohmann::json::array()}};
  if (header.empty()) return out;
  const size_t c_id = column(header, "ID"), c_name = column(header, "Kernel Name"),
               c_grid = column(header, "Grid Size"), c_block = column(header, "Block Size"),
               c_metric = column(header, "Metric Name"), c_unit = column(header, "Metric Unit"),
               c_value = column(header, "Metric Value");
  const bool details = c_metric != std::string::npos && c_value != std::string::npos;
  std::vector<std::string> units(header.size());
  std::vector<RawKernel> kernels;  // in the order their IDs first appear
  std::map<std::string, size_t> by_id;
  for (size_t i = h + 1; i < lines.size(); ++i) {
    const std::string_view l = trim(lines[i]);
    if (l.empty() || l[0] != '"') continue;  // ==PROF==/==WARNING== lines, program output
    const std::vector<std::string> row = csv_fields(l);
    const std::string id = cell(row, c_id);
    if (id == "ID") continue;  // a repeated header (several processes)
    if (id.empty()) {          // the units row of a raw page
      if (!details)
        for (size_t c = 0; c < row.size() && c < units.size(); ++c) units[c] = std::string(trim(row[c]));
      continue;
    }
    auto [it, fresh] = by_id.emplace(id, kernels.size());
    if (fresh) {
      kernels.push_back({id, cell(row, c_name), cell(row, c_grid), cell(row, c_block), {}});
    }
    RawKernel& k = kernels[it->second];
    if (details) {
      const std::string name = cell(row, c_metric);
      if (!name.empty()) k.metrics[name] = {cell(row, c_value), cell(row, c_unit)};
    } else {
      for (size_t c = 0; c < header.size() && c < row.size(); ++c) {
        const std::string name(trim(header[c]));
        if (name.empty() || is_identity_column(name)) continue;
        k.metrics[name] = {std::string(trim(row[c])), units[c]};
      }
    }
  }
  for (size_t i = 0; i < kernels.size(); ++i) out["kernels"].push_back(kernel_json(kernels[i], i));
  return out;
}

std::string find_ncu(const std::string& configured, std::string& why) {
  auto executable = [](const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0 && !fs::is_directory(p); };
  if (!configured.empty()) {
    if (executable(configured)) return configured;
    why = "the configured ncu '" + configured + "' is not an executable file";
    return "";
  }
  if (const char* e = std::getenv("KFORGE_NCU"); e && *e) {
    if (executable(e)) return e;
    why = std::string("KFORGE_NCU='") + e + "' is not an executable file";
    return "";
  }
  if (const char* path = std::getenv("PATH"))
    for (const std::string& dir : split(path, ':'))
      if (!dir.empty() && executable(dir + "/ncu")) return dir + "/ncu";
  if (executable("/usr/local/cuda/bin/ncu")) return "/usr/local/cuda/bin/ncu";
  why = "ncu (Nsight Compute) not found on PATH or at /usr/local/cuda/bin/ncu: install it or set KFORGE_NCU";
  return "";
}

ProfileOptions profile_options_from_env(ProfileOptions o) {
  if (const char* s = std::getenv("KFORGE_PROFILE_SANDBOX"); s && std::string(s) == "0") o.sandbox = false;
  return o;
}

namespace {

using Clock = std::chrono::steady_clock;

nlohmann::json failure(const char* code, const std::string& why, Clock::time_point t0) {
  return {{"tool", "ncu"},
          {"error", valid_utf8(why.substr(0, 600))},
          {"error_code", code},
          {"seconds", std::chrono::duration<double>(Clock::now() - t0).count()}};
}

// A private temporary folder, removed with its files when this goes out of scope.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kforge-profile-XXXXXX").string();
    if (::mkdtemp(tmpl.data())) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

std::string file_or_empty(const std::string& p) {
  try {
    return read_file(p);
  } catch (const std::exception&) {
    return "";
  }
}

// The first line of `text` that mentions `needle` (case-insensitive), trimmed.
std::string line_with(const std::string& text, const std::string& needle) {
  const std::string n = lower(needle);
  for (const std::string& l : split(text, '\n'))
    if (lower(l).find(n) != std::string::npos) return std::string(trim(l));
  return "";
}

}  // namespace

nlohmann::json run_ncu_profile(const std::vector<std::string>& target, const std::vector<std::string>& env,
                               const ProfileOptions& opts) {
  const auto t0 = Clock::now();
  std::string why;
  const std::string ncu = find_ncu(opts.ncu, why);
  if (ncu.empty()) return failure(profile_error::kNcuMissing, why, t0);
  TempDir tmp;
  if (tmp.path.empty()) return failure(profile_error::kNcuFailed, "cannot create a temporary folder for ncu", t0);
  const std::string log = tmp.path + "/ncu.csv", result = tmp.path + "/target.json";

  std::vector<std::string> metrics = profile_metric_names();
  std::vector<std::string> unavailable;
  ProcessResult r;
  std::string output;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::vector<std::string> argv = {ncu,
                                     "--clock-control", "none",
                                     "--profile-from-start", "off",
                                     "--target-processes", "all",
                                     "--launch-count", std::to_string(std::max(1, opts.max_kernels)),
                                     "--csv", "--page", "raw",
                                     "--metrics", join(metrics, ","),
                                     "--log-file", log};
    argv.insert(argv.end(), target.begin(), target.end());
    argv.push_back("--result");
    argv.push_back(result);
    ProcessOptions po;
    po.timeout_s = opts.timeout_s;
    po.env = env;
    if (opts.device >= 0) po.env.push_back(device_env(opts.device));
    std::error_code ec;
    fs::remove(log, ec);
    fs::remove(result, ec);
    r = run_process(argv, po);
    output = file_or_empty(log) + "\n" + r.out + "\n" + r.err;
    // $KFORGE_PROFILE_KEEP=DIR: ncu's raw output is kept there too (to check the parser against it).
    if (const char* keep = std::getenv("KFORGE_PROFILE_KEEP"); keep && *keep) {
      static std::atomic<int> n{0};
      const std::string base = strf("%s/ncu-%d-%d", keep, int(::getpid()), n++);
      try {
        fs::create_directories(keep);
        write_file_atomic(base + ".csv", file_or_empty(log));
        write_file_atomic(base + ".txt", join(argv, " ") + "\n\n" + r.describe() + "\n--- stdout\n" + r.out +
                                             "\n--- stderr\n" + r.err);
      } catch (const std::exception&) {
      }
    }
    if (r.timed_out)
      return failure(profile_error::kNcuTimeout, strf("ncu did not finish within %.0f s", opts.timeout_s), t0);
    if (!r.started) return failure(profile_error::kNcuMissing, "cannot run " + ncu + ": " + r.err, t0);
    if (output.find("ERR_NVGPUCTRPERM") != std::string::npos)
      return failure(profile_error::kNcuPermission,
                     "ncu may not read the GPU's performance counters (ERR_NVGPUCTRPERM): run as root or allow "
                     "them for all users (nvidia module option NVreg_RestrictProfilingToAdminUsers=0)",
                     t0);
    // A metric this ncu does not know fails the whole run: drop the ones its errors name (or, when
    // none is named, the ones least likely to exist everywhere) and try once more.
    std::vector<std::string> drop;
    bool metric_error = false;
    for (const std::string& l : split(output, '\n')) {
      // ncu's own error lines only ("==ERROR== Failed to find metric ..."), not a kernel's name.
      if (l.find("==ERROR==") == std::string::npos || lower(l).find("metric") == std::string::npos) continue;
      metric_error = true;
      for (const std::string& m : metrics)
        if (l.find(m) != std::string::npos || l.find(m.substr(0, m.find('.'))) != std::string::npos) drop.push_back(m);
    }
    if (!metric_error || attempt == 1) break;
    if (drop.empty())
      for (const std::string& m : metrics)
        if (m == kGmma || m.rfind(kStallPrefix, 0) == 0) drop.push_back(m);
    std::sort(drop.begin(), drop.end());
    drop.erase(std::unique(drop.begin(), drop.end()), drop.end());
    for (const std::string& m : drop) {
      metrics.erase(std::remove(metrics.begin(), metrics.end(), m), metrics.end());
      unavailable.push_back(m);
    }
  }
  nlohmann::json parsed = parse_ncu_csv(file_or_empty(log));
  if (parsed["kernels"].empty()) parsed = parse_ncu_csv(r.out);  // an ncu that ignored --log-file
  nlohmann::json target_result = nlohmann::json::parse(file_or_empty(result), nullptr, false);
  if (!target_result.is_object()) target_result = nlohmann::json::object();
  if (parsed["kernels"].empty()) {
    if (!target_result.value("ok", false)) {
      std::string what = target_result.value("error", std::string());
      if (what.empty()) what = line_with(output, "error");
      if (what.empty()) what = "ncu " + r.describe();
      if (what.size() > 300) what = what.substr(0, 297) + "...";
      // No result at all: the profiled process died before it could write one.
      if (!target_result.contains("ok"))
        what += " (the profiled process wrote no result: it died or was killed; where the candidate sandbox "
                "refuses a call ncu makes in it, KFORGE_PROFILE_SANDBOX=0 profiles without the sandbox)";
      return failure(profile_error::kNcuFailed, "the profiled run failed: " + what, t0);
    }
    return failure(profile_error::kNoKernels, "ncu profiled no kernel in the call (" + r.describe() + ")", t0);
  }
  double total = 0;
  for (const auto& k : parsed["kernels"]) total += k.value("duration_us", 0.0);
  nlohmann::json p = {{"tool", "ncu"},
                      {"kernels", parsed["kernels"]},
                      {"kernels_profiled", parsed["kernels"].size()},
                      {"total_duration_us", total},
                      {"clock_control", "none"},
                      {"seconds", std::chrono::duration<double>(Clock::now() - t0).count()}};
  if (!unavailable.empty()) p["unavailable"] = unavailable;
  if (!target_result.value("ok", true) && target_result.contains("error"))
    p["target_error"] = target_result["error"];
  return p;
}

nlohmann::json profile_hgemm_candidate(const std::string& so_path, const HgemmProblem& problem,
                                       const ProfileOptions& opts) {
  const char* e = std::getenv("KFORGE_EXECUTOR");
  const std::string exe = e && *e ? e : (fs::path(self_executable()).parent_path() / "kforge-executor").string();
  std::vector<std::string> target = {exe,
                                     "profile",
                                     "--so", fs::absolute(so_path).string(),
                                     "--m", std::to_string(problem.shape.m),
                                     "--n", std::to_string(problem.shape.n),
                                     "--k", std::to_string(problem.shape.k),
                                     "--layout", problem.layout == Layout::kTN ? "tn" : "nn",
                                     "--acc", problem.acc == Acc::kF32 ? "f32" : "f16",
                                     "--warmup", std::to_string(std::max(0, opts.warmup_calls))};
  if (!opts.sandbox) target.push_back("--no-sandbox");
  nlohmann::json p = run_ncu_profile(target, {"CUDA_MODULE_LOADING=EAGER"}, opts);
  p["sandbox"] = opts.sandbox;
  return p;
}

nlohmann::json profile_torch_candidate(const std::string& task_file, const std::string& candidate_file,
                                       const std::string& build_dir, const TorchEvalOptions& torch,
                                       const ProfileOptions& opts) {
  const std::string python = find_python(torch.python);
  if (python.empty())
    return {{"tool", "ncu"}, {"error", "no Python for the profile (set KFORGE_PYTHON)"}, {"error_code", profile_error::kNcuFailed},
            {"seconds", 0.0}};
  std::vector<std::string> target = {python,
                                     python_worker_dir(torch.worker_dir) + "/kforge_worker",
                                     "profile",
                                     "--task", fs::absolute(task_file).string(),
                                     "--candidate", fs::absolute(candidate_file).string(),
                                     "--build-dir", build_dir,
                                     "--seed", std::to_string(torch.seed),
                                     "--warmup", std::to_string(std::max(0, opts.warmup_calls))};
  std::vector<std::string> env = {"PYTHONDONTWRITEBYTECODE=1", "MAX_JOBS=2"};
  if (!torch.cache_dir.empty()) {
    env.push_back("TORCHINDUCTOR_CACHE_DIR=" + torch.cache_dir + "/inductor");
    env.push_back("TRITON_CACHE_DIR=" + torch.cache_dir + "/triton");
  }
  return run_ncu_profile(target, env, opts);
}

namespace {

// "void kforge::sm90_gemm<128, 256, 64>(Params)" -> "kforge::sm90_gemm<128, 256, 64>", at most 48 characters.
std::string short_kernel_name(std::string n) {
  if (n.rfind("void ", 0) == 0) n = n.substr(5);
  // Drop the parameter list: the last top-level '(' ... ')'.
  int depth = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i] == '<') ++depth;
    if (n[i] == '>') --depth;
    if (n[i] == '(' && depth <= 0 && i > 0) {
      n = n.substr(0, i);
      break;
    }
  }
  for (char& c : n)
    if (c == '|' || c == '\n' || c == '\r') c = ' ';
  if (n.size() > 48) n = n.substr(0, 45) + "...";
  return n.empty() ? std::string("?") : n;
}

std::string num(const nlohmann::json& k, const char* field, const char* fmt) {
  if (!k.contains(field) || !k[field].is_number()) return "-";
  return strf(fmt, k[field].get<double>());
}

}  // namespace

std::string render_profile_table(const nlohmann::json& profile, size_t max_rows) {
  if (!profile.is_object() || !profile.contains("kernels") || !profile["kernels"].is_array() ||
      profile["kernels"].empty())
    return "";
  std::vector<nlohmann::json> ks(profile["kernels"].begin(), profile["kernels"].end());
  std::stable_sort(ks.begin(), ks.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a.value("duration_us", 0.0) > b.value("duration_us", 0.0);
  });
  std::string out =
      "| kernel | time | SM % | DRAM % | tensor % | occupancy % | regs | smem/block | L1 hit % | L2 hit % | top stalls |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
  const size_t rows = std::min(ks.size(), std::max<size_t>(1, max_rows));
  for (size_t i = 0; i < rows; ++i) {
    const nlohmann::json& k = ks[i];
    std::string stalls;
    if (k.contains("stalls") && k["stalls"].is_array())
      for (const auto& s : k["stalls"]) {
        if (!stalls.empty()) stalls += ", ";
        stalls += strf("%s %.0f%%", s.value("reason", std::string("?")).c_str(), s.value("share_pct", 0.0));
      }
    const std::string time = k.contains("duration_us") && k["duration_us"].is_number()
                                 ? human_us(k["duration_us"].get<double>())
                                 : std::string("-");
    const std::string smem = k.contains("shared_mem_per_block_bytes") && k["shared_mem_per_block_bytes"].is_number()
                                 ? strf("%.1f KiB", k["shared_mem_per_block_bytes"].get<double>() / 1024.0)
                                 : std::string("-");
    out += "| " + short_kernel_name(k.value("name", std::string())) + " | " + time + " | " +
           num(k, "sm_throughput_pct", "%.0f") + " | " + num(k, "dram_throughput_pct", "%.0f") + " | " +
           num(k, "tensor_pipe_pct", "%.0f") + " | " + num(k, "achieved_occupancy_pct", "%.0f") + " | " +
           num(k, "registers_per_thread", "%.0f") + " | " + smem + " | " + num(k, "l1_hit_rate_pct", "%.0f") + " | " +
           num(k, "l2_hit_rate_pct", "%.0f") + " | " + (stalls.empty() ? std::string("-") : stalls) + " |\n";
  }
  if (ks.size() > rows) {
    double rest = 0;
    for (size_t i = rows; i < ks.size(); ++i) rest += ks[i].value("duration_us", 0.0);
    out += strf("\n(%zu more kernel%s, %s in all)\n", ks.size() - rows, ks.size() - rows == 1 ? "" : "s",
                human_us(rest).c_str());
  }
  return out;
}

std::string profile_summary(const nlohmann::json& profile) {
  if (!profile.is_object()) return "no profile";
  if (profile.contains("error"))
    return "no profile (" + profile.value("error_code", std::string("error")) + "): " +
           profile.value("error", std::string());
  const size_t n = profile.contains("kernels") ? profile["kernels"].size() : 0;
  return strf("%zu kernel%s, %s, profiled in %.1f s", n, n == 1 ? "" : "s",
              human_us(profile.value("total_duration_us", 0.0)).c_str(), profile.value("seconds", 0.0));
}

}  // namespace kforge
