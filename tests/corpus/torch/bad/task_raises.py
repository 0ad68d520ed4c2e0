# BAD TASK: raises on import.
import torch

raise ImportError("this task needs a module that is not installed")


class Model(torch.nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
