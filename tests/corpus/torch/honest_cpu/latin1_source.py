# -*- coding: latin-1 -*-
# HONEST (a source that is not UTF-8): declares latin-1 as PEP 263 allows and holds a latin-1 byte
# in this comment (café) and in a string. Python reads it; so must kforge.
import torch
import torch.nn as nn

NAME = "relu, café style"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp(x, min=0.0)
