"""One PyTorch candidate against one KernelBench-format task: the order of the checks.

  import torch -> full-precision switches -> load the task (Model, get_inputs, get_init_inputs)
  -> state snapshots -> [phase loading] import the candidate in its own build folder [phase loaded]
  -> identities, precision and threads compared -> both models built from the same seed (the
  reference's weights copied when the parameter sets match) -> verification: several trials with
  fresh inputs, candidate and reference in both orders, allocator blocks poisoned with NaN before
  each candidate call, outputs plain dense tensors that alias no input, shapes and dtypes equal,
  values within the dtype's tolerance, no NaN, inputs unchanged, state snapshots unchanged after
  every call -> timing: a pool of input sets refreshed in place every round (a cache keyed on
  pointers returns stale results), candidate and baselines (eager, torch.compile, reduce-overhead,
  CUDA graph) in a random order per round, each batch bracketed by device-wide synchronisation
  (the result) and by events on the current stream (the cross-check: work the events miss ran on
  another stream), every timed output of the candidate re-checked against the eager outputs of
  the same round, inputs checksummed around each round.

Exceptions raised by candidate code become verdicts; anything else is kforge's own fault
(internal_error). A CUDA error that survives a synchronisation is sticky: the verdict says
"fatal" and the worker exits so that the C++ side starts a fresh one.
"""

import hashlib
import importlib.util
import math
import os
import random
import sys
import threading
import time
import traceback

from . import guards
from .verdict import Verdict, summarize

_perf = time.perf_counter  # captured before any candidate code runs


class Fatal(Exception):
    def __init__(self, code, why):
        super().__init__(why)
        self.code, self.why = code, why


class Rejected(Exception):
    """A verdict is decided; stop judging."""


def _last_line(e):
    msg = ("%s: %s" % (type(e).__name__, e)).strip()
    lines = [l for l in msg.splitlines() if l.strip()]
    return (lines[0] if lines else type(e).__name__)[:400]


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


