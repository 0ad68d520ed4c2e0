# Reduction: the sum of every row of an fp32 matrix.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=1)


rows = 512
cols = 2048


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
