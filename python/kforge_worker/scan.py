"""Static scan of a PyTorch candidate (a KernelBench-format module defining ModelNew).

Python code is scanned through its syntax tree (comments never count, aliases are followed); the
C++/CUDA sources a candidate passes to load_inline are the string constants of the module, scanned
with C comments removed. Needs no torch. Each finding quotes its line, like the C++ scan of CUDA
candidates (src/eval/static_scan.cpp), and uses the same rule names where the meaning is the same.

Rules:
  process_creation     subprocess, multiprocessing, os.system/popen/fork/exec*/spawn*/kill; system(), fork() in C++
  thread_creation      threading, _thread, concurrent, asyncio; std::thread, pthread_create, std::async in C++
  environment_access   os.environ, os.getenv/putenv/unsetenv; getenv/setenv in C++
  dynamic_loading      ctypes, cffi, importlib, __import__, torch.ops.load_library; dlopen/dlsym in C++
  file_access          open(), pathlib, shutil, tempfile, io, pickle, torch.save/load; fopen, fstreams in C++
  timer                the time/timeit modules; cudaEvent*, std::chrono, clock_gettime in C++
  monkey_patch         assigning or deleting attributes of imported modules (torch.x = ...), setattr/delattr
                       on anything but self, __dict__ writes
  introspection        gc, inspect, sys.modules, sys._getframe, sys.settrace, globals(), vars(), eval/exec,
                       the built-in compile(), builtins, __globals__/__code__/__subclasses__
  reference_call       using the task's reference (the name Model, unless the candidate defines its
                       own), importing the task module or kforge itself
  exception_fallback   try/except whose handler does not re-raise (a fallback to PyTorch or the reference
                       when the kernel fails), contextlib.suppress
  stream_creation      torch.cuda.Stream/stream/ExternalStream/set_stream; cudaStreamCreate*,
                       getStreamFromPool, cudaStreamPerThread in C++ (unless streams are allowed)
  precision_settings   TF32 switches, set_float32_matmul_precision, reduced-precision reductions,
                       autocast/amp, set_default_dtype
  library_call         cuBLAS/cuDNN in C++ (the baseline's own libraries)
  device_settings      cudaDeviceSetLimit, persisting-L2 windows, cudaDeviceReset in C++
  no_cuda_kernel       (policy require_cuda_kernel) no __global__ kernel compiled through cpp_extension
  aten_compute         (policy require_cuda_kernel) ATen compute ops called from C++ (at::matmul, ...)
"""

import ast
import json
import re
import sys

FORBIDDEN_MODULES = {
    "subprocess": "process_creation", "multiprocessing": "process_creation", "pty": "process_creation",
    "signal": "process_creation", "threading": "thread_creation", "_thread": "thread_creation",
    "concurrent": "thread_creation", "asyncio": "thread_creation", "ctypes": "dynamic_loading",
    "cffi": "dynamic_loading", "importlib": "dynamic_loading", "time": "timer", "timeit": "timer",
    "gc": "introspection", "inspect": "introspection", "builtins": "introspection",
    "__builtin__": "introspection", "pathlib": "file_access", "shutil": "file_access",
    "tempfile": "file_access", "io": "file_access", "pickle": "file_access", "socket": "process_creation",
    "kforge_worker": "reference_call", "kforge_task": "reference_call", "atexit": "process_creation",
    "resource": "process_creation", "mmap": "file_access", "sysconfig": "introspection",
}

OS_ATTRS = {
    "environ": "environment_access", "environb": "environment_access", "getenv": "environment_access",
    "putenv": "environment_access", "unsetenv": "environment_access", "system": "process_creation",
    "popen": "process_creation", "fork": "process_creation", "forkpty": "process_creation",
    "kill": "process_creation", "killpg": "process_creation", "_exit": "process_creation",
    "abort": "process_creation", "remove": "file_access", "unlink": "file_access", "rename": "file_access",
    "replace": "file_access", "open": "file_access", "write": "file_access", "read": "file_access",
    "dup2": "file_access", "chdir": "file_access",
}
OS_PREFIXES = {"exec": "process_creation", "spawn": "process_creation", "posix_spawn": "process_creation"}

