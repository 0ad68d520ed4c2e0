// CompileService: nvcc behind a content-addressed cache.
//
// Cache layout, all in one folder (options().cache_dir):
//   <key>.so        a finished shared object; its presence is what makes a cache hit
//   <key>.log       nvcc's output for that compile (may be empty)
//   tmp-XXXXXX/     one private work folder per compile in flight, removed when it ends
// Work folders live inside the cache folder so that publishing is a rename(2) within one file
// system: atomic, so another thread or process sees either no <key>.so or the whole file.
//
// A compile runs in two steps inside its work folder: `nvcc ... -M` lists every file the source
// includes (kforge's pre-included ABI header and the CUDA headers too); the key hashes their
// contents with everything else (key_material()); only then is the cache consulted, and on a miss
// nvcc builds the object. A cache hit therefore costs one preprocessor pass (about 0.5 s), never a
// stale object after a header, a flag, the environment or a compiler changed.
#include "compile/compile.hpp"

#include <elf.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "core/error.hpp"
#include "core/files.hpp"
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
constexpr const char* kKeyFormat = "kforge-compile-v2";

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
  note_own_write(to);  // the judge's cache check tells this from a candidate's write
}

// `name` as execvp would find it: itself when it holds a '/', else the first executable on PATH;
// empty when there is none.
std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  for (const std::string& dir : split(path ? path : "", ':')) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Whitespace-separated words of an NVCC_*_FLAGS value (nvcc splits them the same way).
std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The host compiler nvcc runs: the last -ccbin / --compiler-bindir among the flags (as nvcc reads
// them: NVCC_PREPEND_FLAGS, kforge's and the caller's, NVCC_APPEND_FLAGS), else NVCC_CCBIN, else
// gcc. A folder means the gcc inside it.
std::string host_compiler_for(const std::vector<std::string>& extra_flags) {
  std::vector<std::string> all = words(env_or_empty("NVCC_PREPEND_FLAGS"));
  all.insert(all.end(), extra_flags.begin(), extra_flags.end());
  for (const std::string& w : words(env_or_empty("NVCC_APPEND_FLAGS"))) all.push_back(w);
  std::string ccbin = env_or_empty("NVCC_CCBIN");
  for (size_t i = 0; i < all.size(); ++i) {
    for (const char* opt : {"-ccbin", "--compiler-bindir"}) {
      const std::string o = opt;
      if (all[i] == o && i + 1 < all.size()) ccbin = all[i + 1];
      else if (all[i].rfind(o + "=", 0) == 0) ccbin = all[i].substr(o.size() + 1);
    }
  }
  if (ccbin.empty()) return "gcc";
  std::error_code ec;
  if (fs::is_directory(ccbin, ec)) return ccbin + "/gcc";
  return ccbin;
}

// Make-style dependency output ("target: a.h b.h", lines continued by a backslash) -> the paths.
std::vector<std::string> parse_make_deps(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  bool after_colon = false;
  auto flush = [&] {
    if (!cur.empty() && after_colon) out.push_back(cur);
    cur.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      flush();
      while (i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) ++i;
    } else if (c == '\\' && i + 1 < text.size() && (text[i + 1] == ' ' || text[i + 1] == '#')) {
      cur += text[++i];  // an escaped space or '#' inside a path
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      cur += text[++i];
    } else if (c == ':' && !after_colon && (i + 1 == text.size() || std::isspace(static_cast<unsigned char>(text[i + 1])))) {
      cur.clear();  // the end of the target
      after_colon = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      flush();
    } else {
      cur += c;
    }
  }
  flush();
  return out;
}

