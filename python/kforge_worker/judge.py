"""The judge: one PyTorch candidate against one KernelBench-format task. This process never imports
candidate code; the candidate runs in an executor subprocess (executor.py).

  harden (non-dumpable, child subreaper) -> full-precision switches -> load the trusted task ->
  a sample of inputs gives the input and output layout -> the reference Model built from a seed of
  OS entropy (its parameters permuted and jittered where the task allows), an fp64 copy of it ->
  input variants (scaled, shifted) kept where the fp64 reference stays finite -> pool size from the
  reference's per-call time -> two shared arenas (one per executor; per call slot an input buffer
  and an output buffer, each a storage of its own) ->
  the baseline executor (task only: eager, torch.compile, reduce-overhead, CUDA graph) -> [phase
  loading] the candidate executor (candidate only) [phase loaded] -> rounds.

One round: fresh inputs for every slot (each its own seed from os.urandom, a random variant, the
fp32 precision perturbation) copied into both arenas, every output slot poisoned; the candidate and
each baseline run one batch over all slots, in a random order. A batch: the executor is resumed
(SIGCONT), asked to run the slots (a fresh nonce), stopped (SIGSTOP) when it answers, and its outputs
are copied into the judge's own memory; the wall time from the request to the end of that copy is
the batch's time. Before a batch the GPU is shown idle (a probe kernel at its normal latency). Then
every output of the candidate is compared with the fp64 reference, with the eager output's own
error added to the tolerance, and its inputs bit for bit with the judge's copies. The first
`trials` rounds are untimed; `samples` timed rounds follow; the requests look the same. The
parameters are drawn afresh (new seed) after the first round.
"""

import copy
import io
import json
import math
import os
import pickle
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import time

from . import channel, guards, sandbox
from .verdict import Verdict, summarize

_perf = time.perf_counter
WORKER_MAIN = os.path.dirname(os.path.abspath(__file__))
EXCERPT = 2048


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
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s as a Python module" % path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(name, None)
    return mod


def clean_text(s):
    """Valid UTF-8 text whatever a process printed or sent (lone surrogates included)."""
    return s.encode("utf-8", "replace").decode("utf-8", "replace")


def _align(n, a=256):
    return (n + a - 1) // a * a


def _describe_exit(rc):
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            return "killed by signal %d (%s)" % (-rc, signal.Signals(-rc).name)
        except ValueError:
            return "killed by signal %d" % -rc
    return "exit status %d" % rc


