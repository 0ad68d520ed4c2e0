# BAD: raises in forward.
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        raise RuntimeError("not implemented yet")
