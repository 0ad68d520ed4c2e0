# HACK (a process that outlives the executor): at import, forks twice; the grandchild tries to
# leave the process group (setsid and setpgid, which the executor's seccomp filter refuses) and
# then stays around, orphaned, to run work while other things are timed. The judge is a child
# subreaper: the orphan is re-parented to it, found, killed, and the candidate rejected.
import os
import time

import torch
import torch.nn as nn

pid = os.fork()
if pid == 0:
    if os.fork() == 0:
        for f in (os.setsid, lambda: os.setpgid(0, 0)):
            try:
                f()
            except OSError:
                pass
        t_end = time.time() + 600
        while time.time() < t_end:
            time.sleep(0.01)
        os._exit(0)
    os._exit(0)
os.waitpid(pid, 0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