class Executor:
    """The judge's handle on one executor process."""

    def __init__(self, judge, role, env_extra):
        self.judge, self.role = judge, role
        r1, w1 = os.pipe()  # requests
        r2, w2 = os.pipe()  # replies
        # The CPU arena: anonymous memory files (no name in /dev/shm for anyone to open), one for the
        # inputs and one for the outputs of every slot, so that no input's storage reaches an output
        # buffer or another call's inputs; made now (the executor inherits them), sized later.
        self.arena_fds = []
        if not judge.cuda and hasattr(os, "memfd_create"):
            self.arena_fds = [os.memfd_create("kforge-arena-%s-%d" % (role, i)) for i in range(2 * judge.max_pool)]
        self.cap = tempfile.TemporaryFile(prefix="kforge-exec-out-")
        env = dict(os.environ)
        env.update(env_extra)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        fds = (r1, w2) + tuple(self.arena_fds)
        self.proc = subprocess.Popen([sys.executable, "-u", WORKER_MAIN, "exec", str(r1), str(w2)],
                                     pass_fds=fds, stdin=subprocess.DEVNULL, stdout=self.cap,
                                     stderr=self.cap, start_new_session=True, env=env, close_fds=True)
        os.close(r1)
        os.close(w2)
        self.wfd, self.rfd = w1, r2
        self.pgid = self.proc.pid
        self.stopped = False
        self.dead = False

    def request(self, obj, deadline, when):
        """Sends one request and returns the reply that answers it; anything else rejects."""
        v = self.judge.v
        if channel.pending(self.rfd):
            self.judge.forged("%s: the %s executor sent a reply nobody asked for" % (when, self.role))
        nonce = secrets.token_hex(16)
        obj = dict(obj, nonce=nonce)
        try:
            channel.write_frame(self.wfd, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
            rep = channel.read_reply(self.rfd, deadline)
        except TimeoutError:
            raise
        except (channel.ChannelError, OSError) as e:
            rc = self.wait(1.0)
            self.dead = True
            if rc is None:
                self.judge.forged("%s: the %s executor broke the channel (%s)" % (when, self.role, e))
            self.judge.crashed(self, when, rc)
            raise Rejected()
        if rep.get("nonce") != nonce:
            self.judge.forged("%s: a reply from the %s executor that answers no request (nonce %r)" %
                              (when, self.role, str(rep.get("nonce"))[:40]))
        try:
            rep = self.sanitize(rep)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            self.judge.forged("%s: a malformed reply from the %s executor (%s)" % (when, self.role, e))
        if self.proc.poll() is not None:
            # a reply from an exiting executor is void
            self.dead = True
            self.judge.crashed(self, when, self.proc.returncode)
            raise Rejected()
        return rep

    @staticmethod
    def sanitize(rep):
        """Only the fields the judge reads, each of the type it expects (a reply is candidate data)."""
        out = {"nonce": rep.get("nonce"), "ok": rep.get("ok") is True}
        for k in ("code", "why", "traceback"):
            if k in rep:
                out[k] = clean_text(str(rep[k]))[:4000]
        probs = rep.get("problems") or []
        out["problems"] = [[clean_text(str(p[0]))[:60], clean_text(str(p[1]))[:1000]] for p in list(probs)[:16]]
        vals = rep.get("values") or {}
        if not isinstance(vals, dict):
            raise ValueError("values is not an object")
        out["values"] = {str(k): list(v) for k, v in list(vals.items())[:4096]}
        if "kernels" in rep:
            out["kernels"] = [[clean_text(str(k[0]))[:300], float(k[1])] for k in list(rep["kernels"])[:400]]
        for k in ("weights_loaded",):
            if k in rep:
                out[k] = rep[k] is True
        if "baselines" in rep and isinstance(rep["baselines"], dict):
            out["baselines"] = {str(k): clean_text(str(v))[:300] for k, v in rep["baselines"].items()}
        if "seccomp" in rep:
            out["seccomp"] = [clean_text(str(x))[:40] for x in list(rep["seccomp"])[:16]]
        return out

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        if not self.stopped and not self.dead:
            sandbox.signal_group(self.pgid, signal.SIGSTOP)
            self.stopped = True

    def cont(self):
        if self.stopped and not self.dead:
            sandbox.signal_group(self.pgid, signal.SIGCONT)
            self.stopped = False

    def kill(self):
        sandbox.signal_group(self.pgid, signal.SIGKILL)
        try:
            self.proc.kill()
        except OSError:
            pass
        self.wait(5.0)
        self.dead = True
        for fd in [self.wfd, self.rfd] + self.arena_fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def output(self):
        self.cap.flush()
        size = os.fstat(self.cap.fileno()).st_size
        if not size:
            return "", 0
        self.cap.seek(0)
        return self.cap.read(EXCERPT).decode("utf-8", "replace"), size


class Judge:
    def __init__(self, req, send_phase, torch):
        self.req = req
        self.send_phase = send_phase
        self.torch = torch
        self.v = Verdict(req.get("name") or req.get("candidate", "?"))
        self.device = req.get("device", "cuda")
        self.cuda = self.device.startswith("cuda")
        self.trials = max(1, int(req.get("trials", 5)))
        self.samples = int(req.get("samples", 10))
        self.rng = random.Random(os.urandom(32))  # orders, variants, scales: never a replayable seed
        self.details = self.v.d["details"]
        self.checks = self.details.setdefault("checks", {})
        self.t_start = time.monotonic()
        self.run_deadline = self.t_start + max(5.0, float(req.get("run_timeout_s", 300)) - 3.0)
        self.load_timeout = max(2.0, float(req.get("load_timeout_s", 300)) - 2.0)
        self.cand = self.base = None
        self.arenas = []
        self.max_pool = int(req.get("max_pool", 32 if self.cuda else 2))
        self.low_bits = {}
        self._sync = torch.cuda.synchronize

    # ------------------------------------------------------------------------------------------
    # verdict helpers

    def reject(self, code, why):
        self.v.reject(code, clean_text(why))
        raise Rejected()

    def forged(self, why):
        self.reject("forged_reply", why)

    def crashed(self, ex, when, rc):
        self.v.reject("crashed", "%s: the %s executor died (%s)" % (when, ex.role, _describe_exit(rc)))

    def sync(self):
        if self.cuda:
            self._sync()

    def policy(self):
        decl = getattr(self.task, "KFORGE", None)
        return decl if isinstance(decl, dict) else {}

    def tolerance(self, dtype):
        torch = self.torch
        atol, rtol = self.req.get("atol"), self.req.get("rtol")
        decl = self.policy()
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

    # ------------------------------------------------------------------------------------------
    # inputs

    def load_task(self):
        path = self.req["task"]
        try:
            self.task = _load_module(path, "kforge_task")
        except Exception as e:
            self.reject("task_error", "the task %s raised on import: %s" % (os.path.basename(path), _last_line(e)))
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(self.task, name):
                self.reject("task_error", "the task %s defines no %s" % (os.path.basename(path), name))
        decl = self.policy()
        if decl:
            self.details["task_policy"] = {k: decl[k] for k in decl if isinstance(decl[k], (int, float, str, bool, list))}

    def draw(self, variant):
        """One input set: the task's get_inputs() under a seed from OS entropy, then the variant
        (scaled or shifted floating inputs), then the fp32 precision perturbation."""
        torch = self.torch
        torch.manual_seed(secrets.randbits(63))
        try:
            with torch.device(self.device):
                raw = list(self.task.get_inputs())
        except Exception as e:
            self.reject("task_error", "get_inputs() raised %s" % _last_line(e))
        out = []
        for x in raw:
            if isinstance(x, torch.Tensor):
                x = x.to(self.device)
                if x.is_floating_point():
                    if variant == "scale":
                        x = x * math.exp(self.rng.uniform(math.log(0.25), math.log(4.0)))
                    elif variant == "shift":
                        spread = float(x.float().std()) if x.numel() > 1 else 1.0
                        x = x + self.rng.uniform(-2.0, 2.0) * max(spread, abs(float(x.float().mean())), 0.5)
                    if self.perturb and x.dtype == torch.float32:
                        x = self.perturb_fp32(x)
                    x = x.contiguous()
            out.append(x)
        return out

    def perturb_fp32(self, x):
        """Every nonzero element moved (by less than 2^-7 of itself, keeping the distribution) to a
        value whose dropped bits lie below half a unit for fp16, TF32 and bf16 alike: converting it
        to any of them loses magnitude, a systematic bias that does not average out over a sum (the
        fp32 tolerance fails), while fp32 and fp64 arithmetic are unaffected. The low 16 bits are
        (r2 << 13) | r13 with r2 in 0..3 and r13 in 0x0C00..0x0FFF, drawn per element: fp16 and TF32
        (13 bits dropped) round down by 0.375..0.5 of a unit, bf16 (16 bits dropped) by 0.05..0.5."""
        torch = self.torch
        key = (tuple(x.shape), str(x.device))
        low = self.low_bits.get(key)
        if low is None:
            # drawn once per input shape (knowing them tells nothing about an input's value)
            r = torch.randint(0, 4096, x.shape, device=x.device, dtype=torch.int32)
            low = self.low_bits[key] = ((r >> 10) << 13) | (r & 0x3FF) | 0x0C00
        new = (x.contiguous().view(torch.int32) & -65536).bitwise_or_(low).view(torch.float32)
        return torch.where(x == 0, x, new)  # zeros stay zero

    def pick_variant(self):
        return self.rng.choice(self.variants)

    # ------------------------------------------------------------------------------------------
    # references

    def reference_fp64(self, inputs):
        torch = self.torch
        if self.ref64 is None:
            return None
        args = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else
                (x.clone() if isinstance(x, torch.Tensor) else x) for x in inputs]
        with torch.no_grad():
            return self.ref64(*args)

    def flat(self, out):
        if isinstance(out, (tuple, list)):
            return list(out), "tuple"
        return [out], "tensor"

    def new_parameters(self, randomize=False):
        """A fresh seed; the reference built from it; with `randomize` (the candidate's state dict
        matches the reference's, so the same values can be loaded into both) and where the task
        allows, its floating parameters permuted and jittered (so that hard-coded or default initial
        weights cannot match); its fp64 copy."""
        torch = self.torch
        self.seed = secrets.randbits(62)
        try:
            init = list(self.task.get_init_inputs())
            torch.manual_seed(self.seed)
            ref = self.task.Model(*copy.deepcopy(init)).to(self.device)
        except Exception as e:
            self.reject("task_error", "building the reference Model raised %s" % _last_line(e))
        if randomize and self.policy().get("randomize_parameters", True) and isinstance(ref, torch.nn.Module):
            with torch.no_grad():
                for p in ref.parameters():
                    if p.is_floating_point() and p.numel() > 0:
                        flat = p.detach().reshape(-1)
                        perm = flat[torch.randperm(flat.numel(), device=flat.device)]
                        jitter = 1 + 0.25 * (torch.rand_like(perm) * 2 - 1)
                        new = perm * jitter
                        if not bool((flat != 0).any()):
                            new = 0.1 * (torch.rand_like(perm) * 2 - 1)
                        p.copy_(new.view_as(p))
        self.init_inputs = init
        self.ref = ref
        buf = io.BytesIO()
        torch.save(init, buf)
        self.init_bytes = buf.getvalue()
        buf = io.BytesIO()
        torch.save({k: v.detach().cpu() for k, v in ref.state_dict().items()} if isinstance(ref, torch.nn.Module)
                   else {}, buf)
        self.state_bytes = buf.getvalue()
        self.ref64 = None
        if self.req.get("fp64_reference", True):
            try:
                r = copy.deepcopy(ref).double() if isinstance(ref, torch.nn.Module) else None
                if r is not None:
                    self.ref64 = r
                    self.reference_fp64(self.sample)
            except Exception as e:
                self.ref64 = None
                self.details["fp64_reference"] = "unavailable: %s" % _last_line(e)

    # ------------------------------------------------------------------------------------------
    # setup

    def layout(self):
        """Input and output specs from a sample, the variants that keep the reference finite, the
        pool size, and the arenas."""
        torch = self.torch
        decl = self.policy()
        self.perturb = bool(decl.get("perturb_precision", True))
        torch_ = self.torch
        self.eps = {torch_.float32: 2.0 ** -23, torch_.float16: 2.0 ** -10, torch_.bfloat16: 2.0 ** -7}
        self.precision_check = bool(decl.get("precision_check", True)) and all(
            x is None for x in (self.req.get("atol"), self.req.get("rtol"), decl.get("atol"), decl.get("rtol")))
        self.variants = ["plain"]
        self.sample = self.draw("plain")
        self.new_parameters()
        with torch.no_grad():
            try:
                out = self.ref(*[x.clone() if isinstance(x, torch.Tensor) else x for x in self.sample])
            except Exception as e:
                self.reject("task_error", "the reference Model raised %s" % _last_line(e))
        outs, self.out_kind = self.flat(out)
        self.out_meta = []
        for o in outs:
            if isinstance(o, torch.Tensor):
                self.out_meta.append({"kind": "tensor", "shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", ""),
                                      "nbytes": o.numel() * o.element_size()})
            else:
                self.out_meta.append({"kind": "value"})
        self.in_meta = []
        for x in self.sample:
            if isinstance(x, torch.Tensor):
                self.in_meta.append({"kind": "tensor", "shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", ""),
                                     "nbytes": x.numel() * x.element_size()})
            else:
                self.in_meta.append({"kind": "value", "value": x})
        # variants
        wanted = decl.get("input_variants", ["scale", "shift"])
        if wanted is True:
            wanted = ["scale", "shift"]
        if not wanted:
            wanted = []
        tried = {}
        for kind in wanted:
            ok = True
            for _ in range(2):
                try:
                    x = self.draw(kind)
                    r = self.reference_fp64(x) if self.ref64 is not None else None
                    if r is None:
                        with torch.no_grad():
                            r = self.ref(*x)
                    for t in self.flat(r)[0]:
                        if isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
                            ok = False
                except Rejected:
                    raise
                except Exception:
                    ok = False
            tried[kind] = ok
            if ok:
                self.variants.append(kind)
        self.checks["input_variants"] = self.variants
        self.checks["precision_perturbation"] = self.perturb
        # per-call time of the reference decides the pool size
        with torch.no_grad():
            self.ref(*self.sample)
            self.sync()
            t0 = _perf()
            for _ in range(3):
                self.ref(*self.sample)
            self.sync()
        per_call = max((_perf() - t0) / 3, 1e-6)
        in_bytes = sum(m["nbytes"] for m in self.in_meta if m["kind"] == "tensor")
        out_bytes = sum(m["nbytes"] for m in self.out_meta if m["kind"] == "tensor")
        target = float(self.req.get("batch_s", 0.01 if self.cuda else 0.02))
        n = int(min(max(math.ceil(target / per_call), 2), self.max_pool))
        if self.cuda:
            free, _ = torch.cuda.mem_get_info()
            n = max(2, min(n, int(0.25 * free // max(3 * in_bytes + 5 * out_bytes, 1))))
        self.slots = n
        self.reference_per_call_s = per_call

    def make_arena(self, ex):
        """Per slot, one buffer for the inputs and one for the outputs, each a storage of its own (a
        memory file on the CPU; a CUDA allocation of its own, shared by CUDA IPC, on the GPU): an
        input's storage reaches neither an output buffer (a candidate writing its result straight
        into the judge's buffer would skip the copy that the baseline pays) nor another call's
        inputs (no batching ahead across calls)."""
        torch = self.torch

        def pack(metas):
            offs, pos = [], 0
            for m in metas:
                offs.append(pos if m["kind"] == "tensor" else None)
                if m["kind"] == "tensor":
                    pos = _align(pos + m["nbytes"])
            return offs, max(pos, 256)

        in_offs, in_bytes = pack(self.in_meta)
        out_offs, out_bytes = pack(self.out_meta)
        a = {"in": [dict(m, offset=o) for m, o in zip(self.in_meta, in_offs)],
             "out": [dict(m, offset=o) for m, o in zip(self.out_meta, out_offs)],
             "in_t": [], "out_t": []}
        desc = {"in": [], "out": [], "in_nbytes": in_bytes, "out_nbytes": out_bytes}
        if self.cuda:
            import torch.multiprocessing  # noqa: F401 - registers the CUDA IPC reductions
            from multiprocessing.reduction import ForkingPickler
            desc["kind"] = "cuda"
            for side, nbytes in (("in", in_bytes), ("out", out_bytes)):
                # an allocation of its own (a multiple of 2 MiB above the allocator's split limit), so
                # that the IPC handle opens nothing but this buffer
                size = max(_align(nbytes, 2 << 20), 24 << 20)
                for _ in range(self.slots):
                    t = torch.empty(size, dtype=torch.uint8, device=self.device)
                    a[side + "_t"].append(t)
                    desc[side].append(bytes(ForkingPickler.dumps(t)))
        else:
            desc["kind"] = "file"
            fds = list(ex.arena_fds)
            for side, nbytes in (("in", in_bytes), ("out", out_bytes)):
                for _ in range(self.slots):
                    if fds:
                        fd = fds.pop(0)
                        os.ftruncate(fd, nbytes)
                        path = "/proc/self/fd/%d" % fd
                    else:  # no memfd_create: a named file, unlinked once the executor has it mapped
                        d = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
                        fd, path = tempfile.mkstemp(prefix="kforge-arena-", dir=d)
                        os.ftruncate(fd, nbytes)
                        os.close(fd)
                        a.setdefault("paths", []).append(path)
                    a[side + "_t"].append(torch.from_file(path, shared=True, size=nbytes, dtype=torch.uint8))
                    desc[side].append(path)
        a["desc"] = desc
        self.arenas.append(a)
        return a

    def view(self, storage, off, meta):
        torch = self.torch
        dt = getattr(torch, meta["dtype"])
        return storage[off:off + meta["nbytes"]].view(dt).view(meta["shape"])

    def in_views(self, arena, slot):
        return [self.view(arena["in_t"][slot], m["offset"], m) if m["kind"] == "tensor" else None for m in arena["in"]]

    def out_views(self, arena, slot):
        return [self.view(arena["out_t"][slot], m["offset"], m) if m["kind"] == "tensor" else None for m in arena["out"]]

    def init_request(self, role, arena):
        return {"op": "init", "role": role, "device": self.device, "arena": arena["desc"],
                "inputs": [{k: v for k, v in m.items() if k != "nbytes"} for m in arena["in"]],
                "outputs": [{k: v for k, v in m.items() if k != "nbytes"} for m in arena["out"]],
                "out_kind": self.out_kind, "slots": self.slots, "init": self.init_bytes, "seed": self.seed,
                "state": self.state_bytes}

    def deadline(self):
        return self.run_deadline

    def ask(self, ex, obj, when, deadline=None, timeout_code="timeout"):
        try:
            return ex.request(obj, deadline or self.deadline(), when)
        except TimeoutError:
            ex.kill()
            if timeout_code == "compile_timeout":
                self.reject("compile_timeout", "importing (building) the candidate took more than %.0f s; the "
                            "executor was killed" % self.load_timeout)
            self.reject("timeout", "%s: no answer within the run time-out; the %s executor was killed" % (when, ex.role))

    def executor_failure(self, ex, rep, when):
        code, why = rep.get("code", "internal_error"), clean_text(str(rep.get("why", "")))
        if rep.get("traceback"):
            self.details.setdefault("traceback", clean_text(str(rep["traceback"]))[-3000:])
        if ex.role == "baseline":
            self.reject("task_error" if code in ("candidate_error", "internal_error") else code,
                        "%s: the reference failed: %s" % (when, why))
        self.reject(code, why)

    def spawn(self):
        """Both executors start at once (importing torch takes seconds); they get their work later."""
        self.base = Executor(self, "baseline", {})
        env = {}
        if self.req.get("build_dir"):
            os.makedirs(self.req["build_dir"], exist_ok=True)
            env["TORCH_EXTENSIONS_DIR"] = self.req["build_dir"]
        self.cand = Executor(self, "candidate", env)

    def start_baseline(self):
        a = self.make_arena(self.base)
        self.base_arena = a
        req = self.init_request("baseline", a)
        req["task"] = os.path.abspath(self.req["task"])
        req["baselines"] = [b for b in (self.req.get("baselines") or ["eager"]) if b != "eager"]
        rep = self.ask(self.base, req, "preparing the baselines")
        if not rep.get("ok"):
            self.executor_failure(self.base, rep, "preparing the baselines")
        self.unlink_arenas()
        info = rep.get("baselines", {"eager": "available"})
        self.details["baselines"] = info
        self.baselines = ["eager"] + [b for b in req["baselines"] if str(info.get(b, "")).startswith("available")]
        for b in req["baselines"]:
            if b not in self.baselines:
                self.v.flag("baseline_unavailable:" + b)
        self.base.stop()
        self.base_sched = sandbox.scheduling(self.base.proc.pid)

    def check_scheduling(self, when):
        """The baseline executor gets the CPU it had: its threads' affinity, nice value and policy
        and its cgroup are what they were after its own last request (before the candidate was
        loaded, the first time). Only candidate code, which runs as the same user, can have
        changed them (pinned the baseline to one core, reniced it): tampered."""
        now = sandbox.scheduling(self.base.proc.pid)
        changes = sandbox.scheduling_changes(self.base_sched, now)
        if changes:
            self.details["baseline_scheduling"] = changes[:8]
            self.reject("tampered", "%s: the baseline executor's scheduling was changed while the candidate ran (%s): "
                        "it would be timed with less of the machine" % (when, "; ".join(changes[:3])))

    def start_candidate(self):
        a = self.make_arena(self.cand)
        self.cand_arena = a
        # the executor is up (torch imported) before the import time-out starts
        self.ask(self.cand, {"op": "ping"}, "starting the candidate executor")
        self.send_phase("loading")
        t0 = _perf()
        req = self.init_request("candidate", a)
        req["candidate"] = os.path.abspath(self.req["candidate"])
        rep = self.ask(self.cand, req, "importing the candidate", deadline=time.monotonic() + self.load_timeout,
                       timeout_code="compile_timeout")
        self.details["load_s"] = round(_perf() - t0, 3)
        self.send_phase("loaded")
        self.details["executor"] = {"seccomp_denied": rep.get("seccomp", []), "pid_group": "own",
                                    "capabilities": sandbox.capabilities_of(self.cand.proc.pid)}
        if not rep.get("ok"):
            self.executor_failure(self.cand, rep, "importing the candidate")
        self.details["weights_copied"] = bool(rep.get("weights_loaded"))
        self.executor_problems(rep)
        self.cand.stop()
        self.unlink_arenas()

    def unlink_arenas(self):
        for a_ in self.arenas:
            for path in a_.pop("paths", []):
                try:
                    os.unlink(path)  # mapped by its executor: the name is not needed any more
                except OSError:
                    pass

    def executor_problems(self, rep):
        probs = rep.get("problems") or []
        if probs:
            code, why = probs[0][0], probs[0][1]
            self.details["executor_reports"] = [clean_text(str(p))[:300] for p in probs[:8]]
            self.reject(str(code), str(why))

    # ------------------------------------------------------------------------------------------
    # the GPU and the processes between batches

    def probe(self):
        t0 = _perf()
        self.probe_t.add_(1)
        self._sync()
        return _perf() - t0

    def calibrate_probe(self):
        if not self.cuda:
            return
        self.probe_t = self.torch.zeros(1, device=self.device)
        for _ in range(5):
            self.probe()
        xs = sorted(self.probe() for _ in range(21))
        self.probe_idle = xs[len(xs) // 2]
        self.checks["idle_probe_us"] = round(self.probe_idle * 1e6, 1)

    def ensure_idle(self, when):
        """The GPU must be idle before anything is timed (the candidate is stopped by then): a probe
        kernel from this clean context must run at its normal latency. Work the candidate left
        behind is waited for; a GPU that stays busy for 3 s rejects."""
        if not self.cuda:
            return
        limit = self.probe_idle * 4 + 200e-6
        t_end = _perf() + 3.0
        waited = 0
        while True:
            p = self.probe()
            if p <= limit:
                if waited:
                    self.checks["busy_waits"] = self.checks.get("busy_waits", 0) + waited
                return
            if _perf() > t_end:
                self.reject("gpu_not_idle", "%s: the GPU stayed busy for 3 s while the candidate's processes were "
                            "stopped (a probe kernel took %.1f ms, %.0f us when idle): work left running on the "
                            "device" % (when, p * 1e3, self.probe_idle * 1e6))
            waited += 1
            time.sleep(0.01)

    def check_processes(self, when):
        """Every process below the judge must belong to an executor's process group; one that left it
        (a new session or group, a double fork) is killed and rejects."""
        procs = sandbox.all_processes()
        mine = sandbox.descendants(os.getpid(), procs)
        groups = {ex.pgid for ex in (self.cand, self.base) if ex is not None}
        execs = {ex.proc.pid for ex in (self.cand, self.base) if ex is not None}
        # outside every executor's group, or orphaned (re-parented to the judge, a subreaper)
        stray = {pid: st for pid, st in mine.items()
                 if st[1] not in groups or (st[0] == os.getpid() and pid not in execs)}
        if stray:
            sandbox.signal_all(stray, signal.SIGKILL)
            self.details["stray_processes"] = sorted(stray)[:20]
            self.reject("child_process", "%s: %d process(es) below the executor left its process group (a new "
                        "session or a double fork) and were killed" % (when, len(stray)))
        return mine

    # ------------------------------------------------------------------------------------------
    # batches and rounds

    def batch(self, name, profile=False):
        """One timed batch over all slots; returns (seconds, the outputs copied into judge memory, reply)."""
        torch = self.torch
        ex = self.cand if name == "candidate" else self.base
        arena = self.cand_arena if name == "candidate" else self.base_arena
        other = self.base if name == "candidate" else self.cand
        other.stop()
        self.ensure_idle("before %s" % name)
        if ex is self.base:
            self.check_scheduling("before a batch of %s" % name)
        req = {"op": "run", "target": name, "calls": list(range(self.slots))}
        if profile:
            req["profile"] = True
        ex.cont()
        t0 = _perf()
        rep = self.ask(ex, req, "a batch of %s" % name)
        ex.stop()
        copies = [[o.clone() if o is not None else None for o in self.out_views(arena, s)] for s in range(self.slots)]
        self.sync()
        t1 = _perf()
        if ex is self.base:
            self.base_sched = sandbox.scheduling(self.base.proc.pid)  # threads it started, as it left them
        if not rep.get("ok"):
            if name not in ("candidate", "eager"):
                self.details["baselines"][name] = "unavailable: %s" % clean_text(str(rep.get("why")))[:300]
                self.v.flag("baseline_unavailable:" + name)
                self.baselines.remove(name)
                return None, None, rep
            self.executor_failure(ex, rep, "a batch of %s" % name)
        if name == "candidate":
            self.executor_problems(rep)
            # the executor's own snapshots (patched functions, switches, threads, streams), compared
            # after the clock stopped: their cost is not the candidate's
            ex.cont()
            self.executor_problems(self.ask(ex, {"op": "state"}, "after a batch of %s" % name))
            ex.stop()
        return t1 - t0, copies, rep

    def poison(self, arena):
        torch = self.torch
        for s in range(self.slots):
            for o in self.out_views(arena, s):
                if o is None:
                    continue
                if o.is_floating_point() or o.is_complex():
                    o.fill_(float("nan"))
                else:
                    o.view(torch.uint8).fill_(0xA5)

    def fill(self, arena, sets):
        for s, xs in enumerate(sets):
            for dst, x in zip(self.in_views(arena, s), xs):
                if dst is not None:
                    dst.copy_(x)

    def same_bits(self, a, b):
        torch = self.torch
        return torch.equal(a.contiguous().view(-1).view(torch.uint8), b.contiguous().view(-1).view(torch.uint8))

    def compare(self, slot, got, eager, values, ref_values, r64, when, code):
        """One call's outputs against the fp64 reference (eager's own error added to the tolerance)."""
        torch = self.torch
        r64_list = self.flat(r64)[0] if r64 is not None else [None] * len(eager)
        worst = None
        for i, (meta, o, e, r) in enumerate(zip(self.out_meta, got, eager, r64_list)):
            if meta["kind"] != "tensor":
                gv = (values or {}).get(str(slot), [None] * len(eager))[i]
                ev = (ref_values or {}).get(str(slot), [None] * len(eager))[i]
                if gv != ev:
                    self.reject(code, "%s: output %d is %r, expected %r" % (when, i, gv, ev))
                continue
            if o.numel() == 0:
                continue
            if not (o.is_floating_point() or o.is_complex()):
                if o.dtype == torch.bool:
                    bad = o.view(torch.uint8) != e.view(torch.uint8)
                else:
                    bad = o != e
                if r is not None and not r.is_floating_point() and r.dtype != torch.bool:
                    bad &= o != r.to(o.dtype)
                nbad = int(bad.sum().item())
                if nbad:
                    self.reject(code, "%s: output %d differs in %d of %d elements (exact dtype)" % (when, i, nbad, o.numel()))
                continue
            # fp64 outputs are compared in fp64, the others in fp32 (the tolerance is far above the
            # rounding of the fp64 reference to fp32). NaN never passes: not (err <= allowed).
            work = torch.float64 if o.dtype == torch.float64 else torch.float32
            atol, rtol = self.tolerance(o.dtype)
            rd = r.to(work) if (r is not None and tuple(r.shape) == tuple(e.shape)) else None
            ew = e.to(work, copy=True)
            err = o.to(work, copy=True)
            d = None
            if rd is None:
                rd = ew
                allowed = rd.abs().mul_(rtol).add_(atol)
                emax = 0.0
            else:
                d = ew.sub_(rd).abs_()
                emax = float(d.max().item())
                allowed = rd.abs().mul_(rtol).add_(d).add_(atol)
            err.sub_(rd).abs_()
            bad = ~(err <= allowed)
            nbad = int(bad.sum().item())
            if nbad:
                if not bool(torch.isfinite(rd).all().item()) or not bool(torch.isfinite(e).all().item()):
                    self.reject("task_error", "%s: the reference's output %d holds NaN or Inf" % (when, i))
                nonfinite = int((~torch.isfinite(o)).sum().item())
                if nonfinite:
                    self.reject(code, "%s: output %d holds %d NaN/Inf element(s) of %d (NaN never passes; unwritten "
                                "elements read NaN)" % (when, i, nonfinite, o.numel()))
                idx = int((err - allowed).argmax().item())
                self.reject(code, "%s: output %d: %d of %d elements outside atol %g / rtol %g of the fp64 reference "
                            "(max abs error %.3g; at flat index %d got %.8g, expected %.8g)" %
                            (when, i, nbad, o.numel(), atol, rtol, float(err.max().item()), idx,
                             o.reshape(-1)[idx].item(), rd.reshape(-1)[idx].item()))
            max_abs = float(err.max().item())
            # The worst error over its element's bound (0 exact, 1 at the bound): the deviation
            # penalty's statistic (src/eval/verdict.hpp). A zero bound counts an error as infinite.
            over = torch.where(allowed > 0, err / allowed.clamp_min(1e-300 if work == torch.float64 else 1e-38),
                               torch.where(err > 0, float("inf"), 0.0))
            self.worst_over_bound = max(self.worst_over_bound, float(over.max().item()))
            del over
            ratio = self.precision_statistic(o, err, d, rd, when, i)
            if worst is None or max_abs > worst.get("max_abs_err", 0):
                worst = {"max_abs_err": max_abs, "atol": atol, "rtol": rtol, "eager_max_abs_err": emax,
                         "rms_over_eager": ratio}
        return worst

    def precision_statistic(self, o, err, eager_err, ref, when, i):
        """The RMS error against the fp64 reference may be at most 32 times the eager reference's own
        (at least 16 units of the output dtype): a lower precision whose bias was corrected (a
        scalar rescale of an fp16 or TF32 product, fitted to the perturbation) stays inside the
        tolerance but not inside this (measured: fp16 is about 2^13 fp32 units off). Applies with
        the default tolerance only; a task may opt out (KFORGE = {"precision_check": False})."""
        torch = self.torch
        if eager_err is None or not self.precision_check or o.dtype not in self.eps:
            return None
        n = max(err.numel(), 1)
        rms = lambda t: float(torch.linalg.vector_norm(t, dtype=torch.float64).item()) / math.sqrt(n)
        rms_c, rms_e, rms_r = rms(err), rms(eager_err), rms(ref)
        bound = max(32 * rms_e, 16 * self.eps[o.dtype] * rms_r, 1e-30)
        if rms_c > bound:
            own = ("%.0f times the fp32 reference's own (%.3g)" % (rms_c / rms_e, rms_e) if rms_e > 0
                   else "while the fp32 reference is exact here")
            self.reject("precision_downgrade", "%s: output %d: the RMS error against the fp64 reference is %.3g, %s "
                        "(at most 32 times the reference's, or 16 units of %s, are allowed): the result was computed "
                        "in a lower precision, or only approximately" %
                        (when, i, rms_c, own, str(o.dtype).replace("torch.", "")))
        return round(rms_c / rms_e, 2) if rms_e > 0 else None

    def reparameterize(self):
        randomize = bool(self.details.get("weights_copied"))
        self.new_parameters(randomize)
        self.checks["parameters"] = ("fresh seed, then permuted and jittered, loaded into both models" if randomize else
                                     "fresh seed per epoch (state dicts differ: ModelNew built from the same seed)")
        for ex in (self.base, self.cand):
            ex.cont()
            if ex is self.base:
                self.check_scheduling("before new parameters")
            rep = self.ask(ex, {"op": "reinit", "init": self.init_bytes, "seed": self.seed, "state": self.state_bytes},
                           "new parameters")
            ex.stop()
            if ex is self.base:
                self.base_sched = sandbox.scheduling(self.base.proc.pid)
            if not rep.get("ok"):
                self.executor_failure(ex, rep, "building the models with new parameters")
            if ex is self.cand:
                self.executor_problems(rep)

    def run_round(self, rnd, timed, profile=False):
        torch = self.torch
        sets = [self.draw(self.pick_variant()) for _ in range(self.slots)]
        self.fill(self.cand_arena, sets)
        self.fill(self.base_arena, sets)
        self.poison(self.cand_arena)
        self.poison(self.base_arena)
        self.sync()
        order = ["candidate"] + list(self.baselines)
        self.rng.shuffle(order)
        times, outs, reps = {}, {}, {}
        for name in order:
            if name not in self.baselines and name != "candidate":
                continue
            t, copies, rep = self.batch(name, profile=profile and name == "candidate")
            if t is None:
                continue
            times[name] = t / self.slots
            if name in ("candidate", "eager"):
                outs[name] = copies
                reps[name] = rep
            del copies
            self.check_processes("after a batch of %s" % name)
        when = "timed round %d" % (rnd + 1 - self.trials) if timed else "verification round %d" % (rnd + 1)
        code = "timed_output_wrong" if timed else "wrong_result"
        # the reference mutates its inputs: the candidate may too (the same check is meaningless).
        # Whether it does is decided here, by the judge's own reference on a copy: changed inputs in
        # the baseline's arena alone prove nothing (whoever reached the arena could have written
        # them, to have the candidate's inputs go unchecked and the eager output's error, which
        # widens the tolerance, made large).
        if not self.ref_mutates:
            for s in range(self.slots):
                for x, v in zip(sets[s], self.in_views(self.base_arena, s)):
                    if v is not None and not self.same_bits(x, v):
                        if not self.reference_mutates(sets[s]):
                            self.reject("tampered", "%s, call %d: the baseline's inputs changed during the round, but "
                                        "the reference leaves its inputs alone (the judge's own run on a copy): "
                                        "something outside the baseline wrote into its buffers" % (when, s + 1))
                        self.ref_mutates = True
                        self.v.flag("reference_mutates_inputs")
        if not self.ref_mutates:
            for s in range(self.slots):
                for x, v in zip(sets[s], self.in_views(self.cand_arena, s)):
                    if v is not None and not self.same_bits(x, v):
                        self.reject("input_mutated", "%s, call %d: the candidate changed its inputs" % (when, s + 1))
        for s in range(self.slots):
            r64 = self.reference_fp64(sets[s])
            w = self.compare(s, outs["candidate"][s], outs["eager"][s], reps["candidate"].get("values"),
                             reps["eager"].get("values"), r64, "%s, call %d" % (when, s + 1), code)
            if w and w["max_abs_err"] >= self.worst.get("max_abs_err", -1):
                self.worst = w
            del r64
        if profile:
            self.check_kernels(reps["candidate"].get("kernels"))
        del outs, sets
        return times

    def reference_mutates(self, inputs):
        """Whether the judge's own fp32 reference changes (a copy of) these inputs."""
        torch = self.torch
        copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        with torch.no_grad():
            self.ref(*copies)
        self.sync()
        return any(isinstance(x, torch.Tensor) and not self.same_bits(x, c) for x, c in zip(inputs, copies))

    def check_kernels(self, kernels):
        """--require-cuda-kernel: kernels defined in the candidate's own source must have run in the
        profiled batch and taken at least half of its device time (copies left out): a kernel that
        is compiled but never launched, or launched on a token problem, does not count."""
        import re
        with open(self.req["candidate"], "rb") as f:
            src = f.read().decode("utf-8", "replace")
        names = set(re.findall(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?[\w:<>\s\*]*?\b(\w+)\s*\(", src))
        rows = []
        for k in kernels or []:
            try:
                rows.append((clean_text(str(k[0])), float(k[1])))
            except (TypeError, ValueError, IndexError):
                pass
        def is_copy(n):
            low = n.lower()
            return "memcpy" in low or "memset" in low
        mine = sum(t for n, t in rows if any(re.search(r"\b%s\b" % re.escape(x), n) for x in names))
        total = sum(t for n, t in rows if not is_copy(n))
        self.checks["kernels_seen"] = [[n[:120], t] for n, t in rows[:12]]
        self.checks["candidate_kernels"] = sorted(names)[:20]
        self.checks["candidate_kernel_share"] = round(mine / total, 3) if total > 0 else 0.0
        if mine <= 0:
            self.reject("no_kernel_launched", "--require-cuda-kernel: none of the candidate's own kernels (%s) ran in "
                        "a profiled batch (the profiler saw %d other kernel(s))" %
                        (", ".join(sorted(names)[:5]) or "none defined", len(rows)))
        if mine < 0.5 * total:
            self.reject("no_kernel_launched", "--require-cuda-kernel: the candidate's own kernels took %.0f%% of the "
                        "device time of a profiled batch (at least half is required); the rest: %s" %
                        (100 * mine / total, ", ".join(n[:60] for n, _ in rows[:3])))

    def measure_channel(self):
        """The channel's round trip (an empty request), the same for both executors."""
        out = {}
        for ex in (self.base, self.cand):
            xs = []
            for _ in range(11):
                ex.cont()
                t0 = _perf()
                self.ask(ex, {"op": "ping"}, "a ping")
                ex.stop()
                xs.append(_perf() - t0)
            out[ex.role] = round(sorted(xs)[len(xs) // 2] * 1e6, 1)
        self.details["channel_round_trip_us"] = out

    # ------------------------------------------------------------------------------------------

    def run(self):
        torch = self.torch
        self.details["judge_hardening"] = sandbox.harden_judge()
        guards.set_full_precision(torch)
        self.load_task()
        if self.cuda:
            if not torch.cuda.is_available():
                self.reject("no_gpu", "torch %s sees no CUDA device" % torch.__version__)
            torch.cuda.init()
            # The GPU is this judge's alone until the verdict (another slot on the same device, or
            # another kforge, waits): its probe, executors and batches time nothing but its own.
            # While it waits it says so every few seconds (each line restarts kforge's time-out).
            try:
                uuid = sandbox.gpu_uuid(torch, torch.cuda.current_device())
            except Exception as e:  # a torch without device UUIDs: judged without the lock
                uuid, fd, waited, why = None, None, 0.0, "no device UUID from torch (%s)" % e
            if uuid is not None:
                fd, waited, why = sandbox.gpu_lock(uuid, float(self.req.get("gpu_lock_wait_s", 1800)),
                                                   tick=lambda: self.send_phase("waiting_for_gpu"))
            if waited > 0.01:
                self.details["gpu_lock_wait_s"] = round(waited, 3)
            if fd is None and why.startswith("the GPU was held"):
                self.reject("internal_error", why + ": not judged (the candidate is not at fault)")
                self.v.d["correct"] = False
                return
            if fd is None:
                self.details["gpu_lock"] = why
            self.gpu_lock_fd = fd
        try:
            # Where a verdict's time goes (kforge serve reports it; scripts/serve-bench.py sums it):
            # setup (probe, executors, the baseline's import), load (the candidate's import), verify
            # (the verification rounds), time (the timed rounds).
            phases = self.details["phases_s"] = {}
            t_phase = _perf()
            self.calibrate_probe()
            self.spawn()
            self.layout()
            self.ref_mutates = False
            self.worst = {}
            self.worst_over_bound = 0.0
            self.start_baseline()
            phases["setup"] = round(_perf() - t_phase, 4)
            t_phase = _perf()
            self.start_candidate()
            self.check_processes("after importing the candidate")
            self.measure_channel()
            phases["load"] = round(_perf() - t_phase, 4)
            require_kernel = bool(self.req.get("require_cuda_kernel") or self.policy().get("require_cuda_kernel"))
            profile_round = self.rng.randrange(self.trials) if (require_kernel and self.cuda) else -1
            if require_kernel and not self.cuda:
                self.checks["kernel_ran"] = "not checked on the CPU"
            rounds = self.trials + (0 if self.req.get("skip_timing") else self.samples)
            times = {}
            for rnd in range(rounds):
                timed = rnd >= self.trials
                if rnd == self.trials:
                    self.send_phase("timing")
                if rnd == 1:
                    self.reparameterize()
                t_round = _perf()
                t = self.run_round(rnd, timed, profile=rnd == profile_round)
                key = "time" if timed else "verify"
                phases[key] = round(phases.get(key, 0.0) + _perf() - t_round, 4)
                if timed:
                    for k, x in t.items():
                        times.setdefault(k, []).append(x)
            self.checks["verification_rounds"] = self.trials
            self.checks["calls_checked"] = rounds * self.slots
            self.checks["tolerance"] = self.worst
            self.checks["worst_error_over_bound"] = self.worst_over_bound
            if times:
                self.speedups(times)
        finally:
            self.shutdown()
            if getattr(self, "gpu_lock_fd", None) is not None:
                os.close(self.gpu_lock_fd)  # releases the lock
                self.gpu_lock_fd = None
        self.v.d["correct"] = not self.v.d["reasons"]
        if self.v.d["correct"]:
            self.v.d["message"] = "accepted"

    def speedups(self, times):
        v = self.v
        cand = times["candidate"]
        self.details["timing"] = {"pool": self.slots, "rounds": len(cand), "clock": "judge wall time per batch "
                                  "(request to outputs copied back), per call",
                                  "wall_us": {n: summarize([x * 1e6 for x in xs]) for n, xs in times.items()}}
        for n, xs in times.items():
            if n == "candidate":
                continue
            ratios = [b / c for b, c in zip(xs, cand) if c > 0]
            v.d["speedup"][n] = summarize(ratios)
            v.d["candidate_us"][n] = summarize([x * 1e6 for x in cand])
            v.d["baseline_us"][n] = summarize([x * 1e6 for x in xs])
        s = v.d["speedup"].get("eager", {}).get("median", 1.0)
        if s > 200:
            v.flag("implausible_speedup")
        c = summarize(cand)
        if c["p90"] > 1.5 * c["p10"]:
            v.flag("noisy_timing")

    def shutdown(self):
        """Kills both executors (their whole process groups), then every process still below the
        judge: one that survived its group's kill had left it (orphan_process)."""
        for ex in (self.cand, self.base):
            if ex is not None:
                out, size = ex.output()
                if size and ex.role == "candidate":
                    self.details["output"] = clean_text(out)
                    self.details["output_bytes"] = size
                elif size and ex.role == "baseline" and self.v.d["reasons"]:
                    self.details["baseline_output"] = clean_text(out)[:1000]
                ex.kill()
        time.sleep(0.05)
        left = sandbox.descendants(os.getpid())
        if left:
            sandbox.signal_all(left, signal.SIGKILL)
            self.details["stray_processes"] = sorted(left)[:20]
            if not self.v.d["reasons"]:
                self.v.reject("child_process", "%d process(es) outlived the executor's process group and were "
                              "killed" % len(left))
        self.unlink_arenas()