SYS_ATTRS = {
    "modules": "introspection", "_getframe": "introspection", "settrace": "introspection",
    "setprofile": "introspection", "meta_path": "introspection", "path_hooks": "introspection",
    "exit": "process_creation", "stdout": "file_access", "stderr": "file_access", "__stdout__": "file_access",
    "addaudithook": "introspection", "setrecursionlimit": "introspection", "_current_frames": "introspection",
}

BUILTIN_CALLS = {
    "eval": "introspection", "exec": "introspection", "compile": "introspection", "globals": "introspection",
    "vars": "introspection", "locals": "introspection", "__import__": "dynamic_loading", "open": "file_access",
    "breakpoint": "introspection", "input": "file_access", "exit": "process_creation", "quit": "process_creation",
}

DUNDER_ATTRS = {"__globals__", "__code__", "__subclasses__", "__builtins__", "__closure__", "__dict__",
                "__bases__", "__mro__", "__class__", "__getattribute__", "__setattr__", "f_globals",
                "f_locals", "f_back", "gi_frame", "tb_frame"}

# Dotted names (after alias resolution), matched as prefixes.
DOTTED = [
    ("torch.cuda.Stream", "stream_creation"), ("torch.cuda.stream", "stream_creation"),
    ("torch.cuda.ExternalStream", "stream_creation"), ("torch.cuda.set_stream", "stream_creation"),
    ("torch.Stream", "stream_creation"),
    ("torch.cuda.Event", "timer"), ("torch.utils.benchmark", "timer"), ("torch.cuda.nvtx", "timer"),
    ("torch.backends", "precision_settings"), ("torch.set_float32_matmul_precision", "precision_settings"),
    ("torch.set_default_dtype", "precision_settings"), ("torch.set_default_tensor_type", "precision_settings"),
    ("torch.autocast", "precision_settings"), ("torch.cuda.amp", "precision_settings"),
    ("torch.amp", "precision_settings"), ("torch.cpu.amp", "precision_settings"),
    ("torch.ops.load_library", "dynamic_loading"), ("torch.classes.load_library", "dynamic_loading"),
    ("torch.save", "file_access"), ("torch.load", "file_access"), ("torch.hub", "file_access"),
    ("torch.set_num_threads", "thread_creation"), ("torch.set_num_interop_threads", "thread_creation"),
    ("torch.manual_seed", "introspection"), ("torch.cuda.manual_seed", "introspection"),
    ("torch.random", "introspection"), ("torch.set_rng_state", "introspection"),
    ("torch.cuda.set_rng_state", "introspection"), ("torch.cuda.memory", "introspection"),
    ("torch.cuda.caching_allocator", "introspection"), ("torch.cuda.set_per_process_memory_fraction", "introspection"),
    ("torch.cuda.empty_cache", "introspection"), ("torch.overrides", "introspection"),
    ("torch.library", "monkey_patch"), ("torch._C._set", "monkey_patch"), ("torch.utils._python_dispatch", "monkey_patch"),
    ("torch.cuda.set_sync_debug_mode", "introspection"), ("contextlib.suppress", "exception_fallback"),
    ("numpy.load", "file_access"), ("numpy.save", "file_access"), ("os.path", None),
]
PRECISION_WORDS = {"allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction",
                   "fp32_precision", "set_float32_matmul_precision", "autocast"}

