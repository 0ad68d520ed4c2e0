"""kforge's Python eval worker for KernelBench-format PyTorch tasks.

  python3 kforge_worker serve            the judge: line-JSON requests on stdin, phase lines and verdicts on stdout
  python3 kforge_worker exec RFD WFD     the executor the judge starts (executor.py; never run it by hand)
  python3 kforge_worker scan CANDIDATE [--task TASK] [--allow-streams] [--require-cuda-kernel]
  python3 kforge_worker build CANDIDATE --build-dir DIR    import the candidate once (compiles its extension)
  python3 kforge_worker probe            {"python", "torch", "cuda", "device"} as JSON
  python3 kforge_worker profile --task T --candidate C --build-dir DIR --result FILE
                                         one call for Nsight Compute (ncu_target.py; kforge runs it under ncu)

The protocol (serve): one request per line, e.g.
  {"id": 1, "op": "torch", "task": "t.py", "candidate": "c.py", "name": "c.py", "device": "cuda",
   "baselines": ["eager", "compile"], "samples": 10, "trials": 5, "seed": 1, "build_dir": "...",
   "cache_dir": "...", "atol": null, "rtol": null, "skip_timing": false}
answered by zero or more phase lines {"id": 1, "phase": "loading"|"loaded"|"timing"} (the C++ side
applies the compile time-out between "loading" and "loaded") and exactly one verdict line: the
fields of src/eval/verdict.hpp plus "id" and "fatal" (true: the worker exits after it; the caller
starts a fresh one). Every line carries the request's "key" (a secret the caller drew for this
request): only this process has seen it, so a line written into the reply pipe by anyone else
(candidate code reaching it through /proc) is told apart. The serve process is the judge and never
imports candidate code (judge.py); the candidate runs in an executor subprocess (executor.py).
Whatever the task prints goes to a capture file, never into the protocol; what the candidate prints
goes to the executor's capture file; an excerpt is returned in details.output (as valid UTF-8).
"""

import json
import os
import sys
import tempfile
import traceback

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    __package__ = "kforge_worker"

from kforge_worker import sandbox as _sandbox  # noqa: E402
from kforge_worker import scan as scan_mod  # noqa: E402
from kforge_worker.verdict import Verdict  # noqa: E402

# Before anything imports torch, here and in every process started from here (the executors
# inherit the environment): the judge's arenas must be legacy CUDA IPC handles (sandbox.py says why).
_sandbox.legacy_cuda_ipc_env()

EXCERPT = 2048


class Capture:
    """fd 1 and 2 go to a file; the protocol keeps a private copy of the original stdout."""

    def __init__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.proto = os.fdopen(os.dup(1), "w", buffering=1)
        self.fd, path = tempfile.mkstemp(prefix="kforge-pyworker-out-")
        os.unlink(path)
        os.dup2(self.fd, 1)
        os.dup2(self.fd, 2)

    def take(self):
        sys.stdout.flush()
        sys.stderr.flush()
        size = os.fstat(self.fd).st_size
        text = os.pread(self.fd, min(size, EXCERPT), 0).decode("utf-8", "replace") if size else ""
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, 0)
        return text, size

    def send(self, obj):
        self.proto.write(json.dumps(obj, default=str, ensure_ascii=True) + "\n")
        self.proto.flush()


def judge_one(req, cap):
    v = None
    fatal = False
    try:
        if req.get("op", "torch") != "torch":
            v = Verdict(req.get("name", "?"))
            v.reject("internal_error", "this worker judges op 'torch', not '%s'" % req.get("op"))
        else:
            if req.get("cache_dir"):
                os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(req["cache_dir"], "inductor"))
                os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(req["cache_dir"], "triton"))
            try:
                import torch  # noqa: F401
            except Exception as e:  # ImportError, or a broken installation
                v = Verdict(req.get("name", "?"))
                v.reject("no_torch", "PyTorch cannot be imported by %s: %s" % (sys.executable, e))
                v.d["details"]["python"] = sys.version.split()[0]
                torch = None
            if torch is not None:
                from kforge_worker.judge import Fatal, Judge, Rejected
                j = Judge(req, lambda phase: cap.send({"id": req.get("id"), "phase": phase, "key": req.get("key")}),
                          torch)
                v = j.v
                try:
                    j.run()
                except Rejected:
                    pass
                except Fatal as f:
                    v.reject(f.code, f.why)
                    fatal = True
                v.d["details"]["torch"] = torch.__version__
    except Exception as e:
        v = v or Verdict(req.get("name", "?"))
        v.reject("internal_error", "the Python worker failed: %s: %s" % (type(e).__name__, e))
        v.d["details"]["traceback"] = traceback.format_exc()[-3000:]
    except SystemExit as e:
        v = v or Verdict(req.get("name", "?"))
        v.reject("crashed", "candidate code called exit(%s)" % (e.code,))
        fatal = True
    if v.d["reasons"]:
        v.d["correct"] = False
    text, size = cap.take()
    if size:
        v.d["details"]["judge_output"] = text
        v.d["details"]["judge_output_bytes"] = size
    out = _clean(dict(v.d))
    out["id"] = req.get("id")
    out["key"] = req.get("key")
    out["fatal"] = fatal
    return out, fatal


