# HONEST (prints bytes that are not UTF-8): writes raw invalid UTF-8 to its stdout and stderr at
# import and in its first call. The output excerpt in the verdict must stay valid JSON text.
import sys

import torch
import torch.nn as nn

sys.stdout.buffer.write(b"invalid utf-8: \xff\xfe\xc3( \xed\xa0\x80\n")
sys.stdout.buffer.flush()
sys.stderr.buffer.write(b"\xf0\x28\x8c\x28\n")
sys.stderr.buffer.flush()
print("a lone surrogate: \udcff".encode("utf-8", "surrogateescape").decode("latin-1"))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = True

    def forward(self, x):
        if self.first:
            self.first = False
            sys.stdout.buffer.write(b"first call \xff\n")
            sys.stdout.buffer.flush()
        return torch.relu(x)
