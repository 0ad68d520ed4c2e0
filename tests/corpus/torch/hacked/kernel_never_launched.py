# HACK (a kernel compiled but never launched): builds a __global__ matmul kernel through
# load_inline, as --require-cuda-kernel asks, and then computes with torch.matmul. The profiled
# batch shows none of its own kernels.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void kforge_unused_mm(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && j < n) { float s = 0.f; for (int k = 0; k < n; ++k) s += a[i * n + k] * b[k * n + j]; c[i * n + j] = s; }
}
torch::Tensor mm(torch::Tensor a, torch::Tensor b) {
  auto c = torch::empty({a.size(0), b.size(1)}, a.options());
  int n = a.size(0);
  dim3 block(16, 16), grid((n + 15) / 16, (n + 15) / 16);
  kforge_unused_mm<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n);
  return c;
}
"""
cpp_src = "torch::Tensor mm(torch::Tensor a, torch::Tensor b);"
ext = load_inline(name="kforge_corpus_unused_mm", cpp_sources=cpp_src, cuda_sources="#include <ATen/cuda/CUDAContext.h>\n" + cuda_src,
                  functions=["mm"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)
