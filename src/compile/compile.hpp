// The compile service: one candidate .cu file -> a shared object, through nvcc.
//
// Results are cached by content (a hit is found without the preprocessor when the files the last
// scan listed are unchanged: compile.cpp, direct mode): the key covers every input of a compile (cache_key() lists them):
// the source, the contents of every file it includes (as `nvcc -M` finds them, kforge's own
// pre-included ABI header too), the flags and include folders, the environment nvcc and its host
// compiler read, and the identity of both compilers. A finished object is published into the cache
// folder by an atomic rename, so parallel compiles (threads or processes) never see half-written
// files. Compiles time out; the compiler's output is kept verbatim (capped) for whoever wrote the
// candidate. Every object is linked with read-only relocations (-z now -z relro) and checked for
// them before it is published.
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
  // CUTLASS/CuTe headers, put on the include path after include_dirs: "auto" finds them
  // (find_cutlass_include_dirs), "" leaves them out, anything else names the folder.
  std::string cutlass = "auto";
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
  std::string key;       // the cache key (sha256 hex); empty when nvcc could not list the includes
  bool cache_hit = false;
  bool direct_hit = false;  // a hit found through the manifest, without `nvcc -M` (see compile.cpp)
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
  // The host compiler nvcc runs ("gcc", or what -ccbin / NVCC_CCBIN name) and the first line of its
  // --version (empty when it cannot be run).
  const std::string& host_compiler() const { return host_compiler_; }
  const std::string& host_compiler_version() const { return host_version_; }
  // The include folders a compile uses: options().include_dirs, then the CUTLASS folders.
  const std::vector<std::string>& include_dirs() const { return include_dirs_; }
  // nvcc's arguments for an input and an output (kforge's flags, the target, the includes, extras).
  std::vector<std::string> command_for(const std::string& src, const std::string& out) const;
  // The cache key of `source` as compile() would compute it now (runs `nvcc -M`); empty, with the
  // reason in `*log`, when nvcc cannot list the source's includes (e.g. a missing header).
  std::string cache_key(const std::string& source, std::string* log = nullptr) const;

 private:
  struct Deps;
  Deps scan_deps(const std::string& work_dir, const std::string& src_path, double timeout_s) const;
  std::string manifest_path(const std::string& source) const;
  std::string include_stamp() const;
  bool direct_lookup(const std::string& source, CompileResult* r) const;
  void write_manifest(const std::string& source, const Deps& deps, const std::string& work_dir) const;
  std::string key_material(const std::string& source) const;

  CompileOptions opts_;
  std::vector<std::string> include_dirs_;
  std::string nvcc_version_;   // the last release line (see nvcc_version())
  std::string nvcc_identity_;  // the whole of nvcc --version, its resolved path, its nvcc.profile
  std::string host_compiler_, host_version_;
};

// Include folders a person gave (--include-dir): each must exist; returned absolute and normalised
// (so that a stored run resumes from any folder). A usage error, naming the first bad one, otherwise.
std::vector<std::string> checked_include_dirs(const std::vector<std::string>& dirs);
// Extra nvcc arguments a person gave (--nvcc-flag), one argument each: a usage error for an empty
// one and for those that would change what the compile produces or where (-o, -c, -E, -M*, -lib,
// -ptx, --dryrun, ...) or undo read-only relocations (-z lazy, norelro).
void check_nvcc_flags(const std::vector<std::string>& flags);

// The environment variables that change what nvcc or its host compiler produce; their values
// (set or not) are part of every cache key.
const std::vector<std::string>& compile_environment_variables();

// The include folders of the CUTLASS/CuTe headers, searched in this order: $KFORGE_CUTLASS_DIR
// ("off" or "none": none at all), the `nvidia-cutlass` wheel of $KFORGE_PYTHON (else python3),
// then a .cutlass/include folder in the source tree (scripts/cutlass-probe.sh fetch). A folder
// counts when it holds cute/tensor.hpp, directly or under include/; the wheel's and the source
// tree's tools/util/include (cutlass/util) comes along when present. Empty when none is found;
// `*how` (may be null) says where they came from or why there are none.
std::vector<std::string> find_cutlass_include_dirs(std::string* how = nullptr);
// The same for an explicit folder (the CUTLASS source root or its include/ folder); a usage error
// when it holds no cute/tensor.hpp.
std::vector<std::string> cutlass_include_dirs_in(const std::string& dir);

}  // namespace kforge
