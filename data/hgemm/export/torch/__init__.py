"""@NAME@_torch: the @NAME@ library (kforge's HGEMM kernels) as the PyTorch op torch.ops.kforge.hgemm.

Written by `kforge hgemm export --torch` (kforge @VERSION@). The op is compiled on first use by
torch.utils.cpp_extension.load() and linked against this export's static library, so it runs
exactly the kernels and the tuned dispatch table of this export:

    import @NAME@_torch as kh          # PYTHONPATH=<export>/torch
    kh.load()                          # builds (or reuses) the library and the op; idempotent
    c = torch.ops.kforge.hgemm(a, b)   # a (M, K) fp16 or bf16 CUDA, b (K, N): row-major, or w.t() of an (N, K) weight
    y = kh.linear(x, weight, bias)     # F.linear on kforge's kernels (x may be N-D)
    kh.swap_linears(model)             # every fp16/bf16 CUDA nn.Linear -> kh.HgemmLinear (same parameters)

Where the library comes from (load()):
  - prefix=... or $KFORGE_HGEMM_PREFIX: an installed @NAME@ package (cmake --install of this
    export): <prefix>/include/kforge_hgemm.h and <prefix>/lib*/lib@NAME@_static.a beside
    lib*/cmake/@NAME@/.
  - otherwise this export itself, configured and built with CMake into <export>/build
    (target @NAME@_static; $CUDAARCHS or -DCMAKE_CUDA_ARCHITECTURES as the export's CMake takes it).
The op's own build goes to $KFORGE_HGEMM_TORCH_BUILD or <export>/build/torch-op.
"""
import os
import shutil
import subprocess
from pathlib import Path

import torch

__all__ = ["load", "hgemm", "linear", "HgemmLinear", "swap_linears", "version", "variant"]

_HERE = Path(__file__).resolve().parent
_EXPORT = _HERE.parent.parent  # <export>/torch/@NAME@_torch/__init__.py
_LIB = "@NAME@_static"
_loaded = False


class BuildError(RuntimeError):
    """The library or the op could not be built; the message names the log."""


def _installed_library(prefix):
    prefix = Path(prefix)
    header = prefix / "include" / "kforge_hgemm.h"
    libs = [d / f"lib{_LIB}.a" for d in sorted(prefix.glob("lib*")) if (d / "cmake" / "@NAME@").is_dir()]
    libs = [p for p in libs if p.is_file()]
    if not header.is_file() or not libs:
        raise BuildError(f"{prefix} holds no installed @NAME@ package (looked for include/kforge_hgemm.h and "
                         f"lib*/lib{_LIB}.a beside lib*/cmake/@NAME@): give the prefix of `cmake --install` of the "
                         f"export, or unset KFORGE_HGEMM_PREFIX to build the export in place")
    return prefix / "include", libs[0]


