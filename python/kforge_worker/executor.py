"""The executor: the only process that imports candidate code (python3 kforge_worker exec RFD WFD).

The judge (judge.py) starts it in a process group of its own, with stdout and stderr going to a
capture file and the channel (channel.py) on two inherited pipes. It holds nothing a verdict
depends on: it builds the model it is told to build, runs calls on the input slots of a shared
arena (a /dev/shm file on the CPU, a CUDA IPC allocation on the GPU) that the judge filled, copies
each output into the arena's output slot for that call and says "done" with the request's nonce.
The judge draws the inputs, owns the references, reads the outputs back itself, times from outside
and forms the verdict. What this process reports about itself (output metadata, replaced
functions, switches, threads, the kernels the profiler saw) can only add reasons for a rejection:
a candidate that silences these reports still has its outputs checked by the judge.

Two roles: "candidate" (imports the candidate file, builds ModelNew; never sees the task file)
and "baseline" (imports the trusted task, builds Model and the baselines eager, compile,
compile_ro, graph; candidate-free).
"""

import importlib.util
import io
import json
import os
import pickle
import sys
import threading
import traceback

from . import channel, guards, sandbox


def _last_line(e):
    msg = ("%s: %s" % (type(e).__name__, e)).strip()
    lines = [l for l in msg.splitlines() if l.strip()]
    return (lines[0] if lines else type(e).__name__)[:400]


def _declares_cuda(path):
    """Whether the candidate's source builds CUDA code (load_inline's cuda_sources, a __global__ kernel)."""
    try:
        with open(path, "rb") as f:
            src = f.read()
    except OSError:
        return False
    return b"cuda_sources" in src or b"__global__" in src


def _load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s as a Python module" % path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses and pickling need it; removed again after loading
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(name, None)
    return mod


class Reply(Exception):
    def __init__(self, code, why):
        super().__init__(why)
        self.code, self.why = code, why


# Functions torch itself replaces or adds when a candidate uses torch.compile: Dynamo wraps some
# with torch._disable_dynamo (the wrapper's __wrapped__ is the original) and patches
# nn.Module.__init__/__setstate__ to track mutations, with functions defined in torch's own files.
_TORCH_DIR = None


def _from_torch(obj):
    global _TORCH_DIR
    if _TORCH_DIR is None:
        import torch
        _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    code = getattr(obj, "__code__", None) or getattr(getattr(obj, "__func__", None), "__code__", None)
    if code is None:
        return isinstance(obj, (bool, int, str)) or obj is None  # Dynamo's flags and tags
    return os.path.abspath(code.co_filename).startswith(_TORCH_DIR)


def _started_by_torch(frame):
    """The first caller outside threading and concurrent.futures lies in torch's own files."""
    while frame is not None:
        f = frame.f_code.co_filename
        if not (f.endswith(os.sep + "threading.py") or (os.sep + "concurrent" + os.sep) in f):
            return _in_torch_dir(f)
        frame = frame.f_back
    return False


def _in_torch_dir(path):
    _from_torch(None)
    return os.path.abspath(path).startswith(_TORCH_DIR)


def _benign_replacement(old, new):
    return getattr(new, "__wrapped__", None) is old or _from_torch(new)


