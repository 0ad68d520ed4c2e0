#include "corpus/build.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "compile/compile.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/hash.hpp"
#include "core/subprocess.hpp"
#include "core/text.hpp"
#include "corpus/dedup.hpp"
#include "corpus/index.hpp"
#include "corpus/licence.hpp"
#include "db/sqlite.hpp"

namespace kforge {
namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kInstalledSources = {"kforge", "cuda", "cutlass", "torch"};

namespace {

constexpr int kMinNearTokens = 32;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

bool source_extension(const fs::path& p) {
  static const std::set<std::string> exts = {".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".cpp", ".cc",
                                             ".cxx", ".c", ".inl", ".ipp", ".tcc"};
  return exts.count(p.extension().string()) > 0;
}

// An extensionless file that looks like a C++ header: text, with a preprocessor directive.
bool looks_like_header(const std::string& head) {
  if (head.find('\0') != std::string::npos) return false;
  return head.find("#include") != std::string::npos || head.find("#pragma") != std::string::npos ||
         head.find("#ifndef") != std::string::npos || head.find("#if ") != std::string::npos;
}

// The first licence file of a dist-info folder named PREFIX-*.dist-info inside `site`.
std::string dist_info_licence(const fs::path& site, const std::string& prefix) {
  std::error_code ec;
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(site, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix + "-", 0) != 0 || !ends_with(name, ".dist-info")) continue;
    for (const fs::path& d : {e.path() / "licenses", e.path()})
      for (const auto& f : fs::directory_iterator(d, ec)) {
        std::string fn = f.path().filename().string();
        for (char& ch : fn) ch = char(std::toupper(static_cast<unsigned char>(ch)));
        if (f.is_regular_file(ec) && (fn.rfind("LICENSE", 0) == 0 || fn.rfind("LICENCE", 0) == 0 ||
                                      fn.rfind("COPYING", 0) == 0))
          found.push_back(f.path().string());
      }
  }
  std::sort(found.begin(), found.end());
  return found.empty() ? "" : found.front();
}

// The site-packages folder above `dir` (the first ancestor whose name ends with -packages).
fs::path site_packages_of(fs::path dir) {
  for (; !dir.empty() && dir.has_parent_path() && dir.parent_path() != dir; dir = dir.parent_path())
    if (ends_with(dir.filename().string(), "-packages")) return dir;
  return {};
}

std::string run_db_file(const std::string& p) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) return (fs::path(p) / "kforge-search.db").string();
  return p;
}

struct FileRecord {
  std::string path, package, licence, licence_how, sha256, status = "kept", duplicate_of;
  int64_t bytes = 0;
};

}  // namespace

void check_corpus_build_options(const CorpusBuildOptions& o) {
  std::set<std::string> seen;
  for (const std::string& s : o.installed) {
    if (std::find(kInstalledSources.begin(), kInstalledSources.end(), s) == kInstalledSources.end())
      KF_USAGE_ERROR("--installed: unknown source '%s' (expected all, none or a comma list of kforge, cuda, cutlass, "
                     "torch)",
                     s.c_str());
    if (!seen.insert(s).second) KF_USAGE_ERROR("--installed names '%s' twice; name it once", s.c_str());
  }
  std::error_code ec;
  for (const std::string& s : o.sources) {
    if (!fs::is_directory(s, ec))
      KF_USAGE_ERROR("--source %s is not a folder; give a folder of CUDA/C++ sources", s.c_str());
    fs::directory_iterator probe(s, ec);
    if (ec) KF_USAGE_ERROR("--source %s cannot be read (%s)", s.c_str(), ec.message().c_str());
  }
  for (const std::string& r : o.run_dbs) {
    const std::string f = run_db_file(r);
    if (!fs::is_regular_file(f, ec))
      KF_USAGE_ERROR("--run-db %s: no run database %s; give a kforge optimize run folder or its kforge-search.db",
                     r.c_str(), f.c_str());
    std::ifstream in(f, std::ios::binary);
    char magic[16] = {};
    in.read(magic, 16);
    if (std::string(magic, 15) != "SQLite format 3")
      KF_USAGE_ERROR("--run-db %s is not an SQLite database; give a kforge optimize run folder or its "
                     "kforge-search.db",
                     f.c_str());
  }
  if (o.chunk.max_chars < 256) KF_USAGE_ERROR("--max-chunk-chars must be at least 256 (got %zu)", o.chunk.max_chars);
  if (o.chunk.min_chars > o.chunk.max_chars)
    KF_USAGE_ERROR("--min-chunk-chars (%zu) must not exceed --max-chunk-chars (%zu)", o.chunk.min_chars,
                   o.chunk.max_chars);
  if (!(o.near_threshold > 0 && o.near_threshold <= 1))
    KF_USAGE_ERROR("--near-threshold must lie in (0, 1] (got %g)", o.near_threshold);
  if (o.out_dir.empty()) KF_USAGE_ERROR("--out is required: the folder to write the corpus into");
  if (o.installed.empty() && o.sources.empty() && o.run_dbs.empty())
    KF_USAGE_ERROR("nothing to collect: --installed none and no --source or --run-db; give at least one");
  const fs::path out(o.out_dir);
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) KF_USAGE_ERROR("--out %s is a file; give a folder", o.out_dir.c_str());
    if (fs::exists(out / CorpusIndex::kFileName, ec) || fs::exists(out / "corpus.jsonl", ec))
      KF_USAGE_ERROR("--out %s already holds a corpus; give another folder or remove that one", o.out_dir.c_str());
    check_writable((out / "corpus.jsonl").string());
  } else {
    fs::path parent = fs::absolute(out, ec).parent_path();
    if (!fs::is_directory(parent, ec))
      KF_USAGE_ERROR("--out %s: folder %s does not exist; create it first or give another --out", o.out_dir.c_str(),
                     parent.c_str());
    check_writable((parent / ".kforge-corpus-probe").string());
  }
}

