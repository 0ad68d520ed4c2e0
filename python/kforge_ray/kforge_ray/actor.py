"""The Ray actor that owns one ``kforge serve`` process for one device.

One actor per GPU (``num_gpus=1``: Ray sets ``CUDA_VISIBLE_DEVICES``, so the serve process's default
device is the actor's GPU), or per unit of a custom resource for CPU tasks (``num_gpus=0``). The
actor starts ``kforge serve`` on 127.0.0.1 with a port of its own choosing, a random token of its
own (loopback only; clients never see it) and its own SQLite store, and keeps it for its lifetime.
The serve process dies with the actor (``PR_SET_PDEATHSIG``), so a killed node leaves no judge
behind. The actor only forwards: every candidate and its baseline are judged and timed by that one
serve process on that one device, exactly as ``kforge serve`` does on a single host.

Each result the actor returns carries ``placement``: the node, host, actor and the device it was
measured on (GPU model, driver, clocks from ``nvidia-smi``; the CPU model for ``--device cpu``).
"""
from __future__ import annotations

import ctypes
import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
from typing import Any, Dict, List, Optional

# Flags of kforge serve that the actor sets itself (so a pass-through argument may not).
OWNED_SERVE_FLAGS = ("--host", "--port", "--port-file", "--token-file", "--no-auth", "--store", "--device",
                     "--devices", "--work-dir")


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def gpu_info(visible: str) -> Dict[str, Any]:
    """The GPU named by ``visible`` (the first entry of CUDA_VISIBLE_DEVICES: an index or a UUID) as
    nvidia-smi reports it now: model, driver, current and maximum SM clock, memory clock."""
    fields = "name,uuid,driver_version,clocks.sm,clocks.max.sm,clocks.mem,pstate"
    cmd = ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"]
    if visible:
        cmd += ["-i", visible]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"kind": "cuda", "visible": visible, "error": f"nvidia-smi: {e}"}
    if out.returncode != 0 or not out.stdout.strip():
        return {"kind": "cuda", "visible": visible, "error": (out.stderr or out.stdout).strip()[-300:]}
    v = [x.strip() for x in out.stdout.strip().splitlines()[0].split(",")]
    keys = ["name", "uuid", "driver", "sm_clock_mhz", "max_sm_clock_mhz", "mem_clock_mhz", "pstate"]
    info: Dict[str, Any] = {"kind": "cuda", "visible": visible}
    info.update(dict(zip(keys, v)))
    return info


