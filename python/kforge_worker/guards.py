"""Snapshots of process state a candidate must leave alone, taken by the executor before it imports
the candidate and compared after every request (they live in the candidate's own process, so they
can only add reasons for a rejection; nothing the verdict needs depends on them): identities of torch, timer and builtin functions (monkey-patching),
precision switches (TF32, reduced-precision reductions, autocast, default dtype), other global
switches, Python and OS threads, the current CUDA stream."""

import builtins
import os
import random
import threading
import time

# Modules (and classes) whose every attribute is watched; their attribute dictionaries are read
# directly, so nothing lazy is imported by looking.
def _watched_namespaces(torch):
    spaces = {
        "torch": torch, "torch.Tensor": torch.Tensor, "torch.nn.functional": torch.nn.functional,
        "torch.nn.Module": torch.nn.Module, "torch.cuda": torch.cuda, "time": time, "builtins": builtins,
        "random": random, "threading": threading, "os": os, "torch.linalg": torch.linalg, "torch.fft": torch.fft,
        "torch.special": torch.special, "torch.nn.init": torch.nn.init,
    }
    try:
        spaces["torch._C.TensorBase"] = torch._C.TensorBase
    except AttributeError:
        pass
    try:
        spaces["torch.cuda.Event"] = torch.cuda.Event
        spaces["torch.cuda.Stream"] = torch.cuda.Stream
    except AttributeError:
        pass
    try:
        import torch.utils.cpp_extension as ext
        spaces["torch.utils.cpp_extension"] = ext
    except Exception:
        pass
    return spaces


def identity_objects(torch):
    """name -> object of every watched function and class (compared by identity)."""
    snap = {}
    for prefix, space in _watched_namespaces(torch).items():
        try:
            items = list(vars(space).items())
        except TypeError:
            continue
        for name, obj in items:
            if type(obj).__name__ == "module":
                continue
            if prefix == "os" and name in ("environ", "environb"):
                continue
            if prefix == "torch.cuda" and not callable(obj):
                continue  # counters and caches the runtime itself updates
            if prefix == "torch" and not callable(obj) and not isinstance(obj, type):
                continue
            snap[prefix + "." + name] = obj
    return snap


def watched_addition(name):
    """A new attribute that counts as patching (a new method on Tensor or Module, a new builtin)."""
    return any(name.startswith(p) for p in ("torch.Tensor.", "torch._C.TensorBase.", "torch.nn.Module.", "time.",
                                            "builtins."))


def precision_state(torch):
    s = {}

    def put(key, fn):
        try:
            s[key] = fn()
        except Exception:
            pass

    put("default_dtype", lambda: str(torch.get_default_dtype()))
    put("float32_matmul_precision", torch.get_float32_matmul_precision)
    put("cuda.matmul.allow_tf32", lambda: bool(torch.backends.cuda.matmul.allow_tf32))
    put("cudnn.allow_tf32", lambda: bool(torch.backends.cudnn.allow_tf32))
    put("cuda.matmul.fp16_reduced", lambda: bool(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction))
    put("cuda.matmul.bf16_reduced", lambda: bool(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction))
    put("autocast.cuda", lambda: bool(torch.is_autocast_enabled("cuda")))
    put("autocast.cpu", lambda: bool(torch.is_autocast_enabled("cpu")))
    return s


def global_state(torch):
    s = {}

    def put(key, fn):
        try:
            s[key] = fn()
        except Exception:
            pass

    put("cudnn.benchmark", lambda: bool(torch.backends.cudnn.benchmark))
    put("cudnn.enabled", lambda: bool(torch.backends.cudnn.enabled))
    put("deterministic", torch.are_deterministic_algorithms_enabled)
    put("num_threads", torch.get_num_threads)
    return s


def set_full_precision(torch):
    """The reference runs in the task's declared precision: no TF32 anywhere."""
    for fn in (lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", False),
               lambda: setattr(torch.backends.cudnn, "allow_tf32", False),
               lambda: torch.set_float32_matmul_precision("highest")):
        try:
            fn()
        except Exception:
            pass


def python_threads():
    return {t.ident: t.name for t in threading.enumerate()}
