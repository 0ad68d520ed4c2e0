// `kforge corpus build`: the continued-pretraining corpus (CUDA-L2's) from what is installed.
//
// Sources, in this order (an earlier file wins over a later duplicate):
//   kforge     kforge's own kernels (kernels/hgemm/ of the source tree this kforge was built from)
//   --source   each folder given, package = the folder's name
//   cuda       the CUDA toolkit's headers ($CUDA_HOME, else /usr/local/cuda; include/), package
//              cuda-toolkit; CCCL (include/cccl, cub, thrust, cuda, nv) as package cccl
//   cutlass    CUTLASS/CuTe headers (find_cutlass_include_dirs: $KFORGE_CUTLASS_DIR, the
//              nvidia-cutlass wheel), package cutlass
//   torch      the torch wheel's ATen headers (torch/include/ATen of $KFORGE_PYTHON, else python3)
//   --run-db   accepted (correct) CUDA candidates of kforge optimize runs, package kforge-candidates
// Files: .cu .cuh .h .hh .hpp .hxx .cpp .cc .cxx .c .inl .ipp .tcc, and files without an extension
// whose first 4 KiB look like C++ headers (libcu++'s <cuda/std/...>); at most 4 MiB each.
// Each file: its licence (licence.hpp), an exact duplicate (same SHA-256 as a kept file) or a near
// duplicate (dedup.hpp: MinHash, estimated Jaccard >= the threshold, files of at least 32 tokens)
// is dropped; kept files are split into chunks (chunker.hpp) and identical chunks dropped.
// Output in the --out folder: corpus.jsonl (one chunk per line: id, text, origin, package,
// licence, sha256, first_line, last_line), files.jsonl (every file seen: path, package, licence,
// licence_source, sha256, bytes, status kept|duplicate|near_duplicate, duplicate_of), summary.json,
// and corpus.sqlite (chunks and their FTS5 index, index.hpp).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "corpus/chunker.hpp"

namespace kforge {

struct SourceRoot {
  std::string dir;
  std::string package;
  std::string licence_file;            // the package's licence file, may be empty
  std::vector<std::string> skip_dirs;  // top-level folders of `dir` left to another root
};

struct CorpusBuildOptions {
  std::string out_dir;
  std::vector<std::string> installed = {"kforge", "cuda", "cutlass", "torch"};  // which installed sources
  std::vector<std::string> sources;  // --source folders
  std::vector<std::string> run_dbs;  // --run-db run folders or kforge-search.db files
  ChunkOptions chunk;
  double near_threshold = 0.8;
  size_t max_file_bytes = 4u << 20;
  std::function<void(const std::string&)> progress;  // one line at a time; null: silent
};

struct CorpusBuildSummary {
  int64_t files = 0, kept = 0, duplicates = 0, near_duplicates = 0, skipped = 0;
  int64_t chunks = 0, duplicate_chunks = 0;
  int64_t bytes_in = 0, bytes_out = 0;
  std::map<std::string, int64_t> chunks_by_package, chunks_by_licence;
  std::vector<std::string> notes;  // a source that was not found, and why
};

extern const std::vector<std::string> kInstalledSources;  // kforge, cuda, cutlass, torch

// Checks the options (usage errors, nothing created): the installed list, that each --source is a
// readable folder and each --run-db a run database, and that the --out folder can be made and
// holds no corpus yet.
void check_corpus_build_options(const CorpusBuildOptions& o);
// The roots the options name, with a note for each installed source that is missing.
std::vector<SourceRoot> corpus_roots(const CorpusBuildOptions& o, std::vector<std::string>* notes);
CorpusBuildSummary build_corpus(const CorpusBuildOptions& o);

}  // namespace kforge
