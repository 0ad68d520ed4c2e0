# HACK (finding the output buffer through the input's storage): in a single shared arena the
# output buffer of a call lies right after its inputs, inside the same storage as the input tensor,
# so a candidate can reach it (and the other calls' inputs) without any introspection. Each slot's
# inputs are a storage of their own: there is nothing after the input to write to.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        st = x.untyped_storage()
        nbytes = x.numel() * x.element_size()
        start = x.storage_offset() * x.element_size() + (nbytes + 255) // 256 * 256
        out = torch.empty(0, dtype=x.dtype, device=x.device).set_(st, start // x.element_size(), x.shape)
        return torch.clamp(x, min=0, out=out)