# C++ inside string constants: (regex, rule). Word boundaries on both sides.
CPP_RULES = [
    (r"cublas\w*", "library_call"), (r"cudnn\w*", "library_call"), (r"cublasLt\w*", "library_call"),
    (r"at::cuda::blas\w*", "library_call"), (r"cutlass::\w+", None),
    (r"dlopen|dlsym|dlmopen", "dynamic_loading"),
    (r"std::thread|pthread_create|std::async|std::jthread", "thread_creation"),
    (r"(?:system|popen|fork|vfork|execv\w*|execl\w*|posix_spawn\w*)\s*\(", "process_creation"),
    (r"(?:getenv|setenv|putenv|unsetenv|secure_getenv)\s*\(", "environment_access"),
    (r"fopen|std::ofstream|std::ifstream|std::fstream|\bopen\s*\(", "file_access"),
    (r"cudaStreamCreate\w*|getStreamFromPool|cudaStreamPerThread|setCurrentCUDAStream|cuStreamCreate\w*|"
     r"CUDAStreamGuard|getStreamFromExternal", "stream_creation"),
    (r"cudaEvent\w+|cuEvent\w+|std::chrono|clock_gettime|gettimeofday|rdtsc", "timer"),
    (r"cudaDeviceSetLimit|cudaCtxResetPersistingL2Cache|accessPolicyWindow|cudaDeviceReset|"
     r"cudaDeviceSetCacheConfig|cudaStreamSetAttribute|cudaSetDevice|cudaDeviceSynchronize", "device_settings"),
    (r"PyObject|Py_\w+|PyImport\w*|pybind11::module_::import|py::module_::import|py::exec|py::eval", "introspection"),
]
ATEN_COMPUTE = re.compile(
    r"\b(?:at|torch)::(?:matmul|mm|bmm|addmm|baddbmm|linear|conv\w*|softmax|log_softmax|layer_norm|"
    r"batch_norm|group_norm|einsum|relu|gelu|silu|sigmoid|tanh|exp|sum|mean|max|min|amax|argmax|"
    r"cumsum|sort|topk|mul|add|sub|div|pow|sqrt|rsqrt|where|clamp|nn::functional::\w+|native::\w+|_ops::\w+)\s*\(")


class Finding:
    def __init__(self, rule, symbol, line, text):
        self.rule, self.symbol, self.line, self.text = rule, symbol, line, text

    def to_json(self):
        return {"rule": self.rule, "symbol": self.symbol, "line": self.line, "text": self.text}

    def describe(self):
        return "line %d: %s (%s): %s" % (self.line, self.symbol, self.rule, self.text)


