# HONEST (torch.compile): the fused swish-add through torch.compile. Dynamo wraps some torch
# functions (torch.manual_seed among them) on first use; that is torch's own doing, not a patch.
import torch
import torch.nn as nn


def swish_add(x, y):
    return x * torch.sigmoid(x) + y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = torch.compile(swish_add)

    def forward(self, x, y):
        return self.f(x, y)
