// Device side of the HGEMM op: generators, poisoning, the fp32-accumulate reference and the checks.
#include <cmath>
#include <cstring>
#include <limits>

#include "gpu/cuda.hpp"
#include "ops/hgemm.hpp"
#include "ops/hgemm_gen.cuh"

namespace kforge {
namespace {

using gen::mix64;

using gen::decode_at;

__global__ void fill_kernel(unsigned short* p, size_t n, int dist, uint64_t seed, bool bf16) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = gen::encode(gen::value(dist, seed, i, false, 0, 0, bf16), bf16);
}

// A (row-major M x K) or B: the k of element i is i % K for A and for a TN B, i / N for an NN B.
__global__ void fill_operand_kernel(unsigned short* p, size_t n, int dist, uint64_t seed, bool is_a, int64_t k,
                                    int64_t ncols, bool k_minor, uint64_t sign_seed, bool bf16) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int64_t kk = k_minor ? int64_t(i % uint64_t(k)) : int64_t(i / uint64_t(ncols));
    p[i] = gen::encode(gen::value(dist, seed, i, is_a, kk, sign_seed, bf16), bf16);
  }
}

__global__ void poison_kernel(unsigned short* p, size_t n, unsigned short nan) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = nan;
}

// Elements are 2-byte fp16 or bf16 bits (bf16: the problem's dtype), read as floats.
__device__ inline float load_b(const __half* b, int64_t k, int64_t j, int64_t n, int64_t kk, bool tn, bool bf16) {
  return decode_at(b, uint64_t(tn ? j * kk + k : k * n + j), bf16);
}

constexpr int kRefTile = 16;
// Plain shared-memory tiled GEMM in fp32: slow and simple on purpose (it is the reference).
__global__ void reference_kernel(const __half* a, const __half* b, float* ref, float* abs_sum, int64_t m,
                                 int64_t n, int64_t k, bool tn, bool bf16) {
  __shared__ float as[kRefTile][kRefTile + 1], bs[kRefTile][kRefTile + 1];
  const int64_t row = blockIdx.y * int64_t(kRefTile) + threadIdx.y;
  const int64_t col = blockIdx.x * int64_t(kRefTile) + threadIdx.x;
  float acc = 0.f, aacc = 0.f;
  for (int64_t k0 = 0; k0 < k; k0 += kRefTile) {
    const int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = (row < m && ka < k) ? decode_at(a, uint64_t(row * k + ka), bf16) : 0.f;
    bs[threadIdx.y][threadIdx.x] = (col < n && kb < k) ? load_b(b, kb, col, n, k, tn, bf16) : 0.f;
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kRefTile; ++t) {
      const float prod = as[threadIdx.y][t] * bs[t][threadIdx.x];
      acc = fmaf(as[threadIdx.y][t], bs[t][threadIdx.x], acc);
      aacc += fabsf(prod);
    }
    __syncthreads();
  }
  if (row < m && col < n) {
    ref[row * n + col] = acc;
    abs_sum[row * n + col] = aacc;
  }
}

struct DeviceCheck {
  unsigned long long checked, bad, nonfinite, mismatched;
  unsigned int worst_bits;       // float bits of the worst ratio (non-negative floats order as ints)
  unsigned long long worst_idx;  // smallest index with that ratio
};

__device__ inline float element_ratio(float c, double ref, double abs_sum, Acc acc, Dtype dt) {
  if (!isfinite(c)) return INFINITY;
  return float(fabs(double(c) - ref) / hgemm_tolerance(ref, abs_sum, acc, dt));
}

__global__ void compare_kernel(const __half* c, const float* ref, const float* abs_sum, size_t total, Acc acc, Dtype dt,
                               DeviceCheck* out) {
  const bool bf16 = dt == Dtype::kBF16;
  unsigned long long bad = 0, nonfinite = 0, mism = 0;
  unsigned int worst = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const float cv = decode_at(c, i, bf16);
    const float r = element_ratio(cv, ref[i], abs_sum[i], acc, dt);
    nonfinite += !isfinite(cv);
    bad += !(r <= 1.0f);
    mism += (cv != ref[i]);
    worst = max(worst, __float_as_uint(r));
  }
  atomicAdd(&out->bad, bad);
  atomicAdd(&out->nonfinite, nonfinite);
  atomicAdd(&out->mismatched, mism);
  atomicMax(&out->worst_bits, worst);
}

__global__ void locate_worst_kernel(const __half* c, const float* ref, const float* abs_sum, size_t total, Acc acc,
                                    Dtype dt, DeviceCheck* out) {
  const unsigned int target = out->worst_bits;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    if (__float_as_uint(element_ratio(decode_at(c, i, dt == Dtype::kBF16), ref[i], abs_sum[i], acc, dt)) == target)
      atomicMin(&out->worst_idx, (unsigned long long)i);
  }
}

