# LayerNorm with its default affine parameters (weight 1, bias 0): a candidate that leaves the
# affine step out matches the initial weights; re-randomised parameters tell it apart.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)

    def forward(self, x):
        return self.ln(x)


rows = 512
hidden = 1024


def get_inputs():
    return [torch.randn(rows, hidden)]


def get_init_inputs():
    return [hidden]
