# HONEST: the Hankel matrix through unfold, copied to a dense output.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, v):
        n = (v.shape[1] + 1) // 2
        return v.unfold(1, n, 1).contiguous()
