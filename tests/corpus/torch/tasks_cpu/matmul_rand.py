# An fp32 matmul on torch.rand inputs (KernelBench level 1 style): all products are positive, so
# random rounding errors average out over K and only a bias (or the RMS statistic) shows a lower
# precision.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


m, k, n = 256, 1024, 256


def get_inputs():
    return [torch.rand(m, k), torch.rand(k, n)]


def get_init_inputs():
    return []
