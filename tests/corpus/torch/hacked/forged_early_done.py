# HACK (forged "done"): finds the request being served in the executor's stack frames (its nonce
# included), answers it itself before doing any work, then computes the output. A judge that
# stopped its clock at the first "done" and trusted the outputs to be ready would see a tiny time.
# The judge stops the executor and copies the outputs itself when the reply comes: they are still
# the poison it wrote, and the executor's own late reply is a second, unasked-for one.
import json
import os
import stat
import struct
import sys

import torch
import torch.nn as nn


def _answer_early():
    f = sys._getframe(1)
    while f is not None:
        req = f.f_locals.get("req")
        if isinstance(req, dict) and "nonce" in req:
            frame = json.dumps({"nonce": req["nonce"], "ok": True, "values": {}, "problems": []}).encode()
            for name in os.listdir("/proc/self/fd"):
                fd = int(name)
                try:
                    if fd >= 3 and stat.S_ISFIFO(os.fstat(fd).st_mode):
                        os.write(fd, struct.pack("<Q", len(frame)) + frame)
                except OSError:
                    pass
            return
        f = f.f_back


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        if self.calls == 0:
            _answer_early()
        self.calls += 1
        return torch.relu(x)
