# HONEST (more precise than the reference): the fp32 matmul computed in fp64 and rounded to fp32.
# Against an fp32 reference at 1e-4 such a result can fail where the reference itself is off; the
# judge compares with an fp64 reference and allows the fp32 reference's own error.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a.double(), b.double()).float()
