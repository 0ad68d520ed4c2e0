// The tuned dispatch table as a file: JSON written by `kforge hgemm tune`, read by
// `kforge hgemm bench --ours` and compiled into the library by `kforge hgemm export`.
//
//   {"kforge_dispatch_table": 1, "device": "...", "entries": [
//     {"m": 4096, "n": 4096, "k": 4096, "layout": "tn", "acc": "f32", "variant": "sm90_tn_f32_...",
//      "us": 190.2, "baseline_us": 201.5, "verified": true, "variants": "<fingerprint>"}, ...]}
// ("variants": variants_fingerprint(dtype) of the build that tuned the entry; "dtype": "bf16" on a
// bf16 entry, absent or "f16" on an fp16 one: tables written before bf16 keep their meaning.)
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/hgemm/dispatch.hpp"

namespace kforge {

// A short fingerprint of this build's kernel variants of one dtype (their names, in order): an entry
// tuned by a build with another set was chosen among other candidates (`hgemm tune --retune-stale`).
std::string variants_fingerprint(kforge_hgemm_dtype dtype = KFORGE_HGEMM_F16);

// The dispatch table kforge ships, found relative to the running kforge binary (never a path
// baked in at build time): BIN/../data/hgemm/dispatch-table.json (a build folder inside the source
// tree, e.g. build/kforge) or BIN/../share/kforge/hgemm/dispatch-table.json (an installed prefix).
// Empty when neither exists; `looked` (optional) receives the paths tried.
std::string shipped_table_path(std::vector<std::string>* looked = nullptr);

class DispatchTable {
 public:
  DispatchTable() = default;
  // Throws a usage error naming the file and the entry on anything malformed or on a variant name
  // this build does not have.
  static DispatchTable load(const std::string& path);
  static DispatchTable from_json(const nlohmann::json& j, const std::string& origin);
  nlohmann::json to_json() const;

  const kernels::DispatchEntry* data() const { return entries_.data(); }
  size_t size() const { return entries_.size(); }
  const nlohmann::json& rows() const { return rows_; }
  // Adds or replaces the entry of (m, n, k, layout, acc, dtype); `row` carries the measurements.
  void put(nlohmann::json row);
  bool has(int64_t m, int64_t n, int64_t k, kforge_hgemm_layout l, kforge_hgemm_acc a,
           kforge_hgemm_dtype dt = KFORGE_HGEMM_F16) const;
  // The row of (m, n, k, layout, acc, dtype), or nullptr.
  const nlohmann::json* row(int64_t m, int64_t n, int64_t k, kforge_hgemm_layout l, kforge_hgemm_acc a,
                            kforge_hgemm_dtype dt = KFORGE_HGEMM_F16) const;
  std::string device;

 private:
  void rebuild();
  nlohmann::json rows_ = nlohmann::json::array();
  std::vector<std::string> names_;  // owns the variant names entries_ point to
  std::vector<kernels::DispatchEntry> entries_;
};

}  // namespace kforge