// Whether the shared object at `path` was linked with read-only relocations: a PT_GNU_RELRO
// segment and immediate binding (DF_BIND_NOW or DF_1_NOW). Empty when so, else what is missing.
std::string relro_problem(const std::string& path) {
  std::string elf;
  if (!try_read(path, elf)) return "cannot read it";
  if (elf.size() < sizeof(Elf64_Ehdr) || elf.compare(0, 4, ELFMAG) != 0 || elf[EI_CLASS] != ELFCLASS64)
    return "not a 64-bit ELF file";
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  bool relro = false, now = false;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    const uint64_t off = eh.e_phoff + uint64_t(i) * eh.e_phentsize;
    if (eh.e_phentsize < sizeof(Elf64_Phdr) || off + sizeof(Elf64_Phdr) > elf.size()) return "truncated program headers";
    Elf64_Phdr ph;
    std::memcpy(&ph, elf.data() + off, sizeof ph);
    if (ph.p_type == PT_GNU_RELRO) relro = true;
    if (ph.p_type != PT_DYNAMIC) continue;
    for (uint64_t d = ph.p_offset; d + sizeof(Elf64_Dyn) <= elf.size() && d < ph.p_offset + ph.p_filesz;
         d += sizeof(Elf64_Dyn)) {
      Elf64_Dyn dyn;
      std::memcpy(&dyn, elf.data() + d, sizeof dyn);
      if (dyn.d_tag == DT_NULL) break;
      if (dyn.d_tag == DT_BIND_NOW) now = true;
      if (dyn.d_tag == DT_FLAGS && (dyn.d_un.d_val & DF_BIND_NOW)) now = true;
      if (dyn.d_tag == DT_FLAGS_1 && (dyn.d_un.d_val & DF_1_NOW)) now = true;
    }
  }
  if (relro && now) return "";
  if (!relro && !now) return "no GNU_RELRO segment and no BIND_NOW";
  return relro ? "no BIND_NOW" : "no GNU_RELRO segment";
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

  include_dirs_ = opts_.include_dirs;
  std::vector<std::string> cutlass;
  if (opts_.cutlass == "auto") cutlass = find_cutlass_include_dirs();
  else if (!opts_.cutlass.empty()) cutlass = cutlass_include_dirs_in(opts_.cutlass);
  for (const std::string& d : cutlass)
    if (std::find(include_dirs_.begin(), include_dirs_.end(), d) == include_dirs_.end()) include_dirs_.push_back(d);

  // The compilers' identities go into every cache key. nvcc 13 ends its --version with a "Build"
  // line; the "Cuda compilation tools, release X, VX.Y.Z" line names the release, so prefer it and
  // fall back to the last non-empty line for compilers that print something else. The key takes
  // the whole output, the resolved program and its nvcc.profile (which sets nvcc's own include
  // and library folders).
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
    const std::string nvcc_path = resolve_program(opts_.nvcc);
    std::string profile;
    if (!nvcc_path.empty()) try_read((fs::path(nvcc_path).parent_path() / "nvcc.profile").string(), profile);
    nvcc_identity_ = pr.out + "\n" + nvcc_path + "\n" + profile;
  }
  host_compiler_ = host_compiler_for(opts_.extra_flags);
  ProcessResult hr = run_process({host_compiler_, "--version"}, po);
  if (hr.ok()) {
    const std::vector<std::string> lines = split(hr.out, '\n');
    host_version_ = lines.empty() ? "" : lines[0];
  }
}

const std::vector<std::string>& compile_environment_variables() {
  // nvcc's own (the flags it splices into every command line, its host compiler) and those of
  // the GNU toolchain it drives (include and library search, dependency output, tool lookup).
  static const std::vector<std::string> names = {
      "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN",   "CPATH",
      "C_INCLUDE_PATH",     "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "GCC_EXEC_PREFIX",
      "COMPILER_PATH",      "DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES", "SOURCE_DATE_EPOCH"};
  return names;
}

