# Hinge loss with targets of +-1 (KernelBench level 1, 100_HingeLoss, smaller): on get_inputs()
# alone the answer is close to a constant.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


batch_size = 1024
dim = 1024


def get_inputs():
    return [torch.rand(batch_size, dim), torch.randint(0, 2, (batch_size, dim)).float() * 2 - 1]


def get_init_inputs():
    return []
