# ReLU: one grid-stride kernel, float4 loads and stores where the tensor allows.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
    float4 v = x[i];
    v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
    y[i] = v;
  }
}

__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, long start, long n) {
  long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "relu_forward: a CUDA float32 tensor");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const long n = xc.numel();
  const long n4 = n / 4;
  auto stream = at::cuda::getCurrentCUDAStream();
  if (n4 > 0) {
    const int threads = 256;
    const long blocks = std::min<long>((n4 + threads - 1) / threads, 65535L * 8);
    relu_vec4<<<blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(xc.data_ptr<float>()),
                                              reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
  }
  if (n - n4 * 4 > 0) relu_tail<<<1, 4, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

relu_ext = load_inline(name="kforge_relu", cpp_sources=cpp_source, cuda_sources=cuda_source,
                       functions=["relu_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_forward(x)
