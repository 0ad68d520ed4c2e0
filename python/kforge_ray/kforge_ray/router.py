"""The router: a pool of serve actors (one per GPU, or per unit of a custom resource, on every node
that has one), requests spread by queue depth, a request whose actor died handed to another actor.

- The pool follows the cluster: every ``poll_s`` the router lists the live nodes and starts the
  actors a node has room for (pinned to that node), so a node that joins later gets actors and work;
  an actor whose node is gone leaves the pool.
- Each item goes to the live actor with the fewest outstanding items per slot (ties in turn); an
  actor's items of one request go to it as one ``/v1/score`` call.
- "Scored once" is kept by the router's record (``record.py``), not by the actors' stores: an id
  answered once is answered from the record ever after; an id in flight is joined, not sent again;
  an id whose actor died is handed, with the same id, to one other actor, and the dead actor is
  killed (``ray.kill``) so that no late answer from it can arrive. The record holds one verdict per
  id, which is the only verdict any client ever sees.
"""
from __future__ import annotations

import concurrent.futures
import itertools
import math
import queue
import secrets
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

from .record import Record, completion_sha


class ScoreError(Exception):
    """A refusal with the HTTP status kforge serve would answer."""

    def __init__(self, status: int, message: str, retry_after_s: float = 0.0):
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


def random_hex_id() -> str:
    return secrets.token_hex(16)


class PoolOptions:
    """How actors are made. ``resource``: "GPU" (one actor per ``amount`` GPUs, ``num_gpus``) or the
    name of a custom resource (``num_gpus=0``, ``resources={name: amount}``), e.g. ``kforge_cpu``
    for ``--device cpu`` nodes started with ``ray start --resources='{"kforge_cpu": 2}'``."""

    def __init__(self, spec: Dict[str, Any], resource: str = "GPU", amount: float = 1.0, actor_cpus: float = 0.0,
                 actors_per_node: int = 0, max_concurrency: int = 64, poll_s: float = 1.0, node_resource: str = ""):
        if amount <= 0:
            raise ValueError("the resource amount per actor must be positive")
        self.spec = spec
        self.resource = resource
        self.amount = amount
        self.actor_cpus = actor_cpus
        self.actors_per_node = actors_per_node
        self.max_concurrency = max_concurrency
        self.poll_s = poll_s
        self.node_resource = node_resource  # only nodes that have this (custom) resource host actors


class _Actor:
    def __init__(self, handle: Any, node_id: str, index: int):
        self.handle = handle
        self.node_id = node_id
        self.index = index
        self.actor_id = ""
        self.info: Dict[str, Any] = {}
        self.slots = 1
        self.alive = False  # ready and not known dead
        self.dead = False
        self.depth = 0  # items handed to it and not answered
        self.answered = 0


class _Entry:
    def __init__(self, rid: str, task_id: str, completion: str, sha: str):
        self.rid = rid
        self.task_id = task_id
        self.completion = completion
        self.sha = sha
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self.call: Optional[int] = None  # the call it is in now
        self.handed = 0
        self.prefer: Optional[_Actor] = None


class _Call:
    def __init__(self, cid: int, actor: _Actor, rids: List[str]):
        self.cid = cid
        self.actor = actor
        self.rids = rids
        self.t0 = time.perf_counter()