std::vector<SourceRoot> corpus_roots(const CorpusBuildOptions& o, std::vector<std::string>* notes) {
  std::vector<SourceRoot> roots;
  std::error_code ec;
  auto want = [&](const char* s) { return std::find(o.installed.begin(), o.installed.end(), s) != o.installed.end(); };
  auto note = [&](const std::string& n) {
    if (notes) notes->push_back(n);
  };
  if (want("kforge")) {
    const fs::path src = fs::path(KFORGE_DATA_DIR).parent_path();
    const fs::path k = src / "kernels" / "hgemm";
    if (fs::is_directory(k, ec)) {
      std::string lic;
      for (const char* n : {"LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING"})
        if (fs::is_regular_file(src / n, ec)) lic = (src / n).string();
      roots.push_back({k.string(), "kforge", lic, {}});
    } else {
      note("kforge: no kernels/hgemm folder in the source tree " + src.string() + "; skipped");
    }
  }
  for (const std::string& s : o.sources) {
    std::string name = fs::path(s).lexically_normal().filename().string();
    if (name.empty() || name == ".") name = fs::absolute(s, ec).lexically_normal().parent_path().filename().string();
    roots.push_back({s, name.empty() ? "source" : name, "", {}});
  }
  if (want("cuda")) {
    const fs::path cuda = env_or("CUDA_HOME", "/usr/local/cuda");
    const fs::path inc = cuda / "include";
    if (fs::is_directory(inc, ec)) {
      std::string lic = dist_info_licence(cuda / "dist-info", "nvidia_cuda_runtime");
      if (lic.empty() && fs::is_regular_file(cuda / "EULA.txt", ec)) lic = (cuda / "EULA.txt").string();
      std::string cccl_lic = dist_info_licence(cuda / "dist-info", "nvidia_cuda_cccl");
      const std::vector<std::string> cccl = {"cccl", "cub", "thrust", "cuda", "nv"};
      roots.push_back({inc.string(), "cuda-toolkit", lic, cccl});
      for (const std::string& d : cccl)
        if (fs::is_directory(inc / d, ec)) roots.push_back({(inc / d).string(), "cccl", cccl_lic, {}});
    } else {
      note("cuda: no CUDA headers at " + inc.string() + " (set CUDA_HOME); skipped");
    }
  }
  if (want("cutlass")) {
    std::string how;
    const std::vector<std::string> dirs = find_cutlass_include_dirs(&how);
    if (dirs.empty()) note("cutlass: no CUTLASS/CuTe headers found (" + how + "); skipped");
    for (const std::string& d : dirs) {
      const fs::path site = site_packages_of(d);
      roots.push_back({d, "cutlass", site.empty() ? "" : dist_info_licence(site, "nvidia_cutlass"), {}});
    }
  }
  if (want("torch")) {
    const std::string python = env_or("KFORGE_PYTHON", "python3");
    ProcessOptions po;
    po.timeout_s = 120;
    const ProcessResult r =
        run_process({python, "-c", "import os, torch; print(os.path.dirname(torch.__file__))"}, po);
    const std::string dir(trim(r.out));
    const fs::path aten = fs::path(dir) / "include" / "ATen";
    if (!r.ok() || dir.empty()) {
      note("torch: " + python + " cannot import torch (" + r.describe() + "); skipped");
    } else if (!fs::is_directory(aten, ec)) {
      note("torch: the torch wheel at " + dir + " has no include/ATen; skipped");
    } else {
      roots.push_back({aten.string(), "torch", dist_info_licence(fs::path(dir).parent_path(), "torch"), {}});
    }
  }
  return roots;
}

