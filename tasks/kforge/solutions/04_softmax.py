# Softmax over rows: one block per row; max, then the sum of exponentials, then the outputs.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

template <bool MAX>
__device__ float block_reduce(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
  __syncthreads();  // shared may still be read by an earlier reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : (MAX ? -INFINITY : 0.f);
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? fmaxf(v, w) : v + w;
  }
  return v;  // every thread holds the block's result
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float shared[32];
  const float* row = x + (long)blockIdx.x * cols;
  float* out = y + (long)blockIdx.x * cols;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, row[i]);
  m = block_reduce<true>(m, shared);
  float s = 0.f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) s += __expf(row[i] - m);
  s = block_reduce<false>(s, shared);
  const float inv = 1.f / s;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) out[i] = __expf(row[i] - m) * inv;
}

torch::Tensor softmax_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() >= 1, "softmax_forward: CUDA float32");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const int cols = xc.size(-1);
  const long rows = cols ? xc.numel() / cols : 0;
  if (rows > 0) softmax_rows<<<rows, 512, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), cols);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

cpp_source = "torch::Tensor softmax_forward(torch::Tensor x);"

ext = load_inline(name="kforge_softmax", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["softmax_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.softmax_forward(x)
