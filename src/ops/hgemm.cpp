#include "ops/hgemm.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.hpp"

namespace kforge {

kforge_hgemm_problem HgemmProblem::abi() const {
  kforge_hgemm_problem p{};
  p.m = shape.m;
  p.n = shape.n;
  p.k = shape.k;
  p.layout = layout == Layout::kNN ? KFORGE_HGEMM_NN : KFORGE_HGEMM_TN;
  p.acc = acc == Acc::kF32 ? KFORGE_HGEMM_ACC_F32 : KFORGE_HGEMM_ACC_F16;
  p.dtype = dtype == Dtype::kBF16 ? KFORGE_HGEMM_BF16 : KFORGE_HGEMM_F16;
  return p;
}

double element_value(__half h, Dtype dt) {
  if (dt == Dtype::kF16) return __half2float(h);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  const uint32_t wide = uint32_t(bits) << 16;  // bf16 is the top half of an fp32
  float f;
  std::memcpy(&f, &wide, sizeof f);
  return f;
}

size_t elems_a(const Shape& s) { return size_t(s.m) * size_t(s.k); }
size_t elems_b(const Shape& s) { return size_t(s.k) * size_t(s.n); }
size_t elems_c(const Shape& s) { return size_t(s.m) * size_t(s.n); }
double hgemm_flops(const Shape& s) { return s.flops(); }
double hgemm_bytes(const Shape& s) { return 2.0 * double(elems_a(s) + elems_b(s) + elems_c(s)); }

Dist parse_dist(const std::string& s) {
  if (s == "uniform") return Dist::kUniform;
  if (s == "normal") return Dist::kNormal;
  if (s == "int" || s == "small-int") return Dist::kSmallInt;
  if (s == "biased") return Dist::kBiased;
  KF_USAGE_ERROR("unknown input distribution '%s' (expected uniform, normal, int or biased)", s.c_str());
}

std::string to_string(Dist d) {
  switch (d) {
    case Dist::kUniform: return "uniform";
    case Dist::kNormal: return "normal";
    case Dist::kSmallInt: return "int";
    case Dist::kBiased: return "biased";
  }
  return "?";
}

std::string CheckResult::describe() const {
  if (checked == 0) return "nothing checked";
  std::string s = strf("%lld/%lld elements outside tolerance", (long long)bad, (long long)checked);
  if (nonfinite) s += strf(" (%lld NaN/inf: unwritten or overflowed)", (long long)nonfinite);
  if (worst_row >= 0)
    s += strf("; worst at (%lld,%lld): got %.6g, expected %.6g, error/bound %.3g", (long long)worst_row,
              (long long)worst_col, worst_value, worst_ref, worst_ratio);
  return s;
}

std::vector<double> reference_cpu_f64(const HgemmProblem& p, const std::vector<__half>& a,
                                      const std::vector<__half>& b) {
  const Shape& s = p.shape;
  KF_CHECK(a.size() == elems_a(s) && b.size() == elems_b(s), "reference_cpu_f64: input sizes do not match %s",
           s.str().c_str());
  std::vector<double> out(elems_c(s));
  std::vector<double> bcol(size_t(s.k));
  for (int64_t j = 0; j < s.n; ++j) {
    for (int64_t kk = 0; kk < s.k; ++kk)
      bcol[kk] = element_value(p.layout == Layout::kTN ? b[j * s.k + kk] : b[kk * s.n + j], p.dtype);
    for (int64_t i = 0; i < s.m; ++i) {
      double acc = 0;
      for (int64_t kk = 0; kk < s.k; ++kk) acc += element_value(a[i * s.k + kk], p.dtype) * bcol[kk];
      out[i * s.n + j] = acc;
    }
  }
  return out;
}

CheckResult check_cpu(const HgemmProblem& p, const std::vector<__half>& a, const std::vector<__half>& b,
                      const std::vector<__half>& c) {
  const Shape& s = p.shape;
  KF_CHECK(c.size() == elems_c(s), "check_cpu: output size does not match %s", s.str().c_str());
  const std::vector<double> ref = reference_cpu_f64(p, a, b);
  CheckResult r;
  r.checked = int64_t(c.size());
  r.exact = true;
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      double abs_sum = 0;
      for (int64_t kk = 0; kk < s.k; ++kk) {
        const double bv = element_value(p.layout == Layout::kTN ? b[j * s.k + kk] : b[kk * s.n + j], p.dtype);
        abs_sum += std::fabs(element_value(a[i * s.k + kk], p.dtype) * bv);
      }
      const size_t idx = size_t(i * s.n + j);
      const double cv = element_value(c[idx], p.dtype);
      double ratio;
      if (!std::isfinite(cv)) {
        ++r.nonfinite;
        ratio = std::numeric_limits<double>::infinity();
      } else {
        ratio = std::fabs(cv - ref[idx]) / hgemm_tolerance(ref[idx], abs_sum, p);
      }
      if (!(ratio <= 1.0)) ++r.bad;
      if (cv != ref[idx]) r.exact = false;
      if (ratio > r.worst_ratio || r.worst_row < 0) {
        r.worst_ratio = ratio;
        r.worst_row = i;
        r.worst_col = j;
        r.worst_value = cv;
        r.worst_ref = ref[idx];
      }
    }
  }
  return r;
}

}  // namespace kforge