std::vector<std::string> CompileService::command_for(const std::string& src, const std::string& out) const {
  std::vector<std::string> cmd = {opts_.nvcc, "-O3",     "-std=c++17", "--shared", "-Xcompiler",
                                  "-fPIC",    "-cudart", "shared",     "-lineinfo", "-gencode",
                                  gencode_for(opts_.arch), "--expt-relaxed-constexpr"};
  for (const std::string& dir : include_dirs_) cmd.push_back("-I" + dir);
  cmd.insert(cmd.end(), opts_.extra_flags.begin(), opts_.extra_flags.end());
  // Read-only relocations (after the caller's flags, so that they win): the candidate cannot
  // rewrite the symbol table of the process that loads it.
  for (const char* z : {"-z,now", "-z,relro"}) {
    cmd.push_back("-Xlinker");
    cmd.push_back(z);
  }
  cmd.push_back("-o");
  cmd.push_back(out);
  cmd.push_back(src);
  return cmd;
}

// What the key hashes besides the included files: the command (with placeholder paths), both
// compilers' identities, the environment they read, the target and the source.
std::string CompileService::key_material(const std::string& source) const {
  const std::vector<std::string> templ = command_for("<source.cu>", "<output.so>");
  std::string material = std::string(kKeyFormat) + "\n";
  add_field(material, "argc", std::to_string(templ.size()));
  for (const std::string& arg : templ) add_field(material, "arg", arg);
  add_field(material, "nvcc", nvcc_version_);
  add_field(material, "nvcc_identity", nvcc_identity_);
  add_field(material, "host_compiler", host_compiler_);
  add_field(material, "host_path", resolve_program(host_compiler_));
  add_field(material, "host_version", host_version_);
  for (const std::string& name : compile_environment_variables()) {
    const char* v = std::getenv(name.c_str());
    add_field(material, "env", name + (v ? "=" + std::string(v) : std::string(" unset")));
  }
  add_field(material, "arch", opts_.arch);
  add_field(material, "source", source);
  return material;
}

struct CompileService::Deps {
  bool ok = false;
  bool timed_out = false;
  double seconds = 0;
  std::string material;  // one (path, sha256 of content) field pair per included file
  std::string log;       // nvcc's output when !ok
  std::vector<std::string> paths;  // the included files, sorted (none inside the work folder when direct_ok)
  bool direct_ok = false;          // every included file outside the work folder: a manifest can list them
};