def _strip_c_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Scanner(ast.NodeVisitor):
    def __init__(self, source, allow_streams, task_stem):
        self.lines = source.splitlines()
        self.allow_streams = allow_streams
        self.task_stem = task_stem
        self.findings = []
        self.aliases = {}        # local name -> dotted module/object path
        self.modules = set()     # local names bound to imported modules or their members
        self.defines_model = False
        self.strings = []        # (line, value)
        self.has_load_inline = False

    def add(self, rule, symbol, node_or_line):
        if rule is None:
            return
        if rule == "stream_creation" and self.allow_streams:
            return
        line = node_or_line if isinstance(node_or_line, int) else getattr(node_or_line, "lineno", 0)
        text = self.lines[line - 1].strip()[:200] if 0 < line <= len(self.lines) else ""
        for f in self.findings:
            if f.rule == rule and f.line == line:
                return  # one finding per rule and line: the first (outermost) symbol
        self.findings.append(Finding(rule, symbol, line, text))

    def resolve(self, dotted):
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in self.aliases:
            base = self.aliases[head]
            return base + ("." + rest if rest else "")
        return dotted

    # -- imports
    def _check_module(self, name, node):
        root = name.split(".")[0]
        if root in FORBIDDEN_MODULES:
            self.add(FORBIDDEN_MODULES[root], name, node)
        if self.task_stem and root == self.task_stem:
            self.add("reference_call", name, node)
        if root in ("kforge", "kforge_worker", "kforge_task", "kforge_candidate"):
            self.add("reference_call", name, node)

    def visit_Import(self, node):
        for a in node.names:
            self._check_module(a.name, node)
            local = a.asname or a.name.split(".")[0]
            self.aliases[local] = a.name if a.asname else a.name.split(".")[0]
            self.modules.add(local)
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        if node.level:
            self.add("reference_call", "relative import " + ("." * node.level) + mod, node)
        self._check_module(mod, node)
        for a in node.names:
            full = mod + "." + a.name if mod else a.name
            self._check_dotted(full, node)
            if a.name == "Model":
                self.add("reference_call", full, node)
            local = a.asname or a.name
            self.aliases[local] = full
            self.modules.add(local)
        self.generic_visit(node)

    # -- names and attributes
    def _check_dotted(self, full, node):
        if full is None:
            return
        parts = full.split(".")
        if parts[0] == "os" and len(parts) > 1:
            attr = parts[1]
            if attr in OS_ATTRS:
                self.add(OS_ATTRS[attr], full, node)
            for p, rule in OS_PREFIXES.items():
                if attr.startswith(p):
                    self.add(rule, full, node)
        if parts[0] == "sys" and len(parts) > 1 and parts[1] in SYS_ATTRS:
            self.add(SYS_ATTRS[parts[1]], full, node)
        for prefix, rule in DOTTED:
            if full == prefix or full.startswith(prefix + "."):
                self.add(rule, full, node)
                break
        if parts[-1] in PRECISION_WORDS:
            self.add("precision_settings", full, node)
        if parts[-1] in ("load_inline", "load") and "cpp_extension" in full:
            self.has_load_inline = True

    def visit_Attribute(self, node):
        full = self.resolve(_dotted(node))
        self._check_dotted(full, node)
        if node.attr in DUNDER_ATTRS:
            self.add("introspection", node.attr, node)
        if node.attr in PRECISION_WORDS:
            self.add("precision_settings", node.attr, node)
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id == "Model" and isinstance(node.ctx, ast.Load):
            self._model_uses.append(node)
        if node.id in ("__builtins__", "__loader__", "__spec__"):
            self.add("introspection", node.id, node)
        if node.id in self.aliases and isinstance(node.ctx, ast.Load):
            self._check_dotted(self.aliases[node.id], node)
        self.generic_visit(node)

    def visit_ClassDef(self, node):
        if node.name == "Model":
            self.defines_model = True
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        if node.name == "Model":
            self.defines_model = True
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    # -- calls
    def visit_Call(self, node):
        if isinstance(node.func, ast.Name):
            name = node.func.id
            if name in BUILTIN_CALLS and name not in self.aliases:
                self.add(BUILTIN_CALLS[name], name + "()", node)
            if name in ("setattr", "delattr"):
                first = node.args[0] if node.args else None
                if not (isinstance(first, ast.Name) and first.id == "self"):
                    self.add("monkey_patch", name + "()", node)
            if name == "getattr" and len(node.args) >= 2 and not isinstance(node.args[1], ast.Constant):
                self.add("introspection", "getattr() with a computed name", node)
        self.generic_visit(node)

    # -- writes to imported modules
    def _check_target(self, t, node):
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._check_target(e, node)
            return
        if isinstance(t, ast.Starred):
            self._check_target(t.value, node)
            return
        if isinstance(t, ast.Subscript):
            self._check_target(t.value, node)
            return
        if isinstance(t, ast.Attribute):
            d = _dotted(t)
            root = d.split(".")[0] if d else None
            if root and (root in self.modules):
                self.add("monkey_patch", self.resolve(d) + " =", node)
            elif root and root != "self" and root in self._class_names:
                self.add("monkey_patch", d + " =", node)

    def visit_Assign(self, node):
        for t in node.targets:
            self._check_target(t, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node):
        for t in node.targets:
            self._check_target(t, node)
        self.generic_visit(node)

    # -- fallbacks
    def visit_Try(self, node):
        for h in node.handlers:
            reraises = any(isinstance(s, ast.Raise) for s in ast.walk(ast.Module(body=h.body, type_ignores=[])))
            if not reraises:
                what = "bare except" if h.type is None else "except " + (ast.unparse(h.type) if hasattr(ast, "unparse") else "...")
                self.add("exception_fallback", what + " without re-raise", h)
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_Constant(self, node):
        if isinstance(node.value, str):
            self.strings.append((node.lineno, node.value))
        self.generic_visit(node)

    def run(self, tree):
        self._model_uses = []
        self._class_names = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        self.visit(tree)
        if not self.defines_model:
            for n in self._model_uses:
                self.add("reference_call", "Model", n)


