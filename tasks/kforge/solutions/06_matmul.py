# fp32 matmul: 64x64 output tiles, 16-deep K slices in shared memory, 4x4 outputs per thread,
# fp32 accumulation throughout (no TF32).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

constexpr int BM = 64, BN = 64, BK = 16, TM = 4, TN = 4;  // 16x16 threads

// C[M,N] = A[M,K] @ B[K,N], all row-major.
__global__ void sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                            int M, int N, int K) {
  __shared__ float As[BK][BM];  // A tile, transposed: As[k][m]
  __shared__ float Bs[BK][BN];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    // 256 threads load 64x16 of A and 16x64 of B: 4 elements each.
    for (int l = threadIdx.x; l < BM * BK; l += 256) {
      const int m = l / BK, k = l % BK;
      const int gm = row0 + m, gk = k0 + k;
      As[k][m] = (gm < M && gk < K) ? A[(long)gm * K + gk] : 0.f;
    }
    for (int l = threadIdx.x; l < BK * BN; l += 256) {
      const int k = l / BN, n = l % BN;
      const int gk = k0 + k, gn = col0 + n;
      Bs[k][n] = (gk < K && gn < N) ? B[(long)gk * N + gn] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[k][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int gm = row0 + ty * TM + i;
    if (gm >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int gn = col0 + tx * TN + j;
      if (gn < N) C[(long)gm * N + gn] = acc[i][j];
    }
  }
}

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32);
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul_forward: [M,K] @ [K,N]");
  auto ac = a.contiguous(), bc = b.contiguous();
  const int M = ac.size(0), K = ac.size(1), N = bc.size(1);
  auto c = torch::empty({M, N}, ac.options());
  dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
  if (M > 0 && N > 0)
    sgemm_tiled<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(ac.data_ptr<float>(), bc.data_ptr<float>(),
                                                                     c.data_ptr<float>(), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return c;
}
"""

cpp_source = "torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b);"

ext = load_inline(name="kforge_sgemm", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["matmul_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.matmul_forward(a, b)