class ServeActorImpl:
    """The actor's body (``kforge_ray.actor.ServeActor`` is this class wrapped by ``ray.remote``).

    ``spec``: ``kforge`` (the binary on this node), ``serve_args`` (passed to ``kforge serve``:
    tasks, reward, time-outs...), ``device`` (cuda or cpu), ``work_root`` (a folder on this node;
    the actor's store and candidate files go to ``work_root/actor-ID``), ``start_timeout_s``.
    """

    def __init__(self, spec: Dict[str, Any]):
        import ray  # only inside a Ray worker

        ctx = ray.get_runtime_context()
        self.actor_id = ctx.get_actor_id() or f"local-{os.getpid()}"
        self.node_id = ctx.get_node_id()
        self.spec = dict(spec)
        self.device = self.spec.get("device", "cuda")
        self.dir = os.path.join(self.spec["work_root"], "actor-" + self.actor_id[:16])
        os.makedirs(self.dir, exist_ok=True)
        self.store = os.path.join(self.dir, "store.db")
        self.token = secrets.token_hex(24)
        self.token_file = os.path.join(self.dir, "token")
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.token + "\n")
        self.visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0]
        self._local = threading.local()
        self._lock = threading.Lock()
        self._proc: Optional[subprocess.Popen] = None
        self._conns: List[http.client.HTTPConnection] = []  # every keep-alive connection, closed by stop()
        self.restarts = 0
        self._device_info: Dict[str, Any] = {}
        self._device_at = 0.0
        self._start()
        health = self._get("/v1/health")
        self.slots = int(health.get("slots", 1))
        self.n_tasks = int(health.get("tasks", 0))

    # -- the serve process ---------------------------------------------------------------------
    def _start(self) -> None:
        port_file = os.path.join(self.dir, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        args = [self.spec["kforge"], "serve", *self.spec.get("serve_args", []),
                "--host", "127.0.0.1", "--port", "0", "--port-file", port_file, "--token-file", self.token_file,
                "--store", self.store, "--device", self.device, "--work-dir", os.path.join(self.dir, "work")]
        self.log_path = os.path.join(self.dir, "serve.log")
        log = open(self.log_path, "ab")
        box: Dict[str, Any] = {}
        started = threading.Event()

        def run() -> None:
            # A thread that lives as long as the process it starts: PR_SET_PDEATHSIG fires when the
            # thread that forked dies, so the fork happens here and this thread waits on the child.
            try:
                box["proc"] = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                               preexec_fn=_die_with_parent, start_new_session=True)
            except OSError as e:
                box["error"] = e
            started.set()
            if "proc" in box:
                box["proc"].wait()

        threading.Thread(target=run, name="kforge-serve", daemon=True).start()
        started.wait()
        log.close()
        if "error" in box:
            raise RuntimeError(f"cannot start {args[0]}: {box['error']}")
        proc: subprocess.Popen = box["proc"]
        deadline = time.monotonic() + float(self.spec.get("start_timeout_s", 300))
        while not os.path.exists(port_file):
            if proc.poll() is not None:
                raise RuntimeError(f"kforge serve exited with status {proc.returncode} at start: {self._log_tail()}")
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"kforge serve did not listen within {self.spec.get('start_timeout_s', 300)} s: "
                                   f"{self._log_tail()}")
            time.sleep(0.05)
        with open(port_file, encoding="utf-8") as f:
            self.port = int(f.read().strip())
        self._proc = proc
        self._local = threading.local()  # connections to an earlier process are stale

    def _log_tail(self, n: int = 600) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - n))
                return f.read().decode("utf-8", "replace").strip().replace("\n", " | ")
        except OSError:
            return "(no log)"

    def _alive(self) -> None:
        """Restarts the serve process on the same store if it died (its pending rows are judged again
        at start, done rows never); after 3 restarts the actor gives up and exits."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return
            if self.restarts >= 3:
                import ray

                ray.actor.exit_actor()
            self.restarts += 1
            self._start()

    # -- HTTP to the serve process (one keep-alive connection per calling thread) --------------
    def _request(self, method: str, path: str, body: Optional[bytes] = None, timeout: float = 7200):
        for attempt in range(2):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
                self._local.conn = conn
                with self._lock:
                    self._conns.append(conn)
            try:
                conn.request(method, path, body=body, headers={"Authorization": "Bearer " + self.token,
                                                               "Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
                return resp.status, json.loads(data.decode("utf-8")) if data else {}
            except (http.client.HTTPException, ConnectionError, socket.timeout, OSError):
                conn.close()
                self._local.conn = None
                if attempt == 1:
                    raise
                self._alive()
        raise AssertionError("unreachable")

    def _get(self, path: str) -> Dict[str, Any]:
        status, body = self._request("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path}: HTTP {status}: {body}")
        return body

    # -- what the router calls -------------------------------------------------------------------
    def device_info(self) -> Dict[str, Any]:
        now = time.monotonic()
        if not self._device_info or now - self._device_at > 60:
            if self.device == "cpu":
                self._device_info = {"kind": "cpu", "name": _cpu_model(), "cores": os.cpu_count()}
            else:
                self._device_info = gpu_info(self.visible)
            self._device_at = now
        return self._device_info

    def placement(self) -> Dict[str, Any]:
        return {"node_id": self.node_id, "host": socket.gethostname(), "actor_id": self.actor_id,
                "device": self.device_info()}

    def ready(self) -> Dict[str, Any]:
        info = self.placement()
        info.update({"slots": self.slots, "tasks": self.n_tasks, "pid": os.getpid(),
                     "serve_pid": self._proc.pid if self._proc else None, "store": self.store,
                     "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                     "task_list": self._get("/v1/tasks")["tasks"]})
        return info

    def tasks(self) -> List[Dict[str, Any]]:
        self._alive()
        return self._get("/v1/tasks")["tasks"]

    def health(self) -> Dict[str, Any]:
        self._alive()
        return self._get("/v1/health")

    def score(self, items: List[Dict[str, str]]) -> Dict[str, Any]:
        """``POST /v1/score`` of these items on this actor's serve process: ``{"status", "body",
        "call_s"}``; every result carries ``placement``."""
        self._alive()
        t0 = time.perf_counter()
        status, body = self._request("POST", "/v1/score", json.dumps({"items": items}).encode("utf-8"))
        call_s = time.perf_counter() - t0
        if isinstance(body, dict) and isinstance(body.get("results"), list):
            where = self.placement()
            for r in body["results"]:
                if isinstance(r, dict) and r.get("status") == "done":
                    r["placement"] = where
        return {"status": status, "body": body, "call_s": call_s}

    def stop(self) -> None:
        # kforge serve's HTTP server waits for its open keep-alive connections when it stops: close them.
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            c.close()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