class Executor:
    def __init__(self, rfd, wfd, denied):
        self.rfd, self.wfd = rfd, wfd
        self.denied = denied
        import torch
        self.torch = torch
        self.role = None
        self.model = None
        self.contenders = {}
        self.problems = []
        self.started_threads = []

    # -------------------------------------------------------------------------------------------
    # the arena

    def open_arena(self, req):
        torch = self.torch
        a = req["arena"]
        self.bufs = {}
        for side in ("in", "out"):
            if a["kind"] == "file":
                self.bufs[side] = [torch.from_file(p, shared=True, size=a[side + "_nbytes"], dtype=torch.uint8)
                                   for p in a[side]]
            else:  # CUDA IPC handles (torch.multiprocessing reductions)
                self.bufs[side] = [pickle.loads(h) for h in a[side]]
        self.in_specs = req["inputs"]
        self.out_specs = req["outputs"]
        self.out_kind = req["out_kind"]
        self.slots = req["slots"]

    def view(self, buf, off, shape, dtype):
        torch = self.torch
        dt = getattr(torch, dtype)
        n = 1
        for s in shape:
            n *= s
        nbytes = n * torch.empty((), dtype=dt).element_size()
        return buf[off:off + nbytes].view(dt).view(shape)

    def inputs(self, slot):
        out = []
        for spec in self.in_specs:
            if spec["kind"] == "tensor":
                out.append(self.view(self.bufs["in"][slot], spec["offset"], spec["shape"], spec["dtype"]))
            else:
                out.append(spec["value"])
        return out

    def outputs(self, slot):
        return [self.view(self.bufs["out"][slot], s["offset"], s["shape"], s["dtype"]) if s["kind"] == "tensor" else None
                for s in self.out_specs]

    def output_problem(self, t, spec):
        torch = self.torch
        if type(t) is not torch.Tensor:
            return "lazy_output", "an output is a %s, not a plain torch.Tensor" % type(t).__name__
        if t.layout != torch.strided:
            return "lazy_output", "an output has layout %s" % t.layout
        want = "cuda" if self.cuda else "cpu"
        if t.is_meta or t.device.type != want:
            return "lazy_output", "an output lives on %s" % t.device
        if list(t.shape) != list(spec["shape"]) or str(t.dtype).replace("torch.", "") != spec["dtype"]:
            return "wrong_shape", "an output is %s %s, expected %s %s" % (
                str(t.dtype).replace("torch.", ""), list(t.shape), spec["dtype"], list(spec["shape"]))
        if t.numel() > 1:
            try:
                nbytes = t.untyped_storage().nbytes()
            except Exception as e:
                return "lazy_output", "an output has no real storage (%s)" % _last_line(e)
            if any(st == 0 and s > 1 for s, st in zip(t.shape, t.stride())):
                return "lazy_output", "an output is a broadcast view (stride 0): its elements are not all written"
            try:
                overlap = int(torch._debug_has_internal_overlap(t))
            except Exception:
                overlap = 0
            span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()))
            if overlap == 1 or span < t.numel():
                return "lazy_output", "an output's elements overlap in memory (as_strided): they are not all written"
            if (t.storage_offset() + span) * t.element_size() > nbytes:
                return "lazy_output", "an output's storage is smaller than the tensor"
        return None

    def store(self, out, slot):
        """Checks the structure and copies every output into the arena; the first problem is kept."""
        torch = self.torch
        if isinstance(out, (tuple, list)):
            got, kind = list(out), "tuple"
        else:
            got, kind = [out], "tensor"
        if (kind == "tensor") != (self.out_kind == "tensor") or len(got) != len(self.out_specs):
            raise Reply("wrong_shape", "the candidate returned %s of %d, the reference %s of %d" %
                        (kind, len(got), self.out_kind, len(self.out_specs)))
        values = []
        for o, spec, dst in zip(got, self.out_specs, self.outputs(slot)):
            if spec["kind"] != "tensor":
                if isinstance(o, torch.Tensor):
                    raise Reply("wrong_shape", "an output is a tensor, the reference's a %s" % spec["kind"])
                try:
                    json.dumps(o)
                except (TypeError, ValueError):
                    o = repr(o)
                values.append(o)
                continue
            p = self.output_problem(o, spec)
            if p:
                raise Reply(*p)
            if o.untyped_storage().data_ptr() == dst.untyped_storage().data_ptr():
                # written straight into the judge's buffer: the copy the baseline pays would be skipped
                raise Reply("aliased_output", "an output is the judge's own output buffer (written in place of "
                            "being returned)")
            dst.copy_(o)
            values.append(None)
        return values

    # -------------------------------------------------------------------------------------------
    # guards (the candidate's own process: they add reasons, they never clear one)

    def snapshot(self):
        torch = self.torch
        self.ids_objs = guards.identity_objects(torch)
        self.prec = guards.precision_state(torch)
        self.glob = guards.global_state(torch)
        self.py_threads = guards.python_threads()
        self.threads_seen = len(self.started_threads)
        if self.cuda:
            self.default_stream = torch.cuda.current_stream()

    def state_problems(self, when):
        torch = self.torch
        now = guards.identity_objects(torch)
        changed = sorted(k for k, o in self.ids_objs.items() if now.get(k, o) is not o
                         and not _benign_replacement(o, now.get(k)))
        added = [k for k in now if k not in self.ids_objs and guards.watched_addition(k) and not _from_torch(now[k])]
        out = []
        if changed or added:
            names = changed + ["+" + k for k in added]
            out.append(["monkey_patch", "%s: %d watched function(s) replaced, e.g. %s" %
                        (when, len(names), ", ".join(names[:4]))])
        prec = guards.precision_state(torch)
        diff = {k: [self.prec[k], prec.get(k)] for k in self.prec if guards.precision_lowered(k, self.prec[k], prec.get(k))}
        if diff:
            out.append(["precision_downgrade", "%s: precision switches changed: %s" % (when, diff)])
        glob = guards.global_state(torch)
        gdiff = {k: [self.glob[k], glob.get(k)] for k in self.glob
                 if glob.get(k) != self.glob[k] and k not in guards.CANDIDATE_MAY_SET}
        if gdiff:
            out.append(["monkey_patch", "%s: global switches changed: %s" % (when, gdiff)])
        threads = guards.python_threads()
        recent = self.started_threads[self.threads_seen:]
        torch_named = {n for n, by_torch in self.started_threads if by_torch}
        new = sorted({n for i, n in threads.items() if i not in self.py_threads and n not in torch_named} |
                     {n for n, by_torch in recent if not by_torch})
        if new:
            out.append(["background_thread", "%s: the candidate started Python thread(s): %s" % (when, ", ".join(new))])
        if self.cuda and torch.cuda.current_stream() != self.default_stream:
            out.append(["side_stream", "%s: the candidate left another stream current" % when])
        return out

    # -------------------------------------------------------------------------------------------
    # requests

    def classify(self, e, when):
        torch = self.torch
        text = str(e)
        if isinstance(e, getattr(torch.cuda, "OutOfMemoryError", ())) or "out of memory" in text:
            return "out_of_memory", "%s: %s" % (when, _last_line(e))
        if self.cuda and ("CUDA error" in text or "CUDA kernel errors" in text or "cudaError" in text or
                          "illegal" in text or "CUBLAS_STATUS" in text or "device-side assert" in text):
            return "cuda_error", "%s: %s" % (when, _last_line(e))
        return "candidate_error", "%s: %s" % (when, _last_line(e))

    def load_state(self, m, state_bytes):
        torch = self.torch
        if not state_bytes or not isinstance(m, torch.nn.Module):
            return False
        state = torch.load(io.BytesIO(state_bytes), weights_only=True)
        mine = m.state_dict()
        if mine.keys() != state.keys() or any(tuple(mine[k].shape) != tuple(state[k].shape) for k in state):
            return False
        with torch.no_grad():
            m.load_state_dict(state)
        return True

    def build(self, cls, req):
        torch = self.torch
        init = torch.load(io.BytesIO(req["init"]), weights_only=True)
        torch.manual_seed(req["seed"])
        m = cls(*init)
        if isinstance(m, torch.nn.Module):
            m = m.to(self.device)
        loaded = self.load_state(m, req.get("state"))
        if isinstance(m, torch.nn.Module):
            m = m.to(self.device)
        return m, loaded

    def op_init(self, req):
        torch = self.torch
        self.role = req["role"]
        self.device = req["device"]
        self.cuda = self.device.startswith("cuda")
        if self.cuda:
            torch.cuda.init()
        self.open_arena(req)
        if self.role == "baseline":
            return self.init_baseline(req)
        return self.init_candidate(req)

    def init_candidate(self, req):
        torch = self.torch
        # warm the runtime's own threads before counting threads
        torch.ones(1 << 16).sum()
        if self.cuda:
            torch.ones(16, device=self.device).sum().item()

        # Every Python thread started from now on is recorded with where it was started from: one
        # started by torch's own code (Inductor's compile pool for a torch.compile candidate) is not
        # the candidate's background thread.
        orig_start = threading.Thread.start
        record = self.started_threads

        def start(th, *a, **k):
            record.append((th.name, _started_by_torch(sys._getframe(1))))
            return orig_start(th, *a, **k)

        threading.Thread.start = start
        # The candidate starts from the precision the reference runs at (torch's defaults allow TF32
        # in cuDNN's convolutions: an honest conv candidate would run below the task's declared
        # precision without asking for it); any switch it lowers from here is precision_downgrade.
        guards.set_full_precision(torch)
        self.snapshot()
        try:
            self.cand = _load_module(req["candidate"], "kforge_candidate")
        except Exception as e:
            text = str(e)
            if "Error building extension" in text or "ninja" in text.lower() or type(e).__name__ == "CalledProcessError":
                raise Reply("compile_error", "building the candidate's extension failed: %s" % _last_line(e))
            code, why = self.classify(e, "importing the candidate")
            if not self.cuda and _declares_cuda(req["candidate"]):
                # torch's extension builder fails on a machine without CUDA in ways that name no
                # cause (an IndexError from its architecture list): say what is wrong.
                raise Reply("load_error", "a CUDA candidate needs a GPU: it builds CUDA code (cuda_sources or a "
                            "__global__ kernel) and this evaluation runs on the CPU (--device cpu); judge it with "
                            "--device cuda on a GPU machine (%s)" % why)
            raise Reply("load_error" if code == "candidate_error" else code, why)
        if not hasattr(self.cand, "ModelNew"):
            raise Reply("missing_entry_point", "the candidate defines no ModelNew")
        loaded = self.rebuild(req)
        return {"weights_loaded": loaded, "problems": self.state_problems("importing the candidate")}

    def rebuild(self, req):
        torch = self.torch
        try:
            self.model, loaded = self.build(self.cand.ModelNew, req)
        except Reply:
            raise
        except Exception as e:
            raise Reply(*self.classify(e, "building ModelNew"))
        if not callable(self.model):
            raise Reply("missing_entry_point", "ModelNew(...) is not callable")
        if self.cuda:
            torch.cuda.synchronize()
        return loaded

    def init_baseline(self, req):
        torch = self.torch
        guards.set_full_precision(torch)
        task = _load_module(req["task"], "kforge_task")
        self.ref, _ = self.build(task.Model, req)
        info = {"eager": "available"}
        ref = self.ref
        self.contenders["eager"] = ref
        for name in req.get("baselines", []):
            if name == "eager":
                continue
            try:
                if name in ("compile", "compile_ro"):
                    self.contenders[name] = (torch.compile(ref, mode="reduce-overhead") if name == "compile_ro"
                                             else torch.compile(ref))
                    info[name] = "available"
                elif name == "graph":
                    if not self.cuda:
                        raise RuntimeError("CUDA graphs need a CUDA device")
                    self.graphs = self.capture_graphs()
                    info[name] = "available"
                else:
                    raise ValueError("unknown baseline '%s'" % name)
            except Exception as e:
                info[name] = "unavailable: %s" % _last_line(e)
                try:
                    torch.cuda.synchronize() if self.cuda else None
                except Exception:
                    pass
        return {"baselines": info}

    def capture_graphs(self):
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(2):
                self.store(self.ref(*self.inputs(0)), 0)
        torch.cuda.current_stream().wait_stream(side)
        graphs, pool = [], None
        for slot in range(self.slots):
            g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(g, pool=pool):
                self.store(self.ref(*self.inputs(slot)), slot)
            pool = g.pool()
            graphs.append(g)
        torch.cuda.synchronize()
        return graphs

    def op_reinit(self, req):
        torch = self.torch
        if self.role == "baseline":
            # in place, so that compiled and captured baselines keep their parameter addresses
            state = torch.load(io.BytesIO(req["state"]), weights_only=True) if req.get("state") else None
            if state is not None:
                with torch.no_grad():
                    for k, v in self.ref.state_dict().items():
                        v.copy_(state[k])
            if self.cuda:
                torch.cuda.synchronize()
            return {}
        loaded = self.rebuild(req)
        return {"weights_loaded": loaded, "problems": self.state_problems("building ModelNew")}

    def op_run(self, req):
        torch = self.torch
        target = req.get("target", "candidate")
        calls = req["calls"]
        values = {}
        prof = None
        if req.get("profile") and self.cuda:
            from torch.profiler import ProfilerActivity, profile
            prof = profile(activities=[ProfilerActivity.CUDA])
            prof.__enter__()
        try:
            with torch.no_grad():
                for slot in calls:
                    if target == "graph":
                        self.graphs[slot].replay()
                        continue
                    f = self.model if target == "candidate" else self.contenders[target]
                    out = f(*self.inputs(slot))
                    v = self.store(out, slot)
                    if any(x is not None for x in v):
                        values[str(slot)] = v
            if self.cuda:
                torch.cuda.synchronize()
        except Reply:
            raise
        except Exception as e:
            raise Reply(*self.classify(e, "a call" if target == "candidate" else "baseline %s" % target))
        finally:
            kernels = None
            if prof is not None:
                try:
                    prof.__exit__(None, None, None)
                    totals = {}
                    for ev in prof.events():
                        if not str(getattr(ev, "device_type", "")).endswith("CUDA"):
                            continue
                        try:
                            us = float(ev.time_range.elapsed_us())
                        except Exception:
                            us = 0.0
                        totals[ev.name] = totals.get(ev.name, 0.0) + us
                    kernels = sorted(([k, round(t, 1)] for k, t in totals.items()), key=lambda kt: -kt[1])
                except Exception as e:
                    kernels = [["<profiler failed: %s>" % _last_line(e), 0.0]]
        out = {"values": values}
        if kernels is not None:
            out["kernels"] = kernels[:200]
        return out  # the snapshots are compared in a request of their own ("state"), outside the timed batch

    def serve(self):
        while True:
            try:
                req = pickle.loads(channel.read_frame(self.rfd))
            except (channel.ChannelError, EOFError, OSError):
                os._exit(0)
            nonce = req.get("nonce")
            try:
                op = req["op"]
                if op == "ping":
                    rep = {}
                elif op == "init":
                    rep = self.op_init(req)
                    rep["seccomp"] = self.denied
                elif op == "reinit":
                    rep = self.op_reinit(req)
                elif op == "run":
                    rep = self.op_run(req)
                elif op == "state":
                    rep = {"problems": self.state_problems("a call") if self.role == "candidate" else []}
                elif op == "exit":
                    os._exit(0)
                else:
                    raise Reply("internal_error", "unknown request '%s'" % op)
                rep["ok"] = True
            except Reply as r:
                rep = {"ok": False, "code": r.code, "why": r.why}
            except SystemExit as e:
                rep = {"ok": False, "code": "crashed", "why": "candidate code called exit(%s)" % (e.code,)}
            except BaseException as e:  # noqa: B036 - whatever candidate code raises, report it
                rep = {"ok": False, "code": "internal_error" if self.role == "baseline" else "candidate_error",
                       "why": _last_line(e), "traceback": traceback.format_exc()[-3000:]}
            rep["nonce"] = nonce
            sys.stdout.flush()
            sys.stderr.flush()
            channel.write_frame(self.wfd, json.dumps(rep, default=str).encode("utf-8"))


def main(argv):
    rfd, wfd = int(argv[0]), int(argv[1])
    sandbox.die_with_parent()
    # Non-dumpable: another process of the user (the candidate's, for the baseline executor) can
    # neither write this one's memory through /proc/PID/mem nor open its descriptors.
    sandbox.non_dumpable()
    # No capabilities (kforge run as root): CAP_SYS_PTRACE would open the judge's /proc entries.
    sandbox.drop_capabilities()
    denied = sandbox.install_seccomp()
    quiet_progress_bars()
    Executor(rfd, wfd, denied).serve()
    return 0


def quiet_progress_bars():
    """tqdm (which torch.compile's Inductor and other installed libraries may use) starts a monitor
    thread, "tqdm_monitor", with its first progress bar: the judge would see a thread started by a
    call (background_thread) in an honest torch.compile candidate. No bars and no monitor here: the
    executor's output is not a terminal anyway. (A thread of the candidate's own is still seen,
    whatever its name.)"""
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        import tqdm
        tqdm.tqdm.monitor_interval = 0
    except Exception:
        pass