def _built_library(verbose):
    """Configures and builds this export's static library with CMake (a no-op when up to date)."""
    build = _EXPORT / "build"
    lib = build / f"lib{_LIB}.a"
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BuildError("cmake is not on PATH: it builds the export's library (or give an installed prefix)")
    log = build / "torch-op-library.log"
    build.mkdir(parents=True, exist_ok=True)
    # Several processes may load at once (one per GPU under torchrun): one builds, the others wait
    # for it and then find the library up to date.
    import fcntl
    with open(build / ".torch-op-library.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_locked(cmake, build, lib, log, verbose)


def _build_locked(cmake, build, lib, log, verbose):
    steps = []
    if not (build / "CMakeCache.txt").is_file():
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        steps.append([cmake, "-S", str(_EXPORT), "-B", str(build), *gen, "-DCMAKE_BUILD_TYPE=Release"])
    steps.append([cmake, "--build", str(build), "--target", _LIB, "-j", str(os.cpu_count() or 2)])
    with open(log, "w") as f:
        for cmd in steps:
            if verbose:
                print("+", " ".join(cmd), flush=True)
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
            if r.returncode != 0:
                lines = log.read_text(errors="replace").splitlines()
                first = next((x for x in lines if "error" in x.lower()), lines[-1] if lines else "")
                raise BuildError(f"building the library failed ({' '.join(cmd[:2])} exited {r.returncode}: "
                                 f"{first.strip()[:300]}); see {log}")
    if not lib.is_file():
        raise BuildError(f"the build of {_EXPORT} made no {lib.name}; see {log}")
    return _EXPORT / "include", lib


def load(prefix=None, build_directory=None, verbose=False):
    """Builds (or reuses) the op and registers torch.ops.kforge.hgemm in this process. Idempotent."""
    global _loaded
    if _loaded:
        return
    from torch.utils import cpp_extension

    prefix = prefix or os.environ.get("KFORGE_HGEMM_PREFIX")
    include, lib = _installed_library(prefix) if prefix else _built_library(verbose)
    out = Path(build_directory or os.environ.get("KFORGE_HGEMM_TORCH_BUILD") or _EXPORT / "build" / "torch-op")
    out.mkdir(parents=True, exist_ok=True)
    # is_python_module=False: the shared object is loaded with torch.ops.load_library; its
    # TORCH_LIBRARY block registers the operators. with_cuda: CUDA's headers, -lcudart and torch's
    # CUDA libraries. The op has no device code of its own (the kernels are in the library), but
    # cpp_extension derives nvcc architecture flags anyway and, on a machine without a GPU and
    # without TORCH_CUDA_ARCH_LIST, fails doing so: give it one there; it changes no compiled code.
    if "TORCH_CUDA_ARCH_LIST" not in os.environ and not torch.cuda.is_available():
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
    # The library is a linker flag to cpp_extension, not a dependency it tracks: its stamp in the
    # flags makes a rebuilt library relink the op (cpp_extension versions the build on its flags).
    st = lib.stat()
    stamp = f"-DKFORGE_HGEMM_LIBRARY_STAMP={st.st_mtime_ns}{st.st_size}"
    cpp_extension.load(name="@NAME@_torch_op", sources=[str(_HERE / "hgemm_op.cpp")],
                       extra_include_paths=[str(include)], extra_cflags=["-O2", stamp],
                       extra_ldflags=[str(lib)], build_directory=str(out), with_cuda=True,
                       is_python_module=False, verbose=verbose)
    _register_python_parts()
    _loaded = True


def _register_python_parts():
    # Shapes for fake tensors (torch.compile, meta tensors): sizes may be symbolic.
    @torch.library.register_fake("kforge::hgemm")
    def _(a, b):
        torch._check(a.dim() == 2 and b.dim() == 2, lambda: "kforge::hgemm: a and b must be 2-D")
        torch._check(a.shape[1] == b.shape[0], lambda: f"kforge::hgemm: a is {tuple(a.shape)} and b "
                     f"{tuple(b.shape)}: their K differ")
        torch._check(a.dtype == b.dtype, lambda: "kforge::hgemm: a and b must have the same dtype")
        return a.new_empty((a.shape[0], b.shape[1]))
    # Autograd is registered in C++ (hgemm_op.cpp): a Python autograd kernel would cost every call.


def hgemm(a, b):
    """C = a @ b for 2-D fp16 or bf16 CUDA tensors (fp32 accumulation): torch.ops.kforge.hgemm after load()."""
    load()
    return torch.ops.kforge.hgemm(a, b)


def linear(x, weight, bias=None):
    """F.linear(x, weight, bias) on kforge's kernels: x (..., in), weight (out, in), bias (out,).

    The weight is passed as weight.t(), a column-major (in, out) view: the library's TN layout,
    no copy. Leading dimensions of x are flattened into M (a copy only if x is not contiguous)."""
    load()
    if weight.dim() != 2:
        raise ValueError(f"linear: weight must be 2-D (out_features, in_features), got {tuple(weight.shape)}")
    if x.dim() == 0 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: x {tuple(x.shape)} and weight {tuple(weight.shape)}: x's last dimension must "
                         f"be in_features = {weight.shape[1]}")
    lead = x.shape[:-1]
    y = torch.ops.kforge.hgemm(x.reshape(-1, x.shape[-1]), weight.t())
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, weight.shape[0])


class HgemmLinear(torch.nn.Module):
    """nn.Linear's forward on kforge's kernels. from_linear() shares the Linear's parameters."""

    def __init__(self, weight, bias=None):
        super().__init__()
        self.weight = weight if isinstance(weight, torch.nn.Parameter) else torch.nn.Parameter(weight)
        self.bias = bias if bias is None or isinstance(bias, torch.nn.Parameter) else torch.nn.Parameter(bias)
        self.in_features, self.out_features = self.weight.shape[1], self.weight.shape[0]

    @classmethod
    def from_linear(cls, lin):
        return cls(lin.weight, lin.bias)

    def forward(self, x):
        return linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def swap_linears(model, dtypes=(torch.float16, torch.bfloat16)):
    """Replaces, in place, every nn.Linear of `model` whose weight is a CUDA tensor of one of
    `dtypes` by an HgemmLinear sharing its parameters. Returns the qualified names swapped (the
    others are left as they are: fp32 or CPU layers keep torch's kernels)."""
    load()
    swapped = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if type(child) is torch.nn.Linear and child.weight.is_cuda and child.weight.dtype in dtypes:
                setattr(module, child_name, HgemmLinear.from_linear(child))
                swapped.append(f"{name}.{child_name}" if name else child_name)
    return swapped


def version():
    """The library linked into the op: kforge version, ABI and the dispatch table it carries."""
    load()
    return torch.ops.kforge.hgemm_version()


def variant(m, n, k, b_col_major=False, dtype=torch.float16):
    """The kernel variant the op runs for (M, N, K) of `dtype` (torch.float16 or torch.bfloat16) on
    the current CUDA device ('' if none)."""
    load()
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"variant: dtype {dtype} is not torch.float16 or torch.bfloat16")
    return torch.ops.kforge.hgemm_variant(m, n, k, b_col_major, dtype == torch.bfloat16)
