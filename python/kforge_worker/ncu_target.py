"""One PyTorch candidate run for a profiler (python3 kforge_worker profile ...).

kforge starts this process under Nsight Compute (ncu --profile-from-start off) after the candidate
was judged correct; it is never the judge and forms no verdict (src/eval/profile.hpp). It imports
the task (for get_init_inputs/get_inputs) and the candidate (its extension already built in
--build-dir when it was judged), builds ModelNew on the GPU, makes --warmup calls, then one call
between cudaProfilerStart and cudaProfilerStop, and writes {"ok", "error"?} to --result. Whatever
the task or the candidate prints goes to stderr.
"""

import argparse
import importlib.util
import json
import os
import sys


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s as a Python module" % path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv):
    p = argparse.ArgumentParser(prog="kforge_worker profile")
    p.add_argument("--task", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--build-dir", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--result", required=True)
    a = p.parse_args(argv)
    # The result file is opened before any task or candidate code runs; fd 1 joins fd 2.
    out = os.open(a.result, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    sys.stdout.flush()
    os.dup2(2, 1)
    result = {"ok": False}
    try:
        os.makedirs(a.build_dir, exist_ok=True)
        os.environ["TORCH_EXTENSIONS_DIR"] = a.build_dir
        from kforge_worker import sandbox
        sandbox.die_with_parent()
        sandbox.install_seccomp()
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        torch.manual_seed(a.seed)
        task = _load(a.task, "kforge_task")
        init = list(task.get_init_inputs())
        cand = _load(a.candidate, "kforge_candidate")
        torch.manual_seed(a.seed)
        model = cand.ModelNew(*init)
        if isinstance(model, torch.nn.Module):
            model = model.cuda().eval()
        torch.manual_seed(a.seed + 1)
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
        with torch.no_grad():
            for _ in range(max(0, a.warmup)):
                model(*inputs)
            torch.cuda.synchronize()
            torch.cuda.profiler.start()  # cudaProfilerStart: ncu --profile-from-start off profiles from here
            model(*inputs)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        result = {"ok": True}
    except BaseException as e:  # noqa: B036 - whatever the candidate does, report it
        result = {"ok": False, "error": ("%s: %s" % (type(e).__name__, e))[:1000]}
    os.write(out, (json.dumps(result) + "\n").encode())
    os.close(out)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if result["ok"] else 1)
