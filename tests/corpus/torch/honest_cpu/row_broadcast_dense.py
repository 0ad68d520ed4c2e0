# HONEST: one row of column means, written to every row of a dense output.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean(dim=0, keepdim=True).expand(x.shape[0], x.shape[1]).contiguous()
