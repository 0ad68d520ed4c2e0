# A Hankel matrix per batch row: out[b, i, j] = v[b, i + j]. Its values repeat along the
# anti-diagonals, so a candidate could return an as_strided view with overlapping elements.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, v):
        n = (v.shape[1] + 1) // 2
        idx = torch.arange(n, device=v.device)[:, None] + torch.arange(n, device=v.device)[None, :]
        return v[:, idx]


batch = 16
n = 256


def get_inputs():
    return [torch.randn(batch, 2 * n - 1)]


def get_init_inputs():
    return []
