# LayerNorm over the last dimension with learned (random, seeded) weight and bias.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        with torch.no_grad():
            self.ln.weight.normal_(1.0, 0.5)
            self.ln.bias.normal_(0.0, 0.5)

    def forward(self, x):
        return self.ln(x)


rows = 512
hidden = 1024


def get_inputs():
    return [torch.randn(rows, hidden) * 3.0 + 1.0]


def get_init_inputs():
    return [hidden]
