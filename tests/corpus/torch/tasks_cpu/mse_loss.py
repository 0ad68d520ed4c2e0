# Mean squared error on uniform inputs (KernelBench's old loss tasks): on get_inputs() alone the
# answer is close to a constant (1/6), so the scaled and shifted variants matter here.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


batch_size = 256
dim = 4096


def get_inputs():
    return [torch.rand(batch_size, dim), torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
