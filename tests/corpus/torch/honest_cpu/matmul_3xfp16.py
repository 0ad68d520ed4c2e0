# HONEST (split precision done right): each operand split into an fp16 high part and an fp16 low
# part, three products (hi*hi + lo*hi + hi*lo) accumulated in fp32: as accurate as fp32 (the
# technique behind 3xTF32), so it must pass both the tolerance and the precision statistic.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        ah, bh = a.half().float(), b.half().float()
        al, bl = a - ah, b - bh
        return ah @ bh + al @ bh + ah @ bl
