# HONEST: Linear + GELU + scale with the module's own parameters, each call.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return F.gelu(F.linear(x, self.linear.weight, self.linear.bias)) * 0.5
