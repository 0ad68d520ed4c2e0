#include "core/shapes.hpp"

#include <charconv>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/text.hpp"

namespace kforge {

std::string Shape::str() const { return strf("%lldx%lldx%lld", (long long)m, (long long)n, (long long)k); }

static int64_t parse_extent(std::string_view part, std::string_view whole) {
  part = trim(part);
  int64_t v = 0;
  const auto* end = part.data() + part.size();
  auto [ptr, ec] = std::from_chars(part.data(), end, v);
  if (part.empty() || ec != std::errc() || ptr != end)
    KF_USAGE_ERROR("bad shape '%.*s': '%.*s' is not a whole number (expected MxNxK, e.g. 4096x4096x64)",
                   int(whole.size()), whole.data(), int(part.size()), part.data());
  if (v <= 0)
    KF_USAGE_ERROR("bad shape '%.*s': every extent must be positive", int(whole.size()), whole.data());
  if (v >= kMaxExtent)
    KF_USAGE_ERROR("bad shape '%.*s': extent %lld is too large (limit %lld)", int(whole.size()),
                   whole.data(), (long long)v, (long long)kMaxExtent - 1);
  return v;
}

Shape parse_shape(std::string_view text) {
  const std::string_view whole = trim(text);
  std::vector<std::string> parts = split(whole, 'x');
  if (parts.size() != 3) parts = split(whole, ',');
  if (parts.size() != 3)
    KF_USAGE_ERROR("bad shape '%.*s': expected MxNxK, e.g. 4096x4096x64", int(whole.size()), whole.data());
  return Shape{parse_extent(parts[0], whole), parse_extent(parts[1], whole), parse_extent(parts[2], whole)};
}

std::vector<Shape> parse_shape_list(std::string_view text) {
  std::vector<Shape> out;
  for (const std::string& item : split(text, ',')) out.push_back(parse_shape(item));
  if (out.empty()) KF_USAGE_ERROR("no shapes given");
  return out;
}

std::vector<Shape> load_shape_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) KF_USAGE_ERROR("cannot read shape file '%s'", path.c_str());
  std::vector<Shape> out;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    std::string_view t = trim(line);
    if (auto hash = t.find('#'); hash != std::string_view::npos) t = trim(t.substr(0, hash));
    if (t.empty()) continue;
    if (lineno == 1 && (t.rfind("M,", 0) == 0 || t.rfind("m,", 0) == 0)) continue;  // CSV header
    // A CSV row may carry more columns after M,N,K: keep the first three.
    std::vector<std::string> cols = split(t, ',');
    std::string spec = cols.size() > 3 ? cols[0] + "," + cols[1] + "," + cols[2] : std::string(t);
    try {
      out.push_back(parse_shape(spec));
    } catch (const Error& e) {
      KF_USAGE_ERROR("%s:%d: %s", path.c_str(), lineno, e.what());
    }
  }
  if (out.empty()) KF_USAGE_ERROR("shape file '%s' holds no shapes", path.c_str());
  return out;
}

std::vector<Shape> default_grid() {
  static const int64_t sizes[] = {64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384};
  std::vector<Shape> out;
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : sizes) out.push_back({m, n, k});
  return out;
}

std::vector<Shape> resolve_shapes(const std::string& arg) {
  if (arg == "grid") return default_grid();
  if (!arg.empty() && arg[0] == '@') return load_shape_file(arg.substr(1));
  std::error_code ec;
  if (std::filesystem::is_regular_file(arg, ec)) return load_shape_file(arg);
  return parse_shape_list(arg);
}

std::string_view to_string(Layout l) { return l == Layout::kNN ? "nn" : "tn"; }
std::string_view to_string(Acc a) { return a == Acc::kF32 ? "f32" : "f16"; }
std::string_view to_string(Dtype d) { return d == Dtype::kBF16 ? "bf16" : "f16"; }

Dtype parse_dtype(std::string_view s) {
  s = trim(s);
  if (s == "f16" || s == "fp16") return Dtype::kF16;
  if (s == "bf16") return Dtype::kBF16;
  KF_USAGE_ERROR("unknown dtype '%.*s' (expected f16 or bf16)", int(s.size()), s.data());
}

Layout parse_layout(std::string_view s) {
  s = trim(s);
  if (s == "nn") return Layout::kNN;
  if (s == "tn") return Layout::kTN;
  KF_USAGE_ERROR("unknown layout '%.*s' (expected nn or tn)", int(s.size()), s.data());
}

Acc parse_acc(std::string_view s) {
  s = trim(s);
  if (s == "f32") return Acc::kF32;
  if (s == "f16") return Acc::kF16;
  KF_USAGE_ERROR("unknown accumulation '%.*s' (expected f32 or f16)", int(s.size()), s.data());
}

std::vector<Layout> parse_layouts(std::string_view csv) {
  std::vector<Layout> out;
  for (const std::string& s : split(csv, ',')) {
    Layout l = parse_layout(s);
    bool dup = false;
    for (Layout o : out) dup |= (o == l);
    if (!dup) out.push_back(l);
  }
  if (out.empty()) KF_USAGE_ERROR("no layouts given (expected nn, tn or nn,tn)");
  return out;
}

}  // namespace kforge
