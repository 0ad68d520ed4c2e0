// The HGEMM op: problem description, FLOP and byte counts, input generators, references
// (GPU fp32-accumulate and CPU fp64) and the tolerance model of the declared precision.
//
// Tolerance model, per output element c (ref = exact product over the fp16 or bf16 inputs,
// S = sum_k |a_k b_k|):
//   |c - ref| <= u |ref|               rounding of the output to its type, half an ulp relative:
//                                      u = 2^-11 for fp16 (11 significand bits), 2^-8 for bf16 (8)
//              + eps_acc * S           accumulation error; eps_acc = 2^-16 for fp32 accumulation,
//                                      2^-7 for fp16 accumulation (fp16 only)
//              + tiny                  the output type's subnormal spacing: 2^-24 (fp16), 2^-133 (bf16)
// Why the bf16 bound is sound: the kernel rounds its fp32 sum s = ref + e (|e| <= eps_acc S) once,
// so |c - ref| <= |round(s) - s| + |e| <= u |s| + |e| <= u |ref| + (1 + u) eps_acc S; the (1 + u)
// lies inside the factor of ~256 between eps_acc and fp32 accumulation's actual error below. bf16
// products are exact in fp32 (8 x 8 significand bits), so the accumulation term is the fp16 one.
// bf16 accumulation would err by ~2^-8 S, fp16-input or fp8 work on the biased inputs by ~2^-7 K:
// both far outside.
// fp32 accumulation of K terms errs by about sqrt(K) * 2^-24 * S, far inside 2^-16 * S for every K
// kforge meets. fp16 accumulation rounds every partial sum to 11 bits; for normal inputs and large K
// its error lies far outside the fp32 bound, so a problem that declares fp32 rejects fp16 work
// (the GPU tests check exactly this with cuBLAS's own fp16-accumulate GEMM).
// NaN or infinity in the output never passes (outputs are poisoned with NaN before each run).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/shapes.hpp"
#include "kforge/abi/hgemm.h"

namespace kforge {

struct HgemmProblem {
  Shape shape;
  Layout layout = Layout::kNN;
  Acc acc = Acc::kF32;
  Dtype dtype = Dtype::kF16;  // element type of A, B and C; bf16 needs Acc::kF32
  kforge_hgemm_problem abi() const;
  bool bf16() const { return dtype == Dtype::kBF16; }
};

double hgemm_flops(const Shape& s);  // 2 M N K
double hgemm_bytes(const Shape& s);  // 2-byte elements (fp16, bf16): each input read once, the output written once
size_t elems_a(const Shape& s);
size_t elems_b(const Shape& s);
size_t elems_c(const Shape& s);

enum class Dist {
  kUniform,   // uniform in [-1, 1]
  kNormal,    // standard normal
  kSmallInt,  // integers in [-2, 2]: fp32-accumulated products are exact (bit-exact checks)
  kBiased,    // +-1 plus small positive offsets (ops/hgemm_gen.cuh): any precision below fp32
              // accumulation errs systematically; operands only (fill_operands)
};
Dist parse_dist(const std::string& s);
std::string to_string(Dist d);

// Buffers of 2-byte elements are passed as __half* whatever their dtype: the functions below read
// and write them as the problem's (or the given) dtype.
// Device-side generators (counter-based hash: the same seed gives the same values everywhere).
void fill_random(__half* p, size_t n, Dist d, uint64_t seed, cudaStream_t s, Dtype dt = Dtype::kF16);
// A and B of `p` from one distribution (every Dist, kBiased included) and one seed, in p.dtype.
void fill_operands(const HgemmProblem& p, __half* a, __half* b, Dist d, uint64_t seed, cudaStream_t s);
// The NaN pattern in every element (fp16 0x7E00, bf16 0x7FC0): an element the candidate never writes fails.
void poison_nan(__half* p, size_t n, cudaStream_t s, Dtype dt = Dtype::kF16);

// The tolerance bound above for one element.
__host__ __device__ inline double hgemm_tolerance(double ref, double abs_sum, Acc acc, Dtype dt = Dtype::kF16) {
  const double eps_acc = acc == Acc::kF32 ? 1.0 / 65536.0 : 1.0 / 128.0;
  const double u = dt == Dtype::kBF16 ? 1.0 / 256.0 : 1.0 / 2048.0;
  const double tiny = dt == Dtype::kBF16 ? 0x1p-133 : 1.0 / 16777216.0;
  return (ref < 0 ? -ref : ref) * u + eps_acc * abs_sum + tiny;
}

// A host copy's element as a number, read as `dt` (fp16 or bf16 bits).
double element_value(__half h, Dtype dt);

struct CheckResult {
  int64_t checked = 0;
  int64_t bad = 0;        // elements outside the bound (NaN and infinity count as bad)
  int64_t nonfinite = 0;  // NaN or infinity (unwritten elements stay NaN)
  double worst_ratio = 0; // max |c - ref| / bound (infinity for a non-finite element)
  int64_t worst_row = -1, worst_col = -1;
  double worst_value = 0, worst_ref = 0;
  bool exact = false;     // every checked element equals ref exactly
  bool ok() const { return checked > 0 && bad == 0; }
  std::string describe() const;
};

// Full check on the GPU: an fp32-accumulate reference of every element (plus S per element)
// computed on the device, then compared element by element. Allocates M*N*8 bytes.
CheckResult check_full_gpu(const HgemmProblem& p, const __half* a, const __half* b, const __half* c,
                           cudaStream_t s);
// Sampled check on the GPU in fp64: `samples` (row, col) pairs drawn from `seed`, plus the first
// and last element, each dot product recomputed in double precision. Cheap for any shape; the
// whole output is still scanned for NaN/infinity (unwritten elements).
CheckResult check_sampled_gpu(const HgemmProblem& p, const __half* a, const __half* b, const __half* c,
                              int samples, uint64_t seed, cudaStream_t s);

// CPU fp64 reference for small shapes; inputs and output are host copies.
std::vector<double> reference_cpu_f64(const HgemmProblem& p, const std::vector<__half>& a,
                                      const std::vector<__half>& b);
CheckResult check_cpu(const HgemmProblem& p, const std::vector<__half>& a, const std::vector<__half>& b,
                      const std::vector<__half>& c);

// Low-level: the device reference (fp32 accumulation) into float buffers of M*N elements.
void reference_gpu_f32(const HgemmProblem& p, const __half* a, const __half* b, float* ref, float* abs_sum,
                       cudaStream_t s);

// The bound of problem `p`'s declared precision (accumulation and dtype).
inline double hgemm_tolerance(double ref, double abs_sum, const HgemmProblem& p) {
  return hgemm_tolerance(ref, abs_sum, p.acc, p.dtype);
}

}  // namespace kforge
