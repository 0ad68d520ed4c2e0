# Direct 3x3 convolution (stride 1, padding 1): one thread per output pixel of one output channel,
# the channel's weights in shared memory. Parameters in an nn.Conv2d named like the reference's.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// x [N, C, H, W], w [OC, C, KH, KW], b [OC] -> y [N, OC, H, W] (same padding, stride 1)
__global__ void conv2d_direct(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                              float* __restrict__ y, int C, int H, int W, int OC, int KH, int KW, int pad) {
  extern __shared__ float ws[];  // this output channel's C*KH*KW weights
  const int oc = blockIdx.y, n = blockIdx.z;
  for (int i = threadIdx.x; i < C * KH * KW; i += blockDim.x) ws[i] = w[(long)oc * C * KH * KW + i];
  __syncthreads();
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= H * W) return;
  const int oh = p / W, ow = p % W;
  float acc = b[oc];
  for (int c = 0; c < C; ++c) {
    const float* xc = x + ((long)n * C + c) * H * W;
    const float* wc = ws + c * KH * KW;
    for (int kh = 0; kh < KH; ++kh) {
      const int ih = oh + kh - pad;
      if (ih < 0 || ih >= H) continue;
      for (int kw = 0; kw < KW; ++kw) {
        const int iw = ow + kw - pad;
        if (iw < 0 || iw >= W) continue;
        acc = fmaf(xc[ih * W + iw], wc[kh * KW + kw], acc);
      }
    }
  }
  y[(((long)n * OC + oc) * H + oh) * W + ow] = acc;
}

torch::Tensor conv2d_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t pad) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 4 && w.dim() == 4, "conv2d_forward: CUDA float32 NCHW");
  auto xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
  const int N = xc.size(0), C = xc.size(1), H = xc.size(2), W = xc.size(3);
  const int OC = wc.size(0), KH = wc.size(2), KW = wc.size(3);
  TORCH_CHECK(wc.size(1) == C && KH == 2 * pad + 1 && KW == 2 * pad + 1, "conv2d_forward: same-padding odd kernels only");
  auto y = torch::empty({N, OC, H, W}, xc.options());
  const int threads = 256;
  dim3 grid((H * W + threads - 1) / threads, OC, N);
  const size_t smem = sizeof(float) * C * KH * KW;
  if (N > 0 && H * W > 0)
    conv2d_direct<<<grid, threads, smem, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), C, H, W, OC, KH, KW, (int)pad);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

cpp_source = "torch::Tensor conv2d_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t pad);"

ext = load_inline(name="kforge_conv2d", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["conv2d_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=True)

    def forward(self, x):
        return ext.conv2d_forward(x, self.conv.weight, self.conv.bias, 1)
