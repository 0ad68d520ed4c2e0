# HONEST (pure PyTorch, for the CPU tests): ReLU as clamp_min into a new tensor.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.clamp_min(0.0)
