# HACK (TF32 by hand): rounds both inputs to TF32's 10-bit mantissa (as tensor cores do with
# allow_tf32) and multiplies the rounded values. Runs on the CPU, so it shows that the inputs
# themselves make TF32 fail the fp32 tolerance, whatever switch is or is not set.
import torch
import torch.nn as nn


def to_tf32(x):
    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & -8192).view(torch.float32)  # round to nearest on the 13 dropped bits


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(to_tf32(a), to_tf32(b))
