# Linear + exact GELU + scale, fused: a tiled fp32 kernel for x @ W^T whose epilogue adds the bias,
# applies GELU (erf) and scales by 0.5. Parameters in an nn.Linear named like the reference's.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

constexpr int BM = 64, BN = 64, BK = 16, TM = 4, TN = 4;

// y[M,N] = 0.5 * gelu(x[M,K] @ w[N,K]^T + b[N])
__global__ void linear_gelu(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                            float* __restrict__ y, int M, int N, int K) {
  __shared__ float Xs[BK][BM];
  __shared__ float Ws[BK][BN];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int l = threadIdx.x; l < BM * BK; l += 256) {
      const int m = l / BK, k = l % BK, gm = row0 + m, gk = k0 + k;
      Xs[k][m] = (gm < M && gk < K) ? x[(long)gm * K + gk] : 0.f;
    }
    for (int l = threadIdx.x; l < BN * BK; l += 256) {
      const int n = l / BK, k = l % BK, gn = col0 + n, gk = k0 + k;
      Ws[k][n] = (gn < N && gk < K) ? w[(long)gn * K + gk] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = Xs[k][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Ws[k][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < TM; ++i) {
    const int gm = row0 + ty * TM + i;
    if (gm >= M) continue;
    for (int j = 0; j < TN; ++j) {
      const int gn = col0 + tx * TN + j;
      if (gn >= N) continue;
      const float v = acc[i][j] + bias[gn];
      y[(long)gm * N + gn] = 0.5f * (0.5f * v * (1.f + erff(v * 0.70710678118654752f)));
    }
  }
}

torch::Tensor linear_gelu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2 && w.dim() == 2, "linear_gelu_forward: CUDA float32");
  auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
  const int M = xc.size(0), K = xc.size(1), N = wc.size(0);
  TORCH_CHECK(wc.size(1) == K && bc.numel() == N, "linear_gelu_forward: weight [N,K], bias [N]");
  auto y = torch::empty({M, N}, xc.options());
  dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  if (M > 0 && N > 0)
    linear_gelu<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), wc.data_ptr<float>(),
                                                                     bc.data_ptr<float>(), y.data_ptr<float>(), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

cpp_source = "torch::Tensor linear_gelu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

ext = load_inline(name="kforge_linear_gelu", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["linear_gelu_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.linear_gelu_forward(x, self.linear.weight, self.linear.bias)
