// The compile service: one candidate .cu file -> a shared object, through nvcc.
//
// Results are cached by content: the key hashes the source, the flags, the nvcc version and the
// target; a finished object is published into the cache folder by an atomic rename, so parallel
// compiles (threads or processes) never see half-written files. Compiles time out; the compiler's
// output is kept verbatim (capped) for whoever wrote the candidate.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace kforge {

struct CompileOptions {
  std::string nvcc = "nvcc";               // program name or path
  std::string arch = "sm_90a";             // target: "sm_90a" -> -gencode arch=compute_90a,code=sm_90a
  std::vector<std::string> include_dirs;   // -I for each (kforge's include/ for the ABI headers)
  std::vector<std::string> extra_flags;    // appended to kforge's own flags
  double timeout_s = 180;
  size_t max_source_bytes = 512 * 1024;
  size_t max_log_bytes = 64 * 1024;
  std::string cache_dir;                   // empty: cache_dir() + "/compile" (measure/ceilings.hpp)
};

struct CompileResult {
  bool ok = false;
  // When !ok: "compile_error", "compile_timeout", "source_too_large", "not_text", "nvcc_missing",
  // "missing_file".
  std::string failure;
  std::string so_path;   // the shared object in the cache (when ok)
  std::string log;       // nvcc's stdout and stderr, verbatim, capped at max_log_bytes
  std::string key;       // the cache key (sha256 hex)
  bool cache_hit = false;
  double seconds = 0;    // compile wall time (0 on a cache hit)
  std::vector<std::string> command;  // the nvcc command line used
};

class CompileService {
 public:
  explicit CompileService(CompileOptions opts);
  // `name` only labels temporary files and logs. Never throws for the candidate's faults.
  CompileResult compile(const std::string& source, const std::string& name) const;
  CompileResult compile_file(const std::string& path) const;
  // Compiles many sources with up to `jobs` nvcc processes at once; results in input order.
  std::vector<CompileResult> compile_all(const std::vector<std::pair<std::string, std::string>>& name_and_source,
                                         int jobs) const;
  // "Cuda compilation tools, release 13.0, V13.0.88" (the last line of nvcc --version), or empty.
  const std::string& nvcc_version() const { return nvcc_version_; }
  const CompileOptions& options() const { return opts_; }
  // nvcc's arguments for an input and an output (kforge's flags, the target, the includes, extras).
  std::vector<std::string> command_for(const std::string& src, const std::string& out) const;

 private:
  CompileOptions opts_;
  std::string nvcc_version_;
};

}  // namespace kforge
