"""The HTTP front of the router: the endpoints of ``kforge serve``, answered the same way.

``POST /v1/score``, ``POST /v1/jobs``, ``GET /v1/jobs/ID``, ``POST /get_reward`` (OpenRLHF),
``GET /v1/tasks``, ``GET /v1/health``, ``GET /metrics``; the same bearer token rules (``?token=`` for
``/get_reward``; 401 missing, 403 wrong, compared in constant time), the same limits and statuses
(400, 404, 409, 413, 429 with Retry-After, 504 with the results so far), the same request ids for
OpenRLHF (a hash of task and query), so TRL, verl and OpenRLHF clients and ``kforge_client`` do not
change. What differs: ``/v1/health`` also lists the actors, ``/metrics`` has the router's series, and
each result carries ``placement`` (node, host, actor, device) of the actor that judged it.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

from .router import Router, ScoreError, random_hex_id

_JOB = re.compile(r"^/v1/jobs/([A-Za-z0-9_.-]+)$")
_KNOWN = ("/v1/score", "/v1/jobs", "/get_reward", "/v1/tasks", "/v1/health", "/metrics")


def _digest_equal(a: str, b: str) -> bool:
    return hmac.compare_digest(hashlib.sha256(a.encode()).digest(), hashlib.sha256(b.encode()).digest())


def _string_field(j: Dict[str, Any], key: str, i: int, required: bool) -> str:
    if key not in j or j[key] is None:
        if required:
            raise ScoreError(400, f"item {i}: '{key}' is missing")
        return ""
    if not isinstance(j[key], str):
        raise ScoreError(400, f"item {i}: '{key}' must be a string")
    return j[key]


def items_of(body: Dict[str, Any]) -> List[Dict[str, str]]:
    items = body.get("items")
    if not isinstance(items, list):
        raise ScoreError(400, 'the body must hold "items": [{"task_id", "completion", "request_id"}, ...]')
    out = []
    for i, e in enumerate(items):
        if not isinstance(e, dict):
            raise ScoreError(400, f"item {i} is not an object")
        out.append({"task_id": _string_field(e, "task_id", i, True), "completion": _string_field(e, "completion", i, True),
                    "request_id": _string_field(e, "request_id", i, False)})
    return out


def task_of_label(label: Any, i: int) -> str:
    j = label
    if isinstance(j, str):
        if j and j[0] == "{":
            try:
                j = json.loads(j)
            except ValueError:
                raise ScoreError(400, f"label {i} is neither a task id nor a JSON object") from None
        else:
            return j
    if isinstance(j, dict) and isinstance(j.get("task_id"), str):
        return j["task_id"]
    raise ScoreError(400, f'label {i} must be a task id or an object with "task_id"')


class Ingress:
    """``Ingress(router, token, host, port, ...)``; ``start()`` binds and serves in a thread,
    ``port`` is the bound port, ``stop()`` ends it."""

    def __init__(self, router: Router, token: str, host: str = "127.0.0.1", port: int = 8000,
                 max_body_bytes: int = 32 << 20, request_timeout_s: float = 3600.0):
        self.router = router
        self.token = token
        self.max_body_bytes = max_body_bytes
        self.request_timeout_s = request_timeout_s
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self.requests: Dict[Tuple[str, int], int] = {}
        self.latency = {"sum": 0.0, "n": 0}
        ingress = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "kforge-ray"

            def log_message(self, fmt, *args):  # quiet: the metrics count requests
                pass

            def do_GET(self):
                ingress._handle(self, "GET")

            def do_POST(self):
                ingress._handle(self, "POST")

            def do_PUT(self):  # no such endpoint, as in kforge serve (after the token check)
                ingress._handle(self, "PUT")

            def do_DELETE(self):
                ingress._handle(self, "DELETE")

            def do_PATCH(self):
                ingress._handle(self, "PATCH")

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 4096
            allow_reuse_address = True

        self._server = Server((host, port), Handler)
        self.port = self._server.server_address[1]
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, name="kforge-ray-http", daemon=True)
        self._thread.start()

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()

    # -- plumbing -------------------------------------------------------------------------------
    def _reply(self, h: BaseHTTPRequestHandler, status: int, body: Any, route: str, text: bool = False,
               headers: Optional[Dict[str, str]] = None) -> None:
        data = body.encode("utf-8") if text else json.dumps(body).encode("utf-8")
        h.send_response(status)
        h.send_header("Content-Type", "text/plain; version=0.0.4" if text else "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
        with self._lock:
            self.requests[(route, status)] = self.requests.get((route, status), 0) + 1

    def _error(self, h, status: int, why: str, route: str, headers: Optional[Dict[str, str]] = None) -> None:
        self._reply(h, status, {"error": why}, route, headers=headers)

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(h.path)
        path = url.path
        route = "/v1/jobs/ID" if path.startswith("/v1/jobs/") else (path if path in _KNOWN else "other")
        try:
            length = int(h.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            return self._error(h, 400, "the Content-Length is not a number", route)
        if length > self.max_body_bytes:
            h.close_connection = True
            return self._error(h, 413, f"the body is larger than {self.max_body_bytes} bytes", route)
        raw = h.rfile.read(length) if length else b""
        # Authentication before routing: every endpoint but the health check.
        if self.token and path != "/v1/health":
            given = ""
            auth = h.headers.get("Authorization", "")
            if auth.startswith("Bearer "):
                given = auth[7:].strip()
            elif path == "/get_reward":
                given = (parse_qs(url.query).get("token") or [""])[0]
            if not given:
                return self._error(h, 401, "a bearer token is required (Authorization: Bearer TOKEN)", route,
                                   {"WWW-Authenticate": "Bearer"})
            if not _digest_equal(given, self.token):
                return self._error(h, 403, "the token is wrong", route)
        try:
            if method == "POST" and path == "/v1/score":
                return self._score(h, self._body(raw), route)
            if method == "POST" and path == "/v1/jobs":
                return self._jobs(h, self._body(raw), route)
            if method == "POST" and path == "/get_reward":
                return self._get_reward(h, self._body(raw), route)
            if method == "GET" and _JOB.match(path):
                return self._job(h, _JOB.match(path).group(1), route)
            if method == "GET" and path == "/v1/tasks":
                return self._reply(h, 200, {"tasks": self.router.tasks()}, route)
            if method == "GET" and path == "/v1/health":
                st = self.router.stats()
                return self._reply(h, 200, {"status": "ok", "tasks": len(self.router.tasks()), "slots": st["slots"],
                                            "pending": st["pending"], "queue_limit": st["queue_limit"],
                                            "actors": self.router.actors()}, route)
            if method == "GET" and path == "/metrics":
                return self._reply(h, 200, self.metrics_text(), route, text=True)
            return self._error(h, 404, "no such endpoint", route)
        except ScoreError as e:
            headers = {"Retry-After": str(int(-(-e.retry_after_s // 1)))} if e.status == 429 else None
            return self._error(h, e.status, str(e), route, headers)
        except Exception as e:  # noqa: BLE001 - answered, as kforge serve answers its exceptions
            return self._error(h, 500, f"{type(e).__name__}: {e}", route)

    @staticmethod
    def _body(raw: bytes) -> Dict[str, Any]:
        try:
            body = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise ScoreError(400, f"the body is not JSON: {e}") from None
        if not isinstance(body, dict):
            raise ScoreError(400, "the body must be a JSON object")
        return body

    def _collect(self, futures, items) -> Tuple[bool, List[Dict[str, Any]]]:
        deadline = time.monotonic() + self.request_timeout_s
        results: List[Dict[str, Any]] = []
        all_done = True
        for f, it in zip(futures, items):
            while not self.stopping.is_set() and time.monotonic() < deadline and not f.done():
                try:
                    f.result(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
                except Exception:  # noqa: BLE001 - timeouts here; a failure is read below
                    pass
            if f.done():
                err = f.exception()
                if err is not None:
                    raise err
                results.append(f.result())
            else:
                all_done = False
                results.append({"request_id": it["request_id"], "task_id": it["task_id"], "status": "pending"})
        return all_done, results

    def _score(self, h, body, route) -> None:
        t0 = time.perf_counter()
        items = items_of(body)
        for it in items:
            if not it["request_id"]:
                it["request_id"] = "kf-" + random_hex_id()
        futures = self.router.submit(items)
        ok, results = self._collect(futures, items)
        if not ok and self.stopping.is_set():
            return self._reply(h, 503, {"error": "the server is stopping: ask again with the same request ids once it "
                                                 "is back", "results": results}, route)
        if not ok:
            return self._reply(h, 504, {"error": f"not every item was judged within {self.request_timeout_s:.0f} s; "
                                                 "the rest are still being judged: ask again with the same request ids",
                                        "results": results}, route)
        with self._lock:
            self.latency["sum"] += time.perf_counter() - t0
            self.latency["n"] += 1
        return self._reply(h, 200, {"results": results}, route)

    def _jobs(self, h, body, route) -> None:
        items = items_of(body)
        for it in items:
            if not it["request_id"]:
                it["request_id"] = "kf-" + random_hex_id()
        job = "job-" + random_hex_id()
        self.router.submit(items, job)
        return self._reply(h, 202, {"job_id": job, "items": len(items), "poll": "/v1/jobs/" + job}, route)

    def _job(self, h, job_id: str, route) -> None:
        ids = self.router.record.job(job_id)
        if ids is None:
            return self._error(h, 404, "no such job: " + job_id, route)
        results = [self.router.lookup(rid) for rid in ids]
        done = sum(1 for r in results if isinstance(r, dict) and r.get("status") == "done")
        return self._reply(h, 200, {"job_id": job_id, "state": "done" if done == len(ids) else "pending", "done": done,
                                    "items": len(ids), "results": results}, route)

    def _get_reward(self, h, body, route) -> None:
        queries = body.get("query")
        if not isinstance(queries, list):
            raise ScoreError(400, 'the body must hold "query": [prompt + response, ...]')
        prompts = body.get("prompts") or []
        labels = body.get("labels")
        if not isinstance(labels, list):
            raise ScoreError(400, '"labels" must list the task id of every query')
        if len(labels) != len(queries) or (prompts and len(prompts) != len(queries)):
            raise ScoreError(400, f"query, prompts and labels differ in length ({len(queries)}, {len(prompts)}, "
                                  f"{len(labels)})")
        items = []
        for i, q in enumerate(queries):
            if not isinstance(q, str):
                raise ScoreError(400, f"query {i} is not a string")
            response = q
            if prompts:
                if not isinstance(prompts[i], str):
                    raise ScoreError(400, f"prompt {i} is not a string")
                if response.startswith(prompts[i]):
                    response = response[len(prompts[i]):]
            task = task_of_label(labels[i], i)
            # OpenRLHF sends no ids: the same task and text is the same request (scored once), the
            # id kforge serve gives it.
            rid = "orlhf-" + hashlib.sha256((task + "\0" + q).encode("utf-8", "surrogatepass")).hexdigest()[:32]
            items.append({"task_id": task, "completion": response, "request_id": rid})
        futures = self.router.submit(items)
        ok, results = self._collect(futures, items)
        if not ok:
            return self._error(h, 503 if self.stopping.is_set() else 504,
                               f"not every query was judged within {self.request_timeout_s:.0f} s; ask again (the same "
                               "queries are answered from the store once judged)", route)
        rewards, scores, correct, speedup = [], [], [], []
        for r in results:
            ok_r = bool(r.get("correct", False))
            rewards.append(float(r.get("reward", 0.0)))
            scores.append(1.0 if ok_r else 0.0)
            correct.append(1.0 if ok_r else 0.0)
            best = max([float(s.get("median", 0.0)) for s in (r.get("speedup") or {}).values()] or [0.0])
            speedup.append(best if ok_r else 0.0)
        return self._reply(h, 200, {"rewards": rewards, "scores": scores,
                                    "extra_logs": {"kforge_correct": correct, "kforge_speedup": speedup}}, route)

    def metrics_text(self) -> str:
        r = self.router
        st = r.stats()
        m = r.metrics
        out = []

        def help_(name: str, kind: str, text: str) -> None:
            out.append(f"# HELP {name} {text}\n# TYPE {name} {kind}\n")

        help_("kforge_ray_actors", "gauge", "Serve actors ready and alive.")
        out.append(f"kforge_ray_actors {st['actors']}\n")
        help_("kforge_ray_queue_depth", "gauge", "Items handed to an actor and not answered, per actor.")
        for a in r.actors():
            out.append(f'kforge_ray_queue_depth{{actor="{a["actor_id"][:16]}",node="{a["node_id"][:16]}"}} {a["depth"]}\n')
        help_("kforge_ray_pending", "gauge", "Items accepted by the router and not answered.")
        out.append(f"kforge_ray_pending {st['pending']}\n")
        help_("kforge_ray_items_total", "counter", "Items answered, by where the answer came from.")
        for origin, n in sorted(m["items"].items()):
            out.append(f'kforge_ray_items_total{{origin="{origin}"}} {n}\n')
        help_("kforge_ray_handoffs_total", "counter", "Items handed to another actor after theirs died.")
        out.append(f"kforge_ray_handoffs_total {m['handoffs']}\n")
        help_("kforge_ray_actor_deaths_total", "counter", "Actors that died or stopped answering.")
        out.append(f"kforge_ray_actor_deaths_total {m['actor_deaths']}\n")
        help_("kforge_ray_call_overhead_seconds", "summary",
              "Per actor call: the router's round trip less the actor's own HTTP call to its serve process.")
        out.append(f"kforge_ray_call_overhead_seconds_sum {m['overhead_s_sum']:.6f}\n"
                   f"kforge_ray_call_overhead_seconds_count {m['overhead_n']}\n")
        help_("kforge_ray_rejected_full_total", "counter", "Batches refused with 429 (queue full).")
        out.append(f"kforge_ray_rejected_full_total {m['rejected_429']}\n")
        help_("kforge_ray_http_requests_total", "counter", "HTTP requests by route and status.")
        with self._lock:
            for (route, code), n in sorted(self.requests.items()):
                out.append(f'kforge_ray_http_requests_total{{route="{route}",code="{code}"}} {n}\n')
        return "".join(out)
