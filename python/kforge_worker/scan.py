"""Static scan of a PyTorch candidate (a KernelBench-format module defining ModelNew).

Python code is scanned through its syntax tree (comments never count, aliases are followed); the
C++/CUDA sources a candidate passes to load_inline are the string constants of the module, scanned
as the C++ scan of CUDA candidates (src/eval/static_scan.cpp) scans them: comments and literals
blanked, identifiers matched whole. Needs no torch. Each finding quotes its line.

Every rule lives in data/scan-rules.json, the one file both scanners read (the C++ one embeds it at
build time): its "cpp" rules say which scanner each applies to ("cuda": a CUDA candidate file,
"torch": the C++ inside a PyTorch candidate), its "python" tables are the ones below. The same
sample gives the same findings in both (tests/corpus/scan/agreement.*).

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
  device_settings      cudaDeviceSetLimit, persisting-L2 windows, cudaDeviceReset, cudaSetDevice in C++
  device_sync          cudaDeviceSynchronize, cuCtxSynchronize in C++
  no_cuda_kernel       (policy require_cuda_kernel) no __global__ kernel compiled through cpp_extension
  aten_compute         (policy require_cuda_kernel) ATen compute ops called from C++ (at::matmul, ...)
"""

import ast
import json
import os
import re
import sys


# -- the rules: data/scan-rules.json, the one file both scanners read (src/eval/static_scan.cpp
# embeds it at build time). $KFORGE_SCAN_RULES names another file; $KFORGE_DATA_DIR another folder.

def _rules_path():
    if os.environ.get("KFORGE_SCAN_RULES"):
        return os.environ["KFORGE_SCAN_RULES"]
    data = os.environ.get("KFORGE_DATA_DIR")
    if data and os.path.isfile(os.path.join(data, "scan-rules.json")):
        return os.path.join(data, "scan-rules.json")
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "data", "scan-rules.json")


def _load_rules():
    with open(_rules_path(), "rb") as f:
        return json.loads(f.read().decode("utf-8"))


RULES = _load_rules()
_PY = RULES["python"]

FORBIDDEN_MODULES = dict(_PY["modules"])      # import of the module (its root name) -> rule
OS_ATTRS = dict(_PY["os_attrs"])              # os.X -> rule
OS_PREFIXES = dict(_PY["os_prefixes"])        # os.X... -> rule
SYS_ATTRS = dict(_PY["sys_attrs"])            # sys.X -> rule
BUILTIN_CALLS = dict(_PY["builtin_calls"])    # X() of a built-in -> rule
DUNDER_ATTRS = set(_PY["dunder_attrs"])       # .X anywhere -> introspection
# Dotted names (after alias resolution), matched as prefixes; the first match decides (None: allowed).
DOTTED = [(name, rule) for name, rule in _PY["dotted"]]
PRECISION_WORDS = set(_PY["precision_words"])  # .X or a call of X -> precision_settings
# Module attributes a candidate may assign (after alias resolution, exact names): switches of its
# own process that change no precision (guards.CANDIDATE_MAY_SET is the run-time side).
SETTABLE = set(_PY.get("settable", []))
ATEN_COMPUTE = re.compile(_PY["aten_compute"])  # policy require_cuda_kernel: ATen compute from C++


def cpp_rules(scanner):
    """The C++ rules of one scanner ("cuda" or "torch"), grouped by how they match."""
    by = {m: [] for m in ("word", "call", "free_call", "prefix", "std", "namespace", "qualified",
                          "include_name", "include_dir")}
    for e in RULES["cpp"]:
        if scanner in e["scanners"]:
            by[e["match"]].append((e["pattern"], e["rule"]))
    return by


_CPP_RULES = {"cuda": cpp_rules("cuda"), "torch": cpp_rules("torch")}

# -- C++ text as src/eval/static_scan.cpp sees it: comments and the contents of string and character
# literals blanked (strings of asm(...) kept: "rdtsc" can only be spelled there), numbers turned into
# zeros, #include directives recorded; then tokens (identifiers, "::", single characters).

_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _is_ident(c):
    return c.isascii() and (c.isalnum() or c == "_")


