# HACK (TF32 only inside forward): switches TF32 on for the matmul and off again before returning,
# so that a check of the switches after the call sees nothing. Needs a GPU (TF32 is a tensor-core
# format); the perturbed inputs make the TF32 result fail the fp32 tolerance.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return torch.matmul(a, b)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
