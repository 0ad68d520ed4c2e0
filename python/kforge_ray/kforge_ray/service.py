"""``start()``: the router and its HTTP ingress in this process (a Ray driver)."""
from __future__ import annotations

import os
from typing import List, Optional, Sequence

from .actor import OWNED_SERVE_FLAGS
from .ingress import Ingress
from .record import Record
from .router import PoolOptions, Router


class Service:
    def __init__(self, router: Router, ingress: Ingress, record: Record):
        self.router = router
        self.ingress = ingress
        self.record = record

    @property
    def port(self) -> int:
        return self.ingress.port

    @property
    def url(self) -> str:
        host = self.ingress._server.server_address[0]
        return f"http://{host}:{self.port}"

    def stop(self) -> None:
        self.ingress.stop()
        self.router.stop()
        self.record.close()


def check_serve_args(serve_args: Sequence[str]) -> None:
    for a in serve_args:
        flag = a.split("=", 1)[0]
        if flag in OWNED_SERVE_FLAGS:
            raise ValueError(f"'{flag}' is set by kforge-ray for each actor's kforge serve; leave it out of the "
                             f"arguments passed to kforge serve")
    if not any(a.split("=", 1)[0] in ("--tasks", "--hgemm-shapes") for a in serve_args):
        raise ValueError("kforge serve needs tasks: pass --tasks SET.json|DIR and/or --hgemm-shapes ... after '--'")


def start(serve_args: Sequence[str], *, kforge: str = "kforge", device: str = "cuda", resource: Optional[str] = None,
          amount: float = 1.0, actor_cpus: float = 0.0, actors_per_node: int = 0, token: str = "",
          host: str = "127.0.0.1", port: int = 8000, store: str = "kforge-ray.db",
          work_root: str = "/tmp/kforge-ray", max_body_bytes: int = 32 << 20, max_completion_bytes: int = 256 * 1024,
          max_batch: int = 256, max_queue: int = 256, request_timeout_s: float = 3600.0, min_actors: int = 1,
          start_timeout_s: float = 600.0, serve_start_timeout_s: float = 300.0, poll_s: float = 1.0,
          max_concurrency: int = 64, node_resource: str = "", log=None) -> Service:
    """Starts the pool, waits for ``min_actors`` serve actors, binds the ingress; Ray must be initialised
    (``ray.init(address=...)``) before. ``serve_args`` go to every actor's ``kforge serve`` (tasks,
    reward, time-outs; not the flags kforge-ray sets: host, port, token, store, device, work dir)."""
    import ray

    if device not in ("cuda", "cpu"):
        raise ValueError(f"device must be cuda or cpu, not '{device}'")
    check_serve_args(serve_args)
    if not ray.is_initialized():
        raise RuntimeError("Ray is not initialised: call ray.init(address=...) first")
    resource = resource or ("GPU" if device == "cuda" else "kforge_cpu")
    limits: List[str] = ["--max-batch", str(max_batch), "--max-completion-bytes", str(max_completion_bytes),
                         "--max-queue", str(max_queue), "--max-body-bytes", str(max_body_bytes)]
    args = [a for a in serve_args]
    for flag in ("--max-batch", "--max-completion-bytes", "--max-queue", "--max-body-bytes"):
        if any(a.split("=", 1)[0] == flag for a in args):
            raise ValueError(f"'{flag}' is a kforge-ray option (the router enforces it and passes it on); give it "
                             "before '--'")
    spec = {"kforge": kforge, "serve_args": args + limits, "device": device, "work_root": work_root,
            "start_timeout_s": serve_start_timeout_s}
    record = Record(store)
    pool = PoolOptions(spec, resource=resource, amount=amount, actor_cpus=actor_cpus, actors_per_node=actors_per_node,
                       max_concurrency=max_concurrency, poll_s=poll_s, node_resource=node_resource)
    router = Router(record, pool, max_batch=max_batch, max_completion_bytes=max_completion_bytes, max_queue=max_queue,
                    log=log)
    router.start()
    try:
        router.wait_ready(min_actors, start_timeout_s)
        ingress = Ingress(router, token, host=host, port=port, max_body_bytes=max_body_bytes,
                          request_timeout_s=request_timeout_s)
    except BaseException:
        router.stop()
        record.close()
        raise
    ingress.start()
    return Service(router, ingress, record)


def default_work_root() -> str:
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), "kforge-ray")