class Router:
    MAX_HANDOFFS = 4  # an item handed to this many actors without an answer fails (502)

    def __init__(self, record: Record, pool: PoolOptions, max_batch: int = 256, max_completion_bytes: int = 256 * 1024,
                 max_queue: int = 256, log=None):
        self.record = record
        self.pool = pool
        self.max_batch = max_batch
        self.max_completion_bytes = max_completion_bytes
        self.max_queue = max_queue
        self.log = log or (lambda msg: print("kforge-ray: " + msg, file=sys.stderr, flush=True))
        self._lock = threading.RLock()
        self._actors: List[_Actor] = []
        self._entries: Dict[str, _Entry] = {}
        self._waiting: List[str] = []  # rids with no live actor to go to
        self._calls: Dict[int, _Call] = {}
        self._cids = itertools.count(1)
        self._rr = itertools.count()
        self._index = itertools.count()
        self._events: "queue.Queue[tuple]" = queue.Queue()
        self._stop = threading.Event()
        self._tasks: Optional[List[Dict[str, Any]]] = None
        self._task_ids: set = set()
        self._backoff: Dict[str, float] = {}  # node id -> no new actor before this time
        self.metrics = {"items": {}, "handoffs": 0, "actor_deaths": 0, "actors_started": 0, "calls": 0,
                        "overhead_s_sum": 0.0, "overhead_n": 0, "rejected_429": 0}
        self._threads: List[threading.Thread] = []
        self._cls = None
        self.last_start_error = ""
        self._mean_judge_s = 0.0  # moving mean of judged verdicts' judge_s: the 429's Retry-After estimate

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        for name, fn in (("kforge-ray-dispatch", self._dispatch_loop), ("kforge-ray-pool", self._pool_loop)):
            t = threading.Thread(target=fn, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def wait_ready(self, min_actors: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                n = sum(1 for a in self._actors if a.alive)
            if n >= min_actors and self._tasks is not None:
                break
            if time.monotonic() > deadline:
                why = (f"the last actor that failed to start said: {self.last_start_error}" if self.last_start_error
                       else f"does any node have the resource '{self.pool.resource}'?")
                raise RuntimeError(f"{n} serve actor(s) ready after {timeout_s:.0f} s; {min_actors} needed ({why})")
            time.sleep(0.1)
        recovered = self.record.pending()
        if recovered:
            self.log(f"{len(recovered)} request(s) left pending by an earlier router: handed to actors again")
            with self._lock:
                for row in recovered:
                    if row["request_id"] not in self._entries:
                        e = _Entry(row["request_id"], row["task_id"], row["completion"], row["completion_sha"])
                        self._entries[e.rid] = e
                        self._events.put(("dispatch", [e.rid]))

    def stop(self) -> None:
        self._stop.set()
        self._events.put(("stop",))
        import ray

        with self._lock:
            actors = list(self._actors)
        stops = []
        for a in actors:
            if not a.dead:
                try:
                    stops.append(a.handle.stop.remote())
                except Exception:  # noqa: BLE001 - a dead actor cannot be stopped
                    pass
        try:
            ray.wait(stops, num_returns=len(stops), timeout=30)
        except Exception:  # noqa: BLE001
            pass
        for a in actors:
            try:
                ray.kill(a.handle)
            except Exception:  # noqa: BLE001
                pass

    # -- what the ingress asks ------------------------------------------------------------------
    def tasks(self) -> List[Dict[str, Any]]:
        return list(self._tasks or [])

    def actors(self) -> List[Dict[str, Any]]:
        with self._lock:
            return [{"actor_id": a.actor_id, "node_id": a.node_id, "alive": a.alive, "depth": a.depth,
                     "slots": a.slots, "answered": a.answered, "host": a.info.get("host"),
                     "device": a.info.get("device"), "cuda_visible_devices": a.info.get("cuda_visible_devices")}
                    for a in self._actors if a.alive]

    def stats(self) -> Dict[str, Any]:
        with self._lock:
            live = [a for a in self._actors if a.alive]
            return {"pending": len(self._entries), "slots": sum(a.slots for a in live), "actors": len(live),
                    "queue_limit": self.max_queue * max(1, len(live)), "waiting": len(self._waiting)}

    def lookup(self, rid: str) -> Optional[Dict[str, Any]]:
        row = self.record.get(rid)
        if row is None:
            return None
        if row["state"] == "done":
            return row["result"]
        return {"request_id": rid, "task_id": row["task_id"], "status": "pending"}

    def submit(self, items: Sequence[Dict[str, str]], job_id: str = "") -> List[concurrent.futures.Future]:
        """Futures of the results, in the order of ``items`` (task_id, completion, request_id); refuses
        the whole batch (ScoreError) as kforge serve does: 400, 404, 409, 413, 429."""
        if not items:
            raise ScoreError(400, "the batch holds no items")
        if len(items) > self.max_batch:
            raise ScoreError(413, f"the batch holds {len(items)} items; the limit is {self.max_batch}")
        its = []
        for i, it in enumerate(items):
            task, completion, rid = it["task_id"], it["completion"], it.get("request_id") or ""
            if task not in self._task_ids:
                raise ScoreError(404, f"item {i}: unknown task id '{task}' (GET /v1/tasks lists them)")
            size = len(completion.encode("utf-8", "surrogatepass"))
            if size > self.max_completion_bytes:
                raise ScoreError(413, f"item {i}: the completion has {size} bytes; the limit is "
                                      f"{self.max_completion_bytes}")
            if len(rid.encode("utf-8", "surrogatepass")) > 256:
                raise ScoreError(400, f"item {i}: the request id is longer than 256 bytes")
            if not rid:
                rid = "kf-" + random_hex_id()
            its.append((rid, task, completion, completion_sha(task, completion)))
        with self._lock:
            seen: Dict[str, str] = {}
            fresh: List[tuple] = []
            stored: Dict[str, Dict[str, Any]] = {}
            for rid, task, completion, sha in its:
                if rid in seen:
                    if seen[rid] != sha:
                        raise ScoreError(409, f"request id '{rid}' names two different completions in this batch")
                    continue
                seen[rid] = sha
                e = self._entries.get(rid)
                if e is not None:
                    if e.sha != sha:
                        raise ScoreError(409, f"request id '{rid}' was used before for another task or completion")
                    continue
                row = self.record.get(rid)
                if row is not None:
                    if row["completion_sha"] != sha:
                        raise ScoreError(409, f"request id '{rid}' was used before for another task or completion")
                    if row["state"] == "done":
                        stored[rid] = row["result"]
                        continue
                fresh.append((rid, task, completion, sha))
            st = self.stats()
            if fresh and st["pending"] + len(fresh) > st["queue_limit"]:
                self.metrics["rejected_429"] += 1
                per = self._mean_judge_s or 5.0
                wait = math.ceil(per * st["pending"] / max(1, st["slots"]))
                raise ScoreError(429, f"the queue holds {st['pending']} candidates (limit {st['queue_limit']}); this "
                                      f"batch adds {len(fresh)}: retry later", min(600.0, max(1.0, wait)))
            self.record.admit(fresh)
            if job_id:
                self.record.create_job(job_id, [r for r, _, _, _ in its])
            new = []
            for rid, task, completion, sha in fresh:
                e = _Entry(rid, task, completion, sha)
                self._entries[rid] = e
                new.append(rid)
            out = []
            for rid, _, _, _ in its:
                if rid in stored:
                    f: concurrent.futures.Future = concurrent.futures.Future()
                    j = dict(stored[rid])
                    j["from_store"] = True
                    f.set_result(j)
                    self._count("stored")
                    out.append(f)
                else:
                    out.append(self._entries[rid].future)
        if new:
            self._events.put(("dispatch", new))
        return out

    # -- the dispatcher (one thread: every change of placement happens here) --------------------
    def _count(self, origin: str) -> None:
        self.metrics["items"][origin] = self.metrics["items"].get(origin, 0) + 1

    def _dispatch_loop(self) -> None:
        delayed: List[tuple] = []  # (when, rids)
        while not self._stop.is_set():
            timeout = 0.5
            if delayed:
                timeout = max(0.0, min(timeout, min(w for w, _ in delayed) - time.monotonic()))
            try:
                ev = self._events.get(timeout=timeout)
            except queue.Empty:
                ev = None
            now = time.monotonic()
            due = [r for w, r in delayed if w <= now]
            delayed = [(w, r) for w, r in delayed if w > now]
            for rids in due:
                self._dispatch(rids)
            if ev is None:
                continue
            try:
                kind = ev[0]
                if kind == "stop":
                    return
                if kind == "dispatch":
                    self._dispatch(ev[1])
                elif kind == "later":
                    delayed.append((now + ev[1], ev[2]))
                elif kind == "done":
                    self._finish(ev[1], ev[2])
                elif kind == "ready":
                    self._ready(ev[1], ev[2])
            except Exception as e:  # noqa: BLE001 - the loop must go on; say what happened
                self.log(f"dispatcher: {type(e).__name__}: {e}")

    def _pick(self, prefer: Optional[_Actor]) -> Optional[_Actor]:
        live = [a for a in self._actors if a.alive]
        if not live:
            return None
        if prefer is not None and prefer.alive:
            return prefer
        low = min(a.depth / a.slots for a in live)
        ties = [a for a in live if a.depth / a.slots == low]
        return ties[next(self._rr) % len(ties)]

    def _dispatch(self, rids: List[str]) -> None:
        groups: Dict[int, List[str]] = {}
        chosen: Dict[int, _Actor] = {}
        with self._lock:
            for rid in rids:
                e = self._entries.get(rid)
                if e is None or e.future.done():
                    continue
                a = self._pick(e.prefer)
                e.prefer = None
                if a is None:
                    if rid not in self._waiting:
                        self._waiting.append(rid)
                    continue
                a.depth += 1
                groups.setdefault(id(a), []).append(rid)
                chosen[id(a)] = a
        for key, group in groups.items():
            a = chosen[key]
            for start in range(0, len(group), self.max_batch):
                self._send(a, group[start:start + self.max_batch])

    def _send(self, a: _Actor, rids: List[str]) -> None:
        call = _Call(next(self._cids), a, rids)
        items = []
        with self._lock:
            for rid in rids:
                e = self._entries[rid]
                e.call = call.cid
                e.handed += 1
                items.append({"task_id": e.task_id, "completion": e.completion, "request_id": rid})
            self._calls[call.cid] = call
            self.metrics["calls"] += 1
        self.record.handed(rids, a.actor_id)
        try:
            ref = a.handle.score.remote(items)
        except Exception as e:  # noqa: BLE001 - e.g. the actor handle is already known dead
            self._events.put(("done", call, e))
            return
        fut = ref.future()
        fut.add_done_callback(lambda f, c=call: self._events.put(("done", c, f)))

    def _actor_failed(self, a: _Actor, why: str) -> None:
        import ray

        with self._lock:
            if a.dead:
                return
            a.dead = True
            a.alive = False
            self.metrics["actor_deaths"] += 1
            self._backoff[a.node_id] = time.monotonic() + 5.0
        self.log(f"actor {a.actor_id[:12]} on node {a.node_id[:12]} is gone ({why}); its items go to other actors")
        try:
            ray.kill(a.handle, no_restart=True)  # so that nothing late can come from it
        except Exception:  # noqa: BLE001
            pass

    def _finish(self, call: _Call, outcome: Any) -> None:
        with self._lock:
            self._calls.pop(call.cid, None)
            call.actor.depth = max(0, call.actor.depth - len(call.rids))
        # Only the items this call still holds (not handed elsewhere since) are settled here.
        with self._lock:
            mine = [r for r in call.rids if r in self._entries and self._entries[r].call == call.cid]
        if isinstance(outcome, BaseException):
            exc: Optional[BaseException] = outcome
            out = None
        else:
            try:
                out, exc = outcome.result(), None
            except BaseException as e:  # noqa: BLE001
                out, exc = None, e
        if exc is not None:
            self._actor_failed(call.actor, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300])
            self._retry(mine, f"{type(exc).__name__}")
            return
        roundtrip = time.perf_counter() - call.t0
        with self._lock:
            self.metrics["overhead_s_sum"] += max(0.0, roundtrip - float(out.get("call_s", 0.0)))
            self.metrics["overhead_n"] += 1
        status, body = int(out.get("status", 0)), out.get("body") or {}
        results = body.get("results") if isinstance(body, dict) else None
        by_id: Dict[str, Dict[str, Any]] = {}
        if isinstance(results, list):
            for r in results:
                if isinstance(r, dict) and "request_id" in r:
                    by_id[r["request_id"]] = r
        again_same, again_other = [], []
        for rid in mine:
            r = by_id.get(rid)
            if r is not None and r.get("status") == "done":
                self._settle(rid, r, call.actor)
            elif status in (200, 504) and r is not None:
                again_same.append(rid)  # still being judged there: ask it again, it joins the same verdict
            elif status == 429 or status == 503:
                again_other.append(rid)
            else:
                why = body.get("error") if isinstance(body, dict) else str(body)
                self._fail(rid, ScoreError(status if status >= 400 else 502, f"actor answered HTTP {status}: {why}"))
        if again_same:
            with self._lock:
                for rid in again_same:
                    self._entries[rid].prefer = call.actor
                    self._entries[rid].handed -= 1  # the same actor, the same judgement: not a hand-off
            self._dispatch(again_same)
        if again_other:
            self._events.put(("later", 1.0, again_other))

    def _retry(self, rids: List[str], why: str) -> None:
        again = []
        with self._lock:
            for rid in rids:
                e = self._entries.get(rid)
                if e is None:
                    continue
                if e.handed >= self.MAX_HANDOFFS:
                    self._fail(rid, ScoreError(502, f"request '{rid}' was handed to {e.handed} actors and none "
                                                    f"answered (last: {why})"))
                    continue
                e.call = None
                self.metrics["handoffs"] += 1
                again.append(rid)
        if again:
            self._dispatch(again)

    def _settle(self, rid: str, result: Dict[str, Any], actor: _Actor) -> None:
        result = dict(result)
        result.pop("from_store", None)  # the router's first answer of this id: the verdict as judged
        first = self.record.complete(rid, result)
        judge_s = (result.get("timings") or {}).get("judge_s")
        with self._lock:
            e = self._entries.pop(rid, None)
            actor.answered += 1
            self._count("judged" if first else "stored")
            if first and isinstance(judge_s, (int, float)) and judge_s > 0:
                m = self._mean_judge_s
                self._mean_judge_s = judge_s if m == 0 else 0.9 * m + 0.1 * judge_s
        if e is not None and not e.future.done():
            e.future.set_result(result)

    def _fail(self, rid: str, err: ScoreError) -> None:
        with self._lock:
            e = self._entries.pop(rid, None)
        if e is not None and not e.future.done():
            e.future.set_exception(err)

    def _ready(self, a: _Actor, fut: Any) -> None:
        try:
            info = fut.result()
        except BaseException as e:  # noqa: BLE001
            msg = [m for m in str(e).strip().splitlines() if m.strip()]
            self.last_start_error = f"{type(e).__name__}: {msg[-1] if msg else ''}"[:600]
            self.log(f"an actor on node {a.node_id[:12]} did not start: {self.last_start_error}")
            with self._lock:
                a.dead = True
                if a in self._actors:
                    self._actors.remove(a)
                self._backoff[a.node_id] = time.monotonic() + 30.0
            return
        tasks = info.pop("task_list", None)
        with self._lock:
            if a.dead:
                return
            a.info = info
            a.actor_id = info.get("actor_id", "")
            a.slots = max(1, int(info.get("slots", 1)))
            a.alive = True
            self.metrics["actors_started"] += 1
            if tasks is not None and self._tasks is None:
                self._tasks = tasks
                self._task_ids = {t.get("id") for t in tasks}
            waiting, self._waiting = self._waiting, []
        dev = info.get("device") or {}
        self.log(f"actor {a.actor_id[:12]} ready on node {a.node_id[:12]} ({info.get('host')}, "
                 f"{dev.get('name', dev.get('kind', '?'))}, {a.slots} slot(s))")
        if waiting:
            self._dispatch(waiting)

    # -- the pool (follows the cluster's nodes) -------------------------------------------------
    def _pool_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._grow()
            except Exception as e:  # noqa: BLE001
                self.log(f"pool: {type(e).__name__}: {e}")
            self._stop.wait(self.pool.poll_s)

    def _grow(self) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from .actor import ServeActorImpl

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        alive_ids = {n["NodeID"] for n in nodes}
        gone = []
        with self._lock:
            for a in self._actors:
                if not a.dead and a.node_id not in alive_ids:
                    gone.append(a)
        for a in gone:  # its calls in flight fail on their own and their items are handed on
            self._actor_failed(a, "its node is gone")
        with self._lock:
            self._actors = [a for a in self._actors if not (a.dead and a.depth == 0)]
            have: Dict[str, int] = {}
            for a in self._actors:
                if not a.dead:
                    have[a.node_id] = have.get(a.node_id, 0) + 1
        p = self.pool
        if self._cls is None:
            self._cls = ray.remote(ServeActorImpl)
        cls = self._cls
        for n in nodes:
            nid = n["NodeID"]
            if self._backoff.get(nid, 0) > time.monotonic():
                continue
            if p.node_resource and float((n.get("Resources") or {}).get(p.node_resource, 0.0)) <= 0:
                continue
            total = float((n.get("Resources") or {}).get(p.resource, 0.0))
            want = int(math.floor(total / p.amount + 1e-9))
            if p.actors_per_node > 0:
                want = min(want, p.actors_per_node)
            for _ in range(want - have.get(nid, 0)):
                opts: Dict[str, Any] = {"num_cpus": p.actor_cpus, "max_concurrency": p.max_concurrency,
                                        "max_restarts": 0, "max_task_retries": 0,
                                        "scheduling_strategy": NodeAffinitySchedulingStrategy(nid, soft=False)}
                if p.resource == "GPU":
                    opts["num_gpus"] = p.amount
                else:
                    opts["num_gpus"] = 0
                    opts["resources"] = {p.resource: p.amount}
                handle = cls.options(**opts).remote(p.spec)
                a = _Actor(handle, nid, next(self._index))
                with self._lock:
                    self._actors.append(a)
                ready = handle.ready.remote().future()
                ready.add_done_callback(lambda f, a=a: self._events.put(("ready", a, f)))