__global__ void nonfinite_kernel(const __half* c, size_t total, bool bf16, unsigned long long* count) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x)
    local += !isfinite(decode_at(c, i, bf16));
  if (local) atomicAdd(count, local);
}

struct Sample {
  double ref, abs_sum;
  float c;
  long long row, col;
};

// One warp per sampled element: the dot product in fp64.
__global__ void sample_kernel(const __half* a, const __half* b, const __half* c, int64_t m, int64_t n, int64_t k,
                              bool tn, bool bf16, int samples, uint64_t seed, Sample* out) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= samples) return;
  int64_t row, col;
  if (warp == 0) {
    row = 0, col = 0;
  } else if (warp == 1) {
    row = m - 1, col = n - 1;
  } else {
    const uint64_t h = mix64(seed ^ mix64(uint64_t(warp)));
    row = int64_t((h >> 32) % uint64_t(m));
    col = int64_t((h & 0xffffffffu) % uint64_t(n));
  }
  double acc = 0, aacc = 0;
  for (int64_t kk = lane; kk < k; kk += 32) {
    const double p = double(decode_at(a, uint64_t(row * k + kk), bf16)) * double(load_b(b, kk, col, n, k, tn, bf16));
    acc += p;
    aacc += fabs(p);
  }
  for (int off = 16; off > 0; off /= 2) {
    acc += __shfl_down_sync(0xffffffffu, acc, off);
    aacc += __shfl_down_sync(0xffffffffu, aacc, off);
  }
  if (lane == 0) out[warp] = Sample{acc, aacc, decode_at(c, uint64_t(row * n + col), bf16), row, col};
}

int grid_for(size_t n, int block) {
  const size_t blocks = (n + block - 1) / block;
  return int(blocks < 4096 ? (blocks ? blocks : 1) : 4096);
}

}  // namespace

void fill_random(__half* p, size_t n, Dist d, uint64_t seed, cudaStream_t s, Dtype dt) {
  fill_kernel<<<grid_for(n, 256), 256, 0, s>>>(reinterpret_cast<unsigned short*>(p), n, int(d), seed, dt == Dtype::kBF16);
  KF_CUDA_LAUNCHED();
}

void fill_operands(const HgemmProblem& p, __half* a, __half* b, Dist d, uint64_t seed, cudaStream_t s) {
  const Shape& sh = p.shape;
  const uint64_t sign_seed = gen::mix64(seed ^ 0x5157u);
  fill_operand_kernel<<<grid_for(elems_a(sh), 256), 256, 0, s>>>(reinterpret_cast<unsigned short*>(a), elems_a(sh),
                                                                 int(d), seed, true, sh.k, sh.k, true, sign_seed, p.bf16());
  KF_CUDA_LAUNCHED();
  fill_operand_kernel<<<grid_for(elems_b(sh), 256), 256, 0, s>>>(reinterpret_cast<unsigned short*>(b), elems_b(sh),
                                                                 int(d), gen::mix64(seed + 1), false, sh.k, sh.n,
                                                                 p.layout == Layout::kTN, sign_seed, p.bf16());
  KF_CUDA_LAUNCHED();
}

void poison_nan(__half* p, size_t n, cudaStream_t s, Dtype dt) {
  poison_kernel<<<grid_for(n, 256), 256, 0, s>>>(reinterpret_cast<unsigned short*>(p), n, gen::nan_bits(dt == Dtype::kBF16));
  KF_CUDA_LAUNCHED();
}

void reference_gpu_f32(const HgemmProblem& p, const __half* a, const __half* b, float* ref, float* abs_sum,
                       cudaStream_t s) {
  const Shape& sh = p.shape;
  KF_CHECK((sh.m + kRefTile - 1) / kRefTile < 65536, "reference: M=%lld too large", (long long)sh.m);
  dim3 block(kRefTile, kRefTile);
  dim3 grid(unsigned((sh.n + kRefTile - 1) / kRefTile), unsigned((sh.m + kRefTile - 1) / kRefTile));
  reference_kernel<<<grid, block, 0, s>>>(a, b, ref, abs_sum, sh.m, sh.n, sh.k, p.layout == Layout::kTN, p.bf16());
  KF_CUDA_LAUNCHED();
}

