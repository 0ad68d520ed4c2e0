# HONEST: the hinge loss through relu.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.relu(1 - predictions * targets).mean()