namespace {

// The material of the included files `paths` as scan_deps() builds it, read afresh; false when
// one cannot be read.
bool hash_deps(const std::vector<std::string>& paths, std::string* material) {
  material->clear();
  for (const std::string& p : paths) {
    std::string content;
    if (!try_read(p, content)) return false;
    add_field(*material, "dep", p);
    add_field(*material, "dep_sha256", sha256_hex(content));
  }
  return true;
}

// Every folder under the include folders a person or kforge chose (include_dirs(): kforge's
// include/, CUTLASS, --include-dir), with its modification time. A header added to, removed
// from or renamed in any of them changes its folder's time, so a file that would now shadow a
// listed one (found earlier on the search path) invalidates the manifests (direct_lookup).
// `skip`: folders left out of the walk, with everything under them: kforge's own cache, which a
// lookup itself changes (its work folders, each verdict's files), so that an include folder that
// holds it (`--include-dir` of a project whose cache lives inside it, as scripts/gpu-check.sh runs)
// would never hit (0.3-0.5 s of `nvcc -M` per warm verdict on the H200). A header that shadows a
// listed one from inside the cache would need an include path through the cache's own folders;
// what appears there is kforge's to write, and the judge reports any change a candidate makes.
std::string include_tree_stamp(const std::vector<std::string>& dirs, const std::vector<std::string>& skip) {
  std::string stamp;
  std::error_code ec;
  auto add = [&](const fs::path& d) {
    const auto t = fs::last_write_time(d, ec);
    if (ec) return;
    add_field(stamp, "dir", d.string());
    add_field(stamp, "mtime", std::to_string(t.time_since_epoch().count()));
  };
  std::vector<fs::path> skipped;
  for (const std::string& s : skip)
    if (!s.empty()) skipped.push_back(fs::weakly_canonical(s, ec)), ec.clear();
  for (const std::string& d : dirs) {
    add(d);
    for (fs::recursive_directory_iterator it(d, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (!it->is_directory(ec)) continue;
      if (!skipped.empty()) {
        const fs::path canon = fs::weakly_canonical(it->path(), ec);
        if (!ec && std::find(skipped.begin(), skipped.end(), canon) != skipped.end()) {
          it.disable_recursion_pending();
          continue;
        }
        ec.clear();
      }
      add(it->path());
    }
    ec.clear();
  }
  return stamp;
}

}  // namespace

// `nvcc -M` over the source in the work folder: the files it includes, each hashed.
CompileService::Deps CompileService::scan_deps(const std::string& work_dir, const std::string& src_path,
                                               double timeout_s) const {
  Deps d;
  std::vector<std::string> cmd = command_for(src_path, work_dir + "/deps.d");
  // The same command with dependency output instead of linking: drop --shared and the link flags.
  std::vector<std::string> m;
  for (size_t i = 0; i < cmd.size(); ++i) {
    if (cmd[i] == "--shared") continue;
    if (cmd[i] == "-Xlinker" && i + 1 < cmd.size()) {
      ++i;
      continue;
    }
    if (cmd[i] == "-o") m.push_back("-M");
    m.push_back(cmd[i]);
  }
  ProcessOptions po;
  po.timeout_s = timeout_s;
  po.max_output_bytes = opts_.max_log_bytes;
  po.cwd = work_dir;
  po.env = {"TMPDIR=" + work_dir};
  const ProcessResult pr = run_process(m, po);
  d.seconds = pr.seconds;
  d.timed_out = pr.timed_out;
  std::string deps;
  if (!pr.ok() || !try_read(work_dir + "/deps.d", deps)) {
    d.log = pr.out + pr.err;
    if (!pr.started) d.log = pr.err;
    return d;
  }
  std::error_code ec;
  std::vector<std::string> paths;
  for (const std::string& dep : parse_make_deps(deps)) {
    fs::path p(dep);
    if (p.is_relative()) p = fs::path(work_dir) / p;
    p = p.lexically_normal();
    if (fs::equivalent(p, src_path, ec)) continue;  // the source itself is hashed as text
    paths.push_back(p.string());
  }
  std::sort(paths.begin(), paths.end());
  paths.erase(std::unique(paths.begin(), paths.end()), paths.end());
  d.direct_ok = true;
  for (const std::string& p : paths) {
    std::string content;
    if (!try_read(p, content)) {
      d.log = strf("[kforge: cannot read '%s', which the source includes]", p.c_str());
      return d;
    }
    // A path inside the work folder (a header the source made up?) would differ between compiles.
    const bool in_work = p.rfind(work_dir + "/", 0) == 0;
    d.direct_ok &= !in_work;
    add_field(d.material, "dep", in_work ? "<work>/" + p.substr(work_dir.size() + 1) : p);
    add_field(d.material, "dep_sha256", sha256_hex(content));
  }
  d.paths = paths;
  d.ok = true;
  return d;
}

// Direct mode (as ccache calls it): a manifest beside the objects, named by the hash of
// everything in the key but the included files (key_material: source, flags, environment,
// compilers), lists the files the last full scan found and the include folders' stamp. A lookup
// re-hashes those files, without running `nvcc -M` (0.4-0.9 s per verdict, measured on the H200),
// and hits when the key they give names a finished object. It falls back to the full scan when the
// manifest is missing or unreadable, an included file is gone, or the include folders' stamp
// changed (a header that could now shadow a listed one). Left to the full scan's guarantee only:
// a header newly shadowing another between two system folders (root's to change).
// The include folders' stamp a manifest is written with and checked against: one function, so that
// the two never differ in what they leave out (kforge's own cache folders).
std::string CompileService::include_stamp() const {
  return sha256_hex(include_tree_stamp(include_dirs_, {opts_.cache_dir, cache_dir()}));
}

std::string CompileService::manifest_path(const std::string& source) const {
  return opts_.cache_dir + "/" + sha256_hex(key_material(source) + "\nkforge-direct-manifest-1") + ".manifest";
}

bool CompileService::direct_lookup(const std::string& source, CompileResult* r) const {
  std::string text;
  if (!try_read(manifest_path(source), text)) return false;
  std::istringstream in(text);
  std::string line, stamp_hex;
  std::vector<std::string> paths;
  if (!std::getline(in, line) || line != "kforge-manifest 1") return false;
  if (!std::getline(in, line) || line.rfind("stamp ", 0) != 0) return false;
  stamp_hex = line.substr(6);
  while (std::getline(in, line)) {
    if (line.rfind("dep ", 0) != 0) return false;
    paths.push_back(line.substr(4));
  }
  if (include_stamp() != stamp_hex) return false;
  std::string material;
  if (!hash_deps(paths, &material)) return false;
  const std::string key = sha256_hex(key_material(source) + material);
  const std::string so_path = opts_.cache_dir + "/" + key + ".so";
  std::error_code ec;
  if (!fs::is_regular_file(so_path, ec)) return false;
  r->ok = true;
  r->cache_hit = true;
  r->direct_hit = true;
  r->key = key;
  r->so_path = so_path;
  r->seconds = 0;
  try_read(opts_.cache_dir + "/" + key + ".log", r->log);
  return true;
}

void CompileService::write_manifest(const std::string& source, const Deps& deps, const std::string& work_dir) const {
  if (!deps.ok || !deps.direct_ok) return;
  for (const std::string& p : deps.paths)
    if (p.find('\n') != std::string::npos) return;
  std::string text = "kforge-manifest 1\nstamp " + include_stamp() + "\n";
  for (const std::string& p : deps.paths) text += "dep " + p + "\n";
  const std::string tmp = work_dir + "/manifest";
  try {
    write_whole(tmp, text);
    publish(tmp, manifest_path(source));
  } catch (const std::exception&) {
    // A manifest is only a shortcut: without it the next lookup runs the full scan.
  }
}

std::string CompileService::cache_key(const std::string& source, std::string* log) const {
  WorkDir work(opts_.cache_dir);
  const std::string src_path = work.path() + "/candidate.cu";
  write_whole(src_path, source);
  const Deps d = scan_deps(work.path(), src_path, opts_.timeout_s);
  if (log) *log = d.log;
  if (!d.ok) return "";
  return sha256_hex(key_material(source) + d.material);
}

CompileResult CompileService::compile(const std::string& source, const std::string& name) const {
  // The command with placeholder paths: what a result without a real compile reports.
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

  CompileResult r;
  r.command = templ;
  if (direct_lookup(source, &r)) return r;
  // A private work folder for the dependency scan and, on a miss, the compile.
  WorkDir work(opts_.cache_dir);
  const std::string base = sanitise_name(name);
  const std::string src_path = work.path() + "/" + base + ".cu";
  const std::string out_path = work.path() + "/" + base + ".so";
  write_whole(src_path, source);

  // The cache key: everything that decides the produced object, the included files too.
  const Deps deps = scan_deps(work.path(), src_path, opts_.timeout_s);
  r.seconds = deps.seconds;
  if (deps.timed_out) {
    r.failure = "compile_timeout";
    r.log = deps.log;
    cap_log(r.log, opts_.max_log_bytes, false);
    return r;
  }
  // When nvcc cannot even list the includes, the compile below fails with the full story; the
  // result has no key and is never published.
  if (deps.ok) {
    r.key = sha256_hex(key_material(source) + deps.material);
    const std::string so_path = opts_.cache_dir + "/" + r.key + ".so";
    std::error_code ec;
    if (fs::is_regular_file(so_path, ec)) {
      r.ok = true;
      r.cache_hit = true;
      r.so_path = so_path;
      r.seconds = 0;
      try_read(opts_.cache_dir + "/" + r.key + ".log", r.log);  // informational; a missing one is no error
      write_manifest(source, deps, work.path());
      return r;
    }
  }

  // A real compile.
  r.command = command_for(src_path, out_path);
  ProcessOptions po;
  po.timeout_s = std::max(opts_.timeout_s - deps.seconds, 0.001);
  po.max_output_bytes = opts_.max_log_bytes;
  po.cwd = work.path();
  // nvcc's intermediates go to the private folder too, so a killed compile leaves nothing behind.
  po.env = {"TMPDIR=" + work.path()};
  ProcessResult pr = run_process(r.command, po);
  r.seconds += pr.seconds;
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
  std::error_code ec;
  if (!fs::is_regular_file(out_path, ec)) {
    r.failure = "compile_error";
    r.log += strf("\n[kforge: nvcc %s but wrote no '%s']", pr.describe().c_str(), out_path.c_str());
    return r;
  }
  if (const std::string why = relro_problem(out_path); !why.empty()) {
    // Flags or NVCC_APPEND_FLAGS undid -z now / -z relro: refuse to hand out a writable GOT.
    r.failure = "compile_error";
    r.log += strf("\n[kforge: the shared object is not linked with read-only relocations (%s); a flag or "
                  "NVCC_APPEND_FLAGS overrides -z now / -z relro]", why.c_str());
    return r;
  }
  if (!deps.ok) {
    // Compiled although the dependency scan failed: usable, but without a key it is not cached.
    r.failure = "compile_error";
    r.log += "\n[kforge: nvcc -M failed, so the includes are unknown]\n" + deps.log;
    return r;
  }

  // Publish: the log first, then the object, whose arrival is what readers look for. Another
  // compile of the same key may publish at the same time; the files are equivalent, and each
  // rename replaces the target whole.
  const std::string so_path = opts_.cache_dir + "/" + r.key + ".so";
  const std::string tmp_log = work.path() + "/nvcc.log";
  write_whole(tmp_log, r.log);
  publish(tmp_log, opts_.cache_dir + "/" + r.key + ".log");
  publish(out_path, so_path);
  write_manifest(source, deps, work.path());
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

namespace {

// `dir` itself when it holds cute/tensor.hpp, else dir/include when that does; empty otherwise.
std::string cutlass_include_of(const std::string& dir) {
  std::error_code ec;
  for (const std::string& cand : {dir, dir + "/include"})
    if (fs::is_regular_file(cand + "/cute/tensor.hpp", ec)) return fs::absolute(cand).lexically_normal().string();
  return "";
}

// The include folder and, when present, the cutlass/util headers beside it: the wheel and the
// CUTLASS repository keep them in tools/util/include next to include/.
std::vector<std::string> with_util(const std::string& include) {
  std::vector<std::string> dirs = {include};
  std::error_code ec;
  const std::string util = (fs::path(include).parent_path() / "tools/util/include").string();
  if (fs::is_directory(util + "/cutlass/util", ec)) dirs.push_back(fs::path(util).lexically_normal().string());
  return dirs;
}

}  // namespace

std::vector<std::string> cutlass_include_dirs_in(const std::string& dir) {
  const std::string inc = cutlass_include_of(dir);
  if (inc.empty())
    KF_USAGE_ERROR("'%s' holds no CUTLASS/CuTe headers (no cute/tensor.hpp in it or in its include/)", dir.c_str());
  return with_util(inc);
}

std::vector<std::string> find_cutlass_include_dirs(std::string* how) {
  auto say = [&](const std::string& s) {
    if (how) *how = s;
  };
  const std::string env = env_or_empty("KFORGE_CUTLASS_DIR");
  if (env == "off" || env == "none") {
    say("KFORGE_CUTLASS_DIR=" + env);
    return {};
  }
  if (!env.empty()) {
    say("KFORGE_CUTLASS_DIR");
    return cutlass_include_dirs_in(env);
  }
  // The nvidia-cutlass wheel: its package folder, found without importing it (find_spec).
  static std::mutex mu;
  static std::string cached_python, cached_pkg;
  std::string python = env_or_empty("KFORGE_PYTHON");
  if (python.empty()) python = "python3";
  std::string pkg;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (cached_python != python) {
      ProcessOptions po;
      po.timeout_s = 30;
      const ProcessResult pr = run_process(
          {python, "-c",
           "import importlib.util as u\ns = u.find_spec('cutlass_library')\n"
           "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')"},
          po);
      cached_pkg = pr.ok() ? std::string(trim(pr.out)) : "";
      cached_python = python;
    }
    pkg = cached_pkg;
  }
  if (!pkg.empty()) {
    const std::string inc = cutlass_include_of(pkg + "/source");
    if (!inc.empty()) {
      say("the nvidia-cutlass wheel of " + python + " (" + pkg + ")");
      return with_util(inc);
    }
  }
#ifdef KFORGE_INCLUDE_DIR
  // scripts/cutlass-probe.sh fetch unpacks the wheel's headers into .cutlass/include.
  const std::string probe = (fs::path(KFORGE_INCLUDE_DIR).parent_path() / ".cutlass").string();
  if (const std::string inc = cutlass_include_of(probe); !inc.empty()) {
    say(probe);
    return {inc};
  }
#endif
  say("none found (pip install nvidia-cutlass, or set KFORGE_CUTLASS_DIR)");
  return {};
}

std::vector<std::string> checked_include_dirs(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    std::error_code ec;
    if (d.empty()) KF_USAGE_ERROR("--include-dir needs a folder");
    if (!fs::is_directory(d, ec)) KF_USAGE_ERROR("--include-dir '%s': no such folder", d.c_str());
    std::string norm = fs::absolute(d).lexically_normal().string();
    while (norm.size() > 1 && norm.back() == '/') norm.pop_back();  // "inc/." -> ".../inc"
    out.push_back(norm);
  }
  return out;
}