def source_hash(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


class Judge:
    def __init__(self, req, send_phase, torch):
        self.req = req
        self.send_phase = send_phase
        self.torch = torch
        self.v = Verdict(req.get("name") or req.get("candidate", "?"))
        self.device = req.get("device", "cuda")
        self.cuda = self.device.startswith("cuda")
        self.seed = int(req.get("seed", 1))
        self.trials = int(req.get("trials", 5))
        self.samples = int(req.get("samples", 10))
        self.rng = random.Random(self.seed * 7919 + 17)
        self.details = self.v.d["details"]
        self.checks = self.details.setdefault("checks", {})
        # What the judge itself calls, captured before any candidate code runs.
        self._sync = torch.cuda.synchronize
        self._Event = torch.cuda.Event
        self.started_threads = []

    # ------------------------------------------------------------------------------------------
    # helpers

    def sync(self):
        if self.cuda:
            self._sync()

    def cuda_failure(self, e, when):
        """Classifies an exception raised by candidate code; raises Fatal when the context is gone."""
        torch = self.torch
        if isinstance(e, getattr(torch.cuda, "OutOfMemoryError", ())) or "out of memory" in str(e):
            try:
                torch.cuda.empty_cache()
            except Exception:
                pass
            return "out_of_memory", "%s: %s" % (when, _last_line(e))
        text = str(e)
        if self.cuda and ("CUDA error" in text or "CUDA kernel errors" in text or "cudaError" in text or
                          "illegal" in text or "CUBLAS_STATUS" in text or "device-side assert" in text):
            try:
                torch.cuda.synchronize()
            except Exception as e2:
                raise Fatal("cuda_error", "%s: %s (sticky: %s)" % (when, _last_line(e), _last_line(e2)))
            return "cuda_error", "%s: %s" % (when, _last_line(e))
        return "candidate_error", "%s: %s" % (when, _last_line(e))

    def watching_reference(self, fn, when):
        """Runs candidate code with the task's Model.forward replaced by a counting wrapper: a
        candidate that finds the reference (through the garbage collector, a class it was handed)
        and calls it is caught, whichever instance it uses."""
        Model = self.task.Model
        orig = Model.__dict__.get("forward")
        if orig is None:
            return fn()
        hits = [0]

        def counting_forward(*args, **kwargs):
            hits[0] += 1
            return orig(*args, **kwargs)

        Model.forward = counting_forward
        try:
            return fn()
        finally:
            Model.forward = orig
            if hits[0]:
                self.v.reject("forbidden_call", "%s: the candidate called the task's reference Model (%d time(s))" %
                              (when, hits[0]))

    def call_candidate(self, inputs, when):
        torch = self.torch
        try:
            with torch.no_grad():
                out = self.watching_reference(lambda: self.new(*inputs), when)
            self.sync()
        except Fatal:
            raise
        except Exception as e:
            code, why = self.cuda_failure(e, when)
            self.v.reject(code, why)
            raise Rejected()
        self.check_state(when)
        return out

    def check_state(self, when):
        """Identities, precision switches, threads and the current stream, after candidate code ran."""
        torch, v = self.torch, self.v
        changes = guards.identity_changes(self.ids, guards.identity_snapshot(torch, self.extra_ids))
        if changes:
            self.details["patched"] = changes[:40]
            v.reject("monkey_patch", "%s: %d watched function(s) replaced, e.g. %s" % (when, len(changes), ", ".join(changes[:4])))
        prec = guards.precision_state(torch)
        diff = {k: [self.prec[k], prec.get(k)] for k in self.prec if prec.get(k) != self.prec[k]}
        if diff:
            self.details["precision_changed"] = diff
            v.reject("precision_downgrade", "%s: precision switches changed: %s" % (when, diff))
        glob = guards.global_state(torch)
        gdiff = {k: [self.glob[k], glob.get(k)] for k in self.glob if glob.get(k) != self.glob[k]}
        if gdiff:
            self.details["global_state_changed"] = gdiff
            v.reject("monkey_patch", "%s: global switches changed: %s" % (when, gdiff))
        threads = guards.python_threads()
        new = {i: n for i, n in threads.items() if i not in self.py_threads}
        for i, n in enumerate(self.started_threads[self.threads_seen:]):
            new.setdefault(-1 - i, n)  # started and already finished
        if new:
            names = sorted(set(new.values()))
            self.details["new_threads"] = names
            v.reject("background_thread", "%s: the candidate started Python thread(s): %s" % (when, ", ".join(names)))
        if self.cuda:
            cur = torch.cuda.current_stream()
            if cur != self.default_stream:
                v.reject("side_stream", "%s: the candidate left stream %s current" % (when, cur))
        if v.d["reasons"]:
            raise Rejected()

    def resnapshot(self):
        torch = self.torch
        self.ids = guards.identity_snapshot(torch, self.extra_ids)
        self.prec = guards.precision_state(torch)
        self.glob = guards.global_state(torch)
        self.py_threads = guards.python_threads()
        self.threads_seen = len(self.started_threads)

    def make_inputs(self, seed):
        torch = self.torch
        torch.manual_seed(seed)
        try:
            # Factory calls without a device (torch.randn(...)) create the tensors on the device
            # directly: fast enough to draw fresh inputs for every timed call.
            with torch.device(self.device):
                raw = self.task.get_inputs()
        except Exception as e:
            self.v.reject("task_error", "get_inputs() raised %s" % _last_line(e))
            raise Rejected()
        out = []
        for x in raw:
            out.append(x.to(self.device) if isinstance(x, torch.Tensor) else x)
        return out

    def clone_inputs(self, inputs):
        torch = self.torch
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]

    def checksum(self, inputs):
        """A private copy of every input tensor (compared bit for bit by same())."""
        torch = self.torch
        return [x.detach().clone() if isinstance(x, torch.Tensor) else repr(x) for x in inputs]

    def same(self, inputs, copies):
        torch = self.torch
        for x, c in zip(inputs, copies):
            if isinstance(x, torch.Tensor):
                if x.shape != c.shape or x.dtype != c.dtype:
                    return False
                a = x.detach().contiguous().view(-1).view(torch.uint8)
                b = c.contiguous().view(-1).view(torch.uint8)
                if not torch.equal(a, b):
                    return False
            elif repr(x) != c:
                return False
        return True

    # ------------------------------------------------------------------------------------------
    # outputs

    def flatten(self, out, where):
        if isinstance(out, (tuple, list)):
            return list(out), type(out).__name__
        return [out], "tensor"

    def output_problem(self, t, inputs):
        """Why `t` is not a plain dense tensor with its own storage (None when it is)."""
        torch = self.torch
        if type(t) is not torch.Tensor:
            return "lazy_output", "an output is a %s, not a plain torch.Tensor" % type(t).__name__
        if t.layout != torch.strided:
            return "lazy_output", "an output has layout %s" % t.layout
        if t.is_meta or t.device.type != ("cuda" if self.cuda else "cpu"):
            return "lazy_output", "an output lives on %s" % t.device
        try:
            st = t.untyped_storage()
            nbytes = st.nbytes()
        except Exception as e:
            return "lazy_output", "an output has no real storage (%s)" % _last_line(e)
        if t.numel() > 0:
            span = 1 + sum((s - 1) * abs(st_) for s, st_ in zip(t.shape, t.stride()))
            if any(st_ == 0 and s > 1 for s, st_ in zip(t.shape, t.stride())):
                return "lazy_output", "an output is a broadcast view (stride 0): its elements are not all written"
            if t.storage_offset() * t.element_size() + span * t.element_size() > nbytes:
                return "lazy_output", "an output's storage is smaller than the tensor"
            lo, hi = t.data_ptr(), t.data_ptr() + span * t.element_size()
            for x in inputs:
                if isinstance(x, torch.Tensor) and x.numel() > 0:
                    xs = x.untyped_storage()
                    if lo < xs.data_ptr() + xs.nbytes() and xs.data_ptr() < hi:
                        return "aliased_output", "an output shares memory with an input"
        return None

    def tolerance(self, dtype):
        torch = self.torch
        atol, rtol = self.req.get("atol"), self.req.get("rtol")
        decl = getattr(self.task, "KFORGE", {}) if isinstance(getattr(self.task, "KFORGE", None), dict) else {}
        if atol is None:
            atol = decl.get("atol")
        if rtol is None:
            rtol = decl.get("rtol")
        if dtype in (torch.float16, torch.bfloat16):
            d = 1e-2
        elif dtype == torch.float64:
            d = 1e-7
        else:
            d = 1e-4
        return (float(atol) if atol is not None else d), (float(rtol) if rtol is not None else d)

    def compare(self, outs, refs, inputs, when, code="wrong_result"):
        """Structure, plain tensors, shapes, dtypes, values. Rejects and raises on the first failure."""
        torch, v = self.torch, self.v
        o_list, o_kind = self.flatten(outs, when)
        r_list, r_kind = self.flatten(refs, when)
        if len(o_list) != len(r_list) or (r_kind == "tensor") != (o_kind == "tensor"):
            v.reject("wrong_shape", "%s: the candidate returned %s of %d, the reference %s of %d" %
                     (when, o_kind, len(o_list), r_kind, len(r_list)))
            raise Rejected()
        worst = {}
        for i, (o, r) in enumerate(zip(o_list, r_list)):
            if not isinstance(r, torch.Tensor):
                if o != r:
                    v.reject(code, "%s: output %d is %r, expected %r" % (when, i, o, r))
                    raise Rejected()
                continue
            p = self.output_problem(o, inputs)
            if p:
                v.reject(p[0], "%s: %s" % (when, p[1]))
                raise Rejected()
            if tuple(o.shape) != tuple(r.shape) or o.dtype != r.dtype:
                v.reject("wrong_shape", "%s: output %d is %s %s, expected %s %s" %
                         (when, i, str(o.dtype).replace("torch.", ""), list(o.shape),
                          str(r.dtype).replace("torch.", ""), list(r.shape)))
                raise Rejected()
            if o.numel() == 0:
                continue
            if not (r.is_floating_point() or r.is_complex()):
                bad = int((o != r).sum().item())
                if bad:
                    v.reject(code, "%s: output %d differs in %d of %d elements (exact dtype)" % (when, i, bad, o.numel()))
                    raise Rejected()
                continue
            if not bool(torch.isfinite(r).all().item()):
                v.reject("task_error", "%s: the reference's output %d holds NaN or Inf" % (when, i))
                raise Rejected()
            nonfinite = int((~torch.isfinite(o)).sum().item())
            if nonfinite:
                v.reject(code, "%s: output %d holds %d NaN/Inf element(s) of %d (NaN never passes)" %
                         (when, i, nonfinite, o.numel()))
                raise Rejected()
            atol, rtol = self.tolerance(r.dtype)
            od, rd = o.detach().double(), r.detach().double()
            err = (od - rd).abs()
            allowed = atol + rtol * rd.abs()
            nbad = int((err > allowed).sum().item())
            max_abs = float(err.max().item())
            idx = int((err - allowed).argmax().item())
            worst = {"max_abs_err": max_abs, "atol": atol, "rtol": rtol}
            if nbad:
                v.reject(code, "%s: output %d: %d of %d elements outside atol %g / rtol %g (max abs error %.3g; "
                         "at flat index %d got %.6g, expected %.6g)" %
                         (when, i, nbad, o.numel(), atol, rtol, max_abs, idx, od.view(-1)[idx].item(), rd.view(-1)[idx].item()))
                raise Rejected()
        return worst

    def poison_allocator(self, refs):
        """NaN-filled blocks of each output's size, freed at once: the caching allocator hands them
        to the candidate's next allocations of that size, so an output that is never written
        (torch.empty returned as is, or memory that once held the reference's result) reads NaN."""
        if not self.cuda:
            return
        torch = self.torch
        blocks = []
        for r in self.flatten(refs, "")[0]:
            if isinstance(r, torch.Tensor) and r.numel() > 0:
                dt = r.dtype if r.is_floating_point() else torch.float32
                for _ in range(2):
                    blocks.append(torch.full((r.numel(),), float("nan"), dtype=dt, device=r.device))
        del blocks

    # ------------------------------------------------------------------------------------------
    # stages

    def load_task(self):
        path = self.req["task"]
        try:
            self.task = _load_module(path, "kforge_task")
        except Exception as e:
            self.v.reject("task_error", "the task %s raised on import: %s" % (os.path.basename(path), _last_line(e)))
            raise Rejected()
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(self.task, name):
                self.v.reject("task_error", "the task %s defines no %s" % (os.path.basename(path), name))
                raise Rejected()
        decl = getattr(self.task, "KFORGE", None)
        if isinstance(decl, dict):
            self.details["task_policy"] = {k: decl[k] for k in decl if isinstance(decl[k], (int, float, str, bool))}

    def load_candidate(self):
        path = self.req["candidate"]
        build = self.req.get("build_dir")
        if build:
            os.makedirs(build, exist_ok=True)
            os.environ["TORCH_EXTENSIONS_DIR"] = build
        self.send_phase("loading")
        t0 = _perf()
        try:
            self.cand = _load_module(path, "kforge_candidate")
        except Exception as e:
            text = str(e)
            if "Error building extension" in text or "ninja" in text.lower() or type(e).__name__ == "CalledProcessError":
                self.v.reject("compile_error", "building the candidate's extension failed: %s" % _last_line(e))
            else:
                code, why = self.cuda_failure(e, "importing the candidate") if self.cuda else ("load_error", "")
                if code == "candidate_error":
                    code = "load_error"
                self.v.reject(code, why or "importing the candidate raised %s" % _last_line(e))
            self.details["traceback"] = traceback.format_exc()[-3000:]
            raise Rejected()
        self.details["load_s"] = round(_perf() - t0, 3)
        self.send_phase("loaded")
        if not hasattr(self.cand, "ModelNew"):
            self.v.reject("missing_entry_point", "the candidate defines no ModelNew")
            raise Rejected()
        self.check_state("importing the candidate")

    def build_models(self):
        torch = self.torch
        try:
            init = list(self.task.get_init_inputs())
        except Exception as e:
            self.v.reject("task_error", "get_init_inputs() raised %s" % _last_line(e))
            raise Rejected()
        try:
            torch.manual_seed(self.seed)
            self.ref = self.task.Model(*self.clone_inputs(init)).to(self.device)
        except Exception as e:
            self.v.reject("task_error", "building the reference Model raised %s" % _last_line(e))
            raise Rejected()
        try:
            torch.manual_seed(self.seed)
            self.new = self.cand.ModelNew(*self.clone_inputs(init))
            if isinstance(self.new, torch.nn.Module):
                self.new = self.new.to(self.device)
        except Exception as e:
            code, why = self.cuda_failure(e, "building ModelNew")
            self.v.reject(code, why)
            raise Rejected()
        if not callable(self.new):
            self.v.reject("missing_entry_point", "ModelNew(...) is not callable")
            raise Rejected()
        # Same weights for both: KernelBench relies on the seed; where the parameter sets match by
        # name and shape the reference's values are copied, so a different creation order cannot matter.
        copied = False
        if isinstance(self.new, torch.nn.Module):
            rs, ns = self.ref.state_dict(), self.new.state_dict()
            if rs and rs.keys() == ns.keys() and all(rs[k].shape == ns[k].shape for k in rs):
                with torch.no_grad():
                    self.new.load_state_dict(rs)
                copied = True
        self.details["weights_copied"] = copied
        self.check_state("building ModelNew")

    def verify(self):
        torch = self.torch
        worst = {}
        ref_mutates = False
        for trial in range(self.trials):
            inputs = self.make_inputs(self.seed * 1000 + trial)
            ref_in = self.clone_inputs(inputs)
            cand_first = trial % 2 == 1
            refs = None
            if not cand_first:
                with torch.no_grad():
                    refs = self.ref(*ref_in)
                self.sync()
                self.poison_allocator(refs)
            before = self.checksum(inputs)
            out = self.call_candidate(inputs, "verification trial %d" % (trial + 1))
            if cand_first:
                with torch.no_grad():
                    refs = self.ref(*ref_in)
                self.sync()
            if not self.same(inputs, before):
                self.v.reject("input_mutated", "verification trial %d: the candidate changed its inputs" % (trial + 1))
                raise Rejected()
            worst = self.compare(out, refs, inputs, "verification trial %d (%s first)" %
                                 (trial + 1, "candidate" if cand_first else "reference")) or worst
            if trial == 0:
                ref_in2 = self.clone_inputs(inputs)
                with torch.no_grad():
                    self.ref(*ref_in2)
                ref_mutates = not self.same(ref_in2, self.checksum(inputs))
            del out, refs, inputs, ref_in
            if self.cuda:
                torch.cuda.empty_cache()
        if self.cuda:
            self.side_stream_probe()
        self.checks["verification_trials"] = self.trials
        self.checks["tolerance"] = worst
        self.ref_mutates = ref_mutates
        if ref_mutates:
            self.v.flag("reference_mutates_inputs")

    def side_stream_probe(self):
        """The current stream is held up by a spin kernel while the candidate runs; the judge's own
        stream then compares the output with the reference. Work enqueued on the current stream
        cannot have finished yet, so an output that is already right was computed on another
        stream that nobody waits for."""
        torch = self.torch
        sleep = getattr(torch.cuda, "_sleep", None)
        if sleep is None:
            self.checks["side_stream_probe"] = "unavailable (no torch.cuda._sleep)"
            return
        inputs = self.make_inputs(self.seed * 1000 + 777)
        with torch.no_grad():
            refs = self.ref(*self.clone_inputs(inputs))
        cur = torch.cuda.current_stream()

        def matches(out):
            """On the judge's own stream, which does not wait for the current one."""
            with torch.cuda.stream(self.probe_stream), torch.no_grad():
                for o, r in zip(self.flatten(out, "")[0], self.flatten(refs, "")[0]):
                    if not (isinstance(o, torch.Tensor) and isinstance(r, torch.Tensor) and o.shape == r.shape
                            and o.dtype == r.dtype and o.device == r.device):
                        return False
                    atol, rtol = self.tolerance(r.dtype)
                    if not bool(torch.allclose(o.detach(), r, atol=atol, rtol=rtol)):
                        return False
            return True

        try:
            # One untimed round first, so that every block the call and the comparison allocate is in
            # the caching allocator: a cudaMalloc under the spin kernel would synchronise the device and
            # finish the current stream's work early (measured on the H200: every probe came out
            # "not blocked" when the allocator cache had just been emptied).
            # The warm-up outputs are poisoned before they go back to the cache: the probed call gets
            # the same blocks, and an output that is still unwritten must not already hold the answer.
            with torch.no_grad():
                out = self.watching_reference(lambda: self.new(*inputs), "side-stream probe")
            matches(out)
            self.sync()
            poisoned = True
            for o in self.flatten(out, "")[0]:
                if isinstance(o, torch.Tensor) and o.is_floating_point():
                    o.detach().fill_(float("nan"))
                elif isinstance(o, torch.Tensor) and o.dtype != torch.bool and not o.is_complex():
                    o.detach().fill_(torch.iinfo(o.dtype).max)
                else:
                    poisoned = False
            del out
            self.sync()
            sleep(int(4e8))  # ~0.2 s at 2 GHz
            with torch.no_grad():
                out = self.watching_reference(lambda: self.new(*inputs), "side-stream probe")
            time.sleep(0.05)  # work on a side stream (anything under 50 ms) finishes meanwhile
            blocked_after_call = poisoned and not cur.query()
            ready = blocked_after_call and matches(out)
            blocked = not cur.query()
        except Exception as e:
            self.sync()
            code, why = self.cuda_failure(e, "side-stream probe")
            self.v.reject(code, why)
            raise Rejected()
        self.sync()
        self.checks["side_stream_probe"] = {"output_ready_early": ready, "current_stream_blocked": blocked,
                                            "blocked_after_call": blocked_after_call}
        if not blocked_after_call:
            # The call itself waited for the device (a synchronising API, an allocation), or an output
            # could not be poisoned (bool, complex): the probe cannot tell where the work ran; the
            # event/wall cross-check during timing still can.
            self.v.flag("side_stream_probe_inconclusive")
        elif ready and blocked:
            self.v.reject("side_stream", "the output was complete while the current stream was still held up: the "
                          "candidate's work ran on another stream that the current stream does not wait for")
            raise Rejected()
        self.check_state("side-stream probe")

    # ------------------------------------------------------------------------------------------
    # timing

    def prepare_baselines(self, pool):
        """Callables f(i) running a baseline on pool set i; unavailable ones are reported, not fatal."""
        torch = self.torch
        wanted = self.req.get("baselines") or ["eager"]
        out, info = {}, {}
        ref = self.ref
        out["eager"] = lambda i: ref(*pool[i])
        info["eager"] = "available"
        for name in wanted:
            if name == "eager":
                continue
            t0 = _perf()
            try:
                if name in ("compile", "compile_ro"):
                    mode = "reduce-overhead" if name == "compile_ro" else None
                    m = torch.compile(ref, mode=mode) if mode else torch.compile(ref)
                    with torch.no_grad():
                        for i in range(min(3, len(pool))):
                            m(*pool[i])
                    self.sync()
                    out[name] = (lambda m: lambda i: m(*pool[i]))(m)
                elif name == "graph":
                    if not self.cuda:
                        raise RuntimeError("CUDA graphs need a CUDA device")
                    graphs = []
                    side = torch.cuda.Stream()
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side), torch.no_grad():
                        for _ in range(2):
                            ref(*pool[0])
                    torch.cuda.current_stream().wait_stream(side)
                    mempool = None
                    keep = []
                    for i in range(len(pool)):
                        g = torch.cuda.CUDAGraph()
                        with torch.no_grad(), torch.cuda.graph(g, pool=mempool):
                            keep.append(ref(*pool[i]))
                        mempool = g.pool()
                        graphs.append(g)
                    self.sync()
                    self._graph_outputs = keep
                    out[name] = (lambda gs: lambda i: gs[i].replay())(graphs)
                else:
                    raise ValueError("unknown baseline '%s'" % name)
                info[name] = "available (prepared in %.1f s)" % (_perf() - t0)
            except Exception as e:
                info[name] = "unavailable: %s" % _last_line(e)
                self.v.flag("baseline_unavailable:" + name)
                try:
                    self.sync()
                except Exception:
                    pass
        self.details["baselines"] = info
        return out

    def time_all(self):
        torch, v = self.torch, self.v
        self.send_phase("timing")
        # Per-call time of the reference decides the pool size: a batch of distinct input sets
        # long enough to dwarf the synchronisation, small enough to fit in memory.
        probe = self.make_inputs(self.seed * 1000 + 99)
        with torch.no_grad():
            self.ref(*probe)
            self.sync()
            t0 = _perf()
            for _ in range(3):
                self.ref(*probe)
            self.sync()
        per_call = max((_perf() - t0) / 3, 1e-6)
        in_bytes = sum(x.numel() * x.element_size() for x in probe if isinstance(x, torch.Tensor))
        del probe
        target = float(self.req.get("batch_s", 0.004))
        max_pool = int(self.req.get("max_pool", 32 if self.cuda else 4))
        pool_n = int(min(max(math.ceil(target / per_call), 2), max_pool))
        if self.cuda:
            free, _ = torch.cuda.mem_get_info()
            pool_n = max(2, min(pool_n, int(0.25 * free // max(in_bytes * 3, 1))))
        pool = [self.make_inputs(self.seed * 1000 + 500 + i) for i in range(pool_n)]
        self.check_state("before the baselines")
        before = guards.os_threads()
        contenders = self.prepare_baselines(pool)
        self.resnapshot()  # torch.compile and graph capture are the judge's own doing
        # So are the OS threads they start (Inductor's compile workers, Triton): measured on the H200,
        # every honest candidate was flagged os_threads_grew when the compile baselines ran. Threads
        # the candidate started before this point are still counted.
        self.os_threads.update({k: n for k, n in guards.os_threads().items() if k not in before})
        new = self.new
        contenders = dict(contenders)
        contenders["candidate"] = lambda i: new(*pool[i])
        # warm-up (baselines first: anything they start is the judge's; then the snapshot again)
        with torch.no_grad():
            for name, f in sorted(contenders.items(), key=lambda kv: kv[0] == "candidate"):
                if name == "candidate":
                    self.sync()
                    self.resnapshot()
                for i in range(min(2, pool_n)):
                    try:
                        if name == "candidate":
                            self.watching_reference(lambda: f(i), "warm-up")
                        else:
                            f(i)
                    except Exception as e:
                        if name == "candidate":
                            code, why = self.cuda_failure(e, "warm-up")
                            v.reject(code, why)
                            raise Rejected()
                        self.details["baselines"][name] = "unavailable: warm-up raised %s" % _last_line(e)
                        v.flag("baseline_unavailable:" + name)
                        del contenders[name]
                        break
        self.sync()
        self.check_state("warm-up")
        names = sorted(contenders)
        wall = {n: [] for n in names}
        event = {n: [] for n in names}
        for rnd in range(self.samples):
            # fresh contents in the same tensors: a cache keyed on pointers returns stale outputs
            fresh = [self.make_inputs(self.seed * 7000 + rnd * 97 + i) for i in range(pool_n)]
            for dst, src in zip(pool, fresh):
                for d, s in zip(dst, src):
                    if isinstance(d, torch.Tensor):
                        d.copy_(s)
            del fresh
            self.sync()
            sums = [self.checksum(p) for p in pool]
            order = names[:]
            self.rng.shuffle(order)
            kept = {}
            for n in order:
                f = contenders[n]
                outs = []
                keep = n in ("candidate", "eager")
                self.sync()
                if n == "candidate":
                    self.resnapshot()
                if self.cuda:
                    e0 = self._Event(enable_timing=True)
                    e1 = self._Event(enable_timing=True)
                    e0.record()
                t0 = _perf()
                def batch():
                    for i in range(pool_n):
                        o = f(i)
                        if keep:
                            outs.append(o)

                try:
                    with torch.no_grad():
                        if n == "candidate":
                            self.watching_reference(batch, "timed round %d" % (rnd + 1))
                        else:
                            batch()
                    if self.cuda:
                        e1.record()
                    self.sync()
                except Exception as e:
                    if n == "candidate":
                        code, why = self.cuda_failure(e, "timed run")
                        v.reject(code, why)
                        raise Rejected()
                    raise
                t1 = _perf()
                wall[n].append((t1 - t0) / pool_n * 1e6)
                if self.cuda:
                    event[n].append(e0.elapsed_time(e1) * 1e3 / pool_n)
                if keep:
                    kept[n] = outs
                if n == "candidate":
                    self.check_state("timed run %d" % (rnd + 1))
            if not self.ref_mutates and not all(self.same(p, c) for p, c in zip(pool, sums)):
                v.reject("input_mutated", "timed round %d: inputs changed while timed" % (rnd + 1))
                raise Rejected()
            for i in range(pool_n):
                self.compare(kept["candidate"][i], kept["eager"][i], pool[i],
                             "timed round %d, call %d" % (rnd + 1, i + 1), code="timed_output_wrong")
            del kept, sums
        cand = wall["candidate"]
        self.details["timing"] = {
            "pool": pool_n, "rounds": self.samples, "batch_target_s": target,
            "wall_us": {n: summarize(wall[n]) for n in names},
        }
        if self.cuda:
            self.details["timing"]["event_us"] = {n: summarize(event[n]) for n in names}
            # Event timing on the current stream misses work on other streams; the device-wide
            # synchronisation does not. A candidate whose events see much less than the wall clock,
            # where the reference's see most of it, ran its work elsewhere.
            def ratio(n):
                ws, es = sorted(wall[n]), sorted(event[n])
                return es[len(es) // 2] / max(ws[len(ws) // 2], 1e-9)
            rc, re_ = ratio("candidate"), ratio("eager")
            self.details["timing"]["event_over_wall"] = {"candidate": rc, "eager": re_}
            # Measured on the H200: honest candidates 0.97-1.00 of the reference's ratio; a matmul on
            # an unsynchronised side stream 0.55.
            if rc < 0.75 * re_ and rc < 0.8:
                v.reject("side_stream", "events on the current stream saw %.0f%% of the candidate's wall time (the "
                         "reference's saw %.0f%%): its work ran on another stream" % (100 * rc, 100 * re_))
                raise Rejected()
            if rc < 0.9 * re_:
                v.flag("event_wall_gap")
        for n in names:
            if n == "candidate":
                continue
            ratios = [b / c for b, c in zip(wall[n], cand) if c > 0]
            v.d["speedup"][n] = summarize(ratios)
            v.d["candidate_us"][n] = summarize(cand)
            v.d["baseline_us"][n] = summarize(wall[n])
        s = v.d["speedup"].get("eager", {}).get("median", 1.0)
        if s > 200:
            v.flag("implausible_speedup")
        if summarize(cand)["p90"] > 1.5 * summarize(cand)["p10"]:
            v.flag("noisy_timing")

    def run(self):
        torch = self.torch
        guards.set_full_precision(torch)
        self.load_task()
        if self.cuda:
            if not torch.cuda.is_available():
                self.v.reject("no_gpu", "torch %s sees no CUDA device" % torch.__version__)
                raise Rejected()
            torch.cuda.init()
            self.default_stream = torch.cuda.current_stream()
        # warm the runtime's own threads (CPU pool, CUDA helpers) before counting threads
        torch.ones(1 << 16).sum()
        if self.cuda:
            torch.ones(16, device=self.device).sum().item()
        self.extra_ids = {"task.Model": self.task.Model, "task.Model.forward": getattr(self.task.Model, "forward", None),
                          "task.get_inputs": self.task.get_inputs, "task.get_init_inputs": self.task.get_init_inputs}
        self.ids = guards.identity_snapshot(torch, self.extra_ids)
        self.prec = guards.precision_state(torch)
        self.glob = guards.global_state(torch)
        self.py_threads = guards.python_threads()
        self.os_threads = guards.os_threads()
        # Every Python thread started from now on reports itself once, even if it ends at once.
        def on_thread_start(*_):
            self.started_threads.append(threading.current_thread().name)
            sys.setprofile(None)
        threading.setprofile(on_thread_start)
        self.threads_seen = 0
        if self.cuda:
            self.probe_stream = torch.cuda.Stream()  # the judge's own, made before the candidate runs
        self.ids = guards.identity_snapshot(torch, self.extra_ids)
        self.load_candidate()
        self.build_models()
        self.verify()
        if not self.req.get("skip_timing"):
            self.time_all()
        self.check_state("the end")
        grown = {k: n for k, n in guards.os_threads().items() if k not in self.os_threads}
        if grown:
            self.details["os_threads_started"] = sorted(grown.values())
            self.v.flag("os_threads_grew")
        self.v.d["correct"] = not self.v.d["reasons"]
        if self.v.d["correct"]:
            self.v.d["message"] = "accepted"