def _blank_cpp(src):
    """(blanked text with newlines kept, [(offset, header as written)]) of spliced C++ source."""
    b = list(src)
    includes = []
    n = len(src)
    i = 0
    line_start = True
    asm_pending = False
    asm_depth = 0

    def blank(a, z):
        for k in range(a, min(z, n)):
            if b[k] != "\n":
                b[k] = " "

    def quoted(quote, open_at):
        k = open_at + 1
        while k < n and src[k] != quote and src[k] != "\n":
            k += 2 if src[k] == "\\" else 1
        k = min(k, n)
        if not (quote == '"' and asm_depth > 0):
            blank(open_at + 1, k)
        return k + 1 if k < n and src[k] == quote else k

    while i < n:
        c = src[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        was_line_start, line_start = line_start, False
        if src.startswith("//", i):
            end = src.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif src.startswith("/*", i):
            end = src.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
            line_start = was_line_start
        elif c == "#" and was_line_start:
            hash_at = i
            k = i + 1
            while k < n and src[k] in " \t":
                k += 1
            m = _IDENT.match(src, k)
            name_end = m.end() if m else k
            i = k
            if m and m.group(0) in ("include", "include_next", "import"):
                k = name_end
                while k < n and src[k] in " \t":
                    k += 1
                if k < n and src[k] in "<\"":
                    close = ">" if src[k] == "<" else '"'
                    end = k + 1
                    while end < n and src[end] != close and src[end] != "\n":
                        end += 1
                    if end < n and src[end] == close:
                        includes.append((hash_at, src[k:end + 1]))
                        blank(k + 1, end)
                        i = end + 1
                        continue
                i = name_end
        elif c in "\"'":
            i = quoted(c, i)
            asm_pending = False
        elif c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            k = i
            while k < n:
                d = src[k]
                if d in "+-" and k > i and src[k - 1] in "eEpP":
                    k += 1
                elif _is_ident(d) or d == ".":
                    k += 1
                elif d == "'" and k + 1 < n and _is_ident(src[k + 1]):
                    k += 2
                else:
                    break
            for q in range(i, min(k, n)):
                b[q] = "0"
            i = k
            asm_pending = False
        elif _is_ident(c):
            m = _IDENT.match(src, i)
            word = m.group(0) if m else c
            k = i + len(word)
            i = k
            nxt = src[k] if k < n else ""
            if nxt == '"' and word in ("R", "u8R", "uR", "UR", "LR"):
                k2 = k + 1
                delim = ""
                while k2 < n and src[k2] != "(" and len(delim) <= 16 and src[k2] not in " )\\\t\n\"":
                    delim += src[k2]
                    k2 += 1
                if k2 < n and src[k2] == "(" and len(delim) <= 16:
                    close = ")" + delim + '"'
                    end = src.find(close, k2 + 1)
                    quote_at = n if end < 0 else end + len(close) - 1
                    if asm_depth == 0:
                        blank(k + 1, quote_at)
                    i = min(quote_at + 1, n)
                else:
                    i = quoted('"', k)
                asm_pending = False
                continue
            if nxt in "\"'" and nxt and word in ("u8", "u", "U", "L"):
                i = quoted(nxt, k)
                asm_pending = False
                continue
            if word in ("asm", "__asm__", "__asm"):
                asm_pending = True
            elif not (asm_pending and word in ("volatile", "__volatile__", "goto", "inline")):
                asm_pending = False
        else:
            if c == "(":
                if asm_pending:
                    asm_depth = 1
                elif asm_depth > 0:
                    asm_depth += 1
            elif c == ")" and asm_depth > 0:
                asm_depth -= 1
            asm_pending = False
            i += 1
    return "".join(b), includes


def _splice(src):
    """Backslash-newline pairs removed; (text, line of every character, 1-based)."""
    out, lines = [], []
    line = 1
    i, n = 0, len(src)
    while i < n:
        if src[i] == "\\":
            j = i + 1
            if j < n and src[j] == "\r":
                j += 1
            if j < n and src[j] == "\n":
                line += 1
                i = j + 1
                continue
        out.append(src[i])
        lines.append(line)
        if src[i] == "\n":
            line += 1
        i += 1
    return "".join(out), lines


def _tokens(b):
    toks = []
    i, n = 0, len(b)
    while i < n:
        c = b[i]
        if c.isspace():
            i += 1
        elif c.isascii() and (c.isalpha() or c == "_"):
            m = _IDENT.match(b, i)
            toks.append((m.group(0), i, True))
            i = m.end()
        elif c.isdigit():
            while i < n and _is_ident(b[i]):
                i += 1
        elif b.startswith("::", i):
            toks.append(("::", i, False))
            i += 2
        else:
            toks.append((c, i, False))
            i += 1
    return toks


def cpp_findings(source, scanner="torch", allow_streams=False):
    """[(line, rule, symbol)] of C++/CUDA source under one scanner's rules, in source order, each
    (line, rule, symbol) once: what src/eval/static_scan.cpp reports for the same text."""
    rules = _CPP_RULES[scanner]
    text, line_of = _splice(source)
    blanked, includes = _blank_cpp(text)
    hits = []
    for pos, header in includes:
        path = header[1:-1]
        fname = path.rsplit("/", 1)[-1]
        rule = next((r for p, r in rules["include_name"] if fname.startswith(p)), None)
        if rule is None:
            rule = next((r for p, r in rules["include_dir"] if path.startswith(p)), None)
        if rule:
            hits.append((pos, rule, "#include " + header))
    toks = _tokens(blanked)

    def tok_is(k, t):
        return k < len(toks) and toks[k][0] == t

    for t, (w, pos, ident) in enumerate(toks):
        if not ident:
            continue
        if t >= 2 and toks[t - 1][0] == "::" and toks[t - 2][0] == "std":
            matched = [r for p, r in rules["std"] if w == p]
            for r in matched:
                hits.append((toks[t - 2][1], r, "std::" + w))
            if matched:
                continue
        if tok_is(t + 1, "::"):
            for p, r in rules["namespace"]:
                if w == p:
                    hits.append((pos, r, w + "::"))
        for p, r in rules["qualified"]:
            parts = p.split("::")
            ok = True
            for k, part in enumerate(parts):
                at = t + 2 * k
                last = k + 1 == len(parts)
                ok = (at < len(toks) and toks[at][2] and
                      (toks[at][0].startswith(part) if last else toks[at][0] == part) and
                      (last or tok_is(at + 1, "::")))
                if not ok:
                    break
            if ok:
                hits.append((pos, r, "::".join(toks[t + 2 * k][0] for k in range(len(parts)))))
        for p, r in rules["word"]:
            if w == p:
                hits.append((pos, r, w))
        if tok_is(t + 1, "("):
            for p, r in rules["call"]:
                if w == p:
                    hits.append((pos, r, w))
            member = (t >= 1 and toks[t - 1][0] == ".") or (t >= 2 and toks[t - 1][0] == ">" and toks[t - 2][0] == "-")
            if not member:
                for p, r in rules["free_call"]:
                    if w == p:
                        hits.append((pos, r, w))
        for p, r in rules["prefix"]:
            if w.startswith(p):
                hits.append((pos, r, w))
    hits.sort(key=lambda h: h[0])  # stable: the order of the rules within one position
    out, seen = [], set()
    for pos, rule, symbol in hits:
        if rule == "stream_creation" and allow_streams:
            continue
        key = (line_of[pos], rule, symbol)
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


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


def _dotted_rule(full):
    """The first rule of DOTTED that `full` falls under: (True, rule), rule None where it allows
    the name; (False, None) where none does."""
    for prefix, rule in DOTTED:
        if full == prefix or full.startswith(prefix + "."):
            return True, rule
    return False, None


def _allowed_dotted(full):
    """Whether the first rule of DOTTED that `full` falls under allows it (rule null)."""
    matched, rule = _dotted_rule(full)
    return matched and rule is None


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
        matched, rule = _dotted_rule(full)
        if matched:
            self.add(rule, full, node)
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
        # A name the rules allow (rule null, e.g. torch.backends.cudnn.benchmark) is not searched
        # again through its prefixes (torch.backends: precision_settings): the chain holds nothing
        # but those names.
        if full is not None and _allowed_dotted(full):
            return
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
                if self.resolve(d) not in SETTABLE:
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
        # string constants start on their own line; good enough to find it
        for line_in, rule, symbol in cpp_findings(value, "torch", scanner.allow_streams):
            scanner.add(rule, symbol, line0 + line_in - 1)
        if require_cuda_kernel:
            for lineno_in, l in enumerate(text.split("\n")):
                m = ATEN_COMPUTE.search(l)
                if m:
                    scanner.add("aten_compute", m.group(0).rstrip("( "), line0 + lineno_in)
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


def decode_source(raw):
    """Source bytes as Python itself reads them (PEP 263: a BOM or a coding declaration, else
    UTF-8), or None when they are not text in that encoding."""
    import importlib.util
    try:
        return importlib.util.decode_source(raw)
    except (SyntaxError, UnicodeDecodeError, LookupError, ValueError):
        return None


def task_policy(task_path):
    """The task's KFORGE = {...} declaration, read from its syntax tree (the task is not run)."""
    try:
        with open(task_path, "rb") as f:
            text = decode_source(f.read())
        if text is None:
            return {}
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
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
    src = decode_source(raw)
    if src is None:
        print(json.dumps({"findings": [{"rule": "not_text", "symbol": "", "line": 0,
                                        "text": "not text in its declared encoding (UTF-8 unless a PEP 263 coding line says otherwise)"}]}))
        return 0
    policy = task_policy(a.task) if a.task else {}
    require = a.require_cuda_kernel or bool(policy.get("require_cuda_kernel", False))
    fs = scan_source(src, a.allow_streams, require, stem)
    print(json.dumps({"findings": [f.to_json() for f in fs]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