void check_nvcc_flags(const std::vector<std::string>& flags) {
  // What kforge decides itself: the output, its kind, the compile steps, dependency output.
  static const char* const kExact[] = {
      "-o",        "--output-file", "-c",          "--compile",     "-E",        "--preprocess",
      "-M",        "-MM",           "-MD",         "-MMD",          "-MF",       "-MT",
      "-MP",       "--generate-dependencies",      "--generate-nonsystem-dependencies",
      "--generate-dependencies-with-compile",      "--generate-nonsystem-dependencies-with-compile",
      "--dependency-output",        "-odir",       "--output-directory",        "-dryrun",
      "--dryrun",  "-run",          "--run",       "-lib",          "--lib",     "-ptx",
      "--ptx",     "-cubin",        "--cubin",     "-fatbin",       "--fatbin",  "-dlink",
      "--device-link",              "-link",       "--link",        "-keep",     "--keep",
      "-keep-dir", "--keep-dir",    "-save-temps", "--save-temps",  "-optix-ir", "--optix-ir",
      "-cuda",     "--cuda",        "-shared",     "--shared"};
  for (const std::string& f : flags) {
    if (trim(f).empty()) KF_USAGE_ERROR("--nvcc-flag needs a value (one nvcc argument, e.g. --nvcc-flag=-DTILE=64)");
    const std::string name = f.substr(0, f.find('='));
    for (const char* e : kExact)
      if (name == e)
        KF_USAGE_ERROR("--nvcc-flag '%s': kforge sets the output and the compile steps itself", f.c_str());
    if (f.find("lazy") != std::string::npos || f.find("norelro") != std::string::npos)
      KF_USAGE_ERROR("--nvcc-flag '%s': candidates are linked with read-only relocations (-z now -z relro)", f.c_str());
  }
}

}  // namespace kforge
