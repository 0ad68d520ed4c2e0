// Static scan of a candidate's source for calls a task forbids. Comments and string literals are
// blanked before matching (so a mention in a comment is no finding); identifiers match whole words.
// Each finding quotes the line it is on (made valid UTF-8). The rules are data/scan-rules.json,
// shared with the Python worker's scanner (python/kforge_worker/scan.py).
#pragma once
#include <string>
#include <vector>

namespace kforge {

struct ScanPolicy {
  bool allow_streams = false;    // cudaStreamCreate* and friends
  bool allow_libraries = false;  // cuBLAS, cuBLASLt, cuDNN and the like doing the work
  // Whose rules of data/scan-rules.json apply: "cuda" (a CUDA candidate file) or "torch" (the
  // C++ a PyTorch candidate compiles; python/kforge_worker/scan.py applies the same rules).
  std::string scanner = "cuda";
};

struct ScanFinding {
  std::string rule;     // "library_call", "dynamic_loading", "thread_creation", "process_creation",
                        // "stream_creation", "timer", "file_access", "environment_access",
                        // "device_settings", "device_sync"
  std::string symbol;   // what matched, e.g. "cublasGemmEx", "#include <cublas_v2.h>"
  int line = 0;         // 1-based
  std::string text;     // the original line, trimmed, at most 200 characters
  std::string describe() const;  // "line 12: cublasGemmEx (library_call): <text>"
};

std::vector<ScanFinding> static_scan(const std::string& source, const ScanPolicy& policy = {});

}  // namespace kforge
