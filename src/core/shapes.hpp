// GEMM problem shapes and the option words that describe them (layout, accumulation).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kforge {

struct Shape {
  int64_t m = 0, n = 0, k = 0;
  bool operator==(const Shape&) const = default;
  std::string str() const;  // "MxNxK"
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

// The largest extent a shape may have: beyond it the element count of one operand would not
// fit the 32-bit leading dimensions that cuBLAS takes.
inline constexpr int64_t kMaxExtent = int64_t(1) << 31;

// "4096x4096x64" -> Shape. Throws a usage error naming the offending text otherwise.
Shape parse_shape(std::string_view text);
// "64x64x64,128x128x128" -> shapes, in order.
std::vector<Shape> parse_shape_list(std::string_view text);
// A file of shapes: one "MxNxK" or "M,N,K" per line; blank lines, '#' comments and a header line
// "M,N,K" are skipped.
std::vector<Shape> load_shape_file(const std::string& path);
// CUDA-L2's grid: {64,128,...,16384}^3, 1,000 shapes, M slowest.
std::vector<Shape> default_grid();
// The --shapes argument: "grid", a comma-separated list, or "@FILE" / an existing file path.
std::vector<Shape> resolve_shapes(const std::string& arg);

enum class Layout { kNN, kTN };
enum class Acc { kF32, kF16 };
// The element type of A, B and C: fp16, or bf16 (with fp32 accumulation only).
enum class Dtype { kF16, kBF16 };
std::string_view to_string(Layout l);
std::string_view to_string(Acc a);
std::string_view to_string(Dtype d);  // "f16", "bf16"
Layout parse_layout(std::string_view s);
Acc parse_acc(std::string_view s);
Dtype parse_dtype(std::string_view s);  // "f16" (or "fp16"), "bf16"
std::vector<Layout> parse_layouts(std::string_view csv);

}  // namespace kforge
