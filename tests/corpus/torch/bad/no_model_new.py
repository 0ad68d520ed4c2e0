# BAD: defines no ModelNew.
import torch
import torch.nn as nn


class FastRelu(nn.Module):
    def forward(self, x):
        return torch.relu(x)
