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
    # The switches as torch's C++ side holds them, whichever Python route set them (the legacy
    # flags, torch.backends.*.fp32_precision, torch._C's setters): oneDNN's bf16/TF32 on the CPU,
    # fp16 accumulation in cuBLAS, reduced-precision reductions on the CPU and in math SDPA.
    C = torch._C
    for backend, ops in (("generic", ("all",)), ("mkldnn", ("all", "matmul", "conv", "rnn")),
                         ("cuda", ("all", "matmul", "conv", "rnn"))):
        for op in ops:
            put("fp32_precision.%s.%s" % (backend, op), lambda b=backend, o=op: str(C._get_fp32_precision_getter(b, o)))
    put("onednn.allow_tf32", lambda: bool(C._get_onednn_allow_tf32()))
    put("cpu.fp16_reduced", lambda: bool(C._get_cpu_allow_fp16_reduced_precision_reduction()))
    put("cuda.matmul.fp16_accumulation", lambda: bool(C._get_cublas_allow_fp16_accumulation()))
    put("math_sdp.fp16_bf16_reduction", lambda: bool(C._get_math_sdp_allow_fp16_bf16_reduction()))
    return s


# The switches whose True allows a lower precision than the judge set (set_full_precision).
_LOWER_WHEN_TRUE = ("cuda.matmul.allow_tf32", "cudnn.allow_tf32", "cuda.matmul.fp16_reduced", "cuda.matmul.bf16_reduced",
                    "autocast.cuda", "autocast.cpu", "onednn.allow_tf32", "cpu.fp16_reduced",
                    "cuda.matmul.fp16_accumulation", "math_sdp.fp16_bf16_reduction")
_MATMUL_PRECISION = {"highest": 3, "high": 2, "medium": 1}
# torch's per-backend fp32 precision: 'none' defers to the parent ('all', then 'generic') and to the
# legacy flags, every one of which is watched too, so it ranks with 'ieee'.
_FP32_PRECISION = {"ieee": 3, "none": 3, "tf32": 1, "bf16": 0}
_DTYPE = {"torch.float64": 3, "torch.float32": 2}


def precision_lowered(key, old, new):
    """Whether switch `key` going from `old` to `new` (precision_state values) allows a lower precision.
    A switch set again to the precision it had, or to a higher one, is not a downgrade: an honest
    candidate may write torch.backends.cuda.matmul.allow_tf32 = False, which torch 2.11 records as
    fp32_precision 'ieee' where the judge's state read 'none'. Unknown keys and values: any change."""
    if old == new:
        return False
    if key in _LOWER_WHEN_TRUE and isinstance(old, bool) and isinstance(new, bool):
        return new and not old
    ranks = (_MATMUL_PRECISION if key == "float32_matmul_precision" else _FP32_PRECISION if key.startswith("fp32_precision.")
             else _DTYPE if key == "default_dtype" else None)
    if ranks is not None and old in ranks:
        return ranks.get(new, -1) < ranks[old]
    return True


# Global switches a candidate may set in its own process: they change which algorithm runs, never
# the precision (cuDNN's TF32 is its own switch, in precision_state) and never the baseline, which
# runs in a process of its own. cudnn.benchmark is the common one: KernelBench-style solutions set it
# to let cuDNN time its convolution algorithms once per shape (during the judge's verification
# calls, before any timing).
CANDIDATE_MAY_SET = frozenset({"cudnn.benchmark"})


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
    put("num_interop_threads", torch.get_num_interop_threads)
    put("mkldnn.enabled", lambda: bool(torch._C._get_mkldnn_enabled()))
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
