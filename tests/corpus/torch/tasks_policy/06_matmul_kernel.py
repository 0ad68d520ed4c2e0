# Square fp32 matrix multiplication (full fp32: TF32 is off for the reference and must stay off).
import torch
import torch.nn as nn

# The policy: a kernel of the candidate's own must do the work.
KFORGE = {"require_cuda_kernel": True}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


n = 1024


def get_inputs():
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs():
    return []
