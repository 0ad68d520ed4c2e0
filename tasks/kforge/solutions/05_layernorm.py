# LayerNorm: one block per row; mean, then the variance around it (two passes, the row stays in
# cache), then the affine output. Parameters live in an nn.LayerNorm so that they carry the
# reference's names (and so its weights).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__device__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void layernorm_rows(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                               float* __restrict__ y, int cols, float eps) {
  __shared__ float shared[32];
  const float* row = x + (long)blockIdx.x * cols;
  float* out = y + (long)blockIdx.x * cols;
  float s = 0.f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) s += row[i];
  const float mean = block_sum(s, shared) / cols;
  float q = 0.f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    const float d = row[i] - mean;
    q += d * d;
  }
  const float rstd = rsqrtf(block_sum(q, shared) / cols + eps);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) out[i] = (row[i] - mean) * rstd * w[i] + b[i];
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "layernorm_forward: CUDA float32");
  auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
  auto y = torch::empty_like(xc);
  const int cols = xc.size(-1);
  TORCH_CHECK(wc.numel() == cols && bc.numel() == cols, "layernorm_forward: weight and bias of the last dimension");
  const long rows = cols ? xc.numel() / cols : 0;
  if (rows > 0)
    layernorm_rows<<<rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), wc.data_ptr<float>(),
                                                                       bc.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

cpp_source = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

ext = load_inline(name="kforge_layernorm", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["layernorm_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)

    def forward(self, x):
        return ext.layernorm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
