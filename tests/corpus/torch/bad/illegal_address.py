# BAD: a kernel that writes through a wild pointer: an illegal address, a sticky CUDA error; the
# worker must be replaced and the batch go on.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void wild_write(float* p) { p[threadIdx.x + (1L << 40)] = 1.f; }

torch::Tensor wild_forward(torch::Tensor x) {
  auto y = torch::empty_like(x);
  wild_write<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>());
  return y;
}
"""

ext = load_inline(name="kforge_wild", cpp_sources="torch::Tensor wild_forward(torch::Tensor x);",
                  cuda_sources=cuda_source, functions=["wild_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.wild_forward(x)
