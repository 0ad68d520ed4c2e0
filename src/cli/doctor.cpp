// kforge doctor: what this machine offers kforge, and what is missing.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "baselines/cublas.hpp"
#include "cli/commands.hpp"
#include "core/text.hpp"
#include "gpu/device.hpp"
#include "kforge/version.hpp"
#include "torch/torch_eval.hpp"

namespace kforge {
namespace {

// First line of a command's output (stderr folded in), or empty when it fails.
std::string first_line_of(const std::string& cmd) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {};
  char buf[512];
  std::string out;
  while (std::fgets(buf, sizeof buf, p)) {
    if (out.empty() || out.back() != '\n') out += buf;
  }
  const int rc = ::pclose(p);
  if (rc != 0) return {};
  return std::string(trim(out.substr(0, out.find('\n'))));
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void row(const char* what, const std::string& value) { std::printf("  %-22s %s\n", what, value.c_str()); }

int run_doctor() {
  std::printf("kforge %s\n", kVersion);
  bool ok = true;
  std::printf("GPU\n");
  if (auto why = gpu_unavailable_reason()) {
    row("device", "NONE: " + *why);
    ok = false;
  } else {
    DeviceInfo d = query_device(0);
    int count = 0;
    cudaGetDeviceCount(&count);
    row("devices", std::to_string(count));
    row("name", d.name + " (" + d.uuid + ")");
    row("compute capability", strf("%d.%d (%s)", d.cc_major, d.cc_minor, d.arch().c_str()));
    row("SMs", std::to_string(d.sm_count));
    row("L2", human_bytes(double(d.l2_bytes)));
    row("memory", human_bytes(double(d.mem_total)) + " (" + human_bytes(double(d.mem_free)) + " free)");
    row("shared memory/block", human_bytes(double(d.smem_per_block_optin)) + " (opt-in)");
    row("clocks", strf("SM %d MHz, memory %d MHz", d.clock_khz / 1000, d.mem_clock_khz / 1000));
    row("driver (CUDA)", cuda_version_string(d.driver_version));
    row("runtime (CUDA)", cuda_version_string(d.runtime_version));
    if (d.cc_major < 8) {
      row("problem", "kforge needs compute capability 8.0 or newer");
      ok = false;
    }
  }
  std::printf("Toolchain\n");
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  row("runtime (linked)", cuda_version_string(rt));
  row("cuBLAS", cublas_version_string());
  std::string nvcc = first_line_of("nvcc --version | tail -n 1");
  row("nvcc", nvcc.empty() ? "NOT FOUND on PATH (needed to compile candidates)" : nvcc);
  if (nvcc.empty()) ok = false;
  // The interpreter the PyTorch evaluator will run: $KFORGE_PYTHON, else python3 on PATH.
  std::printf("Python (optional: PyTorch tasks)\n");
  const char* env = std::getenv("KFORGE_PYTHON");
  const bool from_env = env && *env;
  const std::string wanted = from_env ? env : "python3";
  const std::string python = find_python();
  const char* label = from_env ? "python (KFORGE_PYTHON)" : "python (python3)";
  std::string py = python.empty() ? "" : first_line_of(shell_quote(python) + " --version");
  if (python.empty()) row(label, from_env ? "NOT FOUND: " + wanted + " (fix or unset KFORGE_PYTHON)" : "not found on PATH");
  else row(label, python + (py.empty() ? " (does not run)" : " (" + py + ")"));
  std::string torch = py.empty() ? "" : first_line_of(shell_quote(python) + " -c 'import torch; print(torch.__version__, \"cuda\" if torch.cuda.is_available() else \"no cuda\")'");
  row("torch", torch.empty() ? "not importable" : torch);
  std::printf("%s\n", ok ? "doctor: everything kforge needs is here"
                         : "doctor: something kforge needs is missing (see above)");
  return ok ? 0 : 1;
}

}  // namespace

void register_doctor(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("doctor", "Check the GPU, CUDA, cuBLAS, nvcc and Python that kforge will use; "
                                               "exits 1 when something required (a GPU, nvcc) is missing");
  cmd->callback([] {
    const int rc = run_doctor();
    if (rc != 0) throw ExitStatus{rc};
  });
}

}  // namespace kforge
