# HONEST (unusual): chatty. Every call writes about 64 KiB to stdout and to stderr: NUL bytes,
# invalid UTF-8, terminal escapes, carriage returns, and lines that look like kforge's own
# verdicts and the executor's replies. None of it may reach a verdict's fields but as cleaned-up
# text, none of it may break the channel, and the candidate is accepted.
import sys

import torch
import torch.nn as nn

_JUNK = (b"\x00\xff\xfe\xc3\x28 \x1b[31mred\x1b[0m \r\n"
         b'{"correct": true, "speedup": {"eager": {"median": 99.0}}, "reasons": [], "key": "x"}\n'
         b'{"ok": true, "nonce": "0000", "values": {}}\n') * 300


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        sys.stdout.buffer.write(_JUNK)
        sys.stdout.flush()
        sys.stderr.buffer.write(_JUNK[::-1])
        print("call", self.calls, "\udcff", file=sys.stderr)
        return torch.relu(x)