CheckResult check_full_gpu(const HgemmProblem& p, const __half* a, const __half* b, const __half* c,
                           cudaStream_t s) {
  const size_t total = elems_c(p.shape);
  DeviceBuffer ref(total * sizeof(float), "reference output"), abs_sum(total * sizeof(float), "reference |a||b| sums");
  DeviceBuffer dcheck(sizeof(DeviceCheck), "check counters");
  reference_gpu_f32(p, a, b, ref.as<float>(), abs_sum.as<float>(), s);
  DeviceCheck init{0, 0, 0, 0, 0, ~0ull};
  KF_CUDA(cudaMemcpyAsync(dcheck.get(), &init, sizeof init, cudaMemcpyHostToDevice, s));
  compare_kernel<<<grid_for(total, 256), 256, 0, s>>>(c, ref.as<float>(), abs_sum.as<float>(), total, p.acc, p.dtype,
                                                      dcheck.as<DeviceCheck>());
  KF_CUDA_LAUNCHED();
  locate_worst_kernel<<<grid_for(total, 256), 256, 0, s>>>(c, ref.as<float>(), abs_sum.as<float>(), total, p.acc,
                                                           p.dtype, dcheck.as<DeviceCheck>());
  KF_CUDA_LAUNCHED();
  DeviceCheck h{};
  KF_CUDA(cudaMemcpyAsync(&h, dcheck.get(), sizeof h, cudaMemcpyDeviceToHost, s));
  KF_CUDA(cudaStreamSynchronize(s));
  CheckResult r;
  r.checked = int64_t(total);
  r.bad = int64_t(h.bad);
  r.nonfinite = int64_t(h.nonfinite);
  r.exact = h.mismatched == 0;
  float worst;
  std::memcpy(&worst, &h.worst_bits, sizeof worst);
  r.worst_ratio = worst;
  if (h.worst_idx != ~0ull) {
    r.worst_row = int64_t(h.worst_idx / p.shape.n);
    r.worst_col = int64_t(h.worst_idx % p.shape.n);
    __half cv;
    float rv;
    KF_CUDA(cudaMemcpy(&cv, c + h.worst_idx, sizeof cv, cudaMemcpyDeviceToHost));
    KF_CUDA(cudaMemcpy(&rv, ref.as<float>() + h.worst_idx, sizeof rv, cudaMemcpyDeviceToHost));
    r.worst_value = element_value(cv, p.dtype);
    r.worst_ref = rv;
  }
  return r;
}

CheckResult check_sampled_gpu(const HgemmProblem& p, const __half* a, const __half* b, const __half* c,
                              int samples, uint64_t seed, cudaStream_t s) {
  KF_CHECK(samples >= 2, "check_sampled_gpu needs at least 2 samples");
  const size_t total = elems_c(p.shape);
  DeviceBuffer dsamples(sizeof(Sample) * samples, "check samples"), dcount(sizeof(unsigned long long), "check counter");
  KF_CUDA(cudaMemsetAsync(dcount.get(), 0, sizeof(unsigned long long), s));
  nonfinite_kernel<<<grid_for(total, 256), 256, 0, s>>>(c, total, p.bf16(), dcount.as<unsigned long long>());
  KF_CUDA_LAUNCHED();
  const int threads = 256;
  sample_kernel<<<(samples * 32 + threads - 1) / threads, threads, 0, s>>>(
      a, b, c, p.shape.m, p.shape.n, p.shape.k, p.layout == Layout::kTN, p.bf16(), samples, seed, dsamples.as<Sample>());
  KF_CUDA_LAUNCHED();
  std::vector<Sample> h(samples);
  unsigned long long nonfinite = 0;
  KF_CUDA(cudaMemcpyAsync(h.data(), dsamples.get(), sizeof(Sample) * samples, cudaMemcpyDeviceToHost, s));
  KF_CUDA(cudaMemcpyAsync(&nonfinite, dcount.get(), sizeof nonfinite, cudaMemcpyDeviceToHost, s));
  KF_CUDA(cudaStreamSynchronize(s));
  CheckResult r;
  r.checked = samples;
  r.nonfinite = int64_t(nonfinite);
  r.bad = int64_t(nonfinite);
  r.exact = nonfinite == 0;
  for (const Sample& smp : h) {
    const double bound = hgemm_tolerance(smp.ref, smp.abs_sum, p);
    const double ratio = std::isfinite(smp.c) ? std::fabs(double(smp.c) - smp.ref) / bound
                                              : std::numeric_limits<double>::infinity();
    if (!(ratio <= 1.0) && std::isfinite(smp.c)) ++r.bad;
    if (double(smp.c) != smp.ref) r.exact = false;
    if (ratio > r.worst_ratio || r.worst_row < 0) {
      r.worst_ratio = ratio;
      r.worst_row = smp.row;
      r.worst_col = smp.col;
      r.worst_value = smp.c;
      r.worst_ref = smp.ref;
    }
  }
  if (nonfinite) r.worst_ratio = std::numeric_limits<double>::infinity();
  return r;
}

}  // namespace kforge
