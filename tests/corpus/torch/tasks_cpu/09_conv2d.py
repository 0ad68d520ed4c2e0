# 3x3 convolution, stride 1, padding 1, with bias (fp32; cuDNN's TF32 is off for the reference).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=True)

    def forward(self, x):
        return self.conv(x)


batch, in_channels, out_channels, size = 4, 16, 32, 32


def get_inputs():
    return [torch.randn(batch, in_channels, size, size)]


def get_init_inputs():
    return [in_channels, out_channels]