def _clean(obj):
    """Valid UTF-8 strings everywhere (lone surrogates, undecodable bytes replaced)."""
    if isinstance(obj, str):
        return obj.encode("utf-8", "replace").decode("utf-8", "replace")
    if isinstance(obj, dict):
        return {_clean(str(k)): _clean(x) for k, x in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(x) for x in obj]
    return obj


def serve():
    cap = Capture()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            v = Verdict("?")
            v.reject("internal_error", "malformed request: %s" % e)
            cap.send(dict(v.d, id=None, fatal=False, key=None))
            continue
        out, fatal = judge_one(req, cap)
        cap.send(out)
        if fatal or req.get("exit_after"):
            os._exit(0)
    return 0


def build(argv):
    """Imports the candidate once (its load_inline builds the extension into --build-dir) in a child
    process; this process runs no candidate code. It is a child subreaper: whatever the import
    leaves running (in this group or one of its own: setpgid stays allowed, ninja needs it; a double
    fork stays below a subreaper) is killed when the child ends or --deadline-s passes, before the
    build is reported, so nothing outlives the build out of the judge's sight to load the machine
    while baselines are timed. The child cannot skip that (by exiting early, or by patching this
    code): the cleanup is not in its process."""
    import argparse
    import time
    p = argparse.ArgumentParser(prog="kforge_worker build")
    p.add_argument("candidate")
    p.add_argument("--build-dir", required=True)
    p.add_argument("--deadline-s", type=float, default=0.0,
                   help="seconds after which the import and everything it started are killed (0: none)")
    a = p.parse_args(argv)
    os.makedirs(a.build_dir, exist_ok=True)
    os.environ["TORCH_EXTENSIONS_DIR"] = a.build_dir
    from kforge_worker import sandbox
    sandbox.die_with_parent()
    sandbox.child_subreaper()
    sandbox.non_dumpable()
    t0 = time.time()
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        # Candidate code runs here: no capabilities, no tracing of other processes, no session of
        # its own for anything it starts.
        sandbox.die_with_parent()
        sandbox.non_dumpable()
        sandbox.drop_capabilities()
        sandbox.install_seccomp()
        try:
            import torch  # noqa: F401
            import importlib.util
            spec = importlib.util.spec_from_file_location("kforge_candidate", a.candidate)
            mod = importlib.util.module_from_spec(spec)
            sys.modules["kforge_candidate"] = mod
            spec.loader.exec_module(mod)
            res = {"ok": True, "error": ""}
        except BaseException as e:  # noqa: B036 - whatever the candidate does, report it
            res = {"ok": False, "error": "%s: %s" % (type(e).__name__, str(e)[:2000])}
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os.write(w, json.dumps(res).encode()[:8000])
        os._exit(0)
    os.close(w)
    timed_out = False
    deadline = t0 + a.deadline_s if a.deadline_s > 0 else None
    while True:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            break
        if deadline is not None and time.time() > deadline:
            timed_out = True
            break
        time.sleep(0.02)
    left = sandbox.kill_descendants()
    raw = b""
    if not timed_out:
        try:
            while True:
                chunk = os.read(r, 8192)
                if not chunk:
                    break
                raw += chunk
        except OSError:
            pass
    os.close(r)
    try:
        res = json.loads(raw.decode("utf-8", "replace")) if raw else None
        ok, err = res.get("ok") is True, str(res.get("error", ""))
    except (ValueError, AttributeError):
        res = None
    if res is None:
        ok, err = False, ("the import ran past --deadline-s" if timed_out else
                          "the import ended without a result (the candidate exited)")
    # What the import left running, besides the child itself: processes of this group (a compile
    # worker pool, say) are killed and that is all; one that moved to a group of its own (ninja's
    # compilers do, but they end with the build) had escaped, and kforge rejects the candidate
    # (child_process).
    me = os.getpgid(0)
    escaped = sorted(p for p, st in left.items() if p != pid and st[1] != me)
    os.write(1, (json.dumps({"ok": ok, "seconds": time.time() - t0, "error": err, "timed_out": timed_out,
                             "killed_left_over": len([p for p in left if p != pid]),
                             "escaped": len(escaped)}) + "\n").encode())
    os._exit(0 if ok else 1)


def probe():
    info = {"python": sys.version.split()[0], "executable": sys.executable, "torch": None, "cuda": False,
            "device": None}
    try:
        import torch
        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda
        info["cuda"] = bool(torch.cuda.is_available())
        if info["cuda"]:
            info["device"] = torch.cuda.get_device_name(0)
    except Exception as e:
        info["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(info))
    return 0


def main(argv):
    cmd = argv[0] if argv else "serve"
    if cmd == "serve":
        return serve()
    if cmd == "scan":
        return scan_mod.main(argv[1:])
    if cmd == "build":
        return build(argv[1:])
    if cmd == "probe":
        return probe()
    if cmd == "profile":
        from kforge_worker import ncu_target
        return ncu_target.main(argv[1:])
    if cmd == "exec":
        from kforge_worker import executor
        return executor.main(argv[1:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
