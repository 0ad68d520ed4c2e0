# Column means repeated on every row: every row of the answer is the same, so a candidate could
# return a broadcast (stride 0) view of one row instead of writing them all.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean(dim=0, keepdim=True).repeat(x.shape[0], 1)


rows = 512
cols = 1024


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
