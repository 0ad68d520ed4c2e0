#include "ops/hgemm_table.hpp"

#include <filesystem>
#include <system_error>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/hash.hpp"

namespace kforge {
namespace {

kforge_hgemm_layout layout_of(const std::string& s, const std::string& where) {
  if (s == "nn") return KFORGE_HGEMM_NN;
  if (s == "tn") return KFORGE_HGEMM_TN;
  KF_USAGE_ERROR("%s: layout '%s' (expected nn or tn)", where.c_str(), s.c_str());
}
kforge_hgemm_acc acc_of(const std::string& s, const std::string& where) {
  if (s == "f32") return KFORGE_HGEMM_ACC_F32;
  if (s == "f16") return KFORGE_HGEMM_ACC_F16;
  KF_USAGE_ERROR("%s: acc '%s' (expected f32 or f16)", where.c_str(), s.c_str());
}
// An entry's "dtype": "f16" or "bf16"; an entry without one is fp16 (tables written before bf16).
kforge_hgemm_dtype dtype_of(const nlohmann::json& row, const std::string& where) {
  if (!row.contains("dtype")) return KFORGE_HGEMM_F16;
  const std::string s = row.at("dtype").get<std::string>();
  if (s == "f16") return KFORGE_HGEMM_F16;
  if (s == "bf16") return KFORGE_HGEMM_BF16;
  KF_USAGE_ERROR("%s: dtype '%s' (expected f16 or bf16)", where.c_str(), s.c_str());
}
std::string dtype_key(const nlohmann::json& row) { return row.contains("dtype") ? row.at("dtype").get<std::string>() : "f16"; }

}  // namespace

DispatchTable DispatchTable::load(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    KF_USAGE_ERROR("dispatch table %s is not JSON: %s", path.c_str(), e.what());
  }
  return from_json(j, path);
}

DispatchTable DispatchTable::from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object() || !j.contains("entries") || !j["entries"].is_array())
    KF_USAGE_ERROR("%s: not a kforge dispatch table (no \"entries\" array)", origin.c_str());
  DispatchTable t;
  t.device = j.value("device", std::string());
  size_t i = 0;
  for (const auto& row : j["entries"]) {
    const std::string where = origin + " entry " + std::to_string(i++);
    try {
      const int64_t m = row.at("m").get<int64_t>(), n = row.at("n").get<int64_t>(), k = row.at("k").get<int64_t>();
      if (m < 1 || n < 1 || k < 1) KF_USAGE_ERROR("%s: sizes must be positive", where.c_str());
      const kforge_hgemm_layout l = layout_of(row.at("layout").get<std::string>(), where);
      const kforge_hgemm_acc a = acc_of(row.at("acc").get<std::string>(), where);
      const kforge_hgemm_dtype dt = dtype_of(row, where);
      const std::string v = row.at("variant").get<std::string>();
      const kernels::KernelVariant* kv = kernels::find_variant(v.c_str());
      if (!kv) KF_USAGE_ERROR("%s: variant '%s' is not in this build of kforge", where.c_str(), v.c_str());
      if (kv->layout != l || kv->acc != a || kv->dtype != dt)
        KF_USAGE_ERROR("%s: variant '%s' is not a %s %s %s variant (the entry's layout, acc and dtype)", where.c_str(),
                       v.c_str(), l == KFORGE_HGEMM_TN ? "tn" : "nn", a == KFORGE_HGEMM_ACC_F16 ? "f16" : "f32",
                       dt == KFORGE_HGEMM_BF16 ? "bf16" : "f16");
    } catch (const nlohmann::json::exception& e) {
      KF_USAGE_ERROR("%s: %s", where.c_str(), e.what());
    }
    t.rows_.push_back(row);
  }
  t.rebuild();
  return t;
}

nlohmann::json DispatchTable::to_json() const {
  return {{"kforge_dispatch_table", 1}, {"device", device}, {"entries", rows_}};
}

void DispatchTable::rebuild() {
  names_.clear();
  entries_.clear();
  names_.reserve(rows_.size());
  for (const auto& r : rows_) names_.push_back(r.at("variant").get<std::string>());
  for (size_t i = 0; i < rows_.size(); ++i) {
    const auto& r = rows_[i];
    entries_.push_back({r.at("m").get<int64_t>(), r.at("n").get<int64_t>(), r.at("k").get<int64_t>(),
                        layout_of(r.at("layout").get<std::string>(), "table"),
                        acc_of(r.at("acc").get<std::string>(), "table"), names_[i].c_str(), dtype_of(r, "table"),
                        r.contains("us") && r.at("us").is_number() ? r.at("us").get<double>() : 0.0});
  }
}

bool DispatchTable::has(int64_t m, int64_t n, int64_t k, kforge_hgemm_layout l, kforge_hgemm_acc a,
                        kforge_hgemm_dtype dt) const {
  return row(m, n, k, l, a, dt) != nullptr;
}

const nlohmann::json* DispatchTable::row(int64_t m, int64_t n, int64_t k, kforge_hgemm_layout l, kforge_hgemm_acc a,
                                         kforge_hgemm_dtype dt) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& e = entries_[i];
    if (e.m == m && e.n == n && e.k == k && e.layout == l && e.acc == a && e.dtype == dt) return &rows_[i];
  }
  return nullptr;
}

std::string variants_fingerprint(kforge_hgemm_dtype dt) {
  // The variant set is fixed when kforge is built. Only the variants of one dtype: an fp16 entry's
  // candidates were the fp16 variants, which adding bf16 ones does not change.
  auto of = [](kforge_hgemm_dtype want) {
    size_t count = 0;
    const kernels::KernelVariant* all = kernels::variants(&count);
    std::string names;
    for (size_t i = 0; i < count; ++i)
      if (all[i].dtype == want) names += std::string(all[i].name) + "\n";
    return sha256_hex(names).substr(0, 16);
  };
  static const std::string f16 = of(KFORGE_HGEMM_F16), bf16 = of(KFORGE_HGEMM_BF16);
  return dt == KFORGE_HGEMM_BF16 ? bf16 : f16;
}

void DispatchTable::put(nlohmann::json row) {
  for (auto& r : rows_) {
    if (r.at("m") == row.at("m") && r.at("n") == row.at("n") && r.at("k") == row.at("k") &&
        r.at("layout") == row.at("layout") && r.at("acc") == row.at("acc") && dtype_key(r) == dtype_key(row)) {
      r = std::move(row);
      rebuild();
      return;
    }
  }
  rows_.push_back(std::move(row));
  rebuild();
}

std::string shipped_table_path(std::vector<std::string>* looked) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path up = exe.parent_path().parent_path();
  for (const fs::path& p : {up / "data" / "hgemm" / "dispatch-table.json", up / "share" / "kforge" / "hgemm" / "dispatch-table.json"}) {
    if (looked) looked->push_back(p.string());
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

}  // namespace kforge