def _scan_cpp(scanner, require_cuda_kernel):
    has_global = False
    for line0, value in scanner.strings:
        if "\n" not in value and len(value) < 40:
            continue  # a name or a flag, not source
        text = _strip_c_comments(value)
        if "__global__" in text:
            has_global = True
        for lineno_in, l in enumerate(text.split("\n")):
            line = line0 + lineno_in  # string constants start on their own line; good enough to find it
            for pattern, rule in CPP_RULES:
                m = re.search(r"(?<![\w:])(?:" + pattern + r")", l)
                if m and rule:
                    scanner.add(rule, m.group(0).rstrip("( ").strip(), line)
            if require_cuda_kernel:
                m = ATEN_COMPUTE.search(l)
                if m:
                    scanner.add("aten_compute", m.group(0).rstrip("( "), line)
    return has_global


def scan_source(source, allow_streams=False, require_cuda_kernel=False, task_stem=None):
    """Findings (a list of Finding) for candidate source text; a syntax error is one finding."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [Finding("syntax_error", "SyntaxError", e.lineno or 0, (e.msg or "")[:200])]
    s = _Scanner(source, allow_streams, task_stem)
    s.run(tree)
    has_global = _scan_cpp(s, require_cuda_kernel)
    if require_cuda_kernel and not (has_global and s.has_load_inline):
        s.add("no_cuda_kernel", "no __global__ kernel built with torch.utils.cpp_extension", 1)
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.walk(tree)):
        if not any(isinstance(n, (ast.Assign,)) and any(isinstance(t, ast.Name) and t.id == "ModelNew"
                                                        for t in n.targets) for n in ast.walk(tree)):
            s.add("missing_model_new", "ModelNew", 1)
    s.findings.sort(key=lambda f: f.line)
    return s.findings


def task_policy(task_path):
    """The task's KFORGE = {...} declaration, read from its syntax tree (the task is not run)."""
    try:
        with open(task_path, "rb") as f:
            tree = ast.parse(f.read().decode("utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "KFORGE" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return {}
            return value if isinstance(value, dict) else {}
    return {}


def main(argv):
    import argparse
    p = argparse.ArgumentParser(prog="kforge_worker scan")
    p.add_argument("candidate")
    p.add_argument("--task", default=None, help="the task file (its name may not be imported)")
    p.add_argument("--allow-streams", action="store_true")
    p.add_argument("--require-cuda-kernel", action="store_true")
    a = p.parse_args(argv)
    import os
    stem = os.path.splitext(os.path.basename(a.task))[0] if a.task else None
    with open(a.candidate, "rb") as f:
        raw = f.read()
    try:
        src = raw.decode("utf-8")
    except UnicodeDecodeError:
        print(json.dumps({"findings": [{"rule": "not_text", "symbol": "", "line": 0, "text": "not UTF-8 text"}]}))
        return 0
    policy = task_policy(a.task) if a.task else {}
    require = a.require_cuda_kernel or bool(policy.get("require_cuda_kernel", False))
    fs = scan_source(src, a.allow_streams, require, stem)
    print(json.dumps({"findings": [f.to_json() for f in fs]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