CorpusBuildSummary build_corpus(const CorpusBuildOptions& o) {
  check_corpus_build_options(o);
  CorpusBuildSummary sum;
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  const std::vector<SourceRoot> roots = corpus_roots(o, &sum.notes);
  for (const std::string& n : sum.notes) say(n);

  std::vector<FileRecord> files;
  std::vector<CorpusChunk> chunks;
  std::unordered_map<std::string, std::string> by_hash;  // sha256 -> kept path
  std::unordered_set<std::string> chunk_hashes;
  NearDuplicateIndex near(o.near_threshold);
  std::vector<std::string> near_paths;  // NearDuplicateIndex ids -> path
  std::set<std::string> seen_paths;     // canonical: a file reached by two roots counts once
  auto last_report = std::chrono::steady_clock::now();

  auto take = [&](const std::string& path, const std::string& origin, std::string content, const std::string& package,
                  LicenceFinder& lf) {
    FileRecord f;
    f.path = origin;
    f.package = package;
    f.bytes = int64_t(content.size());
    sum.bytes_in += f.bytes;
    ++sum.files;
    if (!is_valid_utf8(content)) content = valid_utf8(content);
    f.sha256 = sha256_hex(content);
    f.licence = lf.find(path, content, &f.licence_how);
    auto dup = by_hash.find(f.sha256);
    if (dup != by_hash.end()) {
      f.status = "duplicate";
      f.duplicate_of = dup->second;
      ++sum.duplicates;
      files.push_back(std::move(f));
      return;
    }
    by_hash.emplace(f.sha256, origin);
    const std::string masked = mask_source(content);
    size_t tokens = 0;
    for (size_t i = 0; i < masked.size() && tokens < size_t(kMinNearTokens); ++i)
      tokens += !std::isspace(static_cast<unsigned char>(masked[i])) &&
                (i == 0 || std::isspace(static_cast<unsigned char>(masked[i - 1])));
    if (tokens >= size_t(kMinNearTokens)) {
      const long of = near.add(minhash_signature(masked));
      if (of >= 0) {
        f.status = "near_duplicate";
        f.duplicate_of = near_paths[size_t(of)];
        ++sum.near_duplicates;
        files.push_back(std::move(f));
        near_paths.push_back(origin);  // ids advance for every add()
        return;
      }
      near_paths.push_back(origin);
    }
    ++sum.kept;
    for (SourceChunk& sc : split_chunks(content, o.chunk)) {
      CorpusChunk c;
      c.sha256 = sha256_hex(sc.text);
      if (!chunk_hashes.insert(c.sha256).second) {
        ++sum.duplicate_chunks;
        continue;
      }
      c.id = c.sha256.substr(0, 16);
      c.text = std::move(sc.text);
      c.origin = origin + ":" + std::to_string(sc.first_line) + "-" + std::to_string(sc.last_line);
      c.package = package;
      c.licence = f.licence;
      c.first_line = sc.first_line;
      c.last_line = sc.last_line;
      sum.bytes_out += int64_t(c.text.size());
      ++sum.chunks_by_package[c.package];
      ++sum.chunks_by_licence[c.licence];
      chunks.push_back(std::move(c));
    }
    files.push_back(std::move(f));
  };

  for (const SourceRoot& root : roots) {
    std::error_code ec;
    std::vector<fs::path> paths;
    const fs::path top = fs::path(root.dir);
    for (auto it = fs::recursive_directory_iterator(top, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it.depth() == 0 && it->is_directory(ec) &&
          std::find(root.skip_dirs.begin(), root.skip_dirs.end(), it->path().filename().string()) !=
              root.skip_dirs.end()) {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec)) paths.push_back(it->path());
    }
    std::sort(paths.begin(), paths.end());
    say(strf("kforge corpus build: %s (%s): %zu files to look at", root.dir.c_str(), root.package.c_str(),
             paths.size()));
    LicenceFinder lf{root.dir, root.licence_file};
    size_t done = 0;
    for (const fs::path& p : paths) {
      ++done;
      const std::string canon = fs::weakly_canonical(p, ec).string();
      if (!seen_paths.insert(canon).second) continue;
      const auto size = fs::file_size(p, ec);
      if (ec || size > o.max_file_bytes) {
        ++sum.skipped;
        continue;
      }
      std::string content;
      if (source_extension(p)) {
        content = read_file(p.string());
      } else if (p.extension().empty()) {
        content = read_file(p.string());
        if (!looks_like_header(content.substr(0, 4096))) continue;
      } else {
        continue;
      }
      take(p.string(), p.string(), std::move(content), root.package, lf);
      const auto now = std::chrono::steady_clock::now();
      if (now - last_report > std::chrono::seconds(2)) {
        last_report = now;
        say(strf("kforge corpus build: %s: %zu/%zu files, %lld chunks so far", root.package.c_str(), done,
                 paths.size(), (long long)chunks.size()));
      }
    }
  }
  for (const std::string& r : o.run_dbs) {
    const std::string f = run_db_file(r);
    SqliteDb db(f, "run database");
    Statement s(db, "SELECT id, source FROM candidates WHERE correct = 1 AND language = 'cuda' ORDER BY id");
    LicenceFinder lf{fs::path(f).parent_path().string(), ""};
    int64_t n = 0;
    while (s.step()) {
      ++n;
      take(f, f + "#candidate/" + std::to_string(s.integer(0)), s.text(1), "kforge-candidates", lf);
    }
    say(strf("kforge corpus build: %s: %lld accepted CUDA candidate(s)", f.c_str(), (long long)n));
  }
  sum.chunks = int64_t(chunks.size());

  // Write: everything into a staging folder beside --out, then move the files in.
  std::error_code ec;
  const fs::path out(o.out_dir);
  fs::create_directories(out, ec);
  if (ec) KF_RUNTIME_ERROR("cannot create --out folder %s: %s", o.out_dir.c_str(), ec.message().c_str());
  say(strf("kforge corpus build: writing %lld chunks and their FTS5 index to %s", (long long)sum.chunks,
           o.out_dir.c_str()));
  std::string jsonl;
  for (const CorpusChunk& c : chunks)
    jsonl += json{{"id", c.id},         {"text", c.text},         {"origin", c.origin},
                  {"package", c.package}, {"licence", c.licence}, {"sha256", c.sha256},
                  {"first_line", c.first_line}, {"last_line", c.last_line}}
                 .dump(-1, ' ', false, json::error_handler_t::replace) +
             "\n";
  std::string files_jsonl;
  for (const FileRecord& f : files)
    files_jsonl += json{{"path", f.path},       {"package", f.package}, {"licence", f.licence},
                        {"licence_source", f.licence_how}, {"sha256", f.sha256}, {"bytes", f.bytes},
                        {"status", f.status},   {"duplicate_of", f.duplicate_of}}
                       .dump(-1, ' ', false, json::error_handler_t::replace) +
                   "\n";
  const std::string tmp_db = (out / ".corpus.sqlite.tmp").string();
  fs::remove(tmp_db, ec);
  fs::remove(tmp_db + "-wal", ec);
  fs::remove(tmp_db + "-shm", ec);
  {
    CorpusIndex index(tmp_db);
    index.add_chunks(chunks);
    index.set_meta("built_at", utc_now_iso8601());
    index.set_meta("near_threshold", strf("%g", o.near_threshold));
    index.set_meta("max_chunk_chars", std::to_string(o.chunk.max_chars));
    index.db().exec("PRAGMA wal_checkpoint(TRUNCATE)", "checkpointing the corpus database");
    index.db().exec("PRAGMA journal_mode=DELETE", "closing the WAL of the corpus database");
  }
  json summary = {{"files", sum.files},
                  {"kept", sum.kept},
                  {"duplicates", sum.duplicates},
                  {"near_duplicates", sum.near_duplicates},
                  {"skipped_too_large", sum.skipped},
                  {"chunks", sum.chunks},
                  {"duplicate_chunks", sum.duplicate_chunks},
                  {"bytes_in", sum.bytes_in},
                  {"bytes_out", sum.bytes_out},
                  {"near_threshold", o.near_threshold},
                  {"minhash", {{"hashes", kMinHashes}, {"shingle_tokens", kShingle}, {"band_rows", kBandRows}}},
                  {"max_chunk_chars", o.chunk.max_chars},
                  {"min_chunk_chars", o.chunk.min_chars},
                  {"chunks_by_package", sum.chunks_by_package},
                  {"chunks_by_licence", sum.chunks_by_licence},
                  {"notes", sum.notes}};
  write_file_atomic((out / "files.jsonl").string(), files_jsonl);
  write_file_atomic((out / "summary.json").string(), summary.dump(2) + "\n");
  write_file_atomic((out / "corpus.jsonl").string(), jsonl);
  fs::rename(tmp_db, out / CorpusIndex::kFileName, ec);  // last: its presence marks a finished corpus
  if (ec) KF_RUNTIME_ERROR("cannot move the corpus database into %s: %s", o.out_dir.c_str(), ec.message().c_str());
  return sum;
}

}  // namespace kforge
