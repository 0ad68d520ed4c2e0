# HONEST (fp64 internally): LayerNorm computed in fp64 with the module's own parameters.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)

    def forward(self, x):
        xd = x.double()
        mean = xd.mean(dim=-1, keepdim=True)
        var = xd.var(dim=-1, unbiased=False, keepdim=True)
        y = (xd - mean) / torch.sqrt(var + self.ln.eps)
        return (y * self.ln.weight.double() + self.ln.bias.double()).float()
