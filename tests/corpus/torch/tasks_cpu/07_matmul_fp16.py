# Half-precision matrix multiplication (fp16 in and out; tolerance 1e-2 as for every fp16 task).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


m, k, n = 256, 256, 256


def get_inputs():
    return [torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)]


def get_init_inputs():
    return []
