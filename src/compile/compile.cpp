// CompileService: nvcc behind a content-addressed cache.
//
// Cache layout, all in one folder (options().cache_dir):
//   <key>.so        a finished shared object; its presence is what makes a cache hit
//   <key>.log       nvcc's output for that compile (may be empty)
//   tmp-XXXXXX/     one private work folder per compile in flight, removed when it ends
// Work folders live inside the cache folder so that publishing is a rename(2) within one file
// system: atomic, so another thread or process sees either no <key>.so or the whole file.
#include "compile/compile.hpp"

#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/parallel.hpp"
#include "core/subprocess.hpp"
#include "core/text.hpp"
#include "measure/ceilings.hpp"

namespace kforge {
namespace fs = std::filesystem;
namespace {

// Bump when anything that changes the produced object changes without showing up in the key's
// other parts (for example the way the command is assembled).
constexpr const char* kKeyFormat = "kforge-compile-v1";

// "sm_90a" (or "90a") -> "arch=compute_90a,code=sm_90a". Throws a usage error for anything that
// is not a plain target name.
std::string gencode_for(const std::string& arch) {
  std::string num = arch.rfind("sm_", 0) == 0 ? arch.substr(3) : arch;
  bool plain = !num.empty() && std::isdigit(static_cast<unsigned char>(num[0]));
  for (char c : num) plain = plain && std::isalnum(static_cast<unsigned char>(c));
  if (!plain) KF_USAGE_ERROR("bad CUDA target '%s' (expected something like sm_90a)", arch.c_str());
  return "arch=compute_" + num + ",code=sm_" + num;
}

// One length-prefixed field of the key material, so that no two different inputs can produce
// the same byte string (a field's content can never be mistaken for a separator).
void add_field(std::string& material, std::string_view name, std::string_view value) {
  material += name;
  material += ' ';
  material += std::to_string(value.size());
  material += ':';
  material += value;
  material += '\n';
}

// A file name made of the candidate's name: letters, digits, '.', '_', '-' only, bounded length,
// without a trailing ".cu" (the caller adds its own suffix).
std::string sanitise_name(const std::string& name) {
  std::string base = name;
  if (ends_with(base, ".cu")) base.resize(base.size() - 3);
  std::string out;
  for (char c : base) {
    bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    out += keep ? c : '_';
    if (out.size() >= 100) break;
  }
  if (out.empty() || out == "." || out == "..") out = "candidate";
  return out;
}

// Keeps at most `cap` bytes of `log`, marking the cut.
void cap_log(std::string& log, size_t cap, bool already_cut) {
  if (log.size() > cap) {
    log.resize(cap);
    already_cut = true;
  }
  if (already_cut) log += "\n[log truncated]";
}

// Whole-file read that reports failure instead of throwing.
bool try_read(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return false;
  out = ss.str();
  return true;
}

// Writes a whole file or throws a runtime error.
void write_whole(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) {
    out << content;
    out.flush();
  }
  if (!out) KF_RUNTIME_ERROR("cannot write '%s': %s", path.c_str(), std::strerror(errno));
}

// rename(2) or a runtime error.
void publish(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    KF_RUNTIME_ERROR("cannot move '%s' to '%s': %s", from.c_str(), to.c_str(), std::strerror(errno));
}

// A private work folder, removed with everything in it when this goes out of scope.
class WorkDir {
 public:
  explicit WorkDir(const std::string& parent) {
    std::string templ = parent + "/tmp-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr)
      KF_RUNTIME_ERROR("cannot create a work folder in '%s': %s", parent.c_str(), std::strerror(errno));
    path_ = templ;
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

CompileResult failed(std::string failure, std::string log) {
  CompileResult r;
  r.failure = std::move(failure);
  r.log = std::move(log);
  return r;
}

}  // namespace

CompileService::CompileService(CompileOptions opts) : opts_(std::move(opts)) {
  gencode_for(opts_.arch);  // reject a bad target now rather than at every compile
  if (opts_.cache_dir.empty()) opts_.cache_dir = cache_dir() + "/compile";
  std::error_code ec;
  fs::create_directories(opts_.cache_dir, ec);
  if (ec || !fs::is_directory(opts_.cache_dir))
    KF_USAGE_ERROR("cannot create the compile cache folder '%s': %s", opts_.cache_dir.c_str(),
                   ec ? ec.message().c_str() : "not a folder");

  // The compiler's identity goes into every cache key. nvcc 13 ends its --version with a "Build"
  // line; the "Cuda compilation tools, release X, VX.Y.Z" line names the release, so prefer it and
  // fall back to the last non-empty line for compilers that print something else.
  ProcessOptions po;
  po.timeout_s = 60;
  ProcessResult pr = run_process({opts_.nvcc, "--version"}, po);
  if (pr.ok()) {
    std::string last;
    for (const std::string& line : split(pr.out, '\n')) {
      if (line.empty()) continue;
      last = line;
      if (line.rfind("Cuda compilation tools", 0) == 0) {
        nvcc_version_ = line;
        break;
      }
    }
    if (nvcc_version_.empty()) nvcc_version_ = last;
  }
}

std::vector<std::string> CompileService::command_for(const std::string& src, const std::string& out) const {
  std::vector<std::string> cmd = {opts_.nvcc, "-O3",     "-std=c++17", "--shared", "-Xcompiler",
                                  "-fPIC",    "-cudart", "shared",     "-lineinfo", "-gencode",
                                  gencode_for(opts_.arch)};
  for (const std::string& dir : opts_.include_dirs) cmd.push_back("-I" + dir);
  cmd.insert(cmd.end(), opts_.extra_flags.begin(), opts_.extra_flags.end());
  cmd.push_back("-o");
  cmd.push_back(out);
  cmd.push_back(src);
  return cmd;
}

CompileResult CompileService::compile(const std::string& source, const std::string& name) const {
  // The command with placeholder paths: what the key covers, and what a result without a real
  // compile reports.
  const std::vector<std::string> templ = command_for("<source.cu>", "<output.so>");

  // Refusals that need no compiler, in a fixed order.
  if (source.size() > opts_.max_source_bytes) {
    CompileResult r = failed("source_too_large", strf("source '%s' is %zu bytes; the limit is %zu bytes",
                                                       name.c_str(), source.size(), opts_.max_source_bytes));
    r.command = templ;
    return r;
  }
  if (source.find('\0') != std::string::npos) {
    CompileResult r = failed("not_text", strf("source '%s' contains a NUL byte: not a text file", name.c_str()));
    r.command = templ;
    return r;
  }
  if (nvcc_version_.empty()) {
    CompileResult r = failed("nvcc_missing", strf("cannot run nvcc ('%s --version' failed)", opts_.nvcc.c_str()));
    r.command = templ;
    return r;
  }

  // The cache key: everything that decides the produced object.
  std::string material = std::string(kKeyFormat) + "\n";
  add_field(material, "argc", std::to_string(templ.size()));
  for (const std::string& arg : templ) add_field(material, "arg", arg);
  add_field(material, "nvcc", nvcc_version_);
  add_field(material, "arch", opts_.arch);
  add_field(material, "source", source);

  CompileResult r;
  r.key = sha256_hex(material);
  r.command = templ;
  const std::string so_path = opts_.cache_dir + "/" + r.key + ".so";
  const std::string log_path = opts_.cache_dir + "/" + r.key + ".log";

  std::error_code ec;
  if (fs::is_regular_file(so_path, ec)) {
    r.ok = true;
    r.cache_hit = true;
    r.so_path = so_path;
    try_read(log_path, r.log);  // the log is informational; a missing one is not an error
    return r;
  }

  // A real compile in a private work folder.
  WorkDir work(opts_.cache_dir);
  const std::string base = sanitise_name(name);
  const std::string src_path = work.path() + "/" + base + ".cu";
  const std::string out_path = work.path() + "/" + base + ".so";
  write_whole(src_path, source);
  r.command = command_for(src_path, out_path);

  ProcessOptions po;
  po.timeout_s = opts_.timeout_s;
  po.max_output_bytes = opts_.max_log_bytes;
  po.cwd = work.path();
  // nvcc's intermediates go to the private folder too, so a killed compile leaves nothing behind.
  po.env = {"TMPDIR=" + work.path()};
  ProcessResult pr = run_process(r.command, po);
  r.seconds = pr.seconds;
  r.log = pr.out + pr.err;
  cap_log(r.log, opts_.max_log_bytes, pr.out_truncated || pr.err_truncated);

  if (!pr.started) {
    r.failure = "nvcc_missing";
    r.log = pr.err;
    return r;
  }
  if (pr.timed_out) {
    r.failure = "compile_timeout";
    return r;
  }
  if (!pr.ok()) {
    r.failure = "compile_error";
    return r;
  }
  if (!fs::is_regular_file(out_path, ec)) {
    r.failure = "compile_error";
    r.log += strf("\n[kforge: nvcc %s but wrote no '%s']", pr.describe().c_str(), out_path.c_str());
    return r;
  }

  // Publish: the log first, then the object, whose arrival is what readers look for. Another
  // compile of the same key may publish at the same time; the files are equivalent, and each
  // rename replaces the target whole.
  const std::string tmp_log = work.path() + "/nvcc.log";
  write_whole(tmp_log, r.log);
  publish(tmp_log, log_path);
  publish(out_path, so_path);
  r.ok = true;
  r.so_path = so_path;
  return r;
}

CompileResult CompileService::compile_file(const std::string& path) const {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    return failed("missing_file", strf("cannot read '%s': no such file", path.c_str()));
  const std::string name = fs::path(path).filename().string();
  // Refuse an oversized file before reading it all in.
  uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > opts_.max_source_bytes) {
    CompileResult r = failed("source_too_large", strf("source '%s' is %ju bytes; the limit is %zu bytes",
                                                       path.c_str(), size, opts_.max_source_bytes));
    r.command = command_for("<source.cu>", "<output.so>");
    return r;
  }
  std::string source;
  if (!try_read(path, source))
    return failed("missing_file", strf("cannot read '%s': %s", path.c_str(), std::strerror(errno)));
  return compile(source, name);
}

std::vector<CompileResult> CompileService::compile_all(
    const std::vector<std::pair<std::string, std::string>>& name_and_source, int jobs) const {
  const size_t n = name_and_source.size();
  std::vector<CompileResult> results(n);
  std::vector<std::exception_ptr> errors(n);
  // Each item writes only its own slots; a failure is kept and the other items still compile.
  run_on_slots(n, static_cast<size_t>(std::clamp(jobs, 1, 64)), [&](size_t i, size_t) {
    try {
      results[i] = compile(name_and_source[i].second, name_and_source[i].first);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  });

  // An environment failure (not a candidate's fault) is raised as it would be by compile().
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

}  // namespace kforge
