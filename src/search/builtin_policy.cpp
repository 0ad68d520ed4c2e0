#include "search/builtin_policy.hpp"

#include <algorithm>
#include <array>

#include "core/error.hpp"

namespace kforge {
namespace {

constexpr std::array<int, 3> kBlock = {32, 64, 128};
constexpr std::array<int, 3> kDepth = {8, 16, 32};
constexpr std::array<int, 3> kThreadTile = {2, 4, 8};

// One step up or down within `values` (stays put at the ends).
template <size_t N>
int step(const std::array<int, N>& values, int v, int dir) {
  auto it = std::find(values.begin(), values.end(), v);
  size_t i = it == values.end() ? 0 : size_t(it - values.begin());
  if (dir > 0 && i + 1 < N) ++i;
  if (dir < 0 && i > 0) --i;
  return values[i];
}

}  // namespace

std::string TiledConfig::invalid_reason() const {
  if (bm % tm || bn % tn) return "the block tile is not a multiple of the thread tile";
  const int threads = (bm / tm) * (bn / tn);
  if (threads < 32) return strf("%d threads per block: fewer than one warp", threads);
  if (threads > 1024) return strf("%d threads per block: more than 1024", threads);
  const int smem = (bk * (bm + 1) + bk * (bn + 1)) * 4;
  if (smem > 48 * 1024) return strf("%d bytes of static shared memory: more than 48 KiB", smem);
  return "";
}

nlohmann::json TiledConfig::to_json() const { return {{"bm", bm}, {"bn", bn}, {"bk", bk}, {"tm", tm}, {"tn", tn}}; }

std::optional<TiledConfig> TiledConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  try {
    TiledConfig c{j.at("bm").get<int>(), j.at("bn").get<int>(), j.at("bk").get<int>(), j.at("tm").get<int>(),
                  j.at("tn").get<int>()};
    if (!c.invalid_reason().empty()) return std::nullopt;
    return c;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string tiled_hgemm_source(const TiledConfig& c) {
  KF_CHECK(c.invalid_reason().empty(), "invalid tiled configuration: %s", c.invalid_reason().c_str());
  std::string s = strf(
      "// kforge built-in policy: register-tiled shared-memory HGEMM, fp32 accumulation.\n"
      "// Configuration: BM=%d BN=%d BK=%d TM=%d TN=%d\n"
      "#include <cuda_fp16.h>\n\n"
      "constexpr int BM = %d, BN = %d, BK = %d, TM = %d, TN = %d;\n",
      c.bm, c.bn, c.bk, c.tm, c.tn, c.bm, c.bn, c.bk, c.tm, c.tn);
  s += R"(constexpr int kThreads = (BM / TM) * (BN / TN);

__global__ void __launch_bounds__(kThreads)
tiled_hgemm(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ c,
            int64_t m, int64_t n, int64_t k, bool b_col_major) {
  __shared__ float as[BK][BM + 1];  // A tile, transposed: as[kk][row]
  __shared__ float bs[BK][BN + 1];  // B tile: bs[kk][col]
  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int64_t row0 = int64_t(blockIdx.y) * BM, col0 = int64_t(blockIdx.x) * BN;
  float acc[TM][TN] = {};
  for (int64_t k0 = 0; k0 < k; k0 += BK) {
    for (int i = tid; i < BM * BK; i += kThreads) {
      const int r = i / BK, kk = i % BK;
      const int64_t gr = row0 + r, gk = k0 + kk;
      as[kk][r] = (gr < m && gk < k) ? __half2float(a[gr * k + gk]) : 0.0f;
    }
    for (int i = tid; i < BK * BN; i += kThreads) {
      const int kk = i / BN, cc = i % BN;
      const int64_t gk = k0 + kk, gc = col0 + cc;
      float v = 0.0f;
      if (gk < k && gc < n) v = __half2float(b_col_major ? b[gc * k + gk] : b[gk * n + gc]);
      bs[kk][cc] = v;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float av[TM], bv[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) av[i] = as[kk][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) bv[j] = bs[kk][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int64_t gr = row0 + ty * TM + i, gc = col0 + tx * TN + j;
      if (gr < m && gc < n) c[gr * n + gc] = __float2half_rn(acc[i][j]);
    }
  }
}

extern "C" int kforge_hgemm(const kforge_hgemm_args* args, cudaStream_t stream) {
  const kforge_hgemm_problem& p = args->problem;
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) return 1;
  const int64_t gx = (p.n + BN - 1) / BN, gy = (p.m + BM - 1) / BM;
  if (gx > 2147483647 || gy > 65535) return 2;
  tiled_hgemm<<<dim3(unsigned(gx), unsigned(gy)), kThreads, 0, stream>>>(
      static_cast<const __half*>(args->a), static_cast<const __half*>(args->b), static_cast<__half*>(args->c),
      p.m, p.n, p.k, p.layout == KFORGE_HGEMM_TN);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
)";
  return s;
}

TiledConfig propose_config(const std::optional<TiledConfig>& parent, std::mt19937_64& rng) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    TiledConfig c;
    if (!parent) {
      std::uniform_int_distribution<size_t> pick(0, 2);
      c = {kBlock[pick(rng)], kBlock[pick(rng)], kDepth[pick(rng)], kThreadTile[pick(rng)], kThreadTile[pick(rng)]};
    } else {
      c = *parent;
      std::uniform_int_distribution<int> which(0, 4), dir(0, 1), moves(1, 2);
      for (int mv = moves(rng); mv > 0; --mv) {
        const int d = dir(rng) ? 1 : -1;
        switch (which(rng)) {
          case 0: c.bm = step(kBlock, c.bm, d); break;
          case 1: c.bn = step(kBlock, c.bn, d); break;
          case 2: c.bk = step(kDepth, c.bk, d); break;
          case 3: c.tm = step(kThreadTile, c.tm, d); break;
          default: c.tn = step(kThreadTile, c.tn, d); break;
        }
      }
      if (c == *parent) continue;
    }
    if (c.invalid_reason().empty()) return c;
  }
  return parent ? *parent : TiledConfig{};
}

}  // namespace kforge
